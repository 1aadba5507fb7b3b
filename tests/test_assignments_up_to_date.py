"""Every committed assignments/<name>/ folder is exactly what `autograder build` makes of solutions/<name>/."""
import shutil
from pathlib import Path

import pytest

from autograder.build import build

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p.parent for p in (ROOT / "solutions").glob("*/assignment.toml"))


@pytest.mark.parametrize("source", SOURCES, ids=[s.name for s in SOURCES])
def test_assignment_folder_is_up_to_date(source, tmp_path):
    copy = tmp_path / "solutions" / source.name
    shutil.copytree(source, copy)
    paths = build(copy)
    committed = ROOT / "assignments" / source.name
    generated = {p.relative_to(paths.assignment): p.read_bytes() for p in paths.assignment.rglob("*") if p.is_file()}
    on_disk = {p.relative_to(committed): p.read_bytes() for p in committed.rglob("*") if p.is_file()}
    assert sorted(on_disk) == sorted(generated), f"assignments/{source.name} has other files than the build makes"
    stale = [str(name) for name in generated if generated[name] != on_disk[name]]
    assert not stale, f"assignments/{source.name} is out of date ({stale}): run autograder build solutions/{source.name}"
