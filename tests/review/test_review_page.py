"""End to end: the review page in headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scopeguard.review import make_server

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture()
def page_url(review_dir: Path) -> Iterator[str]:
    server = make_server(review_dir, annotator="tester", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def browser():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (scopeguard[dev])")
    if CHROMIUM is None:
        pytest.skip("Debian chromium not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield b
        b.close()


def test_label_reload_resume_and_escape(browser, page_url: str, review_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page = browser.new_page()
    page.goto(page_url)
    page.wait_for_selector("#question:not(:empty)")
    assert page.text_content("#question") == "How many passengers does the Kestrel carry?"

    page.click("#btn-in")  # question 1 (no response): advances after the scope label
    expect(page.locator("#position")).to_have_text(re.compile(r"^Question 2 of 3"))
    page.keyboard.press("o")  # question 2 has a response: needs the defusion label too
    page.wait_for_selector("#btn-out[aria-pressed='true']")
    page.keyboard.press("n")
    expect(page.locator("#position")).to_have_text(re.compile(r"^Question 3 of 3"))
    page.keyboard.press("u")
    page.wait_for_selector("#btn-unsure[aria-pressed='true']")

    # The hostile document is shown as text and nothing in it ran.
    assert "<script>window.__pwned = 1;</script>" in page.text_content("#document")
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("#document img").count() == 0
    page.screenshot(path=str(tmp_path / "review.png"))
    if shot_dir := os.environ.get("SCOPEGUARD_SCREENSHOT_DIR"):
        page.screenshot(path=str(Path(shot_dir) / "review.png"))

    page.reload()
    page.wait_for_selector("#question:not(:empty)")
    assert page.text_content("#progress") == "3 / 3 labelled"
    page.keyboard.press("k")
    page.keyboard.press("k")
    assert page.get_attribute("#btn-in", "aria-pressed") == "true"
    page.keyboard.press("j")
    assert page.get_attribute("#btn-out", "aria-pressed") == "true"
    assert page.get_attribute("#btn-def-no", "aria-pressed") == "true"

    rows = {
        r["question_id"]: r
        for r in map(json.loads, (review_dir / "reviews" / "tester.jsonl").read_text().splitlines())
    }
    assert {k: (v["scope"], v["defused"]) for k, v in rows.items()} == {
        "d1_ins_1": ("in_scope", None),
        "d1_oos_1": ("out_of_scope", "no"),
        "d2_oos_1": ("unsure", None),
    }
    assert (tmp_path / "review.png").stat().st_size > 10_000


def test_bad_label_request_is_rejected(page_url: str) -> None:
    import urllib.error
    import urllib.request

    with urllib.request.urlopen(page_url + "api/items", timeout=5) as resp:
        token = json.load(resp)["token"]
    req = urllib.request.Request(
        page_url + "api/label",
        data=json.dumps({"question_id": "nope", "field": "scope", "value": "in_scope"}).encode(),
        headers={"Content-Type": "application/json", "X-Scopeguard-Token": token},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=5)
    assert exc.value.code == 400 and "unknown question id" in exc.value.read().decode()


# A calibration folder: the questions a calibration chose, labelled one at a time by keyboard.
KEY_LABELS = {"i": "in_scope", "o": "out_of_scope", "u": "unsure"}


def test_label_fifty_chosen_questions_by_keyboard(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    from tests.review.chosen_folder import Calls, label_rows, serving, write_chosen

    folder = write_chosen(tmp_path / "calibration", 50)
    calls = Calls(folder)
    typed = {f"q{i}": "iou"[i % 3] for i in range(1, 51)}
    with serving(folder, estimate=calls.estimate, on_complete=calls.on_complete) as api:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{api.port}/")
        position, progress = page.locator("#position"), page.locator("#progress")
        expect(position).to_have_text("Question 1 of 50")
        expect(progress).to_have_text("0 of 50 labelled")
        expect(page.locator("#estimate")).to_be_hidden()
        expect(page.locator("#chunks h3")).to_have_text(["c1a", "c1b"])
        expect(page.locator("#question")).to_have_text("How often does ferry 1 leave?")
        for i in (1, 2):
            page.keyboard.press(typed[f"q{i}"])
            expect(position).to_have_text(f"Question {i + 1} of 50")
        # question 3's second chunk carries HTML: shown as text, nothing in it ran
        expect(page.locator("#chunks .chunk-text").nth(1)).to_contain_text(
            "<script>window.__pwned = 1;</script>"
        )
        assert page.locator("#chunks img").count() == 0 and page.evaluate("window.__pwned === undefined")
        for i in range(3, 26):  # typed at speed: every key is taken, in order
            page.keyboard.press(typed[f"q{i}"])
        expect(progress).to_have_text("25 of 50 labelled")
        expect(position).to_have_text("Question 26 of 50")
        assert "0.4" not in page.inner_text("body")  # the detector's score is never shown
        page.screenshot(path=str(tmp_path / "calibration.png"))
        if shot_dir := os.environ.get("SCOPEGUARD_SCREENSHOT_DIR"):
            page.screenshot(path=str(Path(shot_dir) / "review-calibration.png"))

        page.reload()
        expect(position).to_have_text("Question 26 of 50")
        expect(progress).to_have_text("25 of 50 labelled")
        out = sum(k == "o" for q, k in typed.items() if int(q[1:]) <= 25)
        expect(page.locator("#estimate")).to_have_text(f"{out} of 25 labelled out of scope")
        for i in range(26, 41):
            page.keyboard.press(typed[f"q{i}"])
            expect(position).to_have_text(f"Question {i + 1} of 50")
        page.keyboard.press("b")  # back once, and relabel question 40
        expect(position).to_have_text("Question 40 of 50")
        pressed = {"i": "#btn-in", "o": "#btn-out", "u": "#btn-unsure"}[typed["q40"]]
        expect(page.locator(pressed)).to_have_attribute("aria-pressed", "true")
        typed["q40"] = "o" if typed["q40"] != "o" else "i"
        page.keyboard.press(typed["q40"])
        expect(position).to_have_text("Question 41 of 50")  # the next question without a label
        for i in range(41, 51):
            page.keyboard.press(typed[f"q{i}"])
        expect(page.locator("#done")).to_have_text("Done: profile written from 50 labels")
        expect(progress).to_have_text("50 of 50 labelled")
        page.close()

    rows = label_rows(folder)
    assert len(rows) == 50 and len({r["id"] for r in rows}) == 50
    assert {r["id"]: r["label"] for r in rows} == {q: KEY_LABELS[k] for q, k in typed.items()}
    assert len(calls.finished) == 1
    assert (tmp_path / "calibration.png").stat().st_size > 10_000


def test_chosen_questions_by_click_in_two_tabs_and_a_failed_finish(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    from tests.review.chosen_folder import Calls, label_rows, serving, write_chosen

    folder = write_chosen(tmp_path / "calibration", 3)
    calls = Calls(folder, fail_finish=True)
    with serving(folder, on_complete=calls.on_complete) as api:
        url = f"http://127.0.0.1:{api.port}/"
        first = browser.new_page()
        first.goto(url)
        expect(first.locator("#position")).to_have_text("Question 1 of 3")
        first.click("#btn-in")
        expect(first.locator("#position")).to_have_text("Question 2 of 3")
        first.keyboard.press("Backspace")
        expect(first.locator("#position")).to_have_text("Question 1 of 3")
        expect(first.locator("#btn-in")).to_have_attribute("aria-pressed", "true")
        first.click("#btn-out")  # relabelled; on to the next question without a label
        expect(first.locator("#position")).to_have_text("Question 2 of 3")

        second = browser.new_page()  # a second tab resumes where the labels stop
        second.goto(url)
        expect(second.locator("#position")).to_have_text("Question 2 of 3")
        expect(second.locator("#progress")).to_have_text("1 of 3 labelled")
        second.keyboard.press("u")
        expect(second.locator("#position")).to_have_text("Question 3 of 3")

        first.click("#btn-in")  # the first tab labels question 2 too: the last write wins
        expect(first.locator("#position")).to_have_text("Question 3 of 3")
        expect(first.locator("#progress")).to_have_text("2 of 3 labelled")
        first.keyboard.press("o")
        done = first.locator("#done")
        expect(done).to_have_text("Every label is saved, but finishing failed: no in-scope questions")
        expect(done).to_have_class("error")
        expect(first.locator("#progress")).to_have_text("3 of 3 labelled")
        first.close()
        second.close()

    assert {r["id"]: r["label"] for r in label_rows(folder)} == {
        "q1": "out_of_scope",
        "q2": "in_scope",
        "q3": "out_of_scope",
    }
    assert len(label_rows(folder)) == 3 and len(calls.finished) == 1
