"""Workers' scratch folders: removed by their maker, and by the next run when their maker was killed."""
import os
import subprocess
import sys
import time

from autograder.sandbox import scratch
from autograder.sandbox.scratch import Scratch, sweep

MAKE_AND_DIE = """
import os, signal, sys
sys.path.insert(0, {root!r})
from autograder.sandbox.scratch import Scratch
s = Scratch()
open(os.path.join(s.name, "weights.bin"), "wb").write(b"x" * 1000)
print(s.name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _aged(path, seconds):
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_cleanup_removes_the_folder_and_everything_in_it():
    s = Scratch()
    open(os.path.join(s.name, "f"), "w").write("x")
    s.cleanup()
    assert not os.path.exists(s.name)
    s.cleanup()  # twice is harmless


def test_a_killed_makers_folder_is_swept_and_a_living_ones_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(scratch, "_swept", True)  # no sweep of the machine's /tmp from this test
    living = Scratch()
    try:
        out = subprocess.run([sys.executable, "-c", MAKE_AND_DIE.format(root=ROOT)], capture_output=True, text=True)
        orphan = out.stdout.strip()
        assert orphan and os.path.isdir(orphan), out.stderr
        assert orphan not in sweep(os.path.dirname(orphan))  # too young: its maker may not have locked it yet
        _aged(orphan, scratch.STALE_SECONDS + 5)
        _aged(living.name, scratch.STALE_SECONDS + 5)
        removed = sweep(os.path.dirname(orphan))
        assert orphan in removed and not os.path.exists(orphan)
        assert living.name not in removed and os.path.isdir(living.name)  # its maker (this process) holds it
    finally:
        living.cleanup()


def test_sweep_leaves_other_files_alone(tmp_path):
    (tmp_path / "ag-worker-not-a-folder").write_text("x")
    (tmp_path / "other").mkdir()
    for p in (tmp_path / "ag-worker-not-a-folder", tmp_path / "other"):
        _aged(p, scratch.STALE_SECONDS + 5)
    assert sweep(str(tmp_path)) == []
    assert (tmp_path / "ag-worker-not-a-folder").exists() and (tmp_path / "other").exists()
