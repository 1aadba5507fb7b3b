"""How well `autograder similarity` tells disguised copies from independent work, side by side with copydetect,
and how long it takes on a class of 1,000.

    python benchmarks/similarity.py                 quality on both assignments' corpora, then the scale run
    python benchmarks/similarity.py --no-scale      quality only
    python benchmarks/similarity.py --scale-only    the scale run only (100, 300, 1,000 submissions)

Quality. Every corpus item of solutions/<name>/corpus/ (both assignments) is made into a notebook (corpus.py).
The items whose own writing is substantial are the sources: a solution cell whose lines differ from the answer
key's (difflib ratio < OWN_RATIO) with at least OWN_LINES lines of code the key's cell does not have. A corpus bug that is the key with one line changed is a copy of the key, not
independent work, so it is no source; it stays in the class, as students who handed in the key would.
For each source and each transformation of autograder/similarity/disguise.py, a disguised copy; `combined` takes
the solution cells of one source's own parts into another source whose own parts differ. One class per
assignment: all corpus notebooks and all disguised copies, compared once, as the command compares them.

    positive pairs: (source, its disguised copy), per transformation; (combined, each of its two sources)
    negative pairs: two different sources (independent writings); "same part": both rewrote some part

Measured: ROC AUC over (positives of one transformation, all negatives), the share of positives flagged at the
default settings (recall), the share of negatives flagged (false-positive rate). copydetect (its default k = 25,
window 1, its own tokeniser) on the same pairs, given each notebook's code cells as one .py file (what
`jupyter nbconvert --to script` gives it), scored as max(similarity of either side): with the student notebook as
boilerplate, and again with the student notebook and the answer key as boilerplate (the most it can be told).

Scale. N notebooks (N = 100, 300, 1,000) made from the Transformers corpus by random transformations, compared by
the command itself in a child process (`autograder similarity ... --quiet`); wall time, CPU time and the child's
peak resident memory (ru_maxrss).
"""
from __future__ import annotations

import argparse
import difflib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = ["transformers_bert", "bert_inside"]
OWN_RATIO = 0.6
OWN_LINES = 5  # lines of code of its own, at least: `return q, q` in place of the key is no writing to compare


def corpus_notebooks(name: str, folder: Path) -> tuple[dict[str, Path], Path, Path]:
    from autograder.build import release_for
    from autograder.corpus import load_corpus, make_notebook

    release = release_for(name, ROOT)
    key = release.dir / "answer_key.ipynb"
    student = ROOT / "assignments" / name / release.config.notebook
    paths = {}
    for sid, item in load_corpus(ROOT / "solutions" / name).items():
        paths[sid] = make_notebook(folder / f"{sid}.ipynb", key, item, student)
    return paths, key, student


def _code_lines(source: str) -> set[str]:
    return {line.strip() for line in source.split("\n") if line.strip() and not line.strip().startswith("#")}


def own_parts(nb: dict, key: dict) -> set[str]:
    def gid(c):
        return c.get("metadata", {}).get("nbgrader", {}).get("grade_id")

    theirs = {gid(c): "".join(c["source"]) for c in key["cells"] if c["cell_type"] == "code"}
    own = set()
    for c in nb["cells"]:
        g = gid(c)
        if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution") and g in theirs:
            mine = "".join(c["source"])
            new_lines = _code_lines(mine) - _code_lines(theirs[g])
            ratio = difflib.SequenceMatcher(None, theirs[g].split("\n"), mine.split("\n")).ratio()
            if ratio < OWN_RATIO and len(new_lines) >= OWN_LINES:
                own.add(g)
    return own


def build_class(name: str, folder: Path, rng: random.Random):
    from autograder.similarity.disguise import TRANSFORMATIONS, combine, disguise_notebook

    paths, key, student = corpus_notebooks(name, folder / "corpus")
    key_nb = json.loads(key.read_text())
    notebooks = {sid: json.loads(p.read_text()) for sid, p in paths.items()}
    own = {sid: own_parts(nb, key_nb) for sid, nb in notebooks.items()}
    sources = sorted(sid for sid in own if own[sid])
    positives: list[tuple[str, str, str]] = []  # (transformation, a, b)
    extra: dict[str, Path] = {}
    for sid in sources:
        for how in TRANSFORMATIONS:
            copy_id = f"{how}~{sid}"
            path = folder / "copies" / f"{copy_id}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(disguise_notebook(notebooks[sid], how, rng)))
            extra[copy_id] = path
            positives.append((how, sid, copy_id))
        partners = [o for o in sources if o != sid and not (own[o] & own[sid])]
        if partners:
            other = rng.choice(partners)
            copy_id = f"combined~{sid}+{other}"
            path = folder / "copies" / f"{copy_id}.ipynb"
            path.write_text(json.dumps(combine(notebooks[sid], notebooks[other], own[other])))
            extra[copy_id] = path
            positives += [("combined", sid, copy_id), ("combined", other, copy_id)]
    negatives = [(a, b, bool(own[a] & own[b])) for i, a in enumerate(sources) for b in sources[i + 1:]]
    return {**paths, **extra}, key, student, positives, negatives, len(notebooks)


def ours(name: str, all_paths: dict[str, Path], key: Path, student: Path):
    from autograder.grading import resolve_release
    from autograder.similarity import Entry, Settings, find_similar, layout

    release = resolve_release(name)
    lay = layout(sorted({c.part for c in release.checks if c.part}), student, key)
    entries = [Entry(sid, p) for sid, p in all_paths.items()]
    start = time.monotonic()
    comparison = find_similar(entries, lay, key, Settings())
    elapsed = time.monotonic() - start
    index = {s.id: i for i, s in enumerate(comparison.sources)}
    by_pair = {}
    for p in comparison.pairs:
        if p.channel == "code":
            by_pair[(p.a, p.b)] = (p.score, p.flagged)

    def look(a: str, b: str) -> tuple[float, bool]:
        i, j = sorted((index[a], index[b]))
        return by_pair.get((i, j), (0.0, False))

    return look, elapsed


def copydetect_scorer(all_paths: dict[str, Path], student: Path, key: Path | None):
    import copydetect

    def code_of(path: Path) -> str:
        nb = json.loads(path.read_text())
        return "\n\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                           for c in nb["cells"] if c["cell_type"] == "code")

    with tempfile.TemporaryDirectory() as tmp:
        def as_file(text: str, stem: str) -> str:
            f = Path(tmp) / f"{stem}.py"
            f.write_text(text)
            return str(f)

        boiler_text = code_of(student) + ("\n\n" + code_of(key) if key else "")
        import numpy as np

        boiler = np.array(sorted(copydetect.CodeFingerprint(as_file(boiler_text, "_boilerplate"), 25, 1).hashes))
        fps = {sid: copydetect.CodeFingerprint(as_file(code_of(p), f"s{i}"), 25, 1, boilerplate=boiler)
               for i, (sid, p) in enumerate(all_paths.items())}

    def look(a: str, b: str) -> tuple[float, bool]:
        _, (sim_a, sim_b), _ = copydetect.compare_files(fps[a], fps[b])
        score = max(sim_a, sim_b)
        return score, score >= 0.33  # copydetect's own default display threshold

    return look


def auc(pos: list[float], neg: list[float]) -> float:
    """Probability that a positive scores above a negative (ties count half): the area under the ROC curve."""
    import numpy as np

    if not pos or not neg:
        return float("nan")
    neg_sorted = np.sort(np.array(neg))
    below = np.searchsorted(neg_sorted, pos, side="left")
    equal = np.searchsorted(neg_sorted, pos, side="right") - below
    return float((below + 0.5 * equal).sum() / (len(pos) * len(neg)))


def quality(seed: int) -> None:
    from autograder.similarity.disguise import TRANSFORMATIONS

    rng = random.Random(seed)
    rows: dict[str, dict[str, list]] = {}
    negatives_all: dict[str, list] = {}
    for name in ASSIGNMENTS:
        with tempfile.TemporaryDirectory() as tmp:
            paths, key, student, positives, negatives, corpus_size = build_class(name, Path(tmp), rng)
            print(f"{name}: {corpus_size} corpus notebooks, {len({a for _, a, _ in positives})} sources with writing "
                  f"of their own, {len(positives)} positive pairs, {len(negatives)} negative pairs "
                  f"({sum(s for *_, s in negatives)} rewrote a same part); class of {len(paths)}", flush=True)
            look, elapsed = ours(name, paths, key, student)
            print(f"  autograder similarity: {elapsed:.1f} s for the class", flush=True)
            scorers = {"autograder": look}
            try:
                scorers["copydetect"] = copydetect_scorer(paths, student, None)
                scorers["copydetect+key"] = copydetect_scorer(paths, student, key)
            except ImportError:
                print("  copydetect is not installed (pip install copydetect): its columns are left out")
            for tool, scorer in scorers.items():
                for how, a, b in positives:
                    rows.setdefault(tool, {}).setdefault(how, []).append(scorer(a, b))
                negatives_all.setdefault(tool, []).extend((*scorer(a, b), same) for a, b, same in negatives)
    tools = list(rows)
    print("\nper transformation: AUC / recall at the default threshold")
    print(f"{'transformation':<14}" + "".join(f"{t:>26}" for t in tools))
    for how in [*TRANSFORMATIONS, "combined"]:
        cells = []
        for t in tools:
            pos = rows[t].get(how, [])
            neg = [s for s, _, _ in negatives_all[t]]
            recall = sum(f for _, f in pos) / max(1, len(pos))
            cells.append(f"{auc([s for s, _ in pos], neg):.4f} / {100 * recall:5.1f}% (n={len(pos)})")
        print(f"{how:<14}" + "".join(f"{c:>26}" for c in cells))
    for t in tools:
        neg = negatives_all[t]
        same = [x for x in neg if x[2]]
        print(f"{t}: false positives {sum(f for _, f, _ in neg)}/{len(neg)} "
              f"({100 * sum(f for _, f, _ in neg) / max(1, len(neg)):.2f}%); among pairs that rewrote a same part "
              f"{sum(f for _, f, _ in same)}/{len(same)}; highest negative score {max(s for s, _, _ in neg):.3f}")


def scale(seed: int, sizes: list[int]) -> None:
    from autograder.similarity.disguise import TRANSFORMATIONS, disguise_notebook

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths, _, _ = corpus_notebooks("transformers_bert", Path(tmp) / "corpus")
        notebooks = [json.loads(p.read_text()) for p in paths.values()]
        for n in sizes:
            folder = Path(tmp) / f"class{n}"
            folder.mkdir()
            for i in range(n):
                nb = disguise_notebook(rng.choice(notebooks), rng.choice(TRANSFORMATIONS), rng)
                (folder / f"student{i:04d}.ipynb").write_text(json.dumps(nb))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "autograder", "similarity", "transformers_bert", str(folder),
                                   "--out", str(Path(tmp) / f"out{n}"), "--quiet"], cwd=ROOT, capture_output=True,
                                  text=True)
            wall = time.monotonic() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            print(f"{n:>5} submissions: {wall:6.1f} s wall, {cpu:6.1f} s CPU, peak {after.ru_maxrss / 1024:.0f} MB "
                  f"(exit {done.returncode}): {done.stdout.strip()[:150]}", flush=True)
            if done.returncode:
                print(done.stderr[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument("--scale-only", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    args = parser.parse_args()
    if not args.scale_only:
        quality(args.seed)
    if not args.no_scale:
        scale(args.seed, args.sizes)


if __name__ == "__main__":
    main()
