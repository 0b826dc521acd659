"""bam_viz.live.result: a slider grid's frame read as a result writes the captions explain() writes at
the same settings, word for word, for every family, class, layer and query tried, on a short sentence
and in a long one's token window; the one number that differs on purpose, the prior a caption quotes,
is the prior's bar the page draws."""

from __future__ import annotations

import re

import numpy as np
import pytest

import bam_viz
from bam_viz.live import grid as live
from bam_viz.live.wire import unpack
from bam_viz.plots import captions
from bam_viz.plots.tokens import MAX_TICK_TOKENS, token_window, window_around

SHORT = "The acting is superb, but the plot is a tedious mess."
LONG = " ".join(["A slow, handsome film whose second half never finds the nerve of its first,"] * 3)
PRIOR = re.compile(r" \(prior (\d\.\d\d)\)")
FURTHEST = re.compile(r"The head that moved furthest from its prior is layer \d+ head \d+")


@pytest.fixture(scope="module")
def models():
    return {name: bam_viz.load(name) for name in ("bam-wc", "bam-lc", "dirichlet", "categorical", "softmax",
                                                   "mc-dropout")}


def explained(model, grid, i, j, target=None):
    hyper = dict(grid.hyper_at(i, j if grid.prior_spec is not None else None))
    return model.explain(grid.text, n_samples=grid.n_samples, seed=grid.seed, **hyper).for_target(target)


def prior_bar(grid, i, j, layer, head, query, key) -> float:
    """The prior's bar the inside panel draws for `key` (the mean of its draws, or pi)."""
    header, arrays = unpack(live.inside_payload(grid, i, j, layer, head, query, key))
    return float(arrays["prior_row"][j, 0, grid.window.index(key)])


def assert_same_captions(model, grid, i, j, queries, target=None):
    """Every caption of the explorer from the frame equals explain()'s, but the prior quoted, which is
    the prior's bar the page draws."""
    r, f = explained(model, grid, i, j, target), live.FrameResult(grid, i, j, target)
    assert f.target == r.target and f.predicted == r.predicted and f.hyper == r.hyper
    for caption in (captions.prediction_caption, captions.monte_carlo_caption):
        assert caption(f) == caption(r)
    # The grid's KL is the deterministic pass's, summed its own way: equal to float32's precision, so
    # the head named as furthest from its prior is the same unless two heads tie to that precision.
    kl, theirs = np.asarray(f.kl), r.kl.double().numpy()
    np.testing.assert_allclose(kl, theirs, rtol=1e-6, atol=1e-9)
    stochastic = theirs[r.stochastic_layers].ravel()
    tie = stochastic.size > 1 and np.diff(np.sort(stochastic)[-2:])[0] <= 1e-6 * abs(stochastic.max())
    for relative in (False, True):
        ours, them = (captions.layer_head_caption(x, relative=relative) for x in (f, r))
        assert (FURTHEST.sub("", ours) == FURTHEST.sub("", them)) if tie else ours == them
    shown = grid.window
    for layer in range(model.n_layers):
        for head in (0, model.n_heads - 1):
            assert (captions.sampled_maps_caption(f, layer, head, shown=shown)
                    == captions.sampled_maps_caption(r, layer, head, shown=shown))
            for query in queries:
                assert (captions.key_density_caption(f, layer, head, query, 1)
                        == captions.key_density_caption(r, layer, head, query, 1))
                ours = captions.prior_posterior_caption(f, layer, head, query, shown=shown)
                theirs = captions.prior_posterior_caption(r, layer, head, query, shown=shown)
                assert PRIOR.sub("", ours) == PRIOR.sub("", theirs)
                if quoted := PRIOR.search(ours):
                    top = int(f.row_summary(layer, shown).top[head, query])
                    if top in shown:
                        bar = prior_bar(grid, i, j, layer, head, query, top)
                        assert quoted.group(1) == f"{bar:.2f}"
    return f, r


@pytest.mark.parametrize("name", ["bam-wc", "bam-lc", "dirichlet", "categorical", "softmax", "mc-dropout"])
def test_a_frame_captions_as_explain_does(models, name):
    model = models[name]
    grid = live.LiveGrid(model, SHORT, 8, 3)
    G, B = len(grid.values), len(grid.prior_values)
    for i, j in {(0, 0), (G // 2, B - 1), (G - 1, B // 2)}:
        for target in (None, 0, 1):
            assert_same_captions(model, grid, i, j, (0, 3, grid.T - 1), target)


def test_every_class_of_three(three_classes):
    grid = live.LiveGrid(three_classes, SHORT, 6, 1)
    for target in (None, *range(len(three_classes.classes))):
        f, r = assert_same_captions(three_classes, grid, len(grid.values) // 3, 0, (0, 2), target)
        assert f.target_name == r.target_name
        assert f.gap == r.gap and f.gap_softmax == r.gap_softmax and f.se == r.se


@pytest.mark.parametrize("n_samples", [1, 2, 3])
def test_few_samples(models, n_samples):
    """One sample has no spread and no SE; two, no jackknife: the frame says so as explain() does."""
    model = models["bam-wc"]
    grid = live.LiveGrid(model, SHORT, n_samples, 0)
    f, r = assert_same_captions(model, grid, 10, 2, (0, 4))
    assert f.se == r.se and f.mutual_information_interval == r.mutual_information_interval
    # the entropy bar's total and parts (`entropy_parts`), exactly explain()'s
    assert (f.predictive_entropy, f.expected_entropy, f.mutual_information_plugin) == (
        r.predictive_entropy, r.expected_entropy, r.mutual_information_plugin)


def test_a_long_sentence_in_its_window(models):
    """A long sentence's frames hold its token window: the bars' caption still finds the key a query
    attends to most among all tokens (outside the window too), and the share of its attention shown."""
    model = models["bam-wc"]
    T = len(model.tokenizer.encode(LONG)[0])
    assert T > MAX_TICK_TOKENS
    query = T // 2
    window = token_window(T, window_around(T, query))
    grid = live.LiveGrid(model, LONG, 4, 0, window=window)
    f, r = assert_same_captions(model, grid, 5, 1, (0, query, window[-2]))
    layer = model.config.stochastic_layers[-1]
    assert "of the query's mean attention E[w]" in captions.prior_posterior_caption(f, layer, 0, query, shown=window)
    outside = [(h, q) for h in range(model.n_heads) for q in window
               if int(f.row_summary(layer, window).top[h, q]) not in window]
    for h, q in outside[:3]:            # the caption says where the top key is: not among the bars
        assert "is not among the bars shown" in captions.prior_posterior_caption(f, layer, h, q, shown=window)
    with pytest.raises(ValueError, match="frames hold the tokens"):
        f.row_summary(layer, list(range(T)))


def test_the_numbers_the_captions_read(models):
    """The frame's summaries are the sampled weights' own: the top key and its E[w], SE and 5-95%."""
    model = models["bam-wc"]
    grid = live.LiveGrid(model, SHORT, 16, 2)
    i = 12
    r, f = explained(model, grid, i, 0), live.FrameResult(grid, i, 0)
    for layer in model.config.stochastic_layers:
        rows = f.row_summary(layer, grid.window)
        w = r.sample_weights[:, layer].double().numpy()                                  # (S, H, T, T)
        mean = w.mean(0)
        np.testing.assert_array_equal(rows.top, mean.argmax(-1))
        top = mean.argmax(-1)[..., None]
        at_top = np.take_along_axis(w, top[None], -1)[..., 0]
        np.testing.assert_allclose(rows.mean, np.take_along_axis(mean, top, -1)[..., 0], rtol=1e-6)
        np.testing.assert_allclose(rows.se, at_top.std(0, ddof=1) / 4, rtol=1e-5)
        np.testing.assert_allclose(rows.lo, np.quantile(at_top, 0.05, axis=0), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(rows.hi, np.quantile(at_top, 0.95, axis=0), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(rows.share, 1.0, rtol=1e-5)          # every key is shown
        cells = f.map_summary(layer, grid.window)
        std = w.std(0, ddof=1)
        np.testing.assert_allclose(cells.std_max, std.reshape(model.n_heads, -1).max(-1), rtol=1e-6)
        np.testing.assert_allclose(cells.std_mean, std.reshape(model.n_heads, -1).mean(-1), rtol=1e-6)


def test_a_release_reads_a_frame_made_once(models, monkeypatch):
    """Once frame i is made, reading it as a result runs no model."""
    model = models["bam-wc"]
    grid = live.LiveGrid(model, SHORT, 8, 0)
    live.FrameResult(grid, 7, 0)
    monkeypatch.setattr(type(model), "explain", lambda *a, **k: pytest.fail("explain() was called"))
    f = live.FrameResult(grid, 7, 3)
    captions.prediction_caption(f)
    captions.prior_posterior_caption(f, 5, 0, 0, shown=grid.window)
