"""Class and per-check statistics of a batch of results: the one place that counts and averages them.

The class summary (summary.md, summary.csv: reports/summary.py) and the HTML class report
(reports/html.py) take every figure from here and show it with the formatting functions here, so
they agree to the digit.

Which submissions count:

- A submission that **could not be graded** (`SubmissionResult.error` is set: not a notebook, no
  worker, an internal grader error) is counted in `errors`, and listed by the reports with its
  reason. It counts in nothing else: its checks are placeholders ("failed", 0 points), not the
  student's answers, so they are in no per-check count, and its 0 is in no mean, median, minimum,
  maximum or histogram.
- A submission with checks the grader could not decide (ungraded: a problem of the grader's setup)
  is **not final**: its total would be too low, so it is in no mean, median, minimum, maximum,
  full-marks or zero count, nor in the histogram; `not_final` says how many were left out. Its
  decided checks are final and count per check like any other; its ungraded ones are counted as such.
- Every other submission is **graded**: its score (pending checks are not in it) is in the class
  figures.
- Per check, the counts use the statuses of autograder/status.py: passed, partial, failed, pending,
  ungraded. The submissions **scored** on a check are the passed, partial and failed ones; the check's
  mean score and pass rate are over those. Pending and ungraded checks have no score yet: they are
  counted, never averaged in as 0.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from autograder.judge import CheckResult
from autograder.reports.results import SubmissionResult
from autograder.status import PASSED, PARTIAL, PENDING, UNGRADED

TOP_MESSAGES = 3  # most common messages kept per check
FLAG_MIN_ATTEMPTS = 5  # fewer attempts than this say nothing about a check
FLAG_LOST_SHARE = 0.8  # a check that this share of attempts lost points is flagged


@dataclass
class CheckStatistics:
    """One check over the graded submissions."""
    name: str
    part: str
    points: float
    passed: int = 0
    partial: int = 0
    failed: int = 0
    pending: int = 0
    ungraded: int = 0  # the grader could not decide it here (Judge.confirm)
    stub: int = 0  # lost points on a stub the student did not replace (NotImplementedError)
    score_sum: float = 0.0  # over the scored submissions
    messages: list[tuple[str, int]] = field(default_factory=list)  # most common of those who lost points

    @property
    def scored(self) -> int:
        """Submissions with a score on this check."""
        return self.passed + self.partial + self.failed

    @property
    def lost(self) -> int:
        """Scored submissions that lost points on this check (partial or failed)."""
        return self.partial + self.failed

    @property
    def mean(self) -> float | None:
        """The mean score of the scored submissions, in points; None when none was scored."""
        return self.score_sum / self.scored if self.scored else None

    @property
    def pass_rate(self) -> float | None:
        """The share (0 to 1) of the scored submissions that passed; None when none was scored."""
        return self.passed / self.scored if self.scored else None

    @property
    def flag(self) -> str:
        """A hint that the check, not the students, may be at fault (a stub left in place is no attempt)."""
        attempted = self.scored - self.stub
        if attempted < FLAG_MIN_ATTEMPTS:
            return ""
        if self.passed == 0:
            return "nobody got full points"
        if self.lost - self.stub >= FLAG_LOST_SHARE * attempted:
            return f"{self.lost - self.stub} of {attempted} attempts lost points"
        return ""


@dataclass
class ClassStatistics:
    """The class: totals of the graded submissions, and each check in the assignment's order."""
    submissions: int
    errors: int  # could not be graded
    not_final: int  # with checks the grader could not decide here: left out of the class figures
    max_score: float  # the assignment's total (every result lists every check, error rows too)
    scores: list[float]  # the final totals of the graded submissions, ascending
    checks: list[CheckStatistics]
    full_marks: int = 0  # graded submissions with every point that is not pending (hand-graded, GPU rubric)

    @property
    def graded(self) -> int:
        """Graded submissions with a final total (not-final ones are counted in `not_final` instead)."""
        return len(self.scores)

    @property
    def mean(self) -> float | None:
        """The mean final total, in points; None when no submission is graded."""
        return statistics.fmean(self.scores) if self.scores else None

    @property
    def median(self) -> float | None:
        """The median final total, in points; None when no submission is graded."""
        return statistics.median(self.scores) if self.scores else None

    @property
    def minimum(self) -> float | None:
        """The lowest final total; None when no submission is graded."""
        return self.scores[0] if self.scores else None

    @property
    def maximum(self) -> float | None:
        """The highest final total; None when no submission is graded."""
        return self.scores[-1] if self.scores else None

    @property
    def zero(self) -> int:
        """Graded submissions with a final total of 0."""
        return sum(1 for s in self.scores if s == 0)

    def counts_sentence(self) -> str:
        """The first line of both reports: how many submissions, graded, could not be graded, and not final."""
        left_out = f", {self.not_final} not final (left out of the class figures)" if self.not_final else ""
        return (f"{self.submissions} submission(s): {self.graded} graded, "
                f"{self.errors} could not be graded{left_out}.")


def graded_results(results: list[SubmissionResult]) -> list[SubmissionResult]:
    """The submissions whose checks are the student's answers (final or not): what per-check figures count."""
    return [r for r in results if not r.error]


def final_results(results: list[SubmissionResult]) -> list[SubmissionResult]:
    """The graded submissions whose every check is decided: the only totals the class figures take."""
    return [r for r in graded_results(results) if not r.ungraded]


def error_results(results: list[SubmissionResult]) -> list[SubmissionResult]:
    """The submissions that could not be graded, by id."""
    return sorted((r for r in results if r.error), key=lambda r: r.submission)


def message_key(message: str) -> str:
    """Messages grouped by their first line; long ones cut."""
    first = (message.strip().splitlines() or [""])[0].strip()
    return first if len(first) <= 160 else first[:157] + "..."


def most_common(counter: Counter, n: int | None = None) -> list[tuple[str, int]]:
    """Most frequent first, ties by text: the same order on every run."""
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def check_statistics(results: list[SubmissionResult]) -> list[CheckStatistics]:
    """Every check that appears in `results`, in order of first appearance, over the graded submissions."""
    by_name: dict[str, CheckStatistics] = {}
    messages: dict[str, Counter] = {}
    for r in results:
        for c in r.checks:  # an error row's checks too: a check no graded submission has still gets a row
            if c.name not in by_name:
                by_name[c.name] = CheckStatistics(c.name, c.part, c.max_score)
                messages[c.name] = Counter()
    for r in graded_results(results):
        for c in r.checks:
            _count(by_name[c.name], c, messages[c.name])
    for name, s in by_name.items():
        s.messages = most_common(messages[name], TOP_MESSAGES)
    return list(by_name.values())


def _count(s: CheckStatistics, c: CheckResult, messages: Counter) -> None:
    if c.status == PENDING:
        s.pending += 1
        return
    if c.status == UNGRADED:
        s.ungraded += 1
        return
    s.score_sum += c.score
    if c.status == PASSED:
        s.passed += 1
        return
    if c.status == PARTIAL:
        s.partial += 1
    else:
        s.failed += 1
    s.stub += bool(c.stub_hit)
    messages[message_key(c.message) or "(no message)"] += 1


def class_statistics(results: list[SubmissionResult]) -> ClassStatistics:
    """The class's figures, counted as the module docstring says: the one call both reports make."""
    graded = graded_results(results)
    final = final_results(results)
    return ClassStatistics(
        submissions=len(results),
        errors=len(results) - len(graded),
        not_final=len(graded) - len(final),
        max_score=max((r.max_score for r in results), default=0.0),
        scores=sorted(r.score for r in final),
        checks=check_statistics(results),
        full_marks=sum(1 for r in final if r.score >= r.max_score - r.pending_points - 1e-9),
    )


# -- how the reports show the figures (one formatting, so that they agree to the digit) ----------------

def format_mean(value: float | None) -> str:
    """A mean: two decimals; empty when there is nothing to average."""
    return "" if value is None else f"{value:.2f}"


def format_score(value: float | None) -> str:
    """A score, a median, a minimum or a maximum: as few digits as it needs; empty when there is none."""
    return "" if value is None else f"{value:g}"


def format_rate(value: float | None) -> str:
    """A pass rate as a whole percentage; empty when nothing was scored."""
    return "" if value is None else f"{value * 100:.0f}%"
