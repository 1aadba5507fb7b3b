"""The review page at class scale: a results folder of N Transformers & BERT submissions (the answer key's
notebook with each student's three written answers filled in, results as `autograder grade` records them) reviewed
with `autograder review`. Prints, for the figures issue 44 sets:

- the time `autograder review` takes to read the class (the snapshot, once per notebook);
- each answer page served by the running server (uvicorn, over HTTP): median and 95th percentile of 300 pages;
- an item edit that re-scores every answer that has it (applied to all N): the request's time, and reading all N
  scores back;
- `autograder review --merge` writing every hand grade (3 per student) into the results folder.

    python benchmarks/review.py [--students 1000] [--keep DIR]

The grading itself is not timed (written as `grade` writes results, from one graded answer key), so the figures
are the review's alone.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ANSWERS = ["Attention lets every token look at every other token; the scaling by sqrt(d) keeps the softmax from "
           "saturating. ", "Masking hides padding so that it never gets weight. ", "BERT is bidirectional. "]


def make_class(out: Path, students: int) -> Path:
    """Results and notebooks for `students` submissions; returns the release folder."""
    import nbformat

    from autograder.grading import GradeOptions, grade, resolve_release

    release = resolve_release("transformers_bert", ROOT)
    key = release.dir / "answer_key.ipynb"
    first = out / "_first"
    first.mkdir(parents=True)
    shutil.copy(key, first / "student_0000.ipynb")
    [graded] = grade(release, [first / "student_0000.ipynb"], GradeOptions(out / "_graded", quiet=True))
    record = graded.to_dict()
    notebooks = out / "notebooks"
    notebooks.mkdir()
    nb = nbformat.read(key, as_version=4)
    written = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")
               and c.cell_type == "markdown"]
    for n in range(students):
        sub_id = f"student_{n:04d}"
        for i, cell in enumerate(written):
            cell.source = f"{ANSWERS[i % 3]}({sub_id}, answer {i + 1}) " * (1 + n % 5)
        path = notebooks / f"{sub_id}.ipynb"
        nbformat.write(nb, path)
        folder = out / "results" / sub_id
        folder.mkdir(parents=True)
        (folder / "grading.json").write_text(json.dumps({**record, "submission": sub_id, "file": str(path)}))
    shutil.copy(out / "_graded" / "grades.csv", out / "results" / "grades.csv")
    return release.dir


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def get(url: str, token: str, data: dict | None = None, csrf: str = "") -> tuple[float, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if data is not None:
        headers.update({"Content-Type": "application/json", "X-CSRF-Token": csrf})
    request = urllib.request.Request(url, json.dumps(data).encode() if data is not None else None, headers)
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        body = response.read().decode()
    return time.perf_counter() - start, body


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--keep", help="build the class in this folder and keep it")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="review-bench-"))
    release = make_class(work, args.students)
    results = work / "results"
    review = [sys.executable, "-m", "autograder", "review", str(release), "--out", str(results)]
    print(f"{args.students} submissions, 3 written answers each ({work})")
    print(f"reading the class (first `autograder review`, snapshot of every notebook): {timed(review + ['--export', str(work / 'before.csv')]):.1f} s")
    serve_and_measure(review, args.students)
    print(f"--merge of every hand grade into the results folder: {timed(review + ['--merge']):.1f} s")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def serve_and_measure(review: list[str], students: int) -> None:
    import re

    from autograder.review.store import Store

    proc = subprocess.Popen(review + ["--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        while "token=" not in line:
            line = proc.stdout.readline()
        base, token = re.search(r"(http://\S+?)/\?token=(\S+)", line).groups()
        _, page = get(f"{base}/q/0/0", token)
        csrf = re.search(r'name="csrf" content="([0-9a-f]+)"', page).group(1)
        times = []
        for n in range(300):
            took, _ = get(f"{base}/q/{n % 3}/{(n * 37) % students}", token)
            times.append(took)
        times.sort()
        print(f"answer pages: median {statistics.median(times) * 1000:.1f} ms, 95th percentile "
              f"{times[int(len(times) * 0.95)] * 1000:.1f} ms (300 pages)")
        item = int(re.search(r'data-id="(\d+)"', page).group(1))
        for s in range(students):  # the first item applied to every answer of question 0, as graders would
            get(f"{base}/api/grade", token, {"q": 0, "s": s, "version": 0, "toggle": item}, csrf)
        took, body = get(f"{base}/api/item", token, {"q": 0, "id": item, "version": 1, "title": "Correct",
                                                      "points": 4.0, "comment": "re-scored"}, csrf)
        start = time.perf_counter()
        store = Store(Path(review[review.index("--out") + 1]))
        scores = [g.score for g in store.grades(store.questions()[0].name)]
        store.close()
        read = time.perf_counter() - start
        print(f"item edit re-scoring {json.loads(body)['rescored']} answers: {took * 1000:.0f} ms; all {len(scores)} "
              f"scores read back in {read * 1000:.0f} ms")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
