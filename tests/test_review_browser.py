"""The review page in a real browser (Playwright driving Debian's Chromium): grading by question with rubric items
and keys, an item edit that re-scores other answers, two graders conflicting, anonymous mode, hostile answers that
must neither run nor load anything, and the merge into results.json and grades.csv.

`.ci/run` installs Chromium; elsewhere the tests skip when no Chromium or Playwright is installed (CI=true: fail).
`python -m pytest tests/test_review_browser.py --update-goldens` also refreshes docs/review-page.png.
"""
from __future__ import annotations

import csv
import json
import os
import re
import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from autograder.reports.html import find_chromium
from tests.review_fixtures import make_results, start_review

try:
    from playwright.sync_api import expect
except ImportError:  # the tests skip (browser fixture)
    expect = None

SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "review-page.png"


def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    chromium = find_chromium()
    if sync_playwright is None or chromium is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: install Playwright (the test extra) and Debian's chromium")
        pytest.skip("needs Playwright and a Chromium (apt-get install chromium)")
    return sync_playwright, chromium


@pytest.fixture(scope="module")
def browser():
    sync_playwright, chromium = _browser_or_skip()
    with sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses root without it
        b = p.chromium.launch(executable_path=chromium, args=args)
        yield b
        b.close()


@pytest.fixture(scope="module")
def results(example_build, tmp_path_factory):
    return example_build.release, make_results(example_build.release, tmp_path_factory.mktemp("review"))


@pytest.fixture
def server(results):
    release, out = results
    proc, url = start_review(release, out)
    yield url, out
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


class Watch:
    """What a page did that it must not: a dialog, a request off the server, a script the student wrote."""

    def __init__(self, page, origin: str):
        self.problems: list[str] = []
        page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: None if r.url.startswith((origin, "data:")) else
                self.problems.append(f"request: {r.url}"))


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
    watch = Watch(page, origin)
    page.goto(url)
    return context, page, watch, origin


def _ids(out: Path) -> list[str]:
    return sorted(p.parent.name for p in out.glob("*/grading.json"))


def test_grading_by_question_with_items_keys_progress_and_merge(browser, server, update_goldens, tmp_path):
    url, out = server
    context, page, watch, origin = _open(browser, url)
    assert page.url == origin + "/"  # the token left the address bar for a cookie
    page.get_by_role("link", name="q_softmax").first.click()
    page.locator("table.list a").first.click()
    page.wait_for_selector("#grading")
    page.keyboard.press("1")  # "Correct": all 2 points
    expect(page.locator("#score")).to_have_text("2")
    page.keyboard.press("j")
    page.wait_for_url("**/q/0/1")
    page.keyboard.press("2")  # "Partly correct": 1 point
    expect(page.locator("#score")).to_have_text("1")
    page.keyboard.press("c")
    page.keyboard.type("The shift by the maximum is missing.")
    page.click("#save")
    page.wait_for_timeout(300)
    page.reload()
    assert page.locator("#comment").input_value() == "The shift by the maximum is missing."
    assert "2 / 4 graded" in page.locator(".progress-text").first.inner_text()
    if update_goldens:
        page.goto(origin + "/q/0/0")
        page.screenshot(path=str(SCREENSHOT))
    page.goto(origin + "/q/0?ungraded=1")
    assert page.locator("table.list tr.ungraded").count() == 2
    page.goto(origin + "/")
    page.click("#merge")
    expect(page.locator("#merge-result")).to_contain_text("written")
    first, second = _ids(out)[:2]
    with open(out / "grades.csv", encoding="utf-8") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    assert (rows[first]["q_softmax"], rows[second]["q_softmax"]) == ("2", "1")
    shown = json.loads((out / second / "results.json").read_text())
    test = next(t for t in shown["tests"] if t["name"] == "q_softmax")
    assert test["score"] == 1 and "The shift by the maximum is missing." in test["output"]
    assert watch.problems == []
    context.close()


def test_an_item_edit_rescores_every_answer_that_has_it(browser, server):
    url, out = server
    context, page, watch, origin = _open(browser, url)
    page.goto(origin + "/q/0/0")
    if "applied" not in (page.locator("#items .item").first.get_attribute("class") or ""):
        page.keyboard.press("1")
        expect(page.locator("#score")).to_have_text("2")
    page.goto(origin + "/q/0/2")
    if "applied" not in (page.locator("#items .item").first.get_attribute("class") or ""):
        page.keyboard.press("1")
        expect(page.locator("#score")).to_have_text("2")
    page.locator("#items .item .edit").first.click()
    page.fill("#item-form input[name=points]", "1.5")
    page.fill("#item-form input[name=comment]", "Right, but say why it is safe.")
    page.click("#item-form button[type=submit]")
    page.wait_for_load_state()
    expect(page.locator("#score")).to_have_text("1.5")
    page.goto(origin + "/q/0/0")
    assert page.locator("#score").inner_text() == "1.5"
    assert "Right, but say why it is safe." in page.locator("#items").inner_text()
    assert watch.problems == []
    context.close()


def test_two_graders_at_once_the_stale_write_is_refused_and_says_who(browser, results, tmp_path):
    release, out = results
    graders = tmp_path / "graders.txt"
    graders.write_text("ann aaaaaaaaaaaaaaaaaaaaaaaa\nben bbbbbbbbbbbbbbbbbbbbbbbb\n")
    proc, url = start_review(release, out, "--graders", str(graders))
    try:
        ann_ctx, ann, _, origin = _open(browser, url + "?token=" + "a" * 24)
        ben_ctx, ben, _, _ = _open(browser, url + "?token=" + "b" * 24)
        for page in (ann, ben):
            page.goto(origin + "/q/0/3")
        ann.keyboard.press("3")
        expect(ann.locator("#items .item").nth(2)).to_have_class(re.compile("applied"))
        ben.keyboard.press("2")
        ben.wait_for_selector("#banner:not([hidden])")
        assert "by ann" in ben.locator("#banner").inner_text()
        assert "applied" in (ben.locator("#items .item").nth(2).get_attribute("class") or "")  # ann's, shown now
        assert "applied" not in (ben.locator("#items .item").nth(1).get_attribute("class") or "")  # ben's: refused
        ann_ctx.close()
        ben_ctx.close()
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_anonymous_mode_hides_every_name(browser, server):
    url, out = server
    context, page, _, origin = _open(browser, url)
    page.click("#anonymous-toggle")
    for path in ("/", "/q/0", "/q/0/0", "/s/0"):
        page.goto(origin + path)
        text = page.locator("body").inner_text()
        assert not [name for name in _ids(out) if name in text], (path, text[:300])
    page.goto(origin + "/q/0/0")
    assert page.locator("#student-name").inner_text() == "Student 1"
    context.close()


def test_hostile_answers_run_nothing_load_nothing_and_the_page_stays_usable(browser, server):
    url, out = server
    context, page, watch, origin = _open(browser, url)
    positions = {name: i for i, name in enumerate(_ids(out))}
    for name, i in positions.items():
        for path in (f"/q/0/{i}", f"/s/{i}"):
            page.goto(origin + path)
            page.wait_for_selector("#answer, .answer")
            assert page.evaluate("() => window.pwned") is None, (name, path)
    bob = positions["bob"]
    page.goto(origin + f"/q/0/{bob}")
    assert page.locator("section.answer a[href^='javascript']").count() == 0
    assert "[image not loaded: http://127.0.0.1:9/tracker.png]" in page.locator("section.answer").inner_text()
    assert page.locator("#items .item").count() == 3 and page.locator("#grading").is_visible()
    carol = positions["carol"]
    page.goto(origin + f"/q/0/{carol}")
    assert "cut here" in page.locator("section.answer").inner_text()
    version = page.locator("#grading").get_attribute("data-version")
    page.keyboard.press("2")  # the page still grades: the change is saved (the version moves on)
    expect(page.locator("#grading")).not_to_have_attribute("data-version", version or "")
    dan = next(n for n in positions if n.startswith("dan"))
    page.goto(origin + "/")
    assert page.locator("ul.subs b").count() == 0 and dan in page.locator("ul.subs").inner_text()
    assert watch.problems == [], watch.problems
    context.close()
