"""Progress of a grading run on stderr."""
from __future__ import annotations

import sys
import time

from autograder.reports.results import SubmissionResult, pending_points_text


class Progress:
    """Counts of done / failed / pending on stderr: one updating bar on a terminal, else a line per
    submission."""

    def __init__(self, total: int, skipped: int, jobs: int, quiet: bool, bar: bool | None):
        self.total, self.skipped, self.jobs, self.quiet = total, skipped, jobs, quiet
        self.bar = sys.stderr.isatty() if bar is None else bar
        self.done = self.failed = 0
        self.start = time.monotonic()

    @property
    def pending(self) -> int:
        """Submissions of this run not graded yet (the skipped ones, already in --out, left out)."""
        return self.total - self.skipped - self.done

    def counts(self) -> str:
        """The counts every progress line ends with: "done N, failed N, pending N"."""
        return f"done {self.done}, failed {self.failed}, pending {self.pending}"

    def update(self, result: SubmissionResult) -> None:
        """Count one finished result and show it: the bar redrawn (with rate and ETA), or a line with its score,
        pending points and error; nothing when quiet."""
        self.done += 1
        self.failed += bool(result.error)
        if self.quiet:
            return
        if self.bar:
            width = 30
            finished = self.skipped + self.done
            filled = int(width * finished / max(1, self.total))
            elapsed = time.monotonic() - self.start
            eta = elapsed / self.done * self.pending if self.done else 0
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {finished}/{self.total}  {self.counts()}"
                             f"  {self.done / max(elapsed, 1e-9) * 60:.1f}/min  ETA {eta:.0f} s \x1b[K")
            sys.stderr.flush()
            return
        pending = f", {pending_points_text(result)} pending" if result.pending else ""
        pending += f", {len(result.ungraded)} NOT GRADED (grader problem)" if result.ungraded else ""
        error = f"  [{result.error.splitlines()[0][:80]}]" if result.error else ""
        print(f"[{self.skipped + self.done}/{self.total}] {result.submission}: {result.score:g}/{result.max_score:g}"
              f"{pending} ({result.execution_time:.1f} s){error}  ({self.counts()})", file=sys.stderr, flush=True)

    def finish(self) -> None:
        """End the bar's line, so that what is printed next starts on a line of its own."""
        if self.bar and not self.quiet and self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()
