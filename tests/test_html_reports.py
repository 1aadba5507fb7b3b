"""HTML feedback per submission and the instructor's class report (histogram, pass rates)."""
from __future__ import annotations

import re
import struct
import xml.dom.minidom
from pathlib import Path

import pytest

from autograder.entrypoints import command_line as main
from autograder.judge import CheckResult
from autograder.reports.class_statistics import CheckStatistics, check_statistics
from autograder.reports.html import (
    class_report_html,
    find_chromium,
    histogram_svg,
    load_results,
    pass_rates_svg,
    render_png,
    submission_html,
    write_reports,
)
from autograder.reports.results import SubmissionResult, write_submission
from autograder.reports.summary import write_summary


def result(sub: str, scores: dict[str, tuple[float, str]], error: str = "") -> SubmissionResult:
    spec = {"norm": ("1. Normalize", 2, "visible"), "soft": ("2. Softmax", 3, "visible"),
            "secret": ("2. Softmax", 1, "hidden"), "acc": ("3. Accuracy", 4, "visible")}
    checks = []
    for name, (part, points, vis) in spec.items():
        score, status = scores.get(name, (0.0, "failed"))
        msg = {"failed": f"{name} is wrong <b>here</b>\n  File \"cell 3\", line 2\nValueError: x",
               "partial": "right along 1 of 3 dims", "pending": "needs a GPU"}.get(status, "")
        checks.append(CheckResult(name, part, points, score, status, msg, vis, seconds=0.25))
    return SubmissionResult(sub, f"/x/{sub}.ipynb", checks, ["cell 4 was not graded: SyntaxError"], error, 1.5)


CLASS = [
    result("ann", {"norm": (2, "passed"), "soft": (3, "passed"), "secret": (1, "passed"), "acc": (0, "pending")}),
    result("ben", {"norm": (2, "passed"), "soft": (1, "partial"), "acc": (0, "pending")}),
    result("cat", {"acc": (0, "pending")}),
    result("dan", {"acc": (0, "pending")}, error="dan.ipynb is not a notebook: invalid JSON"),
]


def test_submission_page():
    page = submission_html(CLASS[1], "Vectors")
    assert page.startswith("<!DOCTYPE html>") and "<title>Vectors: feedback</title>" in page
    assert "3 / 10" in page  # the score (pending points are not in it) over the maximum
    assert "4 point(s) are pending" in page
    assert "2 / 2" in page and "1 / 4" in page  # score per part; the hidden check counts in its part
    assert "secret" not in page and "1 hidden check(s)" in page  # but is not listed
    assert "soft is wrong" not in page and "right along 1 of 3 dims" in page
    assert "&lt;b&gt;here&lt;/b&gt;" in submission_html(CLASS[2], "V") and "<b>here</b>" not in \
        submission_html(CLASS[2], "V")  # messages are escaped
    assert page.count("<details>") == 3  # one collapsed block per shown check
    failing = submission_html(CLASS[2], "V")
    assert "<pre>File &quot;cell 3&quot;, line 2\nValueError: x</pre>" in failing  # the trace, collapsed
    assert "secret" in submission_html(CLASS[1], "V", audience="instructor")
    assert "cell 4 was not graded" in page


def test_class_report_numbers_and_pictures():
    page, hist, rates = class_report_html(CLASS, "Vectors")
    for svg in (hist, rates):
        xml.dom.minidom.parseString(svg)  # well-formed, standalone
    # graded totals 6, 3, 0 over a maximum of 10 (dan could not be graded: in no figure): one bar per point
    assert hist.count("<rect x=") == 10
    assert "<title>0-1: 1</title>" in hist and "<title>3-4: 1</title>" in hist and "<title>6-7: 1</title>" in hist
    stats = {s.name: s for s in check_statistics(CLASS)}
    assert stats["norm"].pass_rate == 2 / 3 and stats["soft"].partial == 1 and stats["norm"].failed == 1
    assert stats["acc"].pass_rate is None and stats["acc"].pending == 3
    assert "pending (graded by hand or on a GPU)" in rates and ">67%<" in rates
    assert "Could not be graded" in page and "invalid JSON" in page
    assert "<td class='num'>3.00</td>" in page  # mean of 6, 3, 0
    assert page.count("<svg") == 2


def test_histogram_bins_for_fractional_maximum():
    svg = histogram_svg([0.5, 2.25, 2.5], 2.5)
    assert svg.count("<rect x=") == 10 and "<title>2.25-2.5: 2</title>" in svg


def test_report_command(tmp_path, capsys):
    for r in CLASS:
        write_submission(tmp_path, r, "Vectors")
    assert main(["report", str(tmp_path), "--title", "Vectors"]) == 0
    assert (tmp_path / "class-report.html").is_file() and (tmp_path / "histogram.svg").is_file()
    assert all((tmp_path / r.submission / "feedback.html").is_file() for r in CLASS)
    assert "<a href='ann/feedback.html'>" in (tmp_path / "class-report.html").read_text()
    assert main(["report", str(tmp_path / "nothing")]) == 2


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium to render PNG")
def test_pages_render_to_png(tmp_path):
    pages = write_reports(tmp_path, "Vectors", CLASS)
    for page in (pages[1], pages[-1]):
        png = render_png(page, tmp_path / f"{page.parent.name}.png", height=900)
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def _summary_figures(md: str) -> tuple[dict, dict]:
    """summary.md's class figures and its per-check table."""
    score = re.search(r"^Score: mean (\S*), median (\S*), min (\S*), max (\S*), full marks (\d+), zero (\d+)", md, re.MULTILINE)
    counts = re.search(r"^(\d+) submission\(s\): (\d+) graded, (\d+) could not be graded", md, re.MULTILINE)
    figures = dict(zip(("mean", "median", "min", "max", "full marks", "zero"), score.groups()))
    figures.update(zip(("submissions", "graded", "could not be graded"), counts.groups()))
    header, checks = None, {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "check":
            header = cells
        elif header and line.startswith("| ") and len(cells) == len(header):
            checks[cells[0]] = dict(zip(header, cells))
        elif header and not line.strip():
            header = None
    return figures, checks


def _html_figures(page: str) -> tuple[dict, dict]:
    """The class report's figures table and its table of checks."""
    tables = [[re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)]
              for table in re.findall(r"<table>(.*?)</table>", page)]
    figures = dict(zip(*tables[0]))
    counts = re.search(r"(\d+) submission\(s\): (\d+) graded, (\d+) could not be graded", page)
    figures["submissions"] = counts.group(1)
    header, *rows = next(t for t in tables if t[0][:2] == ["Part", "Check"])
    checks = {row[1]: {h.lower(): cell for h, cell in zip(header, row)} for row in rows}
    return figures, checks


def test_class_report_and_summary_show_the_same_figures(tmp_path):
    """One results folder with a submission that could not be graded: summary.md and the class report agree."""
    for r in CLASS:
        write_submission(tmp_path, r, "Vectors")
    results = load_results(tmp_path)
    write_summary(tmp_path, results, "Vectors")
    write_reports(tmp_path, "Vectors", results)
    md_class, md_checks = _summary_figures((tmp_path / "summary.md").read_text())
    html_class, html_checks = _html_figures((tmp_path / "class-report.html").read_text())
    assert md_class == {key: html_class[key] for key in md_class}
    # ann got every point that is not pending: full marks (the pending rubric is not hers to get yet)
    assert md_class == {"mean": "3.00", "median": "3", "min": "0", "max": "6", "full marks": "1", "zero": "1",
                        "submissions": "4", "graded": "3", "could not be graded": "1"}  # dan is not in them
    columns = ("points", "mean", "passed", "partial", "failed", "pending", "ungraded")
    assert list(md_checks) == list(html_checks) == ["norm", "soft", "secret", "acc"]
    for name in md_checks:
        assert {c: md_checks[name][c] for c in columns} == {c: html_checks[name][c] for c in columns}, name
    assert md_checks["norm"]["mean"] == "1.33" and md_checks["acc"]["pending"] == "3"


def test_parts_come_in_the_notebooks_order_in_feedback():
    """A part graded by hidden test files only (listed after every notebook test cell) still comes in order."""
    from autograder.judge import CheckResult
    from autograder.reports.results import SubmissionResult, by_part, feedback_markdown

    checks = [CheckResult("a", "1. A", 1, 1, "passed", ""), CheckResult("c", "3. C", 1, 1, "passed", ""),
              CheckResult("b", "2. B", 1, 0, "failed", "wrong"), CheckResult("w", "Written answers", 1, 0, "pending", ""),
              CheckResult("q", "Part 10", 1, 1, "passed", "")]
    assert list(by_part(checks)) == ["1. A", "2. B", "3. C", "Part 10", "Written answers"]
    text = feedback_markdown(SubmissionResult("s", "s.ipynb", checks), "T")
    assert text.index("## 1. A") < text.index("## 2. B") < text.index("## 3. C") < text.index("## Part 10")


def test_a_message_from_student_code_is_shown_in_feedback_md_as_written_and_makes_nothing():
    from autograder.judge import CheckResult
    from autograder.reports.results import SubmissionResult, feedback_markdown

    raised = "x\n\n# Score: 79 / 79\n<img src=x onerror=alert(1)>\n[free points](http://x.example)"
    text = feedback_markdown(SubmissionResult("s", "s.ipynb", [CheckResult("c", "1. A", 1, 0, "failed", raised)]), "T")
    assert "\n# Score" not in text and "    \\# Score: 79 / 79" in text
    assert "<img" not in text.replace("\\<img", "") and "\\<img" in text and "\\[free points\\](http" in text


def test_feedback_md_escapes_with_backslashes_once_so_a_traceback_reads_as_written():
    """`in <module>` from a failed import: markdown would read `<module>` as an HTML tag, so it is escaped, with a
    backslash (rendered: `<module>`), never as `&lt;module&gt;`; text markdown makes nothing of stays as it is."""
    from autograder.judge import CheckResult
    from autograder.reports.results import SubmissionResult, feedback_markdown

    note = "cell 19, line 1 (plt): raised ModuleNotFoundError (cell 19, line 1, in <module>: import matplotlib)"
    raised = "a < b & c, and &lt; as typed"
    result = SubmissionResult("s", "s.ipynb", [CheckResult("c", "1. A", 1, 0, "failed", raised)], notes=[note])
    text = feedback_markdown(result, "T")
    assert "in \\<module>: import matplotlib" in text and "&lt;module" not in text
    assert "a < b & c, and \\&lt; as typed" in text
    markdown_it = pytest.importorskip("markdown_it")
    html = markdown_it.MarkdownIt("commonmark").render(text)
    assert "in &lt;module&gt;: import" in html and "a &lt; b &amp; c, and &amp;lt; as typed" in html


# -- pass-rates.svg: every label inside the picture, pending never drawn as 0% ---------------------------------

DEJAVU_SANS = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def font_advances(path: Path) -> dict[str, float]:
    """{character: advance width in em} of a TrueType font's BMP characters (its cmap format 4 and hmtx tables):
    the font's own metrics, independent of the report's table."""
    data = path.read_bytes()
    tables = {}
    for i in range(struct.unpack(">H", data[4:6])[0]):
        tag, _, offset, _ = struct.unpack(">4sIII", data[12 + 16 * i: 28 + 16 * i])
        tables[tag.decode()] = offset
    units = struct.unpack(">H", data[tables["head"] + 18: tables["head"] + 20])[0]
    metrics = struct.unpack(">H", data[tables["hhea"] + 34: tables["hhea"] + 36])[0]

    def advance(glyph: int) -> float:
        at = tables["hmtx"] + 4 * min(glyph, metrics - 1)
        return struct.unpack(">H", data[at: at + 2])[0] / units

    cmap = tables["cmap"]
    sub = next(cmap + off for pid, eid, off in (struct.unpack(">HHI", data[cmap + 4 + 8 * i: cmap + 12 + 8 * i])
                                                for i in range(struct.unpack(">H", data[cmap + 2: cmap + 4])[0]))
               if (pid, eid) in ((3, 1), (0, 3)) and struct.unpack(">H", data[cmap + off: cmap + off + 2])[0] == 4)
    n2 = struct.unpack(">H", data[sub + 6: sub + 8])[0]
    n = n2 // 2
    ends = struct.unpack(f">{n}H", data[sub + 14: sub + 14 + n2])
    starts = struct.unpack(f">{n}H", data[sub + 16 + n2: sub + 16 + 2 * n2])
    deltas = struct.unpack(f">{n}h", data[sub + 16 + 2 * n2: sub + 16 + 3 * n2])
    range_at = sub + 16 + 3 * n2
    ranges = struct.unpack(f">{n}H", data[range_at: range_at + n2])
    widths = {}
    for i, (start, end, delta, offset) in enumerate(zip(starts, ends, deltas, ranges)):
        for code in range(start, min(end, 0xFFFE) + 1):
            if offset:
                at = range_at + 2 * i + offset + 2 * (code - start)
                glyph = struct.unpack(">H", data[at: at + 2])[0]
                glyph = (glyph + delta) & 0xFFFF if glyph else 0
            else:
                glyph = (code + delta) & 0xFFFF
            if glyph:
                widths[chr(code)] = advance(glyph)
    return widths


def text_extents(svg: str, widths: dict[str, float]):
    """(label, left, right) in px of every <text> of the picture, its width from the font's metrics (a character
    the font lacks: 1 em, the width of a CJK character in the fallback fonts)."""
    dom = xml.dom.minidom.parseString(svg)
    size = float(dom.documentElement.getAttribute("font-size"))
    for node in dom.getElementsByTagName("text"):
        text = "".join(c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE)
        width = sum(widths.get(c, 1.0) for c in text) * size
        x = float(node.getAttribute("x"))
        anchor = node.getAttribute("text-anchor") or "start"
        left = {"end": x - width, "middle": x - width / 2}.get(anchor, x)
        yield text, left, left + width


LONG_NAMES = [
    "NSP data: A uniform among sentences with a successor, false B spread over the other reviews, reproducible with "
    "the generator (None: torch's global generator)",
    "W" * 60,  # the widest letter
    "MLM: 80% [MASK]",
    "注意力权重：每一行的和为一，填充位置的权重为零，查询与键的缩放点积之后取软最大值",  # CJK: full-width
]


def test_no_label_of_the_pass_rates_runs_past_the_pictures_edges():
    if not DEJAVU_SANS.exists():
        pytest.skip("DejaVu Sans is not installed here: its metrics are what the picture's widths are checked with")
    checks = [CheckStatistics(name, "1.", 1, passed=3, failed=1, pending=2) for name in LONG_NAMES]
    checks.append(CheckStatistics("full", "1.", 1, passed=12, pending=3, ungraded=1))
    svg = pass_rates_svg(checks)
    root = xml.dom.minidom.parseString(svg).documentElement
    _, _, view_width, _ = (float(v) for v in root.getAttribute("viewBox").split())
    for text, left, right in text_extents(svg, font_advances(DEJAVU_SANS)):
        assert 0 <= left and right <= view_width, f"{text!r} spans {left:.1f}..{right:.1f} of 0..{view_width}"
    titles = [t.firstChild.data for t in root.getElementsByTagName("title")]
    assert LONG_NAMES[0] in titles and LONG_NAMES[1] in titles and LONG_NAMES[3] in titles  # cut: whole as tooltip
    assert "MLM: 80% [MASK]" not in titles  # short enough: shown whole, no tooltip needed
    assert ">MLM: 80% [MASK]</text>" in svg


def test_a_short_label_keeps_the_picture_as_wide_as_asked():
    svg = pass_rates_svg([CheckStatistics("norm", "1.", 1, passed=1)])
    assert 'width="640"' in svg and "<title>" not in svg


def test_pending_checks_show_as_pending_never_as_zero_percent():
    # one student left the written answer as handed out (failed), the other waits for the grader (pending)
    blank = result("eve", {"norm": (2, "passed"), "acc": (0, "failed")})
    waiting = result("fay", {"norm": (2, "passed"), "acc": (0, "pending")})
    rates = pass_rates_svg(check_statistics([blank, waiting]))
    acc = rates.split(">acc</text>")[1]  # what the picture says of the check (the axis' 0% tick comes before)
    assert ">0%<" not in acc and ">0% of 1 scored; 1 pending</text>" in acc
    only_waiting = pass_rates_svg(check_statistics([waiting])).split(">acc</text>")[1]
    assert "pending (graded by hand or on a GPU)" in only_waiting and "%" not in only_waiting
