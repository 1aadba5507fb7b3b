"""Grading time per submission: this project's `autograder grade` next to otter-grader's `otter run`.

Both tools grade the same one-question assignment: `normalize(v)` scales the rows of a torch tensor
(N, D) to unit L2 norm, 2 points, checked by a public test on a fixed input and a hidden test on seeded
random rows against expected values computed with torch.nn.functional.normalize. The benchmark writes
both assignment sources into a temporary folder, builds them (`autograder build`, `otter assign`),
makes a correct and a wrong submission from each tool's student notebook (the stubbed cell filled in),
checks that each tool gives them 2/2 and 0/2, then times one whole grading process per submission
(wall clock, subprocess start to exit; CPU time of it and its descendants beside it) --runs times
after --warmup untimed runs, alternating the two tools, and prints median, min and max and the ratio
otter / ours.

    python benchmarks/grade_time.py --runs 5 --otter-python /tmp/otter-venv/bin/python

Without --otter-python only this project is measured. otter-grader is never a dependency of this
project: it lives in its own virtual environment (see benchmarks/README.md for the commands).
Exit status 0; 1 when a tool does not score the submissions as expected (the timings then mean
nothing); a failing build or grading command stops the script with its output.
"""
from __future__ import annotations

import argparse
import copy
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

NAME = "normalize"
POINTS = 2

SOLUTION_BODY = "return v / v.norm(dim=-1, keepdim=True)"
WRONG_BODY = "return v / v.norm()"  # the whole tensor's norm: a plausible mistake, must score 0 on both sides

# The checks, identical on both sides: a public one on a fixed input, a hidden one on seeded random rows.
PUBLIC_TEST = """\
v = torch.tensor([[3.0, 4.0], [0.0, 2.0]])
assert torch.allclose(normalize(v), torch.tensor([[0.6, 0.8], [0.0, 1.0]])), "normalize([[3, 4], [0, 2]]) is wrong\""""
HIDDEN_TEST = """\
x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
expected = torch.nn.functional.normalize(x, dim=1)
assert torch.allclose(normalize(x), expected, atol=1e-6), "normalize is wrong on random rows\""""

QUESTION_TEXT = ("Scale each row $v_i$ of $V \\in \\mathbb{R}^{N \\times D}$ to unit length: "
                 "$v_i / \\lVert v_i \\rVert_2$.")
KERNELSPEC = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
              "language_info": {"name": "python"}}


def solution_cell_source(begin: str = "", end: str = "", solution: str = SOLUTION_BODY) -> str:
    """The cell defining normalize; with markers around the body for a source notebook."""
    body = [begin, solution, end] if begin else [solution]
    return "\n".join(["def normalize(v: torch.Tensor) -> torch.Tensor:",
                      '    """Rows of v (N, D) scaled to unit L2 norm."""', *("    " + line for line in body)])


def write_notebook(path: Path, cells: list) -> None:
    nb = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(KERNELSPEC))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


# ---------------------------------------------------------------- this project

def write_ours_source(root: Path) -> Path:
    """solutions/normalize/: assignment.toml and the source notebook (nbgrader markers)."""
    source = root / "solutions" / NAME
    source.mkdir(parents=True)
    (source / "assignment.toml").write_text(
        'title = "Benchmark: normalize"\n'
        f'notebook = "{NAME}.ipynb"\n'
        "files = []\n\n"
        "[limits]\ncheck_seconds = 60\nimport_seconds = 60\nsubmission_seconds = 300\n", encoding="utf-8")
    nbg = {"schema_version": 3, "locked": False}
    write_notebook(source / f"{NAME}.ipynb", [
        nbformat.v4.new_markdown_cell("# Benchmark: normalize"),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_markdown_cell("## 1. Normalize\n\n" + QUESTION_TEXT),
        nbformat.v4.new_code_cell(
            solution_cell_source("### BEGIN SOLUTION", "### END SOLUTION"),
            metadata={"nbgrader": {**nbg, "grade": False, "grade_id": NAME, "solution": True}}),
        nbformat.v4.new_code_cell(
            f"{PUBLIC_TEST}\n### BEGIN HIDDEN TESTS\n{HIDDEN_TEST}\n### END HIDDEN TESTS",
            metadata={"nbgrader": {**nbg, "locked": True, "grade": True, "grade_id": f"{NAME}_test",
                                   "points": POINTS, "part": "1. Normalize", "solution": False}}),
    ])
    return source


def autograder_command() -> list[str]:
    script = Path(sys.executable).with_name("autograder")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "autograder"]


def ours_score(out: Path) -> tuple[float, float]:
    result = json.loads((out / NAME / "results.json").read_text(encoding="utf-8"))
    return result["score"], sum(t["max_score"] for t in result["tests"])


# ---------------------------------------------------------------- otter-grader

def write_otter_source(root: Path) -> Path:
    """The otter-assign master notebook: assignment config, one question with its solution and tests."""
    master = root / "otter-src" / f"{NAME}.ipynb"
    raw = nbformat.v4.new_raw_cell
    write_notebook(master, [
        raw(f"# ASSIGNMENT CONFIG\nname: {NAME}\nexport_cell: false\ncheck_all_cell: false\n"
            "generate: true\nrun_tests: true"),
        nbformat.v4.new_markdown_cell("# Benchmark: normalize"),
        nbformat.v4.new_code_cell("import torch"),
        raw(f"# BEGIN QUESTION\nname: {NAME}\npoints: {POINTS}\nall_or_nothing: true"),
        nbformat.v4.new_markdown_cell("## 1. Normalize\n\n" + QUESTION_TEXT),
        raw("# BEGIN SOLUTION"),
        nbformat.v4.new_code_cell(solution_cell_source("# BEGIN SOLUTION", "# END SOLUTION")),
        raw("# END SOLUTION"),
        raw("# BEGIN TESTS"),
        nbformat.v4.new_code_cell(PUBLIC_TEST),
        nbformat.v4.new_code_cell("# HIDDEN\n" + HIDDEN_TEST),
        raw("# END TESTS"),
        raw("# END QUESTION"),
    ])
    return master


def otter_command(otter_python: str) -> list[str]:
    script = Path(otter_python).with_name("otter")
    return [str(script)] if script.is_file() else [otter_python, "-m", "otter"]


def otter_score(out: Path) -> tuple[float, float]:
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    tests = [t for t in result["tests"] if "max_score" in t]  # "Public Tests" is a summary row without points
    return sum(t.get("score", 0) for t in tests), sum(t["max_score"] for t in tests)


# ---------------------------------------------------------------- shared

def make_submission(student_nb: Path, dest: Path, solution: str = SOLUTION_BODY) -> Path:
    """The tool's own student notebook with the stubbed `normalize` cell filled in, as a student would."""
    nb = nbformat.read(str(student_nb), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "def normalize" in c.source]
    if len(cells) != 1:
        raise SystemExit(f"{student_nb}: expected one cell defining normalize, found {len(cells)}")
    cells[0].source = solution_cell_source(solution=solution)
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest))
    return dest


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float]:
    """Run cmd to completion; (wall seconds, CPU seconds of it and every descendant it waited for)."""
    cpu, start = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, child_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    return elapsed, cpu


class Tool:
    """One grader: how to call it on a submission, how to read its score, and its timings."""

    def __init__(self, label: str, cmd_for, score_of, cwd: Path, correct: Path, wrong: Path,
                 env: dict | None = None):
        self.label, self.cmd_for, self.score_of, self.cwd, self.env = label, cmd_for, score_of, cwd, env
        self.correct, self.wrong = correct, wrong
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.scores: list[tuple[float, float]] = []  # the correct submission's, every run
        self.wrong_score: tuple[float, float] | None = None

    def command(self, submission: Path) -> list[str]:
        return self.cmd_for(submission, self.cwd / "out")

    def grade(self, submission: Path) -> tuple[float, float, tuple[float, float]]:
        out = self.cwd / "out"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)  # otter run wants an existing output folder
        elapsed, cpu = run(self.command(submission), self.cwd, self.env)
        return elapsed, cpu, self.score_of(out)

    def grade_correct(self, timed: bool) -> None:
        elapsed, cpu, score = self.grade(self.correct)
        self.scores.append(score)
        if timed:
            self.times.append(elapsed)
            self.cpu.append(cpu)


def otter_env(otter_python: str) -> dict:
    """PATH with the otter venv first, so that the kernel otter starts is the venv's python3."""
    env = dict(os.environ)
    env["PATH"] = str(Path(otter_python).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    return env


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="timed grading runs per tool (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per tool first (default 1)")
    p.add_argument("--otter-python", help="python of a virtual environment with otter-grader and ipykernel")
    p.add_argument("--workdir", help="keep the generated sources and outputs here instead of a temp folder")
    args = p.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be at least 1 and --warmup at least 0")
    if args.otter_python and not Path(args.otter_python).is_file():
        p.error(f"--otter-python {args.otter_python}: no such file (see benchmarks/README.md to create the venv)")

    work = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="grade-time-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work}")
    tools: list[Tool] = []

    # This project: source -> build -> correct submission.
    source = write_ours_source(work / "ours")
    ag = autograder_command()
    run([*ag, "build", str(source)], work / "ours")
    release = work / "ours" / "release" / NAME
    student = work / "ours" / "assignments" / NAME / f"{NAME}.ipynb"
    tools.append(Tool("autograder",
                      lambda sub, out: [*ag, "grade", str(release), str(sub), "--out", str(out), "--quiet"],
                      ours_score, work / "ours",
                      make_submission(student, work / "ours" / "submission" / f"{NAME}.ipynb"),
                      make_submission(student, work / "ours" / "wrong" / f"{NAME}.ipynb", WRONG_BODY)))

    # otter-grader: master notebook -> otter assign -> correct submission.
    if args.otter_python:
        otter = otter_command(args.otter_python)
        env = otter_env(args.otter_python)
        master = write_otter_source(work / "otter")
        dist = work / "otter" / "dist"
        run([*otter, "assign", str(master), str(dist)], master.parent, env)
        zips = sorted(glob.glob(str(dist / "autograder" / "*.zip")))
        if len(zips) != 1:
            raise SystemExit(f"otter assign: expected one autograder zip in {dist / 'autograder'}, found {zips}")
        otter_zip = Path(zips[0])
        student = dist / "student" / f"{NAME}.ipynb"
        tools.append(Tool("otter-grader", lambda sub, out: [*otter, "run", "-a", str(otter_zip), str(sub),
                                                            "-o", str(out), "--no-logo"],
                          otter_score, work / "otter",
                          make_submission(student, work / "otter" / "submission" / f"{NAME}.ipynb"),
                          make_submission(student, work / "otter" / "wrong" / f"{NAME}.ipynb", WRONG_BODY), env))
    else:
        print("otter-grader was not measured (no --otter-python); measuring this project only")

    # The checks are live: a wrong submission scores 0 with each tool (untimed).
    for tool in tools:
        tool.wrong_score = tool.grade(tool.wrong)[2]
    load_before = os.getloadavg()[0]
    for i in range(args.warmup + args.runs):  # alternate the tools so that drift affects both alike
        for tool in tools:
            tool.grade_correct(timed=i >= args.warmup)

    ok = True
    print()
    for tool in tools:
        right = all(s == (POINTS, POINTS) for s in tool.scores) and tool.wrong_score == (0, POINTS)
        ok = ok and right
        print(f"{tool.label}: {' '.join(tool.command(tool.correct))}")
        print(f"  correct submission: {', '.join(f'{s:g}/{m:g}' for s, m in tool.scores)} "
              f"({args.warmup + args.runs} runs); wrong submission: {tool.wrong_score[0]:g}/{tool.wrong_score[1]:g}"
              f"{'' if right else '  <-- NOT the expected 2/2 and 0/2'}")
    print(f"\nwall clock per submission, whole process, {args.runs} timed run(s) after {args.warmup} warm-up "
          f"({os.cpu_count()} CPUs, 1-min load average {load_before:.1f} before the runs, "
          f"{os.getloadavg()[0]:.1f} after):")
    print(f"{'tool':<14}{'median s':>10}{'min s':>10}{'max s':>10}{'median CPU s':>14}")
    for tool in tools:
        print(f"{tool.label:<14}{statistics.median(tool.times):>10.2f}{min(tool.times):>10.2f}{max(tool.times):>10.2f}"
              f"{statistics.median(tool.cpu):>14.2f}")
    if len(tools) == 2:
        ratio = statistics.median(tools[1].times) / statistics.median(tools[0].times)
        cpu_ratio = statistics.median(tools[1].cpu) / statistics.median(tools[0].cpu)
        print(f"ratio otter / ours (medians): {ratio:.2f} wall clock, {cpu_ratio:.2f} CPU time")
    if not ok:
        print("error: a tool did not score the submissions as expected; the timings are not comparable")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
