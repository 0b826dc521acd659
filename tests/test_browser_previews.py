"""A preview in the real app, in headless Debian chromium: with $BAM_VIZ_PREVIEWS=always every frame a
request waits for draws a quarter of the samples, as it does under a class's load. The page draws it
at once and says so ("8 of 32 samples for now"), and draws the whole frame when it comes, without
the note.

Fails (never skips) when chromium is missing.
"""

from __future__ import annotations

import time
from pathlib import Path

import browser_latency as bl
import pytest

from bam_viz.core.labels import LABELS
from bam_viz.live import frames

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.browser
NOTE = LABELS["preview"].format(drawn=frames.preview_samples(32), total=32)     # "8 of 32 samples for now"
READ_JS = """() => {
  const sub = document.querySelector('.bamviz-metric[data-metric="p_mc"] .bamviz-metric-sub');
  const hist = [...document.querySelectorAll('.bamviz-title')].find((t) => t.textContent.includes('attention sample'));
  return [sub ? sub.textContent : '', hist ? hist.textContent : ''];
}"""


def test_a_preview_is_drawn_at_once_says_so_and_the_whole_frame_replaces_it(monkeypatch):
    monkeypatch.setenv(frames.PREVIEWS_ENV, "always")
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with bl.explorer_session(log=ROOT / "artifacts" / "browser-previews-server.log") as page:
        box = page.get_by_label("Sentence (text)")
        box.fill("the cast is charming but the story never finds its feet")
        box.press("Control+Enter")
        seen, deadline = [], time.monotonic() + 60
        while time.monotonic() < deadline:             # every headline the page shows, until the note goes
            seen.append(page.evaluate(READ_JS))
            if any(NOTE in sub for sub, _ in seen) and NOTE not in seen[-1][0] and "±" in seen[-1][0]:
                break
            page.wait_for_timeout(40)
        previews = [(sub, hist) for sub, hist in seen if NOTE in sub]
        assert previews, seen[-5:]
        assert all("±" in sub and NOTE in hist and "8 attention samples" in hist for sub, hist in previews)
        last_sub, last_hist = seen[-1]
        assert NOTE not in last_sub and "±" in last_sub and "32 attention samples" in last_hist, seen[-1]
