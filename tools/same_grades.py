"""Do two checkouts grade alike? Each builds and records an assignment with its own package, both grade the same
notebooks (the assignment's corpus of correct and wrong submissions, written once by the first checkout), and
every file of every result folder is compared, less the fields that are timings.

    python tools/same_grades.py --checkout /tmp/before --checkout .                 # both corpora
    python tools/same_grades.py --checkout /tmp/before --checkout . --assignment vectors --limit 5

Compared: each result's grading.json, results.json and feedback.md, and grades.csv (its time column left out).
Prints the differences, at most --show per file, and exits 1 when there is any. A change meant to leave grading
alone (a restructure) shows none; run one checkout against itself to see that nothing else varies between runs.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMINGS = {"execution_time", "seconds", "elapsed"}  # fields that measure time: they differ run to run
CORPUS_WRITER = """
import sys
from pathlib import Path
from autograder import corpus
from autograder.release import load_release
release = load_release(Path(sys.argv[1]))
source = Path(sys.argv[2])
c = corpus.load_corpus(source)
student = source.parent.parent / "assignments" / source.name / release.config.notebook
for sub_id, item in sorted(c.items())[:int(sys.argv[4])]:
    corpus.make_notebook(Path(sys.argv[3]) / f"{sub_id}.ipynb", release.dir / "answer_key.ipynb", item, student)
"""


def run(checkout: Path, *command: str) -> None:
    """A command of `checkout`, with its own package first on the path; stops here if it fails."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, *command], cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 3):
        sys.exit(f"{checkout}: {' '.join(command[:3])}... exited {done.returncode}:\n{done.stderr[-3000:]}")


def build(checkout: Path, assignment: str, course: Path) -> Path:
    """The assignment of `checkout` built and recorded by its own package, in a course folder of its own."""
    source = course / "solutions" / assignment
    origin = checkout / "solutions" / assignment
    shutil.copytree(origin if origin.is_dir() else checkout / "examples" / assignment, source)
    run(checkout, "-m", "autograder", "build", str(source))
    return course / "release" / assignment


def without_timings(value):
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def table_without_timings(path: Path) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    return [{k: v for k, v in row.items() if k not in TIMINGS and "time" not in k} for row in rows]


def comparable(out: Path) -> dict[str, object]:
    """Every compared file of a results folder, by path, as what is compared."""
    files: dict[str, object] = {"grades.csv": table_without_timings(out / "grades.csv")}
    for folder in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for name in ("grading.json", "results.json"):
            if (folder / name).is_file():
                files[f"{folder.name}/{name}"] = without_timings(json.loads((folder / name).read_text("utf-8")))
        if (folder / "feedback.md").is_file():
            files[f"{folder.name}/feedback.md"] = (folder / "feedback.md").read_text(encoding="utf-8")
    return files


def first_difference(a, b, where: str = "") -> str:
    """Where two values first differ, and how: `checks[3].message: '...' != '...'`."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key, "(absent)") != b.get(key, "(absent)"):
                return first_difference(a.get(key, "(absent)"), b.get(key, "(absent)"), f"{where}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{where}[{i}]")
    if isinstance(a, str) and isinstance(b, str) and "\n" in a + b:
        lines = [(x, y) for x, y in zip(a.splitlines() + [""] * 999, b.splitlines()) if x != y]
        a, b = lines[0] if lines else (a, b)
    return f"{where.lstrip('.') or '(whole)'}: {a!r} != {b!r}"


def differences(a: dict, b: dict, show: int) -> list[str]:
    found = [f"{name}: only in {'the first' if name in a else 'the second'}" for name in sorted(set(a) ^ set(b))]
    found += [f"{name}: {first_difference(a[name], b[name])[:show]}" for name in sorted(set(a) & set(b))
              if a[name] != b[name]]
    return found


def compare(checkouts: list[Path], assignment: str, work: Path, args) -> list[str]:
    courses = [work / f"{assignment}-{i}" for i in range(len(checkouts))]
    releases = [build(c, assignment, course) for c, course in zip(checkouts, courses)]
    subs = work / f"{assignment}-submissions"
    subs.mkdir()
    shutil.copyfile(releases[0] / "answer_key.ipynb", subs / "answer_key.ipynb")
    run(checkouts[0], "-c", CORPUS_WRITER, str(releases[0]), str(courses[0] / "solutions" / assignment), str(subs),
        str(args.limit))
    outs = [work / f"{assignment}-out-{i}" for i in range(len(checkouts))]
    for c, release, out in zip(checkouts, releases, outs):
        run(c, "-m", "autograder", "grade", str(release), str(subs), "--out", str(out), "--jobs", str(args.jobs),
            "--quiet")
    first = comparable(outs[0])
    found = [d for out in outs[1:] for d in differences(first, comparable(out), args.show)]
    print(f"{assignment}: {len(list(subs.glob('*.ipynb')))} notebooks, {len(first)} files compared, "
          f"{len(found)} differ")
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", action="append", type=Path, required=True, help="a checkout (twice or more)")
    ap.add_argument("--assignment", action="append", help="solutions/<name> or examples/<name> of each checkout "
                    "(repeatable; default: transformers_bert and bert_inside)")
    ap.add_argument("--limit", type=int, default=10**6, help="at most this many corpus notebooks per assignment")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--show", type=int, default=400, help="characters of each differing file shown")
    args = ap.parse_args(argv)
    checkouts = [c.resolve() for c in args.checkout]
    found = []
    with tempfile.TemporaryDirectory(prefix="ag-same-") as tmp:
        for assignment in args.assignment or ["transformers_bert", "bert_inside"]:
            found += compare(checkouts, assignment, Path(tmp), args)
    for d in found:
        print(d)
    print("the same grades, messages and files" if not found else f"{len(found)} difference(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
