"""The explorer whose pages make their own frames (the app's $BAM_VIZ_FRAMES=browser) in chromium: the
server sends the sentence's states and makes no frame; the page's worker makes every slider value's frame
(views/live/local.js) at the library's numbers for the same seed, and sends the one its captions read
(views/page_frames.py), whose captions are the library's at that value; with
the server stopped (SIGSTOP) after the states arrive, every slider press still repaints; a graph file that
is cut short is one line on the page, never a blank one. Fails (never skips) when chromium is missing."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import browser_latency as bl
import numpy as np
import pytest

from bam_viz.live import grid as live
from bam_viz.live.frames import STATS, make_frame
from bam_viz.plots import captions
from bam_viz.zoo import load_model
from views import runtime

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SHAPE_K = "shape_k · Weibull shape k (log scale)"
LOCAL = """() => { const l = window.bamviz && window.bamviz.local;
  const s = window.bamviz && window.bamviz.views.summary;
  return l && s ? {problem: l.problem, frames: l.stats.frames, loaded: l.stats.loaded, target: s.h.target,
                   stats: Array.from(s.a.stats.data), columns: s.a.stats.shape[1],
                   painted: Number(s.root.dataset.painted)}
         : null; }"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(URL, the server's process) of the app whose pages make their frames."""
    artifacts = ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    process = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BAM_VIZ_FRAMES", "browser")
        mp.setenv("BAM_VIZ_GRAPHS", str(tmp_path_factory.mktemp("graphs")))
        with bl.serve(ROOT / "app.py", log=artifacts / "browser_local-server.log", process=process) as url:
            yield url, process[0]


def _local(page) -> dict:
    return page.evaluate(LOCAL)


def test_the_page_makes_every_frame_at_the_librarys_numbers(served, browser):
    url, _ = served
    page, first, whole = bl.open_explorer(browser, url, complete=True)
    try:
        got = _local(page)
        assert got["problem"] == "" and got["frames"] == 46 and got["loaded"]["threads"] >= 1
        print(f"first charts {first:.1f} s, every frame {whole:.1f} s; graph {got['loaded']['bytes']} bytes, "
              f"session {got['loaded']['sessionMs']:.0f} ms")
        model = load_model("bam-wc")
        grid = live.LiveGrid(model, bl.SENTENCE_24, 32, 0)
        stats = np.array(got["stats"]).reshape(-1, got["columns"])                       # (G, STATS)
        for i in (0, 20, 45):
            want = make_frame(model, bl.SENTENCE_24, 32, 0, dict(grid.hyper_at(i)), grid.window, rng="portable")
            np.testing.assert_allclose(stats[i], want.stats[got["target"]], rtol=0, atol=2e-5,
                                       err_msg=f"shape_k = {grid.values[i]}: {list(STATS)}")
    finally:
        page.close()


TYPED = """(v) => { const s = window.bamviz.views.summary; const l = window.bamviz.local;
  const i = s.h.slider.values.indexOf(v);
  return i >= 0 && s.h.sentence === l.key && l.frames[i] && s.root.dataset.local === String(l.stats.frames)
    && s.idx.i === i ? {i, frames: l.stats.frames, carried: l.stats.carried, target: s.h.target,
      stats: Array.from(s.a.stats.data.slice(i * s.a.stats.shape[1], (i + 1) * s.a.stats.shape[1])),
      note: s.note.textContent, shown: s.note.hidden} : null; }"""


def test_a_value_typed_between_the_grids_is_computed_here_and_kept(served, browser):
    """shape_k typed in its readout (2.5, between two of the grid's values): the server's grid holds it, the
    page keeps its 46 frames and makes the one more, at the library's numbers; the URL keeps the value.
    Words that are no number say so and change nothing."""
    url, _ = served
    page, _, _ = bl.open_explorer(browser, url, complete=True)
    try:
        box = page.get_by_role("textbox", name="shape_k: type a value")
        box.fill("abc")
        box.press("Enter")
        note = page.locator(".bamviz-slider-caption").first
        assert '"abc" is not a number: shape_k takes a value from 0.2 to 1e+03' in note.inner_text()
        assert box.input_value() == "3"
        box.fill("2.5")
        box.press("Enter")
        got = page.wait_for_function(TYPED, arg=2.5, timeout=120_000).json_value()
        assert got["carried"] == 46 and got["frames"] == 47, got          # one frame made, the others kept
        model = load_model("bam-wc")
        want = make_frame(model, bl.SENTENCE_24, 32, 0, {"shape_k": 2.5, "beta": 1.0}, list(range(24)),
                          rng="portable")
        np.testing.assert_allclose(got["stats"], want.stats[got["target"]], rtol=0, atol=2e-5)
        page.wait_for_function("() => new URL(location.href).searchParams.get('shape_k') === '2.5'", timeout=60_000)
        beta = page.get_by_role("textbox", name="beta: type a value")          # the prior's: no frame to make
        beta.fill("0.7")
        beta.press("Enter")
        inside = """() => { const v = window.bamviz.views.inside; const l = window.bamviz.local;
            const j = v && v.h.prior_slider.values.indexOf(0.7);
            return j >= 0 && v.idx.j === j && v.h.sentence === l.key ? {carried: l.stats.carried,
              frames: l.stats.frames, kl: Array.from(v.a.kl.data).some(Number.isFinite)} : null; }"""
        got = page.wait_for_function(inside, timeout=120_000).json_value()
        assert got == {"carried": 47, "frames": 47, "kl": True}, got
        box.fill("1e9")
        box.press("Enter")
        assert "1e+09 is outside the range" in note.inner_text() and box.input_value() == "1000"
    finally:
        page.close()


CAPTIONS = """() => { const s = window.bamviz.views.summary;
  const m = document.querySelector('.st-key-render_marker');
  return {captions: s.h.captions, at: s.h.captions_at, sent: window.bamviz.local.sent,
          turns: window.bamviz.local.stats.turns, footer: m ? m.innerText : ''}; }"""
NUMBER = re.compile(r"[-+−]?\d+\.\d+")


def _same_prose(ours: str, theirs: str, atol: float = 1.5e-3) -> None:
    """The same caption but for the last digit of a number: the page's numbers are float32 WASM's, equal
    to the library's within 2e-5, which may round a printed decimal the other way."""
    assert NUMBER.sub("#", ours) == NUMBER.sub("#", theirs), (ours, theirs)
    got, want = ([float(x.replace("−", "-")) for x in NUMBER.findall(c)] for c in (ours, theirs))
    np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=ours)


OWN = "a sentence of this test's own, which no other page shows"


def test_the_captions_are_written_from_the_pages_frame(served, browser):
    """The value a slider rests at is captioned from the frame the page sends once the server gives it its
    turn (the server makes no frame but the first, for a user alone, which a test before this one's leaves it
    not: its footer counts one or none), and says what the library's explain() says there."""
    from urllib.parse import quote

    url, _ = served
    page, _, _ = bl.open_explorer(browser, url, query=f"?model=bam-wc&n_samples=32&seed=0&text={quote(OWN)}",
                                  complete=True)
    try:
        wait = "() => { const h = window.bamviz.views.summary.h; return h.captions && h.captions.prediction; }"
        page.wait_for_function(wait, timeout=120_000)
        before = page.evaluate("() => window.bamviz.views.summary.h.captions_at[0]")
        bl.press_live(page, SHAPE_K, 2, pause_ms=50)
        page.wait_for_function("""(before) => { const h = window.bamviz.views.summary.h;
            const here = h.slider.values.indexOf(window.bamviz.values[h.slider.name]);
            return here !== before && h.captions && h.captions.prediction && h.captions_at[0] === here; }""",
                               arg=before, timeout=120_000)
        got = page.evaluate(CAPTIONS)
        # each frame sent after a turn the live route gave (views/turns.py)
        assert got["sent"] >= 1 and got["turns"] >= got["sent"], got
        assert re.search(r"slider grid [01]/46", got["footer"]), got
        model = load_model("bam-wc")
        grid = live.LiveGrid(model, OWN, 32, 0)
        i, j = got["at"]
        result = live.FrameResult(grid, i, j, "predicted")              # made here, by the server's code
        _same_prose(got["captions"]["prediction"], captions.prediction_caption(result))
        assert f"{grid.values[i]:.3g}" in got["footer"]
    finally:
        page.close()


def test_a_sentence_other_pages_show_is_captioned_by_one_frame_of_the_servers(served, browser):
    """Two pages on one sentence (a class's first page, a lesson's step): the second's captions come from a
    frame the server made once for both, with its first payload; that page sends none."""
    from urllib.parse import quote

    url, _ = served
    query = "?model=bam-wc&n_samples=32&seed=0&text=" + quote("a sentence two pages of this test show")
    first, _, _ = bl.open_explorer(browser, url, query=query, complete=False)
    second = None
    try:
        second, _, _ = bl.open_explorer(browser, url, query=query, complete=False)
        second.wait_for_function("() => { const h = window.bamviz.views.summary.h; "
                                 "return h.captions && h.captions.prediction; }", timeout=120_000)
        got = second.evaluate(CAPTIONS)
        assert got["sent"] == 0 and "slider grid 1/46" in got["footer"], got
    finally:
        first.close()
        if second is not None:
            second.close()


def test_with_the_server_stopped_every_press_repaints(served, browser):
    url, process = served
    page, _, _ = bl.open_explorer(browser, url, complete=True)
    try:
        before = _local(page)
        os.kill(process.pid, signal.SIGSTOP)
        try:
            times = bl.press_live(page, SHAPE_K, 8, pause_ms=50)
        finally:
            os.kill(process.pid, signal.SIGCONT)
        after = _local(page)
        assert after["painted"] >= before["painted"] + 8 and after["problem"] == ""
        print(f"8 presses with the server stopped: {[round(1000 * t) for t in times]} ms")
    finally:
        page.close()


def test_a_graph_cut_short_is_one_line_on_the_page(served, browser):
    """A model whose graph no page has fetched yet (the server keeps a served file in memory: it never
    changes under its name), its served copy cut before the first fetch."""
    url, _ = served
    model = load_model("bam-lc")
    graph = runtime.frame_graph(model, 32)                       # exported and linked here, as the server does
    served_file = runtime.GRAPHS / graph["graph"].rstrip("/").split("/")[-2] / graph["manifest"]["graph"]
    data = served_file.read_bytes()
    served_file.unlink()                         # a hard link to the cache: a new file, the cache untouched
    served_file.write_bytes(data[: len(data) // 3])
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/?model=bam-lc&n_samples=32&seed=0")
        page.wait_for_selector(".bamviz-local-problem", timeout=120_000)
        line = page.inner_text(".bamviz-local-problem")
        assert line.startswith("This browser could not compute the explorer's frames:") and "the frame graph at" in line
        assert f"is {len(data) // 3} bytes, not the {len(data)} of its manifest" in line and "\n" not in line
        assert page.locator(".bamviz-metric-value").count() == 5            # the page is drawn, not blank
        page.close()
    finally:
        served_file.unlink()
        served_file.write_bytes(data)


def test_a_sentence_of_512_tokens_is_cut_to_the_models_length_said_and_computed(served, browser):
    """The model reads at most 128 tokens: the page says so in one line, and its frames are of those."""
    from urllib.parse import quote

    url, _ = served
    words = " ".join(["the film was long and loud but the actors were wonderful"] * 48)     # over 512 pieces
    page, first, _ = bl.open_explorer(browser, url, query=f"?model=bam-wc&n_samples=32&seed=0&text={quote(words)}",
                                      complete=False)
    try:
        assert page.get_by_text("The text is longer than this model's maximum of 128 tokens").count() >= 1
        t0 = time.perf_counter()                  # the first charts are the server's frame; then the page's
        page.wait_for_function("() => window.bamviz.local.stats.frames >= 1 || window.bamviz.local.problem",
                               timeout=120_000)
        got = _local(page)
        assert got["problem"] == "" and got["frames"] >= 1
        later = time.perf_counter() - t0
        print(f"a 128-token sentence: first charts {first:.1f} s, the page's first frame {later:.1f} s later")
    finally:
        page.close()


def test_a_long_sentences_other_token_window_is_made_here_and_captioned(served, browser):
    """A long sentence's maps show a window of its tokens; another window is another grid: the page makes
    its frames again and the inside panel is captioned."""
    from urllib.parse import quote

    url, _ = served
    words = " ".join(["the film was long and loud but the actors were wonderful"] * 4)       # about 50 tokens
    page, _, _ = bl.open_explorer(browser, url, query=f"?model=bam-wc&n_samples=8&seed=0&text={quote(words)}",
                                  complete=False)
    try:
        inside = """(key) => { const v = window.bamviz.views.inside; const l = window.bamviz.local;
            return v && v.h && v.h.sentence !== key && v.h.sentence === l.key && l.frames[v.h.slider.current]
                   && v.h.captions && v.h.captions.maps ? {key: v.h.sentence, window: v.h.window} : null; }"""
        first = page.wait_for_function(inside, arg=None, timeout=120_000).json_value()
        thumb = page.get_by_role("slider", name=re.compile("Tokens shown"))
        thumb.focus()
        for _ in range(5):
            thumb.press("ArrowRight")
        second = page.wait_for_function(inside, arg=first["key"], timeout=120_000).json_value()
        assert second["window"] != first["window"] and second["window"][0] == 0          # [CLS] stays
        got = page.evaluate("() => document.querySelector('.st-key-render_marker').innerText")
        assert re.search(r"slider grid [01]/", got)    # at most one, made for a user alone (`ALONE_S`)
    finally:
        page.close()
