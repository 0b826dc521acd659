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


# ---- projector sizes: nothing cut off ------------------------------------------------------------
PROJECTOR_SIZES = ((1024, 768), (1280, 720))
# Every visible element of the page (main and sidebar) with text of its own, whose box, or a box
# that clips it, is narrower than its content: an "…" or a cut word. Screen-reader-only text (1 px)
# and the hidden footer do not count. For each plotly chart, the title, axis titles and legend
# must lie inside the chart's box (plotly clips what does not), and the legend must not cover
# the title.
CUT_OFF_JS = r"""() => {
  const roots = [...document.querySelectorAll('[data-testid=stMain], [data-testid=stSidebar]')];
  const text = [];
  for (const root of roots) for (const el of root.querySelectorAll('*')) {
    if (el.closest('svg, .js-plotly-plot, .st-key-render_marker')) continue;
    if (![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
    const r = el.getBoundingClientRect(), style = getComputedStyle(el);
    if (r.width <= 1 || r.height <= 1 || style.visibility === 'hidden') continue;
    for (let e = el, i = 0; e && e !== root && i < 4; e = e.parentElement, i++) {
      const s = getComputedStyle(e);
      const clips = e === el || s.overflowX !== 'visible' || s.textOverflow === 'ellipsis';
      if (clips && e.scrollWidth > e.clientWidth + 1) {
        text.push(`${el.textContent.trim().slice(0, 60)} (${e.scrollWidth - e.clientWidth} px)`);
        break;
      }
    }
  }
  const charts = [];
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const box = plot.querySelector('.main-svg').getBoundingClientRect();
    const title = plot.querySelector('text.gtitle'), legend = plot.querySelector('g.legend');
    const name = title ? title.textContent : '(untitled)';
    const parts = [...plot.querySelectorAll('text.gtitle, text[class*="xtitle"], text[class*="ytitle"]')];
    if (legend) parts.push(legend);
    for (const part of parts) {
      const r = part.getBoundingClientRect();
      const out = Math.max(box.left - r.left, r.right - box.right, box.top - r.top, r.bottom - box.bottom);
      if (r.width > 0 && out > 0.5)
        charts.push(`${name}: ${part.textContent.slice(0, 40)} sticks out ${out.toFixed(1)} px`);
    }
    if (title && legend) {
      const a = title.getBoundingClientRect(), b = legend.getBoundingClientRect();
      if (Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5
          && Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5)
        charts.push(`${name}: legend covers the title`);
    }
  }
  return {text, charts, height: document.querySelector('[data-testid=stMain]').scrollHeight};
}"""


def wait_for_every_chart(page) -> None:
    """Until every chart on the page has been drawn, and the page's fonts are in."""
    page.wait_for_function(
        "() => { const n = document.querySelectorAll('[data-testid=stPlotlyChart]').length;"
        " return n > 0 && document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2 * n; }",
        timeout=120_000)
    page.evaluate("() => document.fonts.ready.then(() => new Promise(r => requestAnimationFrame(r)))")


def open_view(browser, base: str, query: str, width: int, height: int):
    view = browser.new_page(viewport={"width": width, "height": height})
    view.goto(base + query)
    bl.wait_for_view(view, 1)
    wait_for_every_chart(view)
    return view


@pytest.mark.parametrize("query", ["", "?presentation=1"], ids=["normal", "presentation"])
def test_nothing_is_cut_off_at_projector_sizes(page, query):
    """The default page at the sizes of classroom projectors: no label ends in "…", no chart's
    title or legend runs out of its chart."""
    base = urlparse(page.url)._replace(query="").geturl()
    for width, height in PROJECTOR_SIZES:
        view = open_view(page.context.browser, base, query, width, height)
        try:
            found = view.evaluate(CUT_OFF_JS)
            mode = "presentation" if query else "normal"
            view.screenshot(path=str(ARTIFACTS / f"projector-{mode}-{width}x{height}.png"))
        finally:
            view.close()
        assert found["text"] == [], (width, height, found["text"])
        assert found["charts"] == [], (width, height, found["charts"])


def caption_px(page) -> float:
    return page.evaluate("() => parseFloat(getComputedStyle(document.querySelector("
                         "'[data-testid=stMain] [data-testid=stCaptionContainer]')).fontSize)")


def test_presentation_mode_keeps_its_type_through_fragment_reruns_and_turns_off(page):
    """The larger type is set by the full page run: a slider's fragment rerun keeps it, and the
    sidebar toggle takes it (and presentation=1 in the URL) away again."""
    base = urlparse(page.url)._replace(query="").geturl()
    view = open_view(page.context.browser, base, "?presentation=1", 1280, 720)
    try:
        normal_px = 14.0                                    # Streamlit's caption size, 0.875rem
        large_px = caption_px(view)
        assert large_px > 1.2 * normal_px
        assert view.get_by_text("What this shows").count() >= 6
        slider = view.get_by_role("slider", name="shape_k")
        slider.focus()
        n = bl.marker_view(view)
        view.keyboard.press("ArrowRight")
        bl.wait_for_view(view, n + 1)
        assert caption_px(view) == large_px and "presentation=1" in view.url
        n = bl.marker_view(view)
        view.get_by_text("Presentation mode").click()
        bl.wait_for_view(view, n + 1)
        assert caption_px(view) == normal_px
        assert view.get_by_text("What this shows").count() == 0
        assert "presentation" not in parse_qs(urlparse(view.url).query)
    finally:
        view.close()
