"""The Why section in headless Debian chromium: a sentence carrying HTML is attributed and shown as
text (nothing in it runs), and the section follows a released slider.

Fails (never skips) when chromium is missing.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import browser_latency as bl
import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"

pytestmark = pytest.mark.browser
HOSTILE = "<img src=x onerror=alert(1)> a <b>bold</b> and <script>alert(2)</script> good film"
STRIP = ".bv-why"


def settle(page, quiet_ms: int = 1000) -> None:
    """Until the footer's view count has not moved for `quiet_ms`: no run in progress or polling."""
    view = -1
    while view != bl.marker_view(page):
        view = bl.marker_view(page)
        page.wait_for_timeout(quiet_ms)


def test_the_why_section_shows_html_as_text_and_runs_none_of_it():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with bl.serve(ROOT / "app.py", log=ARTIFACTS / "browser-why-server.log") as url, sync_playwright() as p:
        browser = bl.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            dialogs, errors = [], []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url}/?model=bam-wc&n_samples=8&seed=0&text={quote(HOSTILE)}")
            # Clicked once the sentence's grid is complete and the page has stopped polling: a click
            # while the sliders' fragment polls for frames was lost in 1 of 10 fresh pages here
            # (a Streamlit fragment rerun racing the nested Why fragment's), which this test is not
            # about; docs/design.md records it.
            bl.painted(page, complete=True)
            settle(page)
            page.get_by_text("Explain the prediction (why)").click()
            page.wait_for_selector(STRIP, timeout=120_000)
            page.wait_for_timeout(500)
            page.screenshot(path=str(ARTIFACTS / "browser-why.png"), full_page=True)
            chips = page.locator(f"{STRIP} .bv-chip").all_inner_texts()
            assert chips.count("<") >= 4 and "script" in chips and ">" in chips   # the markup, as tokens shown as text
            assert page.locator("img[src=x]").count() == 0                   # no element made from the sentence
            assert page.locator("main b", has_text="bold").count() == 0
            assert page.evaluate("() => new URLSearchParams(location.search).get('why')") == "1"
            first = page.locator(STRIP).inner_html()
            assert "Completeness" in page.locator("main").inner_text()

            # A released slider draws other attention samples, and so other bands.
            slider = page.get_by_role("slider", name="shape_k · Weibull shape k (log scale)")
            slider.focus()
            for _ in range(6):
                page.keyboard.press("ArrowLeft")
                bl.painted(page)
            page.evaluate("html => { window.__whyBefore = html; }", first)
            page.wait_for_function("s => { const e = document.querySelector(s); return e && e.innerHTML !== "
                                   "window.__whyBefore; }", arg=STRIP, timeout=120_000, polling=200)
            assert page.locator(STRIP).inner_html() != first
            assert dialogs == [] and errors == []
        finally:
            browser.close()
