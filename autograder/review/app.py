"""The review page: a Starlette application over one results folder (DIR/review.sqlite).

Access: a request carries a grader's token (once in the URL, which sets an HttpOnly, SameSite=Strict cookie and
redirects to a URL without it; or an `Authorization: Bearer` header). Without one, nothing is served (403). Every
write is a JSON POST with the page's CSRF token in `X-CSRF-Token` (an HMAC of the grader's token) and, when the
browser sends one, an Origin of this server; every change is recorded with its grader. Pages are sent with a
Content-Security-Policy that runs no script but review.js and loads no image but data, and routes take numbers
(question and submission positions), never paths: nothing outside DIR is read.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from autograder.review.merge import merge_hand_grades
from autograder.review.render import cell_html, pygments_css
from autograder.review.store import Stale, Store

HERE = Path(__file__).parent
COOKIE = "ag_review"
ANONYMOUS_COOKIE = "ag_review_anonymous"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
MAX_BODY = 256 * 1024  # a comment or an item is text a person types


@dataclass
class ReviewConfig:
    """What `make_app` serves: the results folder, the graders by token, and the secret the CSRF tokens are made with
    (new for each server, so a page from an earlier one must be reloaded)."""

    out_dir: Path
    graders: dict[str, str]  # token -> grader's name
    anonymous: bool = False  # names hidden for everyone (else each grader may hide them)
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))


class Review:
    """The state behind the routes: the store (one connection, one writer at a time) and the access rules."""

    def __init__(self, config: ReviewConfig):
        self.config = config
        self.store = Store(config.out_dir)
        self.lock = threading.Lock()
        environment = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
        self.templates = Jinja2Templates(env=environment)

    def grader(self, request: Request) -> str | None:
        """The name of the grader whose token the request carries (cookie or Bearer header); None when it carries no
        known token. Tokens are compared in constant time."""
        token = request.cookies.get(COOKIE) or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        for known, name in self.config.graders.items():
            if token and hmac.compare_digest(token, known):
                return name
        return None

    def csrf(self, request: Request) -> str:
        """The CSRF token a page from this request carries: HMAC-SHA256 of the grader's token under the server's
        secret."""
        token = request.cookies.get(COOKIE) or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return hmac.new(self.config.secret, token.encode(), hashlib.sha256).hexdigest()

    def anonymous(self, request: Request) -> bool:
        """Whether students' names are hidden on this request's pages: for everyone by `--anonymous`, else by the
        grader's cookie."""
        return self.config.anonymous or request.cookies.get(ANONYMOUS_COOKIE) == "1"

    def shown_name(self, request: Request, sub: dict) -> str:
        """A submission's name as this request shows it: its id, or "Student N" (its position, from 1) when
        anonymous."""
        return f"Student {sub['position'] + 1}" if self.anonymous(request) else sub["id"]

    def page(self, request: Request, template: str, **context) -> Response:
        """A template rendered with what every page shows (CSRF token, title, grader, anonymity), sent with HEADERS."""
        context.update(request=request, csrf=self.csrf(request), anonymous=self.anonymous(request),
                       forced_anonymous=self.config.anonymous, title=self.store.meta("title", "Review"),
                       grader=self.grader(request))
        response = self.templates.TemplateResponse(request, template, context)
        response.headers.update(HEADERS)
        return response


def _denied() -> Response:
    return PlainTextResponse("No access: open the address `autograder review` printed (it carries your token).",
                             status_code=403, headers=HEADERS)


def _json(data: dict, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=HEADERS)


def make_app(config: ReviewConfig) -> Starlette:
    """The ASGI application `autograder review` serves: every route but /static needs a grader's token (403 without),
    every write also passes `_write_problem`."""
    review = Review(config)

    def guarded(handler, write: bool = False):
        async def endpoint(request: Request) -> Response:
            token = request.query_params.get("token")
            if token and request.method == "GET" and any(hmac.compare_digest(token, t) for t in config.graders):
                response = RedirectResponse(request.url.remove_query_params("token"), status_code=303)
                response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
                return response
            if review.grader(request) is None:
                return _denied()
            if write:
                problem = await _write_problem(review, request)
                if problem:
                    return _json({"error": problem}, 403)
            return await handler(review, request)
        return endpoint

    routes = [
        Route("/", guarded(index)),
        Route("/q/{q:int}", guarded(question_list)),
        Route("/q/{q:int}/{s:int}", guarded(answer_page)),
        Route("/s/{s:int}", guarded(submission_page)),
        Route("/anonymous", guarded(set_anonymous)),
        Route("/api/grade", guarded(api_grade, write=True), methods=["POST"]),
        Route("/api/item", guarded(api_item, write=True), methods=["POST"]),
        Route("/api/merge", guarded(api_merge, write=True), methods=["POST"]),
        Route("/static/{name:str}", static),
    ]
    app = Starlette(routes=routes)
    app.state.review = review
    return app


async def _write_problem(review: Review, request: Request) -> str:
    """Why a write is refused (empty: it is not): the CSRF token, the origin, the body's type and size."""
    if not hmac.compare_digest(request.headers.get("x-csrf-token", ""), review.csrf(request)):
        return "the page's CSRF token is missing or wrong: reload the page"
    origin = request.headers.get("origin")
    if origin and origin.split("://", 1)[-1] != request.headers.get("host", ""):
        return "a write from another site is refused"
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return "writes are JSON"
    if int(request.headers.get("content-length") or 0) > MAX_BODY:
        return "too large"
    return ""


STATIC = {"review.js": "text/javascript", "review.css": "text/css"}


async def static(request: Request) -> Response:
    """GET /static/<name>: review.js or review.css (with Pygments' styles appended); any other name is 404. No token
    needed: they hold nothing of the class."""
    name = request.path_params["name"]
    if name not in STATIC:
        return PlainTextResponse("not found", status_code=404)
    body = (HERE / "static" / name).read_text(encoding="utf-8")
    if name == "review.css":
        body += "\n" + pygments_css()
    return Response(body, media_type=STATIC[name], headers={**HEADERS, "Cache-Control": "max-age=300"})


# -- pages ------------------------------------------------------------------------------------------------------

async def index(review: Review, request: Request) -> Response:
    """GET /: every question with (answers graded, answers), and every submission."""
    with review.lock:
        questions = [(q, *review.store.progress(q.name)) for q in review.store.questions()]
        subs = review.store.submissions()
        names = {s["id"]: review.shown_name(request, s) for s in subs}
    return review.page(request, "index.html", questions=questions, submissions=subs, names=names)


async def question_list(review: Review, request: Request) -> Response:
    """GET /q/<q>: the question's answers with their grades (`?ungraded=1`: only those not graded yet)."""
    ungraded_only = request.query_params.get("ungraded") == "1"
    with review.lock:
        q = review.store.question(request.path_params["q"])
        if q is None:
            return PlainTextResponse("no such question", status_code=404, headers=HEADERS)
        subs = review.store.submissions()
        grades = {g.submission: g for g in review.store.grades(q.name)}
        done, total = review.store.progress(q.name)
    rows = [(s, review.shown_name(request, s), grades[s["id"]]) for s in subs
            if not ungraded_only or not grades[s["id"]].graded]
    return review.page(request, "question.html", q=q, rows=rows, ungraded_only=ungraded_only, done=done, total=total)


def _neighbours(subs: list[dict], graded: dict[str, bool], position: int,
                ungraded_only: bool) -> tuple[int | None, int | None]:
    """The previous and next answers (among those not graded yet, with `ungraded_only`)."""
    shown = [s["position"] for s in subs if not ungraded_only or not graded.get(s["id"]) or s["position"] == position]
    at = shown.index(position) if position in shown else -1
    before = shown[at - 1] if at > 0 else None
    after = shown[at + 1] if 0 <= at < len(shown) - 1 else None
    return before, after


async def answer_page(review: Review, request: Request) -> Response:
    """GET /q/<q>/<s>: one answer to grade, with its cells, the rubric, the grade's history and links to the answers
    before and after it."""
    ungraded_only = request.query_params.get("ungraded") == "1"
    with review.lock:
        store = review.store
        q = store.question(request.path_params["q"])
        sub = store.submission(request.path_params["s"])
        if q is None or sub is None:
            return PlainTextResponse("no such answer", status_code=404, headers=HEADERS)
        grade = store.grade(sub["id"], q.name)
        items = store.items(q.name)
        history = store.history(sub["id"], q.name)
        subs = store.submissions()
        graded = store.graded_flags(q.name)
        done, total = store.progress(q.name)
        answer = store.answer(sub["id"], q.name)
    before, after = _neighbours(subs, graded, sub["position"], ungraded_only)
    cells = Markup("".join(cell_html(c) for c in answer))
    return review.page(request, "answer.html", q=q, sub=sub, name=review.shown_name(request, sub), grade=grade,
                       items=items, history=history, cells=cells, before=before, after=after, done=done, total=total,
                       ungraded_only=ungraded_only, position=request.path_params["q"])


async def submission_page(review: Review, request: Request) -> Response:
    """GET /s/<s>: one submission whole: its notebook, its automatic checks (from its grading.json) and its hand
    grades."""
    import json

    with review.lock:
        sub = review.store.submission(request.path_params["s"])
        if sub is None:
            return PlainTextResponse("no such submission", status_code=404, headers=HEADERS)
        questions = review.store.questions()
        hand = {q.name: review.store.grade(sub["id"], q.name) for q in questions}
    try:
        result = json.loads((review.config.out_dir / sub["id"] / "grading.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result = {"checks": [], "notes": ["the automatic checks' results could not be read"]}
    cells = Markup("".join(cell_html(c) for c in sub["cells"]))
    return review.page(request, "submission.html", sub=sub, name=review.shown_name(request, sub), result=result,
                       cells=cells, questions=questions, hand=hand)


async def set_anonymous(review: Review, request: Request) -> Response:
    """GET /anonymous?on=1|0&back=PATH: set the grader's cookie that hides names, then go back (to a path of this
    server only, never another site)."""
    back = request.query_params.get("back", "/")
    response = RedirectResponse(back if back.startswith("/") and not back.startswith("//") else "/", status_code=303)
    response.set_cookie(ANONYMOUS_COOKIE, "1" if request.query_params.get("on") == "1" else "0", httponly=True,
                        samesite="strict")
    return response


# -- writes -----------------------------------------------------------------------------------------------------

async def _body(request: Request) -> dict:
    try:
        data = await request.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _stale(stale: Stale) -> JSONResponse:
    return _json({"error": f"{stale.what}" + (f" by {stale.by}" if stale.by else "") + ": what you see was "
                  "reloaded; make your change again if it still applies", "current": stale.current}, 409)


async def api_grade(review: Review, request: Request) -> Response:
    """POST /api/grade: one change to an answer's grade (toggle an item, comment, score set by hand, graded), made
    from the `version` the page saw: 409 with what is stored now when another grader changed it first."""
    data = await _body(request)
    grader = review.grader(request) or ""
    with review.lock:
        q = review.store.question(int(data.get("q", -1)))
        sub = review.store.submission(int(data.get("s", -1)))
        if q is None or sub is None:
            return _json({"error": "no such answer"}, 404)
        override = data.get("override", "keep")
        if override not in ("keep", None) and not isinstance(override, (int, float)):
            return _json({"error": "a score is a number"}, 400)
        try:
            grade = review.store.change(sub["id"], q.name, int(data.get("version", -1)), grader,
                                        toggle=data.get("toggle"), comment=data.get("comment"), override=override,
                                        graded=data.get("graded"))
        except Stale as stale:
            return _stale(stale)
        except KeyError:
            return _json({"error": "no such rubric item for this question"}, 404)
    return _json({"grade": grade.to_dict()})


async def api_item(review: Review, request: Request) -> Response:
    """POST /api/item: a new rubric item (no `id`), or an edit of one made from its `version`, with how many answers
    the edit re-scores; 409 when another grader changed it first."""
    data = await _body(request)
    grader = review.grader(request) or ""
    title, comment = str(data.get("title", "")).strip()[:500], str(data.get("comment", ""))[:5000]
    try:
        points = float(data.get("points", 0))
    except (TypeError, ValueError):
        return _json({"error": "points are a number"}, 400)
    if not title:
        return _json({"error": "an item needs a title"}, 400)
    with review.lock:
        q = review.store.question(int(data.get("q", -1)))
        if q is None:
            return _json({"error": "no such question"}, 404)
        try:
            if data.get("id") is None:
                return _json({"item": review.store.add_item(q.name, title, points, comment, grader).__dict__,
                              "rescored": 0})
            item, count = review.store.edit_item(int(data["id"]), int(data.get("version", -1)), grader, title,
                                                 points, comment)
        except Stale as stale:
            return _stale(stale)
        except KeyError:
            return _json({"error": "no such item"}, 404)
    return _json({"item": item.__dict__, "rescored": count})


async def api_merge(review: Review, request: Request) -> Response:
    """POST /api/merge: the hand grades written into the results (as `--merge`); answers how many submissions
    changed."""
    with review.lock:
        changed = merge_hand_grades(review.store, review.config.out_dir, review.store.meta("title", ""))
    return _json({"merged": changed})
