"""HTML feedback: one page per submission for the student, and a class report for the instructor.

    autograder report RESULTS_DIR [--title T] [--png]

reads the grading.json files that `autograder grade --out RESULTS_DIR` wrote and adds
RESULTS_DIR/<submission>/feedback.html and RESULTS_DIR/class-report.html (with histogram.svg and
pass-rates.svg beside it). The pictures are plain SVG: no plotting library, and the pages open in
any browser or mail client that shows HTML. `--png` also renders each page to PNG with a headless
Chromium, where one is installed. The class report's figures come from reports/class_statistics.py
(which submissions count is defined there), so summary.md shows the same ones.
"""
from __future__ import annotations

import html
import json
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

from autograder.files import write_atomic
from autograder.reports.class_statistics import (
    CheckStatistics, ClassStatistics, class_statistics, error_results, format_mean, format_rate, format_score,
)
from autograder.reports.results import SubmissionResult, by_part
from autograder.status import UNSCORED, by_hand

COLORS = {"passed": "#1a7f37", "partial": "#b7791f", "failed": "#c62828", "pending": "#5b6b7f", "ungraded": "#6f42c1"}
LABELS = {"passed": "passed", "partial": "partial credit", "failed": "failed", "pending": "pending",
          "ungraded": "not graded"}

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Helvetica, Arial, sans-serif;
       color: #1f2328; max-width: 56rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.45; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin: 1.6rem 0 .5rem; }
.sub { color: #59636e; margin-top: 0; }
.total { font-size: 2rem; font-weight: 600; margin: .6rem 0; }
.note { background: #fff8c5; border: 1px solid #e3d27c; border-radius: 6px; padding: .5rem .8rem; margin: .4rem 0; }
.error { background: #ffebe9; border-color: #ff8182; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0 1rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #d1d9e0; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; } td.num, th.num { text-align: right; white-space: nowrap; }
.bar { background: #eaeef2; border-radius: 4px; height: .7rem; width: 10rem; display: inline-block; vertical-align: middle; }
.bar > span { display: block; height: 100%; border-radius: 4px; background: #1a7f37; }
.badge { display: inline-block; border-radius: 1rem; padding: 0 .55rem; font-size: .8rem; color: white; font-weight: 600; }
.check { border: 1px solid #d1d9e0; border-radius: 6px; margin: .4rem 0; padding: .45rem .7rem; }
.check .head { display: flex; gap: .6rem; align-items: baseline; }
.check .name { font-weight: 600; flex: 1; } .check .pts { white-space: nowrap; color: #59636e; }
.msg { margin: .3rem 0 0; white-space: pre-wrap; }
details { margin-top: .3rem; } summary { cursor: pointer; color: #0969da; font-size: .9rem; }
pre { background: #f6f8fa; border-radius: 6px; padding: .5rem .7rem; overflow-x: auto; font-size: .85rem; margin: .3rem 0; }
figure { margin: .5rem 0 1.2rem; } figcaption { color: #59636e; font-size: .9rem; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def page_html(title: str, body: str, extra_css: str = "") -> str:
    """A whole page in the reports' style (the similarity report adds its own rules with `extra_css`)."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
            f"<style>{CSS}{extra_css}</style></head><body>\n{body}\n</body></html>\n")


def _fmt(x: float) -> str:
    return f"{x:g}"


def _parts(result: SubmissionResult) -> dict:
    return by_part(result.checks)


def _bar(fraction: float, color: str = "#1a7f37") -> str:
    pct = max(0.0, min(1.0, fraction)) * 100
    return f'<span class="bar"><span style="width:{pct:.1f}%;background:{color}"></span></span>'


def submission_html(result: SubmissionResult, title: str, audience: str = "student") -> str:
    """The student's page: total, score per part, each check with its message; details collapsed.
    Hidden checks count in the part totals but are not listed to students (as on Gradescope)."""
    body = [f"<h1>{_e(title)}</h1>", f'<p class="sub">Feedback for {_e(Path(result.file).name or result.submission)}</p>']
    pending_pts = sum(c.max_score for c in result.pending)
    body.append(f'<div class="total">{_fmt(result.score)} / {_fmt(result.max_score)}</div>')
    if pending_pts:
        hand = sum(c.max_score for c in result.pending if by_hand(c.status, c.message))
        why = ", ".join(text for points, text in ((hand, f"{_fmt(hand)} graded by hand"),
                                                   (pending_pts - hand, f"{_fmt(pending_pts - hand)} measured later on a "
                                                                        "GPU")) if points)
        body.append(f'<div class="note">{_fmt(pending_pts)} point(s) are pending ({why}), so they are not in the '
                    "score yet.</div>")
    if result.error:
        body.append(f'<div class="note error">{_e(result.error)}</div>')
    if result.ungraded:
        body.append(f'<div class="note error">{_e(result.not_final_note())}</div>')
    for note in result.notes:
        body.append(f'<div class="note">{_e(note)}</div>')
    parts = _parts(result)
    rows = []
    for part, checks in parts.items():
        got = sum(c.score for c in checks if c.status not in UNSCORED)
        top = sum(c.max_score for c in checks)
        pend = sum(c.max_score for c in checks if c.status == "pending")
        rows.append(f"<tr><td>{_e(part)}</td><td class='num'>{_fmt(got)} / {_fmt(top)}"
                    f"{f' ({_fmt(pend)} pending)' if pend else ''}</td><td>{_bar(got / top if top else 1)}</td></tr>")
    body.append("<h2>Score per part</h2><table><tr><th>Part</th><th class='num'>Score</th><th></th></tr>"
                + "".join(rows) + "</table>")
    for part, checks in parts.items():
        shown = [c for c in checks if audience == "instructor" or c.visibility != "hidden"]
        if not shown:
            continue
        body.append(f"<h2>{_e(part)}</h2>")
        hidden_count = len(checks) - len(shown)
        for c in shown:
            color = COLORS.get(c.status, "#59636e")
            pts = LABELS[c.status] if c.status in UNSCORED else f"{_fmt(c.score)} / {_fmt(c.max_score)}"
            first, _, rest = c.message.partition("\n")
            block = [f'<div class="check"><div class="head"><span class="badge" style="background:{color}">'
                     f'{_e(LABELS.get(c.status, c.status))}</span><span class="name">{_e(c.name)}</span>'
                     f'<span class="pts">{_e(pts)}</span></div>']
            if first:
                block.append(f'<p class="msg">{_e(first)}</p>')
            details = []
            if rest.strip():
                details.append(f"<pre>{_e(rest.strip())}</pre>")
            details.append(f"<div>check: <code>{_e(c.name)}</code>; visibility: {_e(c.visibility)}; "
                           f"time: {c.seconds:.2f} s{'; your code raised NotImplementedError' if c.stub_hit else ''}</div>")
            block.append(f"<details><summary>Details</summary>{''.join(details)}</details></div>")
            body.append("".join(block))
        if hidden_count:
            body.append(f'<p class="sub">{hidden_count} hidden check(s) in this part are counted in its score '
                        "but not shown.</p>")
    return page_html(f"{title}: feedback", "\n".join(body))


# -- class report ----------------------------------------------------------------------------------

def _nice_bins(max_score: float, n: int = 10) -> list[tuple[float, float]]:
    """Bin edges: whole-point bins when the maximum is a whole number (a score equal to the upper edge of
    the last bin goes in it), else `n` equal bins."""
    top = max_score if max_score > 0 else 1.0
    if float(top).is_integer():
        width = max(1, math.ceil(top / 12))
        count = math.ceil(top / width)
        return [(i * width, min(top, (i + 1) * width)) for i in range(count)]
    width = top / n
    return [(i * width, (i + 1) * width) for i in range(n)]


def histogram_svg(totals: list[float], max_score: float, width: int = 640, height: int = 300) -> str:
    """Histogram of total scores as a standalone SVG."""
    bins = _nice_bins(max_score)
    counts = [0] * len(bins)
    bin_width = bins[0][1] - bins[0][0]
    for t in totals:
        counts[max(0, min(len(bins) - 1, int(t // bin_width)))] += 1
    left, right, top, bottom = 48, 16, 20, 48
    pw, ph = width - left - right, height - top - bottom
    cmax = max(counts + [1])
    step = max(1, math.ceil(cmax / 5))
    ymax = step * math.ceil(cmax / step)
    bw = pw / len(bins)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    for y in range(0, ymax + 1, step):
        py = top + ph - ph * y / ymax
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{py:.1f}" y2="{py:.1f}" stroke="#d1d9e0"/>')
        parts.append(f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end" fill="#59636e">{y}</text>')
    for i, ((lo, hi), c) in enumerate(zip(bins, counts)):
        h = ph * c / ymax
        x = left + i * bw
        parts.append(f'<rect x="{x + 2:.1f}" y="{top + ph - h:.1f}" width="{bw - 4:.1f}" height="{h:.1f}" '
                     f'fill="#0969da"><title>{_fmt(round(lo, 2))}-{_fmt(round(hi, 2))}: {c}</title></rect>')
        if c:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{top + ph - h - 4:.1f}" text-anchor="middle" '
                         f'fill="#1f2328">{c}</text>')
    for i in range(len(bins) + 1):
        x = left + i * bw
        value = bins[i][0] if i < len(bins) else bins[-1][1]
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle" fill="#59636e">'
                     f'{_fmt(round(value, 1))}</text>')
    parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="#59636e"/>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#1f2328">'
                 f'total score (out of {_fmt(max_score)})</text>')
    parts.append(f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" fill="#1f2328" '
                 f'transform="rotate(-90 14 {top + ph / 2:.1f})">submissions</text>')
    parts.append("</svg>")
    return "\n".join(parts)


# -- text widths in the pictures: a label never runs past the picture's edge ---------------------------------

FONT_SIZE = 12  # px, the pictures' font-size
# Advance widths of printable ASCII (32..126) in DejaVu Sans, the first font the pictures name, in thousandths of
# an em, rounded up (read from the font's hmtx table). Arial and Helvetica, the fallbacks, are narrower. Any other
# character counts 1 em: CJK's full width, and wider than most Latin, Greek and Cyrillic letters.
_ASCII_MILLI_EM = (
    318, 401, 460, 838, 637, 951, 780, 275, 391, 391, 500, 838, 318, 361, 318, 337, 637, 637, 637, 637, 637, 637,
    637, 637, 637, 637, 337, 337, 838, 838, 838, 531, 1000, 685, 687, 699, 771, 632, 576, 775, 752, 295, 295, 656,
    558, 863, 749, 788, 604, 788, 695, 635, 611, 732, 685, 989, 686, 611, 686, 391, 337, 391, 838, 500, 500, 613,
    635, 550, 635, 616, 353, 635, 634, 278, 278, 580, 278, 975, 634, 612, 635, 635, 412, 521, 393, 634, 592, 818,
    592, 592, 525, 637, 337, 637, 838)
ELLIPSIS = "\u2026"
MAX_LABEL_PX = 320  # a longer check name is cut, with an ellipsis, and shown whole as the label's tooltip
MIN_PLOT_PX = 330  # the bars' area keeps at least this width: the picture grows beyond `width` for long labels


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """An upper bound of the width in px of `text` at font size `size` (see _ASCII_MILLI_EM)."""
    milli = sum(_ASCII_MILLI_EM[ord(c) - 32] if 32 <= ord(c) < 127 else 1000 for c in text)
    return milli * size / 1000


def fit_label(text: str, max_px: float = MAX_LABEL_PX) -> str:
    """`text` if it fits in max_px, else its longest start that fits with an ellipsis after it."""
    if text_width(text) <= max_px:
        return text
    room, kept = max_px - text_width(ELLIPSIS), ""
    for c in text:
        if text_width(kept + c) > room:
            break
        kept += c
    return kept.rstrip() + ELLIPSIS


def pass_rates_svg(checks: list[CheckStatistics], width: int = 640) -> str:
    """Horizontal bars: share of the scored submissions passing each check (partial credit shown apart).

    The label column is as wide as the longest label (up to MAX_LABEL_PX; a longer name is cut with an ellipsis
    and kept whole in a <title>, the tooltip), so no label runs past the left edge; the right margin as wide as the
    longest rate, written after a full bar. A check some submissions still
    wait on (pending: by hand, on a GPU) says so beside its rate: its 0% of scored submissions is never a 0% of
    the class."""
    row, top, pad = 24, 12, 8
    labels = [fit_label(s.name) for s in checks]
    left = pad + math.ceil(max((text_width(label) for label in labels), default=0)) + pad
    rates = [_rate_text(s) if s.scored else "" for s in checks]  # after the bar: at its end for a full one
    right = max(60, 6 + math.ceil(max((text_width(html.unescape(r)) for r in rates), default=0)) + pad)
    width = max(width, left + MIN_PLOT_PX + right)
    height = top + row * len(checks) + 36
    pw = width - left - right
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="{FONT_SIZE}">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    for i in range(0, 101, 25):
        x = left + pw * i / 100
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + row * len(checks)}" stroke="#d1d9e0"/>')
        parts.append(f'<text x="{x:.1f}" y="{top + row * len(checks) + 16}" text-anchor="middle" '
                     f'fill="#59636e">{i}%</text>')
    for i, (s, label) in enumerate(zip(checks, labels)):
        y = top + i * row
        tooltip = f"<title>{_e(s.name)}</title>" if label != s.name else ""
        parts.append(f'<text x="{left - pad}" y="{y + row / 2 + 4:.1f}" text-anchor="end" fill="#1f2328">'
                     f'{tooltip}{_e(label)}</text>')
        if not s.scored:
            parts.append(f'<text x="{left + 4}" y="{y + row / 2 + 4:.1f}" fill="{COLORS["pending"]}">'
                         f'{_unscored_reason(s)}</text>')
            continue
        p = s.passed / s.scored
        q = s.partial / s.scored
        parts.append(f'<rect x="{left}" y="{y + 4}" width="{pw * p:.1f}" height="{row - 8}" fill="{COLORS["passed"]}"/>')
        if q:
            parts.append(f'<rect x="{left + pw * p:.1f}" y="{y + 4}" width="{pw * q:.1f}" height="{row - 8}" '
                         f'fill="{COLORS["partial"]}"/>')
        parts.append(f'<text x="{left + pw * (p + q) + 6:.1f}" y="{y + row / 2 + 4:.1f}" fill="#1f2328">'
                     f'{rates[i]}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 4}" text-anchor="middle" fill="#1f2328">'
                 f'share of scored submissions passing (amber: partial credit)</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _rate_text(s: CheckStatistics) -> str:
    """The pass rate of a scored check; with the submissions still pending on it, how many were scored and how many
    wait (a written answer left blank by one student and waiting for the grader in the rest is not "0%")."""
    waiting = s.pending + s.ungraded
    if not waiting:
        return format_rate(s.pass_rate)
    pending = f"{s.pending} pending" if s.pending else ""
    ungraded = f"{s.ungraded} not graded" if s.ungraded else ""
    return _e(f"{format_rate(s.pass_rate)} of {s.scored} scored; " + ", ".join(w for w in (pending, ungraded) if w))


def _unscored_reason(s: CheckStatistics) -> str:
    if s.pending:
        return "pending (graded by hand or on a GPU)"
    if s.ungraded:
        return "not graded (a problem of the grader)"
    return "no graded submission"


def _class_figures_html(stats: ClassStatistics) -> str:
    """The same figures as summary.md's "Score:" line, in a table."""
    heads = ("mean", "median", "min", "max", "full marks", "zero", "graded", "could not be graded")
    cells = (format_mean(stats.mean), format_score(stats.median), format_score(stats.minimum),
             format_score(stats.maximum), stats.full_marks, stats.zero, stats.graded, stats.errors)
    return ("<table><tr>" + "".join(f"<th class='num'>{h}</th>" for h in heads) + "</tr><tr>"
            + "".join(f"<td class='num'>{c}</td>" for c in cells) + "</tr></table>")


def _checks_table_html(checks: list[CheckStatistics]) -> str:
    """The same figures per check as summary.md's table, and the pass rate."""
    heads = ("Points", "Mean", "Passed", "Partial", "Failed", "Pending", "Ungraded", "Pass rate")
    rows = []
    for s in checks:
        cells = (format_score(s.points), format_mean(s.mean), s.passed, s.partial, s.failed, s.pending,
                 s.ungraded, format_rate(s.pass_rate))
        rows.append(f"<tr><td>{_e(s.part)}</td><td>{_e(s.name)}</td>"
                    + "".join(f"<td class='num'>{c}</td>" for c in cells) + "</tr>")
    return ("<table><tr><th>Part</th><th>Check</th>" + "".join(f"<th class='num'>{h}</th>" for h in heads)
            + "</tr>" + "".join(rows) + "</table>")


def class_report_html(results: list[SubmissionResult], title: str) -> tuple[str, str, str]:
    """(page, histogram svg, pass-rates svg) for the instructor."""
    stats = class_statistics(results)
    hist = histogram_svg(stats.scores, stats.max_score)
    rates = pass_rates_svg(stats.checks)
    errors = error_results(results)
    body = [f"<h1>{_e(title)}: class report</h1>",
            f'<p class="sub">{_e(stats.counts_sentence())} Maximum score {format_score(stats.max_score)}.</p>']
    if stats.graded:
        body.append(_class_figures_html(stats))
    body.append(f"<h2>Total scores</h2><figure>{hist}<figcaption>Histogram of the total scores of the "
                f"{stats.graded} graded submission(s) (pending points, graded by hand or on a GPU, are not included; a submission that "
                "could not be graded is not in it).</figcaption></figure>")
    body.append(f"<h2>Pass rate per check</h2><figure>{rates}</figure>")
    body.append("<h2>Checks</h2>" + _checks_table_html(stats.checks))
    if errors:
        body.append("<h2>Could not be graded</h2><table><tr><th>Submission</th><th>Why</th></tr>" + "".join(
            f"<tr><td>{_e(r.submission)}</td><td>{_e(r.error)}</td></tr>" for r in errors) + "</table>")
    body.append("<h2>Submissions</h2><table><tr><th>Submission</th><th class='num'>Score</th><th></th></tr>"
                + "".join(_submission_row(r) for r in sorted(results, key=lambda r: r.submission)) + "</table>")
    return page_html(f"{title}: class report", "\n".join(body)), hist, rates


def _submission_row(r: SubmissionResult) -> str:
    link = f"<a href='{_e(r.submission)}/feedback.html'>{_e(r.submission)}</a>"
    if r.error:  # its 0 is no score: see class_statistics
        return f"<tr><td>{link}</td><td class='num'>could not be graded</td><td></td></tr>"
    if r.ungraded:  # some checks NOT GRADED: what it has so far is no grade (grades.csv leaves its total empty)
        return f"<tr><td>{link}</td><td class='num'>not final</td><td></td></tr>"
    bar = _bar(r.score / r.max_score if r.max_score else 0)
    return f"<tr><td>{link}</td><td class='num'>{_fmt(r.score)} / {_fmt(r.max_score)}</td><td>{bar}</td></tr>"


def load_results(results_dir: Path) -> list[SubmissionResult]:
    """Every result of a results folder, read from DIR/<id>/grading.json, in id order."""
    out = []
    for f in sorted(results_dir.glob("*/grading.json")):
        out.append(SubmissionResult.from_dict(json.loads(f.read_text(encoding="utf-8"))))
    return out


def write_reports(results_dir: Path, title: str, results: list[SubmissionResult] | None = None) -> list[Path]:
    """Every submission's feedback.html and the class report; returns the pages written."""
    results = load_results(results_dir) if results is None else results
    pages = []
    for r in results:
        path = results_dir / r.submission / "feedback.html"
        write_atomic(path, submission_html(r, title))
        pages.append(path)
    page, hist, rates = class_report_html(results, title)
    write_atomic(results_dir / "histogram.svg", hist)
    write_atomic(results_dir / "pass-rates.svg", rates)
    write_atomic(results_dir / "class-report.html", page)
    pages.append(results_dir / "class-report.html")
    return pages


def find_chromium() -> str | None:
    """The path of a Chromium or Chrome on PATH, under any of its usual names; None when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render_png(page: Path, png: Path, width: int = 1000, height: int | None = None) -> Path:
    """Screenshot a page with headless Chromium (for a look, or for mailing the class report)."""
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError("no Chromium or Chrome found to render PNG (apt-get install chromium)")
    if height is None:
        text = page.read_text(encoding="utf-8")
        height = 700 + 40 * text.count("<tr>") + 70 * text.count('class="check"') + 330 * text.count("<svg")
    with tempfile.TemporaryDirectory(prefix="ag-chromium-") as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--screenshot={png.resolve()}", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
    return png
