"""What an import converted, what it could not and why: printed, and kept as solutions/<name>/IMPORT.md.

An importer drops nothing silently: each solution, test and point of the source is listed as converted,
or as not converted with the reason and what to do. Notes say where the converted assignment means
something different from the source, and the limits every assignment of that format shares.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

REPORT_FILE = "IMPORT.md"


@dataclass
class ImportReport:
    """What one import converted, refused and noted, written beside the imported assignment (REPORT_FILE) and printed
    by `autograder import`."""
    fmt: str  # the source's format: "nbgrader", "otter"
    source: Path  # the notebook imported
    target: Path  # solutions/<name>/
    converted: list[str] = field(default_factory=list)
    not_converted: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def convert(self, text: str) -> None:
        """Record one item converted, as a line of the report."""
        self.converted.append(text)

    def refuse(self, where: str, what: str, why: str) -> None:
        """Record an item not converted: `where` it is, `what` it is and `why`."""
        self.not_converted.append(f"{where}: {what}: {why}")

    def note(self, text: str) -> None:
        """Add a note (each text once)."""
        if text not in self.notes:
            self.notes.append(text)

    def render(self) -> str:
        """The report as Markdown: converted, not converted, notes, each with a line where it is empty."""
        lines = [f"# Imported from {self.fmt}: {self.source.name}", "",
                 f"Source: `{self.source}`. Written by `autograder import {self.fmt}`; edit freely.", ""]
        for title, items, empty in (("Converted", self.converted, "nothing"),
                                    ("Not converted", self.not_converted, "nothing: every item was converted"),
                                    ("Notes", self.notes, "none")):
            lines += [f"## {title}", ""] + [f"- {item}" for item in items] + ([f"- {empty}"] if not items else [])
            lines.append("")
        return "\n".join(lines)

    def write(self) -> Path:
        """Write the rendered report into the target folder; returns its path."""
        path = self.target / REPORT_FILE
        path.write_text(self.render(), encoding="utf-8")
        return path

    def summary(self) -> str:
        """A few lines for the command line."""
        head = (f"{self.source} -> {self.target}: {len(self.converted)} item(s) converted, "
                f"{len(self.not_converted)} not converted (see {self.target / REPORT_FILE})")
        return "\n".join([head] + [f"  NOT CONVERTED {item}" for item in self.not_converted])
