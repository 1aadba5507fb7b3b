"""The review page's truth and its walls, without a browser: the store (versions, re-scoring, history), the CSV round
trip with conflicts, the sanitiser, access and CSRF rules over HTTP, a killed server, and the merge into results.
tests/test_review_browser.py drives the same page in Chromium."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import urllib.error
import urllib.request

import pytest

from autograder.review.render import markdown_html, outputs_html
from autograder.review.spreadsheet import export_csv, import_csv
from autograder.review.store import Stale, Store
from tests.review_fixtures import make_results, start_review


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path)
    s.add_question("q1", "1. Why", 2.0, "written answer")
    for sub in ("a", "b", "c"):
        s.put_submission(sub, None, [], "", {"q1": []})
    yield s
    s.close()


def test_items_score_clamped_and_an_item_edit_rescores_every_answer_that_has_it(store):
    correct, partly, wrong = store.items("q1")
    g = store.change("a", "q1", 0, "ann", toggle=correct.id)
    assert (g.score, g.graded, g.version) == (2.0, True, 1)
    store.change("b", "q1", 0, "ann", toggle=correct.id)
    g = store.change("c", "q1", 0, "ann", toggle=partly.id)
    assert g.score == 1.0
    item, rescored = store.edit_item(correct.id, correct.version, "ben", "Correct", 1.5, "")
    assert rescored == 2 and [store.grade(s, "q1").score for s in "abc"] == [1.5, 1.5, 1.0]
    minus = store.add_item("q1", "No reason given", -5, "say why", "ann")
    g = store.change("c", "q1", g.version, "ann", toggle=minus.id)
    assert g.score == 0.0  # clamped at 0, never negative
    g = store.change("c", "q1", g.version, "ann", override=1.75)
    assert g.score == 1.75
    assert [h["grader"] for h in store.history("c", "q1")] == ["ann", "ann", "ann"]


def test_a_stale_write_is_refused_with_what_changed_and_who(store):
    correct, partly, _ = store.items("q1")
    store.change("a", "q1", 0, "ann", toggle=correct.id)
    with pytest.raises(Stale) as stale:
        store.change("a", "q1", 0, "ben", toggle=partly.id)
    assert stale.value.by == "ann" and stale.value.current["applied"] == [correct.id]
    assert store.grade("a", "q1").applied == [correct.id]
    store.edit_item(correct.id, correct.version, "ann", "Right", 2, "")
    with pytest.raises(Stale):
        store.edit_item(correct.id, correct.version, "ben", "Correct!", 2, "")
    assert store.item(correct.id).title == "Right"


def test_the_csv_round_trip_applies_rows_and_reports_conflicts_never_overwriting(store):
    correct, partly, _ = store.items("q1")
    store.change("a", "q1", 0, "ann", toggle=correct.id)
    exported = list(csv.DictReader(export_csv(store).splitlines()))
    assert [(r["submission"], r["score"], r["items"]) for r in exported] == [("a", "2", "Correct"), ("b", "", ""),
                                                                              ("c", "", "")]
    exported[1].update(items="Partly correct", comment="half of it")
    exported[2].update(score="1.25")
    exported[0].update(items="Partly correct")
    store.change("a", "q1", 1, "ben", comment="seen again")  # changed in the review since the export
    text = ",".join(exported[0]) + "\n" + "\n".join(",".join(f'"{v}"' for v in r.values()) for r in exported)
    changed, conflicts = import_csv(store, text, "sheet")
    assert changed == 2 and len(conflicts) == 1 and "line 2: a / q1" in conflicts[0] and "ben" in conflicts[0]
    assert store.grade("a", "q1").applied == [correct.id]  # the conflict was not applied
    assert (store.grade("b", "q1").score, store.grade("b", "q1").comment) == (1.0, "half of it")
    assert store.grade("c", "q1").score == 1.25
    changed, conflicts = import_csv(store, "submission,question,items,version\nb,q1,Nonsense,1\n", "sheet")
    assert changed == 0 and "unknown rubric item" in conflicts[0]


@pytest.mark.parametrize("text", [
    "<script>window.pwned=1</script>", "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))",
    '<a href="javascript:alert(1)">x</a>', "<svg onload=alert(1)><script>alert(1)</script></svg>",
    "<iframe src=//evil></iframe>", '<div style="background:url(http://evil)">x</div>', "<style>*{}</style>",
    '<img src="http://127.0.0.1:9/t.png">', "![t](file:///etc/passwd)", "<form action=/api/merge><button>",
    '<a href="data:text/html,<script>alert(1)</script>">x</a>', '<a href="/api/merge">same site</a>',
])
def test_student_markdown_keeps_no_script_no_handler_no_outside_url(text):
    rendered = markdown_html(text)
    for tag, attrs in _elements(rendered):
        assert tag not in ("script", "iframe", "svg", "style", "form", "button", "object", "embed"), rendered
        for name, value in attrs:
            assert not name.startswith("on") and name != "style", rendered
            assert not (value or "").lower().lstrip().startswith("javascript:"), rendered
            assert name != "src" or (value or "").startswith("data:image/"), rendered


def _elements(fragment: str) -> list[tuple[str, list]]:
    from html.parser import HTMLParser

    found = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    Collect().feed(fragment)
    return found


def test_images_are_shown_from_the_notebooks_own_data_only():
    assert '<img src="data:image/png;base64,AAAA"' in markdown_html("![a](attachment:a.png)",
                                                                     {"a.png": "data:image/png;base64,AAAA"})
    assert "[image not loaded: http://x/y.png]" in markdown_html("![a](http://x/y.png)")
    svg = outputs_html([{"kind": "image", "mime": "image/svg+xml", "data": "PHN2Zz4="}])
    assert svg.startswith('<img class="output" src="data:image/svg+xml;base64,')  # an <img>: its scripts never run


@pytest.fixture(scope="module")
def results(example_build, tmp_path_factory):
    return example_build.release, make_results(example_build.release, tmp_path_factory.mktemp("review"))


def _request(url: str, token: str | None = None, data: dict | None = None, headers: dict | None = None):
    request = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None,
                                     headers={**({"Authorization": f"Bearer {token}"} if token else {}),
                                              **({"Content-Type": "application/json"} if data is not None else {}),
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_nothing_without_the_token_no_write_without_csrf_and_a_killed_server_loses_nothing(results):
    release, out = results
    proc, url = start_review(release, out)
    try:
        base, token = url.split("/?token=")
        assert _request(base + "/")[0] == 403 and _request(base + "/q/0/0")[0] == 403
        assert _request(base + "/", "wrong-token")[0] == 403
        status, page = _request(base + "/q/0/0", token)
        assert status == 200
        csrf = re.search(r'name="csrf" content="([0-9a-f]+)"', page).group(1)
        item = int(re.search(r'data-id="(\d+)"', page).group(1))
        change = {"q": 0, "s": 0, "version": 0, "toggle": item}
        assert _request(base + "/api/grade", token, change)[0] == 403  # no CSRF token
        assert _request(base + "/api/grade", token, change, {"X-CSRF-Token": csrf, "Origin": "http://evil"})[0] == 403
        status, body = _request(base + "/api/grade", token, change, {"X-CSRF-Token": csrf})
        assert status == 200 and json.loads(body)["grade"]["score"] == 2
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    store = Store(out)
    assert store.grade(store.submissions()[0]["id"], "q_softmax").score == 2  # committed before the kill
    store.close()


def test_the_command_refuses_another_host_without_graders_and_merges_into_every_result(results, capsys):
    from autograder.review.command import ReviewOptions, run
    from autograder.review.server import ReviewError

    release, out = results
    with pytest.raises(ReviewError, match="--graders"):
        run(ReviewOptions(str(release), str(out), host="0.0.0.0", quiet=True))
    store = Store(out)
    first = store.submissions()[0]["id"]
    grade = store.grade(first, "q_softmax")
    correct = store.items("q_softmax")[0]
    if correct.id not in grade.applied:
        store.change(first, "q_softmax", grade.version, "ann", toggle=correct.id)
    grade = store.grade(first, "q_softmax")
    store.change(first, "q_softmax", grade.version, "ann", comment="Clear and right.")
    store.close()
    assert run(ReviewOptions(str(release), str(out), merge=True, quiet=True)) == 0
    shown = json.loads((out / first / "results.json").read_text())
    test = next(t for t in shown["tests"] if t["name"] == "q_softmax")
    assert test["score"] == 2 and "Clear and right." in test["output"]
    with open(out / "grades.csv", encoding="utf-8") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    assert rows[first]["q_softmax"] == "2" and len(rows) == len(list(out.glob("*/grading.json")))
    assert "Clear and right." in (out / first / "feedback.md").read_text()
    assert json.loads((out / first / "hand.json").read_text())["checks"][0]["score"] == 2


def test_hand_grades_of_an_nbgrader_course_go_into_its_gradebook(store, tmp_path, monkeypatch):
    """A result whose notebook lies in a course's submitted/<student>/<assignment>/ tree: the merge hands its hand
    grades to the course's gradebook as manual scores (export/gradebook.py scores_into_gradebook, by_hand)."""
    import autograder.export.gradebook as nbgrader_export
    from autograder.reports.results import SubmissionResult
    from autograder.review.merge import merge_hand_grades

    course = tmp_path / "course"
    notebook = course / "submitted" / "a" / "ps1" / "ps1.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    store.set_meta("assignment", "ps1")
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    check = {"name": "q1", "part": "1. Why", "max_score": 2.0, "score": 0.0, "status": "pending",
             "message": "graded by hand", "visibility": "visible"}
    (out / "a" / "grading.json").write_text(json.dumps(SubmissionResult("a", str(notebook), []).to_dict()
                                                       | {"checks": [check]}))
    correct = store.items("q1")[0]
    store.change("a", "q1", 0, "ann", toggle=correct.id)
    calls = []
    monkeypatch.setattr(nbgrader_export, "scores_into_gradebook",
                        lambda *args, **kw: calls.append((args, kw)) or [])
    assert merge_hand_grades(store, out, "PS1") == 1
    [((got_course, name, nb, by_student), kw)] = calls
    assert (got_course, name, nb, kw) == (course, "ps1", "ps1.ipynb", {"by_hand": True})
    assert [(c.name, c.score) for c in by_student["a"]] == [("q1", 2.0)]
