"""What a kind of deferred check is: a check that `autograder grade` reports pending, and something else decides
later (a GPU run of the accuracy rubric, a teaching assistant grading a written answer).

A kind says, in one object:
- which of an assignment's checks are its own (`owns`), and why a platform's autograder cannot score them
  (`why_pending`: Gradescope's points summary and `verify` quote it);
- its results file in DIR/<submission>/ (`results_file`), written by its own command, and how the recorded
  results are read back (`read_back`): `autograder grade` merges them into every result it writes, so a regrade
  or a resumed run never loses them;
- what `autograder grade` prints to the instructor while its checks are pending (`advice`);
- what a student is told at submission time about its checks (`student_notes`: a file the check will need);
- whether nbgrader's formgrader shows its checks as manually graded cells (`nbgrader_hand_graded`);
- when one of its results is final (`is_final`).

Grading, resuming, the grade command and the exports loop over `autograder.deferred.KINDS`; none of them names
a kind. Guarantee of every kind: a result it reads back is merged only while it was decided from the bytes
being graded (autograder.deferred.recorded), else the check stays pending and a note says why.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from autograder.judge import CheckResult
from autograder.status import UNSCORED
from autograder.testing import CheckSpec


@dataclass
class ReadBack:
    """What a kind recorded for one submission: results to merge (replacing the pending checks of the same names)
    and notes for the student (a recorded result that no longer matches the notebook)."""

    checks: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AdviceContext:
    """Where `autograder grade` ran, for the commands a kind's advice spells out."""

    assignment: str  # the name or path `grade` was given
    submissions: tuple[str, ...]  # as given on the command line
    out: str  # the results folder

    def unzipped(self) -> tuple[str, list[str]]:
        """(the shell commands that unpack the zip files among the submissions, the submissions with each zip
        replaced by its folder): for a command that reads files beside the notebooks."""
        commands, given = [], []
        for s in self.submissions:
            if s.lower().endswith(".zip"):
                folder = s[:-4] or "submissions"
                commands.append(f"unzip -q {shlex.quote(s)} -d {shlex.quote(folder)} && ")
                given.append(folder)
            else:
                given.append(s)
        return "".join(commands), given


class DeferredKind:
    """One kind of deferred check. Subclasses set the class attributes and implement `owns` and `why_pending`."""

    key: ClassVar[str] = ""  # one word, unique among the kinds
    results_file: ClassVar[str | None] = None  # in DIR/<submission>/: what the kind's command recorded
    command: ClassVar[str] = ""  # the verb that decides its checks, for messages
    nbgrader_hand_graded: ClassVar[bool] = False  # formgrader shows its checks as manually graded cells

    def owns(self, spec: CheckSpec) -> bool:
        """Whether `spec` (a check of a release) is one of this kind's."""
        raise NotImplementedError

    def why_pending(self, spec: CheckSpec) -> str:
        """Why no autograder run on a platform scores `spec`, and who does: one line."""
        raise NotImplementedError

    def read_back(self, folder: Path, notebook: Path) -> ReadBack:
        """The results this kind recorded in `folder` (DIR/<submission>) for `notebook`; none by default."""
        return ReadBack()

    def advice(self, specs: list[CheckSpec], pending: set[str], where: AdviceContext) -> list[str]:
        """Lines `autograder grade` prints about this kind's checks still pending (names in `pending`)."""
        return []

    def student_notes(self, specs: list[CheckSpec], notebook: Path) -> dict[str, str]:
        """Messages by check name, said when a student submits (a file the check will need is missing)."""
        return {}

    def is_final(self, check: CheckResult) -> bool:
        """Whether `check`, one of this kind's recorded results, is decided for good: only those are merged."""
        return check.status not in UNSCORED
