"""bam_viz.live.posted and views.page_frames: the frame a page makes, sent back as its numbers (as
views/live/local.js sends them: JSON, 9 significant digits), writes the captions the server's own frame
writes, word for word; numbers that are not a frame of the grid are refused with one line; and a grid whose
frames the page makes waits for them without making one."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import bam_viz
from bam_viz.live import grid as live
from bam_viz.live import scheduler
from bam_viz.live.posted import MAP_FIELDS, ROW_FIELDS, read_posted
from bam_viz.plots import captions
from bam_viz.plots.tokens import token_window, window_around
from views import panels

SHORT = "The acting is superb, but the plot is a tedious mess."
LONG = " ".join(["A slow, handsome film whose second half never finds the nerve of its first,"] * 3)


def _sent(a) -> list:
    """As local.js rounds a number (toPrecision(9); null for NaN), through JSON."""
    return [None if not np.isfinite(v) else float(f"{v:.9g}") for v in np.asarray(a, dtype=np.float64).ravel()]


def numbers_of(grid, i: int, others=()) -> dict:
    """The numbers a page sends of frame i of `grid` (made here, by the server: the same numbers), and the
    stats of frames `others` in the sweep."""
    f = grid.frame(i)
    rows = {}
    for layer, (row, block) in f.rows.items():
        r = {name: (np.asarray(getattr(row, name)).ravel().tolist() if name == "top" else _sent(getattr(row, name)))
             for name in ROW_FIELDS}
        r |= {"query": block.query.tolist(), "key": block.key.tolist(), "std_max": _sent(block.std_max),
              "std_mean": _sent(block.std_mean), "map_share": _sent(block.share)}
        rows[str(layer)] = r
    sweep = [None] * len(grid.values)
    for k in (*others, i):
        sweep[k] = _sent(grid.frame(k).stats)
    got = {"sentence": grid.sentence_key, "index": i, "n_samples": grid.n_samples, "stats": _sent(f.stats),
           "p_samples": _sent(f.p_samples), "spread": _sent(f.spread), "rows": rows, "sweep": sweep}
    return json.loads(json.dumps(got))


def posted(grid, numbers):
    return read_posted(numbers, grid, grid.kl_table(numbers["index"]))


@pytest.fixture(scope="module")
def models():
    return {name: bam_viz.load(name) for name in ("bam-wc", "dirichlet", "categorical")}


def all_captions(result, grid, model) -> list[str]:
    out = [captions.prediction_caption(result), captions.monte_carlo_caption(result),
           captions.layer_head_caption(result), captions.layer_head_caption(result, relative=True)]
    for layer in model.config.stochastic_layers:
        for head in (0, model.n_heads - 1):
            out.append(captions.sampled_maps_caption(result, layer, head, shown=grid.window))
            for query in (grid.window[0], grid.window[len(grid.window) // 2], grid.window[-1]):
                out.append(captions.prior_posterior_caption(result, layer, head, query, shown=grid.window))
                out.append(captions.key_density_caption(result, layer, head, query, grid.window[1]))
    return out


@pytest.mark.parametrize("name", ["bam-wc", "dirichlet", "categorical"])
def test_a_sent_frame_captions_as_the_servers_frame(models, name):
    model = models[name]
    grid = live.LiveGrid(model, SHORT, 8, 3)
    G, B = len(grid.values), len(grid.prior_values)
    for i, j in {(0, 0), (G // 2, B - 1), (G - 1, B // 2)}:
        sent = posted(grid, numbers_of(grid, i, others=(0, G - 1)))
        for target in (None, 0, 1):
            ours = live.FrameResult(grid, i, j, target, posted=sent)
            theirs = live.FrameResult(grid, i, j, target)
            assert not ours.waiting and ours.target == theirs.target and ours.predicted == theirs.predicted
            assert all_captions(ours, grid, model) == all_captions(theirs, grid, model)
            # the sweep's caption reads the frames the page made: here the same three as the grid's
            assert panels.summary_captions(ours, grid) == panels.summary_captions(theirs, grid)


def test_a_long_sentences_window(models):
    model = models["bam-wc"]
    T = len(model.tokenizer.encode(LONG)[0])
    window = token_window(T, window_around(T, T // 2))
    grid = live.LiveGrid(model, LONG, 4, 0, window=window)
    sent = posted(grid, numbers_of(grid, 5))
    assert all_captions(live.FrameResult(grid, 5, 1, posted=sent), grid, model) == all_captions(
        live.FrameResult(grid, 5, 1), grid, model)


def _broken(numbers: dict, path: tuple, value) -> dict:
    out = json.loads(json.dumps(numbers))
    at = out
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    return out


def test_numbers_that_are_not_a_frame_of_the_grid_are_refused(models):
    model = models["bam-wc"]
    grid = live.LiveGrid(model, SHORT, 4, 0)
    good = numbers_of(grid, 3)
    layer = str(model.config.stochastic_layers[-1])
    H, T = model.n_heads, grid.T
    broken = {
        "another sentence": _broken(good, ("sentence",), "0" * 16),
        "an index past the slider": _broken(good, ("index",), len(grid.values)),
        "a bool index": _broken(good, ("index",), True),
        "other samples": _broken(good, ("n_samples",), 8),
        "a short stats": _broken(good, ("stats",), good["stats"][:-1]),
        "a probability over 1": _broken(good, ("p_samples", 0), 1.5),
        "a null probability": _broken(good, ("p_samples", 0), None),
        "a NaN probability (JSON's NaN, which Python reads)": _broken(good, ("p_samples", 0), float("nan")),
        "an infinite estimate": _broken(good, ("stats", 0), float("inf")),
        "a string": _broken(good, ("spread", 0), "0.1"),
        "a negative spread": _broken(good, ("spread", 0), -0.1),
        "a top key past the sentence": _broken(good, ("rows", layer, "top", 0), T),
        "a fractional top key": _broken(good, ("rows", layer, "top", 0), 0.5),
        "a map cell outside the window": _broken(good, ("rows", layer, "query", 0), T + 3),
        "a layer that is not random": _broken(good, ("rows", "0"), good["rows"][layer]),
        "a short row": _broken(good, ("rows", layer, "se"), good["rows"][layer]["se"][: H * T - 1]),
        "a short sweep": _broken(good, ("sweep",), good["sweep"][:-1]),
        "a sweep of strings": _broken(good, ("sweep", 0), ["x"] * len(good["stats"])),
        "not an object": [],
    }
    for what, numbers in broken.items():
        with pytest.raises(ValueError) as err:
            read_posted(numbers, grid, grid.kl_table(3))
        assert "\n" not in str(err.value) and str(err.value), what
    assert set(good["rows"][layer]) == {*ROW_FIELDS, *MAP_FIELDS}
    posted(grid, good)                                   # and the good one is read


def test_a_grid_whose_frames_the_page_makes_waits_for_them(models):
    """No frame made on the server: the result waits, with the grid's numbers, and writes no caption."""
    scheduler.FRAMES.use("browser")
    try:
        grid = live.LiveGrid(models["bam-wc"], SHORT + " Again.", 4, 0)
        assert grid.in_browser
        grid.start(7)
        waiting = live.FrameResult(grid, 7, 2)
        assert waiting.waiting and grid.frames == [None] * len(grid.values)
        assert panels.summary_captions(waiting, grid) is None
        assert panels.inside_captions(waiting, 5, 0, 0, 1, False, grid.window) is None
        np.testing.assert_array_equal(waiting.kl, grid.kl_table(7)[2])
        assert waiting.target == int(np.argmax(grid.softmax_probs))
        with pytest.raises(ValueError, match="slider value 3, not 7"):
            live.FrameResult(grid, 7, 0, posted=posted(grid, numbers_of(grid, 3)))
    finally:
        scheduler.FRAMES.use("server")


def test_a_late_frame_is_dropped_and_a_wrong_one_said_in_one_line(models, monkeypatch):
    """A frame of the sentence before (sent as the page's sentence changed) is dropped: the new sentence's
    captions still wait for theirs; numbers that are wrong for this sentence are said; a good one is kept.
    The server makes a frame only while no other explorer runs."""
    from views import page_frames

    session = {}
    monkeypatch.setattr(page_frames, "ss", session)
    scheduler.FRAMES.use("browser")
    try:
        grid = live.LiveGrid(models["bam-wc"], SHORT, 4, 0)
        before = live.LiveGrid(models["bam-wc"], SHORT + " Really.", 4, 0)
    finally:
        scheduler.FRAMES.use("server")
    twin = live.LiveGrid(models["bam-wc"], SHORT, 4, 0)        # the same sentence: what the page sends
    assert twin.sentence_key == grid.sentence_key
    session[page_frames.SENT] = numbers_of(before, 3)
    page_frames.take(grid)
    assert page_frames.problem(grid) is None and page_frames.KEPT not in session and page_frames.SENT not in session
    session[page_frames.SENT] = _broken(numbers_of(twin, 3), ("spread", 0), -1.0)
    page_frames.take(grid)
    assert page_frames.problem(grid).startswith("spread holds a number outside [0, ")
    session[page_frames.SENT] = numbers_of(twin, 3)
    page_frames.take(grid)
    assert page_frames.problem(grid) is None and session[page_frames.KEPT][1].index == 3
    assert not page_frames.result(grid, 3, 0).waiting and grid.frames[3] is None          # the page's frame
    page_frames._running[-1] = 1                       # another session's explorer run in progress
    try:
        assert page_frames.result(grid, 4, 0).waiting and grid.frames[4] is None          # the page's to send
    finally:
        del page_frames._running[-1]
    now = time.monotonic()
    monkeypatch.setattr(page_frames, "_seen", {"another": now - page_frames.ALONE_S + 5})   # ran one 25 s ago
    assert page_frames.result(grid, 4, 0).waiting and grid.frames[4] is None
    page_frames._seen["another"] = now - page_frames.ALONE_S - 1                        # over 30 s ago
    assert not page_frames.result(grid, 4, 0).waiting and grid.frames[4] is not None      # alone: the server's
    assert "another" not in page_frames._seen


def test_a_closed_pages_session_leaves_the_user_alone(monkeypatch):
    """A session whose page closed (the runtime no longer has it active) counts no more, however recent."""
    from streamlit import runtime

    from views import page_frames

    class Runtime:
        def is_active_session(self, session):
            return session == "open"

    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: Runtime())
    monkeypatch.setattr(page_frames, "_seen", {"open": time.monotonic(), "closed": time.monotonic()})
    assert not page_frames._alone() and set(page_frames._seen) == {"open"}
    del page_frames._seen["open"]
    assert page_frames._alone()
