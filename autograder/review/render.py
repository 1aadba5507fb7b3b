"""Student text made into HTML a grader reads, never runs: markdown rendered by markdown-it-py and sanitised by
nh3 (allow-listed tags and attributes, http/https/mailto links only), code highlighted by Pygments (which escapes
it), outputs escaped. An image is shown only from data the notebook holds (its attachments and outputs): an
image pointing at a URL or a file is not fetched; the page says where it pointed. The pages' Content-Security-Policy
(app.py) forbids scripts other than the page's own and images other than data, as a second wall.
"""
from __future__ import annotations

import html
import re

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|svg\+xml);base64,[A-Za-z0-9+/=]+")
LINK = re.compile(r"(https?:|mailto:)", re.IGNORECASE)
TAGS = {"a", "b", "blockquote", "br", "code", "del", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
        "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "u", "ul"}
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "td": {"align"}, "th": {"align"},
              "span": {"class"}}
_formatter = HtmlFormatter(nowrap=True)


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """Images from data only (never fetched from anywhere); links to the web or mail only (never data: pages)."""
    if tag == "img" and attribute == "src":
        return value if DATA_IMAGE.fullmatch(value) else None
    if attribute == "href":
        return value if LINK.match(value) else None
    return value


def sanitise(fragment: str) -> str:
    """An HTML fragment with only the allowed tags and attributes (TAGS, ATTRIBUTES); scripts and styles removed with
    their content."""
    return nh3.clean(fragment, tags=TAGS, attributes=ATTRIBUTES, url_schemes={"http", "https", "mailto", "data"},
                     attribute_filter=_keep_attribute, link_rel="noopener noreferrer nofollow",
                     clean_content_tags={"script", "style"})


def _image_rule(attachments: dict):
    def render_image(renderer, tokens, idx, options, env):
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        alt = html.escape(token.content or "image")
        if src.startswith("attachment:") and src[len("attachment:"):] in attachments:
            src = attachments[src[len("attachment:"):]]
        if DATA_IMAGE.fullmatch(src):
            return f'<img src="{src}" alt="{alt}">'
        return f'<span class="not-loaded">[image not loaded: {html.escape(src[:200])}]</span>'
    return render_image


def markdown_html(source: str, attachments: dict | None = None) -> str:
    """A markdown cell's text as sanitised HTML; its images shown only from data (`attachment:` names resolved in
    `attachments`)."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
    md.add_render_rule("image", _image_rule(attachments or {}))
    return sanitise(md.render(source))


def code_html(source: str) -> str:
    """Python code, escaped and highlighted."""
    return f'<pre class="code highlight">{highlight(source, PythonLexer(), _formatter)}</pre>'


def outputs_html(outputs: list[dict]) -> str:
    """A code cell's snapshot outputs: images from data, everything else as escaped text."""
    parts = []
    for output in outputs:
        if output.get("kind") == "image":
            src = f"data:{output['mime']};base64,{output['data']}"
            if DATA_IMAGE.fullmatch(src):
                parts.append(f'<img class="output" src="{src}" alt="output image">')
        else:
            parts.append(f'<pre class="output">{html.escape(str(output.get("text", "")))}</pre>')
    return "".join(parts)


_TEXT = re.compile(r">([^<]+)<")
_LONG_RUN = re.compile(r"(?:&[#\w]+;|[^\s&<]){200,}")
_CHUNK = re.compile(r"(?:&[#\w]+;|[^\s&<]){1,100}")
ZERO_WIDTH_SPACE = "\u200b"


def breakable(fragment: str) -> str:
    """Text runs without a space (a 10 MB answer of one word, a long hash) get a zero-width space every 100
    characters: browsers lay out one unbroken word of 100,000 characters in seconds to minutes; entities are kept
    whole, attributes untouched."""
    def chunked(run: re.Match) -> str:
        return ZERO_WIDTH_SPACE.join(_CHUNK.findall(run.group(0)))

    return _TEXT.sub(lambda text: ">" + _LONG_RUN.sub(chunked, text.group(1)) + "<", fragment)


def cell_html(cell: dict) -> str:
    """One snapshot cell (answers.snapshot_cell) as HTML."""
    if cell.get("type") == "markdown":
        body = markdown_html(str(cell.get("source", "")), cell.get("attachments") or {})
    elif cell.get("type") == "code":
        body = code_html(str(cell.get("source", ""))) + outputs_html(cell.get("outputs") or [])
    else:
        body = f'<pre>{html.escape(str(cell.get("source", "")))}</pre>'
    return f'<div class="cell {html.escape(str(cell.get("type")))}" data-cell="{int(cell.get("number", 0))}">' \
           f'<div class="cell-number">cell {int(cell.get("number", 0))}</div>{breakable(body)}</div>'


def pygments_css() -> str:
    """The CSS for the highlighted code, appended to review.css."""
    return _formatter.get_style_defs(".highlight")
