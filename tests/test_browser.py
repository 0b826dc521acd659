"""The real app in headless Debian chromium: type, move shape_k with the keyboard, see it change.

Fails (never skips) when chromium is missing. Screenshots land in artifacts/ (git-ignored).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
_spec = importlib.util.spec_from_file_location("browser_latency", ROOT / "bench" / "browser_latency.py")
bl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bl)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with bl.serve(ROOT / "app.py", log=ARTIFACTS / "browser-test-server.log") as url, \
            sync_playwright() as p:
        browser = bl.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            bl.wait_for_view(page, 1)
            bl.wait_for_charts(page, 7)
            yield page
        finally:
            browser.close()



def plot_data(page) -> str:
    """The data plotly actually drew, from the DOM, for every chart on the page."""
    return page.evaluate(
        "() => JSON.stringify([...document.querySelectorAll('.js-plotly-plot')]"
        ".map(el => (el.data || []).map(t => [t.x, t.y, t.z])))")


def submit_text(page, text: str) -> None:
    """Type `text` into the sentence box, submit it, and wait for the page's next full view."""
    box = page.get_by_label("Sentence (text)")
    box.fill(text)
    view = bl.marker_view(page)
    box.press("Control+Enter")
    bl.wait_for_view(page, view + 1)


def test_type_a_sentence_and_move_shape_k(page):
    submit_text(page, "A quiet, strange and quite lovely little film.")
    bl.wait_for_charts(page, 7)
    before_plots = plot_data(page)
    page.screenshot(path=str(ARTIFACTS / "browser-before.png"))

    slider = page.get_by_role("slider", name="shape_k")
    slider.focus()
    start = slider.get_attribute("aria-valuetext")
    for _ in range(4):                       # four grid steps, ~75% larger k
        view = bl.marker_view(page)
        page.keyboard.press("ArrowRight")
        bl.wait_for_view(page, view + 1)
    assert slider.get_attribute("aria-valuetext") != start
    assert "shape_k=" + slider.get_attribute("aria-valuetext") in page.locator(
        ".st-key-render_marker").inner_text()
    after_plots = plot_data(page)
    page.screenshot(path=str(ARTIFACTS / "browser-after.png"))
    assert after_plots != before_plots
    # The sliders live in a fragment: its rerun alone must still carry the new value into the URL.
    shown = float(slider.get_attribute("aria-valuetext"))
    in_url = float(parse_qs(urlparse(page.url).query)["shape_k"][0])
    assert in_url == pytest.approx(shown, rel=5e-3)
    assert float(start) != pytest.approx(in_url, rel=5e-3)


def test_the_footer_is_hidden_yet_readable_and_shown_with_debug(page):
    """The footer is debug text: hidden from users, still read by the benchmarks (through a fragment
    rerun too), and shown with the URL parameter debug=1."""
    marker = page.locator(".st-key-render_marker")
    assert marker.is_hidden() and bl.marker_view(page) > 0
    slider = page.get_by_role("slider", name="shape_k")
    slider.focus()
    view = bl.marker_view(page)
    page.keyboard.press("ArrowLeft")
    bl.wait_for_view(page, view + 1)
    assert marker.is_hidden() and bl.marker_server_ms(page) is not None
    url = urlparse(page.url)
    page.goto(url._replace(query=url.query + "&debug=1").geturl())
    bl.wait_for_view(page, 1)
    assert marker.is_visible() and marker.inner_text().startswith("view ")
    page.goto(url.geturl())                  # back to the user's page for the tests that follow
    bl.wait_for_view(page, 1)
    bl.wait_for_charts(page, 7)


def test_hostile_text_renders_as_text(page):
    submit_text(page, "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned=2'> fine")
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("script:text('__pwned')").count() == 0
    page.screenshot(path=str(ARTIFACTS / "browser-hostile.png"))


def test_the_benchmarks_measure_every_press_of_a_served_app(page):
    """bench/browser_latency.py and bench/latency_floor.py time pages through `measure_app`: one
    summary per app with a positive time for every press (each waits for the next view). It runs
    in the module's chromium (one Playwright per process)."""
    res = bl.measure_app(page.context.browser, ROOT / "bench" / "trivial_app.py", "value", presses=3)
    assert res["n"] == 3 and len(res["times_s"]) == 3 and all(t > 0 for t in res["times_s"])
    assert 0 < res["median_s"] <= res["p95_s"] < 60
