"""The part of an assignment that a function or class of the notebook belongs to.

One rule for `autograder build`'s depends_on notes (build.calls_into_other_parts) and the mutation analysis
(mutants/analysis.graded_definitions). Given the parts whose checks read the definition (`reading`):

1. the one part whose checks read it, when they are all in one part (what grades it wins over where it stands);
2. else the part the markdown heading above it names (`## 4. Training loop`, `## Part 4: Training loop`,
   `### 4.2 ...`: its number, or its title, matches one part's), when that part's checks read it or none do;
3. else the part of the first test cell after it (a part's solution, then its tests), on the same condition;
4. else the first part, in the parts' order, whose checks read it.

The heading is the nearest one above the definition; one that names no part (`### Hints`) gives way to the
heading it sits under, while a heading of the same level or above (`## Appendix`) ends the search. Rules 2 and 4
keep a part with hidden checks only (tests/*.py, no test cell in the notebook) from being given the next part's
definitions.
"""
from __future__ import annotations

import re

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_NUMBER = re.compile(r"\s*(?:(?:part|question|task|exercise|problem|section|step|q)\s*)?(\d+)(?!\d)", re.I)


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[*_`]", "", text).split()).strip().lower()


def _number(text: str) -> int | None:
    match = _NUMBER.match(_plain(text))
    return int(match.group(1)) if match else None


def _title(text: str) -> str:
    text = _plain(text)
    match = _NUMBER.match(text)
    return (text[match.end():] if match else text).strip(" .:-)").strip()


def part_named_by(heading: str, parts) -> str | None:
    """The one part of `parts` that a heading's text names: the same text, the same number (`4`, `Part 4`,
    `Question 4`, `4.2`), or the same title after the number; None when it names none or several."""
    parts = [p for p in dict.fromkeys(parts) if p]
    for same in (lambda p: _plain(p) == _plain(heading),
                 lambda p: _number(heading) is not None and _number(p) == _number(heading),
                 lambda p: bool(_title(heading)) and _title(p) == _title(heading)):
        found = [p for p in parts if same(p)]
        if found:
            return found[0] if len(found) == 1 else None
    return None


def headings(cells) -> list[list[tuple[int, str]]]:
    """For each cell, the markdown headings it sits under, outermost first (level, text)."""
    out, stack = [], []
    for cell in cells:
        out.append(list(stack))
        if cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        fenced = False
        for line in ("".join(source) if isinstance(source, list) else source).split("\n"):
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            match = None if fenced else _HEADING.match(line)
            if match:
                level = len(match.group(1))
                stack = [h for h in stack if h[0] < level] + [(level, match.group(2))]
    return out


def heading_parts(cells, parts) -> list[str | None]:
    """For each cell, the part the nearest heading above it names (a heading naming none gives way to the one it
    sits under), else None."""
    out = []
    for under in headings(cells):
        out.append(next((p for p in (part_named_by(text, parts) for _, text in reversed(under)) if p), None))
    return out


def part_order(parts) -> list[str]:
    """The parts in order: by their numbers when each has a number of its own, else as given."""
    parts = [p for p in dict.fromkeys(parts) if p]
    numbers = [_number(p) for p in parts]
    if None not in numbers and len(set(numbers)) == len(numbers):
        return [p for _, p in sorted(zip(numbers, parts))]
    return parts


def definition_part(reading, heading: str | None, position: str | None, parts) -> str | None:
    """The part a definition belongs to (the module's rule): `reading`, the parts whose checks read it; `heading`,
    the part the heading above it names; `position`, the part of the first test cell after it."""
    reading = list(dict.fromkeys(p for p in reading if p))
    if len(reading) == 1:
        return reading[0]
    for candidate in (heading, position):
        if candidate and candidate in parts and (candidate in reading or not reading):
            return candidate
    order = part_order([*parts, *reading])
    return min(reading, key=order.index) if reading else None
