"""A Ray node lost in the middle of `autograder grade --cluster`: how long after the loss the command ends, and
what it wrote. The node is lost the way a dead machine or a killed agent loses it: its agent (raylet) is SIGKILLed
once the first result is written.

    python benchmarks/cluster_node_lost.py                 # --cluster local: the only node's agent is killed
    python benchmarks/cluster_node_lost.py --worker-node   # a head and a worker node: the worker node's agent
    python benchmarks/cluster_node_lost.py --address HOST:PORT --agent PID   # a cluster started apart, one agent

With --cluster local nothing is left to grade on: the command ends with NOT GRADED rows for what was not graded and
exit 3. With a worker node lost, the head grades the lost submissions again: every row graded, exit 0. Each
submission is the example course's answer key whose normalize sleeps --sleep s, so that the run outlasts the loss.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.grading import build_and_record
from tests.conftest import EXAMPLE_SOURCE, make_submission

NORMALIZE = "return v / v.norm(dim=-1, keepdim=True)"


def descendants_named(pid: int, name: bytes) -> list[int]:
    """Processes below `pid` whose command line's first word ends with `name`."""
    from autograder.sandbox.processes import descendants

    found = []
    for child in descendants(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as fh:
                if fh.read().split(b"\0")[0].endswith(name):
                    found.append(child)
        except OSError:
            continue
    return found


def results(out: Path) -> dict[str, str]:
    rows = {}
    for graded in out.glob("*/grading.json"):
        if (graded.parent / ".graded.json").is_file():
            rows[graded.parent.name] = json.loads(graded.read_text()).get("error", "") or "graded"
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--submissions", type=int, default=8)
    ap.add_argument("--sleep", type=float, default=4.0, help="seconds each submission's normalize sleeps")
    ap.add_argument("--worker-node", action="store_true", help="a head and a worker node; the worker's agent is killed")
    ap.add_argument("--address", help="a running cluster's address (with --agent: the pid of the agent to kill)")
    ap.add_argument("--agent", type=int)
    ap.add_argument("--give-up", type=float, default=600, help="seconds after the loss before the command is killed")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ag-bench-node-lost-") as tmp:
        work = Path(tmp)
        shutil.copytree(EXAMPLE_SOURCE, work / "course" / "solutions" / "vectors")
        release = build_and_record(work / "course" / "solutions" / "vectors").release
        slow = {NORMALIZE: f"import time; time.sleep({args.sleep})\n    {NORMALIZE}"}
        (work / "subs").mkdir()
        subs = [make_submission(work / "subs" / f"s{i:02d}.ipynb", release / "answer_key.ipynb", slow)
                for i in range(args.submissions)]
        cluster, address, agent_of = None, args.address or "local", args.agent
        if args.worker_node:
            from ray.cluster_utils import Cluster

            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
            worker = cluster.add_node(num_cpus=1)
            address, agent_of = cluster.address, worker.all_processes["raylet"][0].process.pid
        out = work / "out"
        command = [sys.executable, "-m", "autograder", "grade", str(release), *map(str, subs), "--out", str(out),
                   "--quiet", "--cluster", address]
        start = time.monotonic()
        proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None and not results(out):
                time.sleep(0.2)
            agents = [agent_of] if agent_of else descendants_named(proc.pid, b"raylet")
            if proc.poll() is not None or not agents:
                print(f"no node to lose: the command ended ({proc.returncode}) or no agent was found")
                return 1
            before = len(results(out))
            os.kill(agents[0], signal.SIGKILL)
            lost_at = time.monotonic()
            try:
                output, _ = proc.communicate(timeout=args.give_up)
            except subprocess.TimeoutExpired:
                print(f"the command was still running {args.give_up:.0f} s after the loss: killed")
                return 1
            ended = time.monotonic()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            if cluster is not None:
                cluster.shutdown()
        rows = results(out)
        graded = sum(1 for why in rows.values() if why == "graded")
        kind = "worker node" if args.worker_node else f"--cluster {address}"
        print(f"{kind} on {socket.gethostname()}: "
              f"{args.submissions} submissions ({args.sleep:.0f} s each), the agent killed "
              f"{lost_at - start:.1f} s after the start with {before} result(s) written")
        print(f"the command ended {ended - lost_at:.1f} s after the loss, exit {proc.returncode}: {len(rows)} rows, "
              f"{graded} graded, {len(rows) - graded} NOT GRADED")
        for name, why in sorted(rows.items()):
            if why != "graded":
                print(f"  {name}: {why}")
        if proc.returncode not in (0, 3):
            print(output.decode("utf-8", "replace")[-3000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
