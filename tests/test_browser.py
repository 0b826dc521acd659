"""The real app in headless Debian chromium: type, move shape_k with the keyboard, see the charts
change without the server, and the URL follow on release.

Fails (never skips) when chromium is missing. Screenshots land in artifacts/ (git-ignored).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import browser_latency as bl
import pytest

from bam_viz.live import grid as live

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"

pytestmark = pytest.mark.browser
SHAPE_K = "shape_k · Weibull shape k (log scale)"


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with bl.serve(ROOT / "app.py", log=ARTIFACTS / "browser-test-server.log") as url, \
            sync_playwright() as p:
        browser = bl.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            bl.painted(page, complete=True)
            page.errors = errors
            yield page
        finally:
            browser.close()


def canvases(page) -> list[str]:
    """Every chart canvas's pixels, as data URLs, in page order (the ones off screen brought up to date)."""
    bl.painted(page, settled=True)
    return page.evaluate("() => [...document.querySelectorAll('.bamviz-root canvas')].map(c => c.toDataURL())")


def submit_text(page, text: str) -> None:
    """Type `text` into the sentence box, submit it, and wait for its charts, every slider value, and
    the server to be done (its polling for new frames stopped)."""
    bl.new_sentence(page, text)
    idle(page)


def idle(page, quiet_s: float = 1.0) -> None:
    """Until the footer's view count has not moved for `quiet_s` and nothing runs."""
    view = -1
    while view != bl.marker_view(page):
        view = bl.marker_view(page)
        page.wait_for_timeout(1000 * quiet_s)
    bl.wait_for_view(page, view)


def url_value(page, name: str) -> float | None:
    """From the page's own location: Playwright's `page.url` can miss a history.replaceState."""
    values = parse_qs(urlparse(page.evaluate("() => location.href")).query).get(name)
    return float(values[0]) if values else None


def test_sliders_move_the_charts_in_the_browser_and_the_url_on_release(page):
    submit_text(page, "A quiet, strange and quite lovely little film.")
    before = canvases(page)
    page.screenshot(path=str(ARTIFACTS / "browser-before.png"))
    slider = page.get_by_role("slider", name=SHAPE_K)
    slider.focus()
    start = float(slider.get_attribute("aria-valuetext"))
    view = bl.marker_view(page)
    for _ in range(4):                       # four grid steps (~21% each; one to leave the trained k)
        page.keyboard.press("ArrowRight")
        bl.painted(page)
    # painted with no server run in between: the footer still counts the same view
    assert bl.marker_view(page) == view
    moved = float(slider.get_attribute("aria-valuetext"))
    step = 10 ** (1 / live.POSTERIOR_PER_DECADE)
    assert start * step ** 2.5 < moved < start * step ** 4 * 1.05           # the trained k sits between two steps
    after = canvases(page)
    page.screenshot(path=str(ARTIFACTS / "browser-after.png"))
    assert len(after) == len(before) and after != before
    # released: the value reaches the server, then the URL
    page.wait_for_function("v => new URLSearchParams(location.search).get('shape_k') !== null && "
                           "Math.abs(parseFloat(new URLSearchParams(location.search).get('shape_k')) - v) < 0.01 * v",
                           arg=moved, timeout=30_000)
    assert url_value(page, "shape_k") == pytest.approx(moved, rel=5e-3)
    assert page.errors == []


def test_the_prior_slider_changes_only_the_prior_panels(page):
    summary = page.locator(".bamviz-root[data-kind=summary] canvas")
    before_summary = [summary.nth(i).evaluate("c => c.toDataURL()") for i in range(summary.count())]
    before = canvases(page)
    beta = page.get_by_role("slider", name="beta · Gamma prior rate β (log scale)")
    beta.focus()
    for _ in range(3):
        page.keyboard.press("ArrowLeft")
        bl.painted(page)
    assert [summary.nth(i).evaluate("c => c.toDataURL()") for i in range(summary.count())] == before_summary
    assert canvases(page) != before


def std_map_darkness(page) -> float:
    """1 - mean luminance (0 white, 1 black) of the std map's cells, read from the canvas where
    views/live/inside.js says it drew the map (`data-maps` on the canvas: each map's box in canvas pixels)."""
    bl.painted(page, settled=True)
    return page.evaluate("""() => {
        const c = [...document.querySelectorAll('.bamviz-root canvas')].find(c => c.dataset.maps);
        const box = JSON.parse(c.dataset.maps).find(m => m.title.startsWith('std'));
        const px = c.getContext('2d').getImageData(box.x, box.y, box.w, box.h).data;
        let sum = 0;
        for (let i = 0; i < px.length; i += 4) sum += (0.2126 * px[i] + 0.7152 * px[i + 1] + 0.0722 * px[i + 2]) / 255;
        return 1 - sum / (px.length / 4);
    }""")


def set_slider(page, name: str, value_index: int) -> None:
    """Move a live slider to a grid index as a user would (Home, then ArrowRight)."""
    slider = page.get_by_role("slider", name=name)
    slider.focus()
    page.keyboard.press("Home")
    bl.painted(page)
    for _ in range(value_index):
        page.keyboard.press("ArrowRight")
    bl.painted(page)


def test_colour_scales_are_fixed_so_certainty_reads_pale(page):
    """The std map is coloured over 0 to 0.5 whatever the values: at k = 1000 it is near white, at
    k = 0.2 it is not (a relative scale would stretch both to full orange)."""
    set_slider(page, SHAPE_K, 0)                                    # k = 0.2
    uncertain = std_map_darkness(page)
    page.keyboard.press("End")                                      # k = 1000
    bl.painted(page)
    certain = std_map_darkness(page)
    assert certain < 0.05 and uncertain > certain + 0.05, (uncertain, certain)


def test_the_footer_is_hidden_yet_readable_and_shown_with_debug(page):
    """The footer is debug text: hidden from users, still read by the benchmarks, shown with debug=1."""
    marker = page.locator(".st-key-render_marker")
    assert marker.is_hidden() and bl.marker_view(page) > 0
    url = urlparse(page.url)
    page.goto(url._replace(query=url.query + "&debug=1").geturl())
    bl.wait_for_view(page, 1)
    assert marker.is_visible() and marker.inner_text().startswith("view ")
    assert "slider grid" in marker.inner_text()
    page.goto(url.geturl())                  # back to the user's page for the tests that follow
    bl.painted(page, complete=True)


def test_the_page_asks_nothing_of_the_network(page):
    """Every request the page makes goes to its own server: a classroom may have no internet."""
    base = urlparse(page.url)._replace(path="", query="").geturl()
    view = page.context.browser.new_page(viewport={"width": 1280, "height": 720})
    outside = []
    view.on("request", lambda r: None if r.url.startswith((base, "data:", "blob:")) else outside.append(r.url))
    try:
        view.goto(base)
        bl.painted(view, settled=True)
        view.get_by_text("About / theory").click()
        view.wait_for_timeout(1500)
    finally:
        view.close()
    assert outside == []


def test_an_uncaught_error_shows_no_traceback_or_path(page):
    """With the repository's .streamlit/config.toml (showErrorDetails none), a page that raises shows
    the user no traceback, no exception text and no server path."""
    with bl.serve(ROOT / "tests" / "data" / "raising_app.py") as url:
        view = page.context.browser.new_page()
        try:
            view.goto(url)
            view.get_by_text("before the failure").wait_for(timeout=60_000)
            view.wait_for_timeout(1000)
            shown = view.locator("[data-testid=stMain]").inner_text()
        finally:
            view.close()
    assert "before the failure" in shown
    for secret in ("Traceback", "internal detail", "raising_app.py", str(ROOT)):
        assert secret not in shown, secret


def test_hostile_text_renders_as_text(page):
    submit_text(page, "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned=2'> fine")
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("script:text('__pwned')").count() == 0
    assert page.locator(".bamviz-root img").count() == 0
    page.screenshot(path=str(ARTIFACTS / "browser-hostile.png"))
    assert page.errors == []


def test_the_benchmarks_measure_every_press(page):
    """bench/browser_latency.py times the explorer's live slider (`press_live`) and the trivial page
    (`measure_app`): a positive time for every press."""
    live = bl.press_live(page, SHAPE_K, 3, pause_ms=50)
    assert len(live) == 3 and all(0 < t < 30 for t in live)
    res = bl.measure_app(page.context.browser, ROOT / "bench" / "trivial_app.py", "value", presses=3)
    assert res["n"] == 3 and len(res["times_s"]) == 3 and all(t > 0 for t in res["times_s"])
    assert 0 < res["median_s"] <= res["p95_s"] < 60



def test_the_page_clock_counts_the_wait_of_a_busy_page(page):
    """bench/load.py judges presses on the page's own clock (`PRESS_CLOCK_JS`): it must start when the
    browser received the key, not when a busy page got round to it, or a class's slowest presses
    would go unseen. A press sent while a task holds the page's main thread for 400 ms measures at
    least that; one on an idle page, far less; both directions of the slider are timed."""
    page.evaluate(bl.PRESS_CLOCK_JS)
    slider = page.get_by_role("slider", name=SHAPE_K)
    slider.focus()
    for key, busy_ms in (("ArrowRight", 0), ("ArrowLeft", 400), ("ArrowRight", 0)):
        if busy_ms:
            page.evaluate(f"""() => {{ setTimeout(() => {{ const t = performance.now();
                                                           while (performance.now() - t < {busy_ms}) {{}} }}, 0); }}""")
        page.keyboard.press(key)
        bl.painted(page)
        page.wait_for_timeout(300)
    times = page.evaluate("() => window.__press")
    assert len(times) == 3, times
    assert times[1] >= 390 and times[0] < 300 and times[2] < 300, times


def test_each_chart_view_is_made_once_a_page(page):
    """After the sentences and slider moves of the tests above, each of the three views (sliders,
    summary, inside) was made once since the page loaded: a rerun that rebuilds an element adopts
    its view (arrays, canvases) rather than starting a blank one that fetches its payload again."""
    submit_text(page, "Two new sentences in a row, to rebuild what can be rebuilt.")
    submit_text(page, "And a second one, shorter.")
    made = page.evaluate("() => window.bamviz.mounts")
    assert made == {"sliders": 1, "summary": 1, "inside": 1}, made

# ---- projector sizes: nothing cut off ------------------------------------------------------------
PROJECTOR_SIZES = ((1024, 768), (1280, 720))
# Every visible element of the page (main and sidebar) with text of its own, whose box, or a box
# that clips it, is narrower than its content: an "…" or a cut word. Screen-reader-only text (1 px)
# and the hidden footer do not count. Every chart canvas must lie inside its component's box.
CUT_OFF_JS = r"""() => {
  const roots = [...document.querySelectorAll('[data-testid=stMain], [data-testid=stSidebar]')];
  const text = [];
  for (const root of roots) for (const el of root.querySelectorAll('*')) {
    if (el.closest('.st-key-render_marker')) continue;
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
  for (const root of document.querySelectorAll('.bamviz-root')) {
    const box = root.getBoundingClientRect();
    for (const c of root.querySelectorAll('canvas')) {
      const r = c.getBoundingClientRect();
      if (r.width > 0 && (r.right > box.right + 0.5 || r.left < box.left - 0.5))
        charts.push(`${c.getAttribute('aria-label')}: ${(r.right - box.right).toFixed(1)} px out`);
    }
  }
  return {text, charts, height: document.querySelector('[data-testid=stMain]').scrollHeight};
}"""


def open_view(browser, base: str, query: str, width: int, height: int):
    view = browser.new_page(viewport={"width": width, "height": height})
    view.goto(base + query)
    bl.painted(view)
    view.evaluate("() => document.fonts.ready.then(() => new Promise(r => requestAnimationFrame(r)))")
    return view


@pytest.mark.parametrize("query", ["", "?presentation=1"], ids=["normal", "presentation"])
def test_nothing_is_cut_off_at_projector_sizes(page, query):
    """The default page at the sizes of classroom projectors: no label ends in "…", no chart runs
    out of its box."""
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


def test_presentation_mode_folds_the_prose_and_turns_off(page):
    """presentation=1: larger type, every panel's prose folded under "What this shows"; a slider
    move keeps it; the sidebar toggle takes it (and presentation=1 in the URL) away again."""
    base = urlparse(page.url)._replace(query="").geturl()
    view = open_view(page.context.browser, base, "?presentation=1", 1280, 720)
    try:
        normal_px = 14.0                                    # Streamlit's caption size, 0.875rem
        assert caption_px(view) > 1.2 * normal_px
        assert view.locator(".bamviz-root.presentation").count() == 3
        assert view.get_by_text("What this shows").count() >= 6
        slider = view.get_by_role("slider", name=SHAPE_K)
        slider.focus()
        view.keyboard.press("ArrowRight")
        bl.painted(view)
        assert view.locator(".bamviz-root.presentation").count() == 3
        assert "presentation=1" in view.evaluate("() => location.href")
        n = bl.marker_view(view)
        view.get_by_text("Presentation mode").click()
        bl.wait_for_view(view, n + 1)
        bl.painted(view)
        view.wait_for_function("() => document.querySelectorAll('.bamviz-root.presentation').length === 0")
        assert caption_px(view) == normal_px
        assert view.get_by_text("What this shows").count() == 0
        assert "presentation" not in parse_qs(urlparse(view.evaluate("() => location.href")).query)
    finally:
        view.close()


PAGE_TITLES = {"corpus": "Corpus: where the model", "about": "About: Bayesian Attention Modules",
               "theory": "Theory lab", "lessons": "Lessons"}


def test_no_page_opened_at_its_own_address_logs_an_error(page):
    """Each page opened at its address shows its title, with nothing in the console and no failed request:
    Streamlit's frontend would otherwise probe `<page>/_stcore/health` and `.../host-config` first and log
    their 404s (views.serving.BackendBase tells it the server's address)."""
    root = page.evaluate("() => location.origin")
    for path, title in PAGE_TITLES.items():
        problems = _opened_quietly(page.context.browser, f"{root}/{path}", title)
        assert problems == [], f"/{path}: {problems}"


def _opened_quietly(browser, url: str, title: str) -> list[str]:
    """What a new page at `url` logs (console errors and warnings, failed requests) until its `title`
    shows and 1.5 s after."""
    other, problems = browser.new_page(), []
    other.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    other.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    other.on("requestfailed", lambda r: problems.append(f"failed {r.url}"))
    try:
        other.goto(url)
        other.get_by_role("heading", name=title).first.wait_for(timeout=120_000)
        other.wait_for_timeout(1500)
    finally:
        other.close()
    return problems
