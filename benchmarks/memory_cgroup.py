"""A class graded inside a memory cgroup it does not own, as on Gradescope (a container's cgroup): copies of the
answer key and one notebook whose `scaled_dot_product` writes 8 GB into memfd files, `--jobs 2`, in an enclosing
cgroup of 5 GB made for the run. Prints each submission's score, the memfd notebook's row, the exit code, the
enclosing group's peak and how many of its own processes (the command, the judges, their fork servers) the
kernel's OOM killer took.

    python benchmarks/memory_cgroup.py [--assignment transformers_bert] [--keys 6] [--limit-gb 5] [--hoard-gb 8]

Needs root (or a delegated cgroup v2 subtree) and a memory cgroup controller; says why not otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.sandbox.cgroups import Group, own_group

HOARD = '''
def _hoard():
    import os, time
    block = b"x" * (1 << 20)
    files = []
    for _ in range({gb} * 1024 // 48):  # memfd files of 48 MB each, under the output-size limit
        fd = os.memfd_create("hoard")
        files.append(fd)
        for _ in range(48):
            os.write(fd, block)
        time.sleep(0.005)
    return files


def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    _hoard()
    return _scaled_dot_product(q, k, v, attn_drop_rate, mask)
'''
TARGET = "def scaled_dot_product("


def enclosing_group(limit: int) -> Group:
    own, why = own_group()
    if own is None:
        sys.exit(f"no memory cgroup here: {why}")
    group = own.child(f"ag-bench-enclosing-{os.getpid()}")
    group.create()
    if own.version == "v2":
        group.delegate_memory()  # type: ignore[attr-defined]
    group.set_limit(limit)
    return group


def hoarding_notebook(key: Path, path: Path, gb: int) -> None:
    nb = nbformat.read(key, as_version=4)
    hits = [c for c in nb.cells if TARGET in c.source]
    assert hits, f"{TARGET} is not in the answer key"
    for cell in hits:
        cell.source = cell.source.replace(TARGET, "def _scaled_dot_product(")
    nb.cells.append(nbformat.v4.new_code_cell(HOARD.format(gb=gb)))
    nbformat.write(nb, path)


def peak(group: Group) -> int:
    name = "memory.max_usage_in_bytes" if group.version == "v1" else "memory.peak"
    try:
        return int(Path(group.file(name)).read_text())
    except (OSError, ValueError):
        return 0


def local_oom_kills(group: Group) -> int:
    if group.version == "v1":
        return group.oom_kills()
    events = dict(line.split() for line in Path(group.file("memory.events.local")).read_text().splitlines())
    return int(events.get("oom_kill", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", default="transformers_bert")
    parser.add_argument("--keys", type=int, default=6)
    parser.add_argument("--limit-gb", type=float, default=5.0)
    parser.add_argument("--hoard-gb", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "autograder", "build", f"solutions/{args.assignment}"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    key = ROOT / "release" / args.assignment / "answer_key.ipynb"
    work = Path(tempfile.mkdtemp(prefix="ag-memory-cgroup-"))
    subs, out = work / "subs", work / "out"
    subs.mkdir()
    for n in range(args.keys):
        shutil.copy(key, subs / f"key{n}.ipynb")
    hoarding_notebook(key, subs / "memfd.ipynb", args.hoard_gb)
    group = enclosing_group(int(args.limit_gb * 2**30))
    enter = f'echo $$ > {group.file("cgroup.procs")} && exec "$@"'
    command = [sys.executable, "-m", "autograder", "grade", args.assignment, str(subs), "--out", str(out),
               "--jobs", str(args.jobs)]
    start = time.monotonic()
    try:
        done = subprocess.run(["sh", "-c", enter, "sh", *command], cwd=ROOT, capture_output=True, text=True)
        seconds, top, killed = time.monotonic() - start, peak(group), local_oom_kills(group)
    finally:
        group.kill()
        group.remove(wait=10.0)
    report(out, done, seconds, top, killed, args)
    shutil.rmtree(work, ignore_errors=True)


def report(out: Path, done: subprocess.CompletedProcess, seconds: float, top: int, killed: int, args) -> None:
    print(f"{args.keys} answer keys + a notebook writing {args.hoard_gb} GB into memfd, --jobs {args.jobs}, "
          f"inside a {args.limit_gb:g} GB memory cgroup")
    for folder in sorted(p for p in out.iterdir() if (p / "grading.json").is_file()):
        row = json.loads((folder / "grading.json").read_text())
        pending = sum(c["max_score"] for c in row["checks"] if c["status"] == "pending")
        lost = [c for c in row["checks"] if c["status"] in ("failed", "partial", "ungraded")]
        print(f"  {row['submission']:8} {row['score']:g}/{row['max_score']:g} (+{pending:g} pending)  "
              f"memory held by: {row.get('memory', '')}")
        for c in lost:
            print(f"      {c['status']:8} {c['name']}: {(c['grader_problem'] or c['message'])[:160]}")
    print(f"exit code {done.returncode}; {seconds:.0f} s; enclosing group's peak {top / 2**30:.2f} GB; "
          f"grading processes taken by the kernel's OOM killer: {killed}")
    print("stderr (last lines):\n  " + "\n  ".join(done.stderr.strip().splitlines()[-6:]))


if __name__ == "__main__":
    main()
