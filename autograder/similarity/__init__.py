"""`autograder similarity`: which submissions of a class are similar, per part, code and written answers apart.

Modules, lowest first: normalise.py (code -> tokens that disguise does not change), fingerprints.py (winnowing),
sources.py (a notebook -> per part, what its student wrote), compare.py (every pair through an inverted index),
report.py (index.html, a page per flagged pair, pairs.csv). `find_similar` ties them together; docs/similarity.md
says why this algorithm and what it measures.

Guarantees: nothing is written anywhere but DIR/similarity/ (never a student's results); no student code runs
(it is parsed, never executed); a submission that cannot be read or holds nothing written is a row with the reason.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autograder.similarity.compare import CODE, TEXT, Comparison, Settings, compare
from autograder.similarity.sources import CURRENT, KEY, PAST, Layout, Source, layout, read_source


@dataclass
class Entry:
    """A notebook to read: its id, its path (None: `problem` says why there is none), and whose it is."""

    id: str
    path: Path | None
    kind: str = CURRENT
    problem: str = ""


class Progress:
    """Notebooks read so far on stderr: one updating bar on a terminal, else a line every tenth of the run."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.quiet, self.done = total, quiet, 0
        self.bar = sys.stderr.isatty()
        self.start = time.monotonic()
        self.step = max(1, total // 10)

    def update(self) -> None:
        self.done += 1
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        if self.bar:
            filled = int(30 * self.done / max(1, self.total))
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} notebooks read"
                             f"  ETA {eta:.0f} s \x1b[K")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        elif self.done % self.step == 0 or self.done == self.total:
            print(f"[{self.done}/{self.total}] notebooks read ({elapsed:.1f} s, ETA {eta:.0f} s)", file=sys.stderr,
                  flush=True)


def read_all(entries: list[Entry], lay: Layout, quiet: bool = True) -> list[Source]:
    progress = Progress(len(entries), quiet)
    sources = []
    for e in entries:
        if e.problem or e.path is None:
            sources.append(Source(e.id, e.kind, e.path, problem=e.problem or "no notebook"))
        else:
            sources.append(read_source(e.id, e.path, e.kind, lay))
        progress.update()
    return sources


def find_similar(entries: list[Entry], lay: Layout, answer_key: Path | None = None, settings: Settings | None = None,
                 quiet: bool = True) -> Comparison:
    """Read every entry (and the answer key, as a source of its own), then compare."""
    if answer_key is not None and answer_key.is_file():
        entries = [*entries, Entry("answer key", answer_key, KEY)]
    sources = read_all(entries, lay, quiet)
    starter = {CODE: lay.starter_code_fps, TEXT: lay.starter_text_fps}
    return compare(sources, starter, settings)


__all__ = ["CURRENT", "KEY", "PAST", "Comparison", "Entry", "Layout", "Settings", "Source", "find_similar", "layout",
           "np"]
