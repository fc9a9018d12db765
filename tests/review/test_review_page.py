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
