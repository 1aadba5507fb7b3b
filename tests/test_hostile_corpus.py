"""The hostile and broken corpus (tests/hostile/) graded as one batch with --jobs 2.

Every submission gets a result row and the outcome tests/hostile/expected.json gives it: no score
above what its honest code earns, the grading run's files intact, nothing written outside the
workers' scratch space, no network, nothing read that the grader keeps private, and no process left
behind. Grading the corpus again (in the opposite order) gives byte-identical scores.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import shutil
import socket
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder.entrypoints import command_line as cli_main
from autograder.grading import GradeOptions, grade
from autograder.grading import resolve_release
from autograder.reports.results import SubmissionResult
from autograder.sandbox.forkserver import shutdown_fork_server
from autograder.submissions import discover
from tests.goldens import compare_or_update, grades

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "hostile"
EXPECTED = json.loads((HOSTILE / "expected.json").read_text(encoding="utf-8"))
EXAMPLE = ROOT / "tests" / "example_course" / "solutions" / "vectors"
LIMITS = """
[limits]
check_seconds = 6
import_seconds = 6
submission_seconds = 90
memory_mb = 1024
output_mb = 16
"""


# -- watching the machine ---------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every live descendant of `root`."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st:
                table[int(entry)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out[pid] = table[pid][1]
        todo.extend(children.get(pid, []))
    return out


class ProcessWatch:
    """Records every process this test process starts, at any depth, while a grading run goes on."""

    def __init__(self):
        self.seen: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            self.seen.update(_descendants(os.getpid()))
            time.sleep(0.1)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def survivors(self, grace: float = 15.0) -> list[str]:
        """Recorded processes still alive (same pid, same start time) after `grace` seconds."""
        end = time.monotonic() + grace
        while True:
            alive = [pid for pid, start in self.seen.items() if (_stat(pid) or (0, -1))[1] == start]
            if not alive or time.monotonic() > end:
                break
            time.sleep(0.2)
        out = []
        for pid in alive:
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "multiprocessing.resource_tracker" not in cmd:  # this test process's own, ends with it
                out.append(f"{pid}: {cmd[:160]}")
        return out


def marked_processes(marker: str) -> list[str]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd.split():
                out.append(f"{entry}: {cmd}")
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_digest(*folders: Path) -> dict[str, str]:
    """Every file under `folders` (the release, the instructor's sources, the submissions) -> its hash."""
    return {str(p): digest(p) for folder in folders for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


# -- the run --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    source = root / "course" / "solutions" / "vectors"
    shutil.copytree(EXAMPLE, source)
    toml = source / "assignment.toml"
    toml.write_text(toml.read_text().split("[limits]")[0].rstrip() + "\n" + LIMITS)
    release = resolve_release(str(source))
    subs = root / "submissions"
    subs.mkdir()
    out = root / "out"
    marker = str(7_300_000 + random.randrange(600_000))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    connections: list[bytes] = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    connections.append(conn.recv(100) or b"(connected)")
                except OSError:
                    connections.append(b"(connected)")

    threading.Thread(target=accept, daemon=True).start()

    secrets = [release.dir / "answer_key.ipynb", release.dir / "reference.py", release.dir / "reference.json",
               release.dir / "manifest.json", release.dir / "tests" / "test_hidden.py", source / "vectors.ipynb",
               source / "tests" / "test_hidden.py", source / "assignment.toml", subs / "correct.ipynb",
               EXAMPLE / "tests" / "test_hidden.py", EXAMPLE / "vectors.ipynb", HOSTILE / "expected.json",
               ROOT / ".git" / "HEAD", out / "grades.csv", out / "correct" / "results.json"]
    private_dirs = [release.dir, source.parent.parent, subs, out, ROOT / "tests", ROOT / ".git"]
    write_targets = {
        "out_grades": out / "grades.csv", "out_result": out / "correct" / "results.json",
        "own_result": out / "write_files" / "results.json", "out_new": out / "HACKED",
        "release": release.dir / "manifest.json", "hidden_tests": source / "tests" / "test_hidden.py",
        "submission": subs / "correct.ipynb", "repo": ROOT / f"HACKED-{marker}",
        "tmp": Path(f"/tmp/ag-hostile-{marker}"), "var_tmp": Path(f"/var/tmp/ag-hostile-{marker}"),
        "shm": Path(f"/dev/shm/ag-hostile-{marker}"), "home": Path.home() / f"ag-hostile-{marker}"}
    fill = {"__AG_SECRETS__": json.dumps([str(p) for p in secrets]),
            "__AG_PRIVATE_DIRS__": json.dumps([str(p) for p in private_dirs]),
            "__AG_WRITE_TARGETS__": json.dumps([str(p) for p in write_targets.values()]),
            "__AG_MARKER__": marker, "__AG_PORT__": str(port)}
    for e in EXPECTED:
        target = subs / e["file"]
        if e.get("generated") == "big_output":
            from tests.hostile.make_corpus import big_output

            big_output(target, nbformat.read(HOSTILE / "notebooks" / "correct.ipynb", as_version=4))
            continue
        data = (HOSTILE / "notebooks" / e["file"]).read_bytes()
        if b"__AG_" in data:
            nb = nbformat.reads(data.decode(), as_version=4)
            for cell in nb.cells:
                for key, value in fill.items():
                    cell.source = cell.source.replace(key, value)
            data = nbformat.writes(nb).encode()
        target.write_bytes(data)
    before = tree_digest(release.dir, source.parent.parent / "solutions", subs)
    cwd = os.getcwd()
    os.chdir(ROOT)  # grading hides the folder it runs from: the repository with the example's sources
    try:
        shutdown_fork_server()
        start = time.monotonic()
        with ProcessWatch() as watch:
            code = cli_main(["grade", str(source), str(subs), "--out", str(out), "--jobs", "2", "--quiet"])
        seconds = time.monotonic() - start
        survivors = watch.survivors()
        strays = marked_processes(marker) + marked_processes(str(int(marker) + 1))
        first_csv = (out / "grades.csv").read_bytes()
        results = {r.submission: r for r in (SubmissionResult.from_dict(json.loads(p.read_text()))
                                             for p in out.glob("*/grading.json"))}
        # again, everything skipped: the run resumes
        resumed = grade(release, discover([subs], "vectors.ipynb").submissions,
                        GradeOptions(out, quiet=True, jobs=2))
        # and graded again in the opposite order, with --regrade
        again = grade(release, list(reversed(discover([subs], "vectors.ipynb").submissions)),
                      GradeOptions(out, quiet=True, jobs=2, regrade=True))
        shutdown_fork_server()
    finally:
        os.chdir(cwd)
        stop.set()
        server.close()
    yield {"code": code, "out": out, "results": results, "csv": first_csv, "again": {r.submission: r for r in again},
           "again_csv": (out / "grades.csv").read_bytes(), "resumed": resumed, "seconds": seconds,
           "survivors": survivors, "strays": strays, "connections": connections, "write_targets": write_targets,
           "before": before, "release": release, "source": source, "subs": subs, "marker": marker}
    for p in write_targets.values():  # in case the confinement failed: leave no litter
        if p.name.startswith(("ag-hostile-", "HACKED")):
            p.unlink(missing_ok=True)


# -- the checks ------------------------------------------------------------------------------------------

def test_corpus_is_big_enough_and_every_submission_has_a_row(corpus_run):
    assert len(EXPECTED) >= 30
    assert corpus_run["code"] == 0
    rows = list(csv.DictReader(corpus_run["csv"].decode().splitlines()))
    assert sorted(r["submission"] for r in rows) == sorted(e["id"] for e in EXPECTED)
    assert sorted(corpus_run["results"]) == sorted(e["id"] for e in EXPECTED)
    print(f"\ncorpus of {len(EXPECTED)} graded in {corpus_run['seconds']:.0f} s with --jobs 2")


@pytest.mark.parametrize("expected", EXPECTED, ids=[e["id"] for e in EXPECTED])
def test_expected_outcome(corpus_run, expected):
    r = corpus_run["results"][expected["id"]]
    assert r.score == expected["score"], f"{expected['what']}: {r.to_dict()}"
    assert r.score <= expected["honest"]
    if expected["error"]:
        assert expected["error"] in r.error
        return
    assert not r.error, r.error
    for c in r.checks:
        want = expected["lost"].get(c.name)
        if want is None:
            expected_status = "pending" if c.name == "q_softmax" else "passed"  # the written answer: graded by hand
            assert c.status == expected_status, f"{c.name}: {c.message}"
            continue
        assert c.score == 0, f"{c.name}: {c.message}"
        alternatives = want if isinstance(want, list) else [want]
        assert any(a in c.message for a in alternatives), f"{c.name}: {c.message!r} lacks {want!r}"
        for word in ("LEAK", "ESCAPED", "NETWORK"):
            assert word not in c.message
    if expected["note"]:
        assert any(expected["note"] in n for n in r.notes), r.notes


def test_nothing_private_was_read_and_no_network(corpus_run):
    for r in corpus_run["results"].values():
        for c in r.checks:
            for word in ("LEAK", "ESCAPED", "NETWORK"):
                assert word not in c.message, f"{r.submission} {c.name}: {c.message}"
    assert corpus_run["connections"] == [], "a worker reached a port on the grading machine"


def test_grading_files_are_intact_and_nothing_was_written_outside_scratch(corpus_run):
    targets, out = corpus_run["write_targets"], corpus_run["out"]
    for name in ("repo", "tmp", "var_tmp", "shm", "home", "out_new"):
        assert not targets[name].exists(), f"a worker wrote {targets[name]}"
    release, source, subs = corpus_run["release"].dir, corpus_run["source"], corpus_run["subs"]
    assert tree_digest(release, source.parent.parent / "solutions", subs) == corpus_run["before"]
    assert b"1000" not in (out / "grades.csv").read_bytes()
    for folder in out.iterdir():
        if folder.is_dir() and (folder / "results.json").is_file():
            gradescope = json.loads((folder / "results.json").read_text())
            ours = json.loads((folder / "grading.json").read_text())
            assert gradescope["score"] == ours["score"] <= 11, folder.name
    summary = (out / "summary.md").read_text()
    assert "## Checks" in summary and "normalize_test" in summary


def test_no_process_is_left_behind(corpus_run):
    assert corpus_run["strays"] == [], "processes started by submissions outlived their workers"
    assert corpus_run["survivors"] == [], "processes of the grading run outlived it"


def test_resuming_skips_everything_already_graded(corpus_run):
    assert [r.score for r in corpus_run["resumed"]] == [corpus_run["results"][r.submission].score
                                                         for r in corpus_run["resumed"]]


def test_grading_again_gives_identical_scores_and_messages(corpus_run):
    assert corpus_run["again_csv"] == corpus_run["csv"]
    timing = {e["id"] for e in EXPECTED if e["timing_sensitive"]}
    for sub_id, first in corpus_run["results"].items():
        second = corpus_run["again"][sub_id]
        assert [c.score for c in first.checks] == [c.score for c in second.checks], sub_id
        if sub_id not in timing:
            assert [c.message for c in first.checks] == [c.message for c in second.checks], sub_id
            assert first.notes == second.notes, sub_id


def test_grades_match_the_golden_file(corpus_run, update_goldens):
    """Every hostile submission's checks (status, score) as committed in tests/goldens/; messages vary
    with the run's random marker and port, so they are compared by test_expected_outcome instead."""
    compare_or_update("hostile_corpus", grades(corpus_run["results"], messages=False), update_goldens)
