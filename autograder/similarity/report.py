"""The similarity report: DIR/similarity/index.html, one page per flagged pair, DIR/similarity/pairs.csv.

Written for the instructor only, beside (never inside) the students' results: nothing here is read by results.json,
feedback or an export. The wording says "similar", never more: the instructor decides what a similarity means.
Every string that comes from a submission (ids, file names, code, answers, messages) is escaped (html.escape,
quotes included); the pages hold no script. Style: the CSS of `autograder report` (reports/html.py).
"""
from __future__ import annotations

import csv
import html
import io
from pathlib import Path

import numpy as np

from autograder.files import write_atomic
from autograder.reports.html import page_html
from autograder.similarity.compare import CODE, Comparison, Pair
from autograder.similarity.fingerprints import located
from autograder.similarity.normalise import cell_definitions
from autograder.similarity.sources import CURRENT, Layout, Source, shingles

EXTRA_CSS = """
body { max-width: 90rem; }
.side { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .8rem; background: #f6f8fa;
        border-radius: 6px; padding: .4rem 0; overflow-x: auto; white-space: pre; }
.code a, .code span { display: block; padding: 0 .6rem; color: inherit; text-decoration: none; min-height: 1.1em; }
.code .m { background: #fff1b8; } .code .m:target { background: #ffd33d; }
.code .n { color: #8c959f; display: inline; padding: 0 .6rem 0 0; }
.flag { color: #9a6700; font-weight: 600; }
"""
UNFLAGGED_SHOWN = 50  # pairs below the threshold listed on the index for context, highest first
MAX_PAGES = 500  # side-by-side pages for the highest-ranked similar pairs; every pair is in pairs.csv


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str) -> str:
    return page_html(title, body, EXTRA_CSS)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def page_name(rank: int) -> str:
    """Where the flagged pair of rank `rank` (from 1) has its page, relative to DIR/similarity/."""
    return f"pairs/pair-{rank:04d}.html"


def write_report(out: Path, title: str, comparison: Comparison, lay: Layout) -> Path:
    """Writes the report under out/similarity/; returns the index page."""
    folder = out / "similarity"
    pages: dict[int, str] = {}
    sides: dict[tuple[int, str], tuple[list[str], dict[int, list[int]]]] = {}  # a submission is in many pairs
    for rank, pair in enumerate([p for p in comparison.pairs if p.flagged][:MAX_PAGES], start=1):
        pages[id(pair)] = page_name(rank)
        write_atomic(folder / page_name(rank), pair_html(title, comparison, pair, lay, sides))
    write_atomic(folder / "pairs.csv", pairs_csv(comparison, pages))
    index = folder / "index.html"
    write_atomic(index, index_html(title, comparison, pages))
    return index


def _who(src: Source) -> str:
    return _e(src.label)


def _parts_cell(pair: Pair, limit: float) -> str:
    items = sorted(pair.parts.items(), key=lambda kv: -kv[1].score)
    return "; ".join(f'{"<b>" if s.score >= limit else ""}{_e(part)}: {_pct(s.score)} ({s.shared})'
                     f'{"</b>" if s.score >= limit else ""}' for part, s in items)


def index_html(title: str, c: Comparison, pages: dict[int, str]) -> str:
    """index.html: what was compared and how, the sources not compared, the groups, per channel every flagged pair
    (and the closest UNFLAGGED_SHOWN others) linked to its page where it has one, then closeness to the answer key."""
    s = c.settings
    current = [x for x in c.sources if x.kind == CURRENT]
    compared = [x for x in current if not x.problem]
    flagged = [p for p in c.pairs if p.flagged]
    body = [f"<h1>Similarity: {_e(title)}</h1>",
            f'<p class="sub">{len(compared)} of {len(current)} submission(s) compared, per part, on the code and the '
            f"written answers each student wrote (the notebook as handed out and code most of the class shares taken "
            f"out). {len(flagged)} pair(s) at or above the threshold ({_pct(s.threshold)} for code, "
            f"{_pct(s.text_threshold)} for written answers). A high score says two submissions are similar; it is "
            f"not a finding: read both sides before deciding anything.</p>"]
    if len(flagged) > MAX_PAGES:
        body.append(f'<p class="note">{len(flagged)} similar pairs: side-by-side pages for the {MAX_PAGES} highest; '
                    "every pair is in pairs.csv.</p>")
    body += _problems_html(c)
    body += _groups_html(c)
    for channel in (CODE, "written answers"):
        rows = [p for p in c.pairs if p.channel == channel]
        shown = [p for p in rows if p.flagged] + [p for p in rows if not p.flagged][:UNFLAGGED_SHOWN]
        limit = s.threshold if channel == CODE else s.text_threshold
        body.append(f"<h2>Similar pairs: {_e(channel)}</h2>")
        if not shown:
            body.append("<p>No pair shares enough to list.</p>")
            continue
        body.append('<table><tr><th class="num">#</th><th>submission</th><th>submission</th><th class="num">score'
                    '</th><th>parts (score, fingerprints in common)</th><th></th></tr>')
        for rank, p in enumerate(shown, start=1):
            link = f'<a href="{_e(pages[id(p)])}">side by side</a>' if id(p) in pages else ""
            mark = '<span class="flag">similar</span> ' if p.flagged else ""
            body.append(f'<tr><td class="num">{rank}</td><td>{_who(c.sources[p.a])}</td><td>{_who(c.sources[p.b])}'
                        f'</td><td class="num">{mark}{_pct(p.score)}</td><td>{_parts_cell(p, limit)}</td>'
                        f"<td>{link}</td></tr>")
        body.append("</table>")
        if len(rows) > len(shown):
            body.append(f"<p>{len(rows) - len(shown)} more pair(s) below the threshold are in pairs.csv.</p>")
    body += _key_html(c)
    return _page(f"Similarity: {title}", "\n".join(body))


def _problems_html(c: Comparison) -> list[str]:
    rows = [x for x in c.sources if x.problem]
    if not rows:
        return []
    out = ["<h2>Not compared</h2><table><tr><th>submission</th><th>why</th></tr>"]
    out += [f"<tr><td>{_who(x)}</td><td>{_e(x.problem)}</td></tr>" for x in rows]
    return out + ["</table>"]


def _groups_html(c: Comparison) -> list[str]:
    out = ["<h2>Groups of three or more similar submissions</h2>"]
    if not c.groups:
        return out + ["<p>None.</p>"]
    out.append("<ul>")
    out += [f"<li>{len(g)} submissions: {', '.join(_who(c.sources[i]) for i in g)}</li>" for g in c.groups]
    return out + ["</ul>"]


def _key_html(c: Comparison) -> list[str]:
    out = ["<h2>Close to the answer key</h2>"]
    if not c.key_scores:
        return out + ["<p>No submission (or no answer key to compare with).</p>"]
    out.append('<table><tr><th>submission</th><th class="num">score</th><th>parts</th></tr>')
    ranked = sorted(c.key_scores.items(), key=lambda kv: -max(p.score for p in kv[1].values()))
    for i, parts in ranked[:UNFLAGGED_SHOWN + len(c.key_flagged)]:
        best = max(p.score for p in parts.values())
        mark = '<span class="flag">similar</span> ' if i in c.key_flagged else ""
        cells = "; ".join(f"{_e(part)}: {_pct(s.score)}" for part, s in sorted(parts.items(), key=lambda kv: -kv[1].score))
        out.append(f'<tr><td>{_who(c.sources[i])}</td><td class="num">{mark}{_pct(best)}</td><td>{cells}</td></tr>')
    return out + ["</table>"]


# -- one pair, side by side ------------------------------------------------------------------------------

def _side(code: list[tuple[str, str]], lay: Layout) -> tuple[list[str], dict[int, list[int]]]:
    """The part's code as lines, and fingerprint -> the lines (1-based) its k-grams span."""
    lines: list[str] = []
    where: dict[int, list[int]] = {}
    for _, source in code:
        offset = len(lines)
        for d in cell_definitions(source, lay.names):
            for fp, spans in located(d.tokens).items():
                for first, last in spans:
                    where.setdefault(fp, []).extend(range(offset + first, offset + last + 1))
        lines += source.split("\n") + [""]
    return lines, where


def _code_html(side: str, other: str, lines: list[str], mine: dict[int, list[int]], theirs: dict[int, list[int]],
               shared: set[int]) -> str:
    target: dict[int, int] = {}
    for fp in shared:
        for line in mine.get(fp, []):
            target.setdefault(line, min(theirs[fp]))
    out = []
    for number, text in enumerate(lines, start=1):
        num = f'<span class="n">{number:>4}</span>'
        if number in target:
            out.append(f'<a class="m" id="{side}-L{number}" href="#{other}-L{target[number]}">{num}{_e(text)}</a>')
        else:
            out.append(f'<span id="{side}-L{number}">{num}{_e(text)}</span>')
    return f'<div class="code">{"".join(out)}</div>'


def pair_html(title: str, c: Comparison, pair: Pair, lay: Layout, sides: dict | None = None) -> str:
    """A pair's page: for each part, highest first, the two sides side by side with the lines of shared fingerprints
    highlighted (code) or the two written answers. `sides` caches each source's highlighted code across pages."""
    a, b = c.sources[pair.a], c.sources[pair.b]
    body = [f"<h1>{_who(a)} and {_who(b)}: similar {_e(pair.channel)}</h1>",
            f'<p class="sub">{_e(title)}. Score {_pct(pair.score)}: the share of the smaller side\'s fingerprints '
            "that the other side holds too, after the notebook as handed out and the class's common code are taken "
            "out. Highlighted lines hold a shared fingerprint; a click goes to the matching lines on the other "
            'side. Similar is not the same as copied: read both. <a href="../index.html">All pairs</a></p>']
    for part, score in sorted(pair.parts.items(), key=lambda kv: -kv[1].score):
        body.append(f"<h2>{_e(part)}: {_pct(score.score)} ({score.shared} fingerprints in common)</h2>")
        if pair.channel == CODE:
            body.append(_code_pair(pair, part, lay, c, {} if sides is None else sides))
        else:
            body.append(_text_pair(a, b, part))
    return _page(f"{a.label} / {b.label}", "\n".join(body))


def _code_pair(pair: Pair, part: str, lay: Layout, c: Comparison, sides: dict) -> str:
    a, b = c.sources[pair.a], c.sources[pair.b]
    for i in (pair.a, pair.b):
        if (i, part) not in sides:
            sides[(i, part)] = _side(c.sources[i].code.get(part, []), lay)
    lines_a, where_a = sides[(pair.a, part)]
    lines_b, where_b = sides[(pair.b, part)]
    common = c.common.get((CODE, part), np.zeros(0, np.uint64))
    left_out = set(lay.starter_code_fps.tolist()) | set(common.tolist())
    shared = (set(where_a) & set(where_b)) - left_out
    return (f'<div class="side"><div><b>{_who(a)}</b>{_code_html("a", "b", lines_a, where_a, where_b, shared)}</div>'
            f'<div><b>{_who(b)}</b>{_code_html("b", "a", lines_b, where_b, where_a, shared)}</div></div>')


def _text_pair(a: Source, b: Source, part: str) -> str:
    shared = np.intersect1d(a.text_fps.get(part, np.zeros(0, np.uint64)), b.text_fps.get(part, np.zeros(0, np.uint64)))

    def marked(text: str) -> str:
        lines = text.split("\n")
        return "".join(f'<span class="m">{_e(x)}</span>' if len(np.intersect1d(shingles(x), shared)) else
                       f"<span>{_e(x)}</span>" for x in lines)

    return (f'<div class="side"><div><b>{_who(a)}</b><div class="code">{marked(a.text.get(part, ""))}</div></div>'
            f'<div><b>{_who(b)}</b><div class="code">{marked(b.text.get(part, ""))}</div></div></div>')


# -- the table --------------------------------------------------------------------------------------------

CSV_FIELDS = ["what", "submission_a", "submission_b", "score", "similar", "fingerprints_shared", "parts", "page",
              "message"]


def _safe_cell(text: str) -> str:
    """A spreadsheet never reads a cell as a formula (an id or message beginning with = + - @)."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def pairs_csv(c: Comparison, pages: dict[int, str]) -> str:
    """pairs.csv: every pair, flagged or not, then each submission's closeness to the answer key, then the sources
    not compared with why; cells a spreadsheet would read as formulas made text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    rows: list[list] = [CSV_FIELDS]
    for p in c.pairs:
        parts = ";".join(f"{part}={s.score:.3f}" for part, s in sorted(p.parts.items()))
        rows.append([p.channel, c.sources[p.a].label, c.sources[p.b].label, f"{p.score:.3f}",
                     "yes" if p.flagged else "no", p.shared, parts, pages.get(id(p), ""), ""])
    for i, parts_scores in sorted(c.key_scores.items()):
        best = max(s.score for s in parts_scores.values())
        parts = ";".join(f"{part}={s.score:.3f}" for part, s in sorted(parts_scores.items()))
        rows.append(["answer key", c.sources[i].label, "answer key", f"{best:.3f}",
                     "yes" if i in c.key_flagged else "no", sum(s.shared for s in parts_scores.values()), parts, "", ""])
    rows += [["not compared", x.label, "", "", "", "", "", "", x.problem] for x in c.sources if x.problem]
    writer.writerows([_safe_cell(str(cell)) for cell in row] for row in rows)
    return buffer.getvalue()
