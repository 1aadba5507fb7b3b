"""Snapshots of the submitted notebooks for the review page: each submission's cells, and per question the cells that
hold its answer. Taken by `autograder review` from the notebooks the results name; the pages then read the snapshot
in DIR only.

Bounds (a hostile notebook stays a page a grader can use): a notebook over MAX_NOTEBOOK_BYTES is not read (the page
says so); a cell's text is cut at MAX_CELL_CHARS, an output's at MAX_OUTPUT_CHARS, an image over MAX_IMAGE_BYTES is
left out, with a note each time. Images are kept only as PNG, JPEG, GIF or SVG data (SVG is shown as an image, where
its scripts never run).
"""
from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from autograder.deferred.recorded import file_digest

MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_CELL_CHARS = 20_000
MAX_OUTPUT_CHARS = 20_000
MAX_IMAGE_BYTES = 2 * 2**20
MAX_CELLS = 2_000
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml")
CITED_CELL = re.compile(r"notebook cell (\d+)")


def _text(value: object) -> str:
    return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else ""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n\n[... cut here: {len(text):,} characters in all, the first {limit:,} shown]"


def _image(mime: str, data: object) -> dict | None:
    raw = _text(data).strip()
    if mime == "image/svg+xml":
        raw = base64.b64encode(raw.encode("utf-8")).decode("ascii")
    if len(raw) * 3 // 4 > MAX_IMAGE_BYTES:
        return {"kind": "text", "text": f"[an image of {len(raw) * 3 // 4 / 2**20:.1f} MB, not shown]"}
    if not re.fullmatch(r"[A-Za-z0-9+/=\s]*", raw):
        return None
    return {"kind": "image", "mime": mime, "data": re.sub(r"\s", "", raw)}


def _outputs(cell: dict) -> list[dict]:
    out = []
    for output in cell.get("outputs", []) if isinstance(cell.get("outputs"), list) else []:
        if not isinstance(output, dict):
            continue
        data = output.get("data") if isinstance(output.get("data"), dict) else {}
        image = next((m for m in IMAGE_TYPES if m in data), None)
        shown = _image(image, data[image]) if image else None
        if shown:
            out.append(shown)
        elif "text/plain" in data or "text" in output or "traceback" in output:
            text = _text(data.get("text/plain")) or _text(output.get("text")) or "\n".join(
                str(line) for line in output.get("traceback", []) if isinstance(line, str))
            out.append({"kind": "text", "text": _cut(re.sub(r"\x1b\[[0-9;]*m", "", text), MAX_OUTPUT_CHARS)})
    return out[:20]


def _attachments(cell: dict) -> dict:
    found = {}
    for name, bundle in (cell.get("attachments") or {}).items() if isinstance(cell.get("attachments"), dict) else ():
        mime = next((m for m in IMAGE_TYPES if isinstance(bundle, dict) and m in bundle), None)
        image = _image(mime, bundle[mime]) if mime else None
        if image and image["kind"] == "image":
            found[str(name)] = f"data:{image['mime']};base64,{image['data']}"
    return found


def snapshot_cell(cell: dict, number: int) -> dict:
    """One notebook cell as the snapshot the page shows (`number` counts from 1): type, grade_id, source and outputs
    cut to the bounds, images from data only."""
    meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    nbgrader = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
    return {"number": number, "type": str(cell.get("cell_type", "code")), "grade_id": str(nbgrader.get("grade_id", "")),
            "source": _cut(_text(cell.get("source")), MAX_CELL_CHARS), "outputs": _outputs(cell),
            "attachments": _attachments(cell)}


def read_cells(path: Path) -> tuple[list[dict], str]:
    """(the notebook's cells as snapshots, a note when it could not be read whole)."""
    try:
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            return [], f"the notebook is {size / 2**20:.0f} MB, over the {MAX_NOTEBOOK_BYTES // 2**20} MB the review shows"
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        return [], f"the notebook could not be read: {type(exc).__name__}"
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        return [], "the notebook has no cells"
    note = f"only the first {MAX_CELLS} of {len(cells)} cells are shown" if len(cells) > MAX_CELLS else ""
    return [snapshot_cell(c, i) for i, c in enumerate(cells[:MAX_CELLS], start=1) if isinstance(c, dict)], note


def _under_heading(cells: list[dict], heading: str) -> list[dict]:
    for i, cell in enumerate(cells):
        if cell["type"] == "markdown" and heading and heading in cell["source"]:
            following = []
            for after in cells[i + 1:]:
                if after["type"] == "markdown" and after["source"].lstrip().startswith("#"):
                    break
                following.append(after)
            return following
    return []


def answer_cells(cells: list[dict], question: str, message: str, heading: str = "") -> list[dict]:
    """The cells holding the answer to `question`: those whose nbgrader grade_id it is, else the cell the check's
    message cites (`notebook cell N`), else the cells under its heading."""
    named = [c for c in cells if c["grade_id"] == question]
    if named:
        return named
    cited = CITED_CELL.search(message or "")
    if cited and 1 <= int(cited.group(1)) <= len(cells):
        return [cells[int(cited.group(1)) - 1]]
    return _under_heading(cells, heading)


def digest(path: Path) -> str | None:
    """sha256 of the notebook's bytes; None when it cannot be read."""
    return file_digest(path)
