"""A class night on one machine: N answer keys of an assignment plus a hostile batch written against it, graded by
`autograder grade --jobs J`, twice: a rate run (wall time, submissions per minute, how busy the machine's cores were:
core-seconds per submission, what bounds the rate once every core is busy; each hostile notebook's row), then a
memory run of the same folder that reads the peak PSS of the whole process tree (the command, grading processes,
fork servers, workers: from /proc every 0.2 s, which costs the machine some 5% of its CPU: not in the rate). Each
run prints its rows: every answer key must get the answer key's score, every submission a row.

    python benchmarks/class_run.py                                 # transformers_bert, 200 keys + 20 hostile, --jobs 2
    python benchmarks/class_run.py --keys 40 --jobs 2
    python benchmarks/class_run.py --keys 40 --no-hostile --recording-from-elsewhere   # a release built elsewhere
    python benchmarks/class_run.py --keys 40 --checkout /tmp/before --checkout . --rounds 2   # side by side

With --checkout (repeatable), each checkout builds its own release with its own package (PYTHONPATH and the
working directory set to it) and grades the same folder of submissions; the rate runs alternate between the
checkouts, --rounds times, and a table of their medians ends the output.

The hostile batch (HOSTILE below): memory held in memfd files, a huge tensor and millions of small objects
returned to the judge, a 30 MB error message with the worker's own truncation replaced, a 69 MB constant, an
endless loop and a __del__ that hangs, an output flood, a fork bomb, os._exit and kill of the parent, a recursion
crash, and the inputs that are no notebook at all (not JSON, empty, a syntax error, a FIFO, a dangling link, a link
to the answer key, names of the run's own tables).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SDP = "def scaled_dot_product(q, k, v, mask=None, attn_drop_rate=0.0):\n"
HOSTILE_CELLS = {
    "memfd_hoard": SDP + "    import os\n    chunk = b'x' * (32 << 20)\n"
                         "    for _ in range(256):  # 8 GB in memfd files (each under the file size limit), outside any process\n"
                         "        fd = os.memfd_create('x')\n        os.write(fd, chunk)\n"
                         "        globals().setdefault('_fds', []).append(fd)\n    return q, q\n",
    "huge_return": SDP + "    import torch\n    return torch.zeros(150_000_000), q\n",
    "million_dicts": SDP + "    return [{} for _ in range(3_500_000)], q\n",
    "error_flood": "import sys\nfor _m in list(sys.modules.values()):\n    for _n in dir(_m):\n"
                   "        if 'trunc' in _n.lower() or 'cap' in _n.lower():\n"
                   "            try:\n                setattr(_m, _n, lambda *a, **k: a[0] if a else '')\n"
                   "            except Exception:\n                pass\n" + SDP + "    raise ValueError('x' * 30_000_000)\n",
    "constant_69mb": "WEIGHTS = '" + "7" * 69_000_000 + "'\n",
    "endless_loop": SDP + "    while True:\n        pass\n",
    "del_hangs": "class Hang:\n    def __del__(self):\n        while True:\n            pass\n\n"
                 "_keep = Hang()\n" + SDP + "    import torch\n    h = Hang()\n"
                 "    w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -1)\n    return w @ v, w\n",
    "output_flood": "import sys\nfor _ in range(2000):\n    sys.stdout.write('y' * 100_000)\n",
    "fork_bomb": SDP + "    import os\n    while True:\n        try:\n            os.fork()\n        except OSError:\n"
                      "            pass\n",
    "os_exit": SDP + "    import os\n    os._exit(0)\n",
    "kill_parent": SDP + "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return q, q\n",
    "recursion": SDP + "    return scaled_dot_product(q, k, v, mask, attn_drop_rate)\n",
}


def hostile_batch(key: Path, folder: Path) -> list[Path]:
    """The hostile notebooks and inputs, written into folder."""
    nb = json.loads(key.read_text(encoding="utf-8"))
    made = []
    for name, cell in HOSTILE_CELLS.items():
        copy = json.loads(json.dumps(nb))
        copy["cells"].append({"cell_type": "code", "metadata": {}, "source": cell, "outputs": [], "execution_count": None})
        path = folder / f"{name}.ipynb"
        path.write_text(json.dumps(copy), encoding="utf-8")
        made.append(path)
    (folder / "not_json.ipynb").write_text("this is no notebook", encoding="utf-8")
    (folder / "empty.ipynb").write_text("", encoding="utf-8")
    broken = json.loads(json.dumps(nb))
    broken["cells"].append({"cell_type": "code", "metadata": {}, "source": "def f(:\n", "outputs": [],
                            "execution_count": None})
    (folder / "syntax_error.ipynb").write_text(json.dumps(broken), encoding="utf-8")
    os.mkfifo(folder / "fifo.ipynb")
    os.symlink(folder / "gone.ipynb", folder / "dangling.ipynb")
    os.symlink(key, folder / "link_to_key.ipynb")
    for name in ("grades.csv.ipynb", "summary.md.ipynb"):
        shutil.copyfile(key, folder / name)
    return made + [folder / n for n in ("not_json.ipynb", "empty.ipynb", "syntax_error.ipynb", "fifo.ipynb",
                                        "dangling.ipynb", "link_to_key.ipynb", "grades.csv.ipynb", "summary.md.ipynb")]


def tree_pss_kb(root_pid: int) -> int:
    """Sum of the Pss of root_pid and every descendant (kB)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            continue
    return total


def machine_cpu() -> tuple[int, int]:
    """(busy, idle) clock ticks of the whole machine so far, all cores (/proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields[:8]) - idle, idle


def graded(cmd: list[str], every: float = 0.2, checkout: Path = ROOT) -> tuple[float, int, int, str, float, float]:
    """(seconds, peak tree PSS in kB, exit status, stderr tail, core-seconds the machine was busy, the busy
    fraction of all its cores) of one grading command."""
    peak = [0]
    busy0, idle0 = machine_cpu()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=checkout,
                            env=checkout_env(checkout))
    done = threading.Event()

    def sample():
        while every and not done.is_set():
            peak[0] = max(peak[0], tree_pss_kb(proc.pid))
            time.sleep(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.monotonic() - start
    done.set()
    sampler.join()
    busy1, idle1 = machine_cpu()
    ticks = os.sysconf("SC_CLK_TCK")
    busy, idle = (busy1 - busy0) / ticks, (idle1 - idle0) / ticks
    return seconds, peak[0], proc.returncode, err[-2000:], busy, busy / max(busy + idle, 1e-9)


def checkout_env(checkout: Path) -> dict:
    """The environment a command of `checkout` runs in: its own package first on the path."""
    return {**os.environ, "PYTHONPATH": str(checkout)}


def built_release(checkout: Path, assignment: Path, course: Path, elsewhere: bool) -> Path:
    """The assignment built and recorded by `checkout`'s own `autograder build`, in a course folder of its own."""
    source = course / "solutions" / assignment.name
    shutil.copytree(assignment, source)
    subprocess.run([sys.executable, "-m", "autograder", "build", str(source)], cwd=checkout,
                   env=checkout_env(checkout), check=True, stdout=subprocess.DEVNULL)
    release = course / "release" / assignment.name
    if elsewhere:
        recording = json.loads((release / "recording.json").read_text(encoding="utf-8"))
        recording["fingerprint"] = "another environment"
        (release / "recording.json").write_text(json.dumps(recording), encoding="utf-8")
    return release


def report_run(name: str, every: float, release: Path, subs: Path, out: Path, args, hostile: list[Path],
               checkout: Path = ROOT) -> float:
    """One graded run of the folder, its figures and rows printed. The rate run reads no memory (reading the PSS of
    every process costs the machine some 5% of its CPU at every 0.2 s, and slows the run it measures); the memory
    run reads it every `every` seconds. Returns the run's wall seconds."""
    cmd = [sys.executable, "-m", "autograder", "grade", str(release), str(subs), "--out", str(out), "--jobs",
           str(args.jobs), "--quiet"]
    seconds, peak_kb, status, err, busy, fraction = graded(cmd, every, checkout)
    rows = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/grading.json")}
    table = (out / "grades.csv").read_text().splitlines()
    key_rows = [r for sub_id, r in rows.items() if sub_id.startswith("key")]
    key_seconds = sorted(r.get("execution_time", 0) for r in key_rows)
    scores = {r["score"] for r in key_rows}
    n = args.keys + len(hostile)
    memory = f"peak PSS of the process tree {peak_kb / 2**20:.2f} GiB (read every {every:g} s)" if every else \
        "no memory read"
    print(f"{name} run: wall {seconds:.1f} s, {n / seconds * 60:.0f} submissions/min, {memory}, exit {status}")
    print(f"  CPU: the machine's {os.cpu_count()} cores {fraction:.0%} busy, {busy:.0f} core-seconds, "
          f"{busy / n:.2f} per submission")
    print(f"  rows: {len(rows)} result folders, {len(table) - 1} rows in grades.csv (of {n} inputs); answer keys: "
          f"{len(key_rows)} graded, scores {sorted(scores)}, median {key_seconds[len(key_seconds) // 2]:.2f} s each")
    for path in hostile if name == "rate" else []:
        sub_id = next((s for s, r in rows.items() if Path(r.get("file", "")).name == path.name), None)
        r = rows.get(sub_id or "", {})
        first = (r.get("error") or "").splitlines()[0][:90] if r.get("error") else ""
        ungraded = sum(1 for c in r.get("checks", []) if c.get("status") == "not graded")
        print(f"  {path.name:24s} -> {sub_id or 'NO ROW'}: {r.get('score', '-')}/{r.get('max_score', '-')}"
              f" ({ungraded} not graded) in {r.get('execution_time', 0):.1f} s {first}")
    if status not in (0, 3):
        print(err)
    return seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assignment", default="transformers_bert", help="solutions/<name> of each checkout")
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--memory-every", type=float, default=0.2, metavar="SECONDS",
                    help="how often the memory run reads the PSS of the tree (each reading costs the machine some 20-40 "
                         "ms of CPU, so the rate is measured in a run of its own first); 0: no memory run")
    ap.add_argument("--no-hostile", dest="hostile", action="store_false", help="the answer keys alone")
    ap.add_argument("--recording-from-elsewhere", action="store_true",
                    help="mark the release's recording as made in another environment, as that of a release built "
                         "on an instructor's laptop and graded elsewhere is: the reference then runs live")
    ap.add_argument("--checkout", action="append", type=Path,
                    help="a checkout of this project (repeatable; default: this one); several run side by side")
    ap.add_argument("--rounds", type=int, default=1, help="rate runs per checkout, alternating between checkouts")
    args = ap.parse_args(argv)
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    with tempfile.TemporaryDirectory(prefix="ag-class-run-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        releases, folders, hostile = {}, {}, []
        for i, c in enumerate(checkouts):  # each checkout grades its own assignment's answer keys
            releases[c] = built_release(c, c / "solutions" / args.assignment, work / f"course{i}",
                                        args.recording_from_elsewhere)
            folders[c] = work / f"subs{i}"
            folders[c].mkdir()
            for k in range(args.keys):
                shutil.copyfile(releases[c] / "answer_key.ipynb", folders[c] / f"key{k:04d}.ipynb")
            hostile = hostile_batch(releases[c] / "answer_key.ipynb", folders[c]) if args.hostile else []
        print(f"{args.assignment}: {args.keys} answer keys + {len(hostile)} hostile inputs, --jobs {args.jobs}")
        walls: dict[Path, list[float]] = {c: [] for c in checkouts}
        for r in range(args.rounds):
            for i, c in enumerate(checkouts):
                print(f"[{c}]")
                walls[c].append(report_run("rate", 0.0, releases[c], folders[c], work / f"out-rate-{i}-{r}", args, hostile, c))
        for i, c in enumerate(checkouts if args.memory_every else []):
            print(f"[{c}]")
            report_run("memory", args.memory_every, releases[c], folders[c], work / f"out-memory-{i}", args, hostile, c)
        if len(checkouts) > 1:
            base = statistics.median(walls[checkouts[0]])
            print(f"{'checkout':40s} {'rate runs: wall median (min-max) s':>36s}  ratio to the first")
            for c in checkouts:
                w = walls[c]
                print(f"{str(c)[-40:]:40s} {statistics.median(w):14.1f} ({min(w):.1f}-{max(w):.1f})"
                      f"{statistics.median(w) / base:22.2f}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
