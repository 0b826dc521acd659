"""A release in the real app, in headless Debian chromium. Where the server makes the frames
(BAM_VIZ_FRAMES=server), the live route answers it (views/live_route.py), so the charts and their
captions move to the released value while the server's footer still shows the last run; where the page
makes them (the app's default) the route is not asked, and the captions come with the values' run.
Either way the values reach Session State, the footer and the URL once the slider rests.

Fails (never skips) when chromium is missing.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import browser_latency as bl
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.browser
FOOTER_JS = "() => { const m = document.querySelector('.st-key-render_marker'); return m ? m.innerText : ''; }"
# What the summary draws: the route's answers so far, the values its captions were written for, and
# the slider value the browser holds, as an index on the summary's grid.
STATE_JS = """() => {
  const b = window.bamviz, h = b.views.summary && b.views.summary.h;
  if (!h || !h.slider) return null;
  const want = h.slider.values.indexOf(b.values[h.slider.name]);
  return { answers: b.route.answers, at: h.captions_at[0], want, value: b.values[h.slider.name],
           route: h.route, inside: b.views.inside && b.views.inside.h ? b.views.inside.h.captions_at[0] : null };
}"""


@pytest.mark.parametrize("frames", ["server", "browser"])
def test_a_release_is_answered_by_the_route_then_the_values_reach_the_url(frames, monkeypatch):
    monkeypatch.setenv("BAM_VIZ_FRAMES", frames)
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with bl.explorer_session(log=ROOT / "artifacts" / "browser-route-server.log") as page:
        box = page.get_by_label("Sentence (text)")
        text = "the cast is charming but the story never finds its feet"
        box.fill(text)
        box.press("Control+Enter")
        shows = f"text {hashlib.sha256(text.encode()).hexdigest()[:8]} "        # views.explorer.text_tag
        page.wait_for_function(f"({FOOTER_JS})().includes({shows!r})", timeout=60_000)
        before, view = page.evaluate(STATE_JS), bl.marker_view(page)
        assert before["route"].startswith("/_bamviz/live?t=")
        page.locator("input.bamviz-range").first.focus()
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        if frames == "browser":
            value = page.evaluate("() => window.bamviz.values.shape_k")
            k = f"shape_k={value:.3g}"
            page.wait_for_function(f"({FOOTER_JS})().includes({k!r})", timeout=30_000)
            page.wait_for_function(f"() => ({STATE_JS})().at === {before['want'] + 2}", timeout=30_000)
            seen = page.evaluate(STATE_JS)
            assert seen["answers"] == before["answers"] and seen["want"] == before["want"] + 2   # no route asked
            assert bl.marker_view(page) > view and k in page.url
            return
        deadline, seen = time.monotonic() + 30, None
        while time.monotonic() < deadline:
            seen = page.evaluate(STATE_JS)
            if seen["at"] == seen["inside"] == seen["want"] and seen["answers"] > before["answers"]:
                break
            page.wait_for_timeout(20)
        assert seen["at"] == seen["want"] == before["want"] + 2 and seen["inside"] == seen["want"], (before, seen)
        answered = page.evaluate(FOOTER_JS)
        assert bl.marker_view(page) == view and "shape_k=3 " in answered      # no run of the page yet
        k = f"shape_k={seen['value']:.3g}"
        page.wait_for_function(f"({FOOTER_JS})().includes({k!r})", timeout=30_000)
        assert bl.marker_view(page) > view and k in page.url
