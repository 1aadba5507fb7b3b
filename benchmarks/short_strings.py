"""A notebook of millions of short strings, graded by `autograder grade`: the peak resident memory of the whole
grading tree (the command and every process it starts, summed, sampled every 20 ms) and the submission's row.

    python benchmarks/short_strings.py [--mb 210] [--where source|output|code] [--assignment PATH]

`--where source`: a code cell whose source is a list of one-character lines (`"a",`: 35 million strings in 210 MB);
`output`: the same lines as a printed output; `code`: one cell whose code is a list literal of `'a'`. The notebook is
written to a temporary folder (never the repository), the example assignment built there unless `--assignment`
names a release or solutions folder.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "example_course" / "solutions" / "vectors"


def write_notebook(path: Path, megabytes: int, where: str) -> int:
    """The notebook, about `megabytes` MB; returns how many short strings it holds."""
    count = megabytes * 2**20 // 4
    with open(path, "w") as fh:
        fh.write('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [')
        if where == "source":
            fh.write('{"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [], "source": [')
        elif where == "output":
            fh.write('{"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "print(1)", "outputs": '
                     '[{"output_type": "stream", "name": "stdout", "text": [')
        else:
            fh.write('{"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [], "source": "x = [')
        item = "'a'" if where == "code" else '"a"'
        chunk = ",".join([item] * 1_000_000)
        for done in range(0, count, 1_000_000):
            fh.write(("," if done else "") + (chunk if count - done >= 1_000_000 else ",".join([item] * (count - done))))
        fh.write(']\\n"}' if where == "code" else "]}]}" if where == "output" else "]}")
        fh.write("]}")
    return count


def tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
                parents[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [p for p, parent in parents.items() if parent == pid and p not in tree]
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=210)
    parser.add_argument("--where", choices=["source", "output", "code"], default="source")
    parser.add_argument("--assignment", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ag-short-strings-"))
    try:
        assignment = args.assignment
        if assignment is None:
            assignment = work / "course" / "solutions" / "vectors"
            shutil.copytree(EXAMPLE, assignment)
            subprocess.run([sys.executable, "-m", "autograder", "build", str(assignment)], check=True,
                           capture_output=True)
        notebook = work / "subs" / "strings.ipynb"
        notebook.parent.mkdir()
        count = write_notebook(notebook, args.mb, args.where)
        print(f"{notebook.stat().st_size / 2**20:.0f} MB, {count:,} short strings ({args.where})")
        command = [sys.executable, "-m", "autograder", "grade", str(assignment), str(notebook.parent),
                   "--out", str(work / "out")]
        start = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        peak = [0]

        def sample() -> None:
            while proc.poll() is None:
                peak[0] = max(peak[0], tree_rss(proc.pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        output = proc.communicate()[0].decode(errors="replace")
        sampler.join()
        print(f"exit {proc.returncode}, {time.monotonic() - start:.1f} s, peak RSS of the grading tree "
              f"{peak[0] / 2**20:,.0f} MB")
        grading = work / "out" / "strings" / "grading.json"
        if grading.is_file():
            row = json.loads(grading.read_text())
            print(f"row: score {row.get('score')}/{row.get('max_score')}, error: {row.get('error', '')[:400]}")
            notes = row.get("notes") or []
            print("notes:", [n[:200] for n in notes][:3])
        else:
            print("no row;", output[-2000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
