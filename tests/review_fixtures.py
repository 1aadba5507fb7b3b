"""A results folder to review: the example assignment graded for students whose written answers are ordinary,
hostile (script tags, javascript: links, SVG with scripts, images pointing at files and URLs, 10 MB of text) or
whose names carry markup; and the review server started as a user starts it."""
from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from autograder.grading import GradeOptions, grade

SVG_WITH_SCRIPT = '<svg xmlns="http://www.w3.org/2000/svg" onload="window.pwned=1"><script>window.pwned=1</script>' \
                  '<rect width="10" height="10"/></svg>'
PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
ANSWERS = {
    "alice": "Subtracting the **maximum** keeps `exp` from overflowing; softmax is shift invariant.",
    "bob": "<script>window.pwned=1</script>\n\n<img src=x onerror=\"window.pwned=1\">\n\n"
           "[click me](javascript:window.pwned=1) and <a href=\"javascript:window.pwned=1\">this</a>\n\n"
           "![tracker](http://127.0.0.1:9/tracker.png) ![local](file:///etc/passwd) <img src=\"/etc/passwd\">\n\n"
           f"{SVG_WITH_SCRIPT}\n\n<iframe src=\"http://127.0.0.1:9/\"></iframe><style>body{{display:none}}</style>",
    "carol": "A" * (10 * 2**20),
    "dan <b onmouseover=x>": "Because exp(1000) is inf.",
}


def _answer(nb, text: str) -> None:
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "q_softmax":
            cell.source = text
            return
    raise AssertionError("the example has no q_softmax cell")


def make_results(release: Path, root: Path) -> Path:
    """Grade one submission per ANSWERS entry (bob's also with an SVG output whose script must not run)."""
    subs = root / "subs"
    subs.mkdir(parents=True)
    for name, text in ANSWERS.items():
        nb = nbformat.read(release / "answer_key.ipynb", as_version=4)
        _answer(nb, text)
        if name == "bob":
            out = nbformat.v4.new_code_cell("show()")
            out.outputs = [nbformat.v4.new_output("display_data", data={"image/svg+xml": SVG_WITH_SCRIPT,
                                                                          "image/png": PNG_1PX})]
            nb.cells.append(out)
        nbformat.write(nb, subs / f"{name}.ipynb")
    out = root / "out"
    from autograder.release import load_release

    grade(load_release(release), sorted(subs.iterdir()), GradeOptions(out, quiet=True))
    return out


def start_review(release: Path, out: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """`autograder review` on a free port; (the process, the URL it printed: with the token unless --graders)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "review", str(release), "--out", str(out),
                             "--port", "0", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        found = re.search(r"(http://\S+?)/?(\?token=\S+)?(\s|$)", line)
        if found and "review:" in line:
            return proc, found.group(1) + "/" + (found.group(2) or "")
    proc.kill()
    raise AssertionError("autograder review printed no address:\n" + "".join(lines))


def png_data() -> bytes:
    return base64.b64decode(PNG_1PX)
