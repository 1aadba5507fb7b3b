"""`autograder verify <name>`: the release is sound before it reaches students.

1. The reference solution (the answer key) gets every point that can be graded here.
2. The untouched student notebook gets 0 on every check that runs into a stub.
3. No line of solution or hidden-test text appears anywhere in assignments/<name>/.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.build import Paths, _read_source_notebook, build, transform
from autograder.config import load_config
from autograder.grade import GradeOptions, grade
from autograder.release import load_release


@dataclass
class VerifyReport:
    problems: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def secret_lines(source: Path) -> set[str]:
    """Stripped lines that exist only in solutions, hidden tests or hidden test files."""
    config = load_config(source)
    out = transform(_read_source_notebook(source / config.notebook), str(source / config.notebook))
    secret = {s.strip() for s in out.secrets}
    for test_file in sorted((source / "tests").glob("*.py")):
        secret |= {s.strip() for s in test_file.read_text(encoding="utf-8").splitlines()}
    public = {s.strip() for s in out.public}
    return {s for s in secret - public if s and s.strip("#").strip()}


def find_leaks(assignment_dir: Path, secrets: set[str]) -> list[str]:
    leaks = []
    for f in sorted(p for p in assignment_dir.rglob("*") if p.is_file()):
        text = f.read_bytes().decode("utf-8", errors="replace")
        if f.suffix == ".ipynb":
            nb = nbformat.reads(text, as_version=4)
            candidates = [line for c in nb.cells for line in "".join(c.source).split("\n")]
            candidates += [line for c in nb.cells for o in c.get("outputs", []) for line in str(o).split("\n")]
        else:
            candidates = text.splitlines()
        for line in {c.strip() for c in candidates} & secrets:
            leaks.append(f"{f.relative_to(assignment_dir)}: contains {line[:70]!r}")
    return leaks


def verify(source: Path, cuda: bool | None = None) -> VerifyReport:
    report = VerifyReport()
    paths = build(source)
    release = load_release(paths.release)
    config = release.config
    with tempfile.TemporaryDirectory(prefix="ag-verify-") as tmp:
        key, student = paths.release / "answer_key.ipynb", paths.assignment / config.notebook
        results = grade(release, [key, student], GradeOptions(Path(tmp), quiet=True, cuda=cuda))
    ref_result, stub_result = results
    for c in ref_result.checks:
        if c.status == "pending":
            report.lines.append(f"reference   {c.name}: pending (needs a GPU)")
        elif c.score < c.max_score:
            report.problems.append(f"the reference gets {c.score:g}/{c.max_score:g} on {c.name}: {c.message}")
    for c in stub_result.checks:
        if c.stub_hit and c.score > 0:
            report.problems.append(f"the untouched student notebook gets {c.score:g} on {c.name}, "
                                   "which runs into a stub")
    stubbed = sum(1 for c in stub_result.checks if c.stub_hit)
    report.lines.append(f"reference: {ref_result.score:g}/{ref_result.max_score:g} "
                        f"({len(ref_result.pending)} pending); untouched student notebook: "
                        f"{stub_result.score:g}/{stub_result.max_score:g} ({stubbed} checks hit a stub)")
    leaks = find_leaks(paths.assignment, secret_lines(paths.source))
    report.problems += [f"leak: {leak}" for leak in leaks]
    report.lines.append(f"leak check: {len(leaks)} leaked line(s) in {paths.assignment}")
    return report
