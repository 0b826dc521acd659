"""What the captions say of the sampled weights, checked on the samples of every shipped model: a
caption that says rows sum to 1, that weights lie in [0, 1], that a std passes its colour scale or
that the weights' mean is (or is not) softmax(ψ) says what `ExplainResult.sample_weights` shows."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import bam_viz
from bam_viz import families, zoo
from bam_viz.plots import captions
from bam_viz.plots.style import STD_RANGE, WEIGHT_RANGE

TEXT = "A warm, funny film that never drags."
S = 64                # enough draws to tell a shift of E[w] from softmax(ψ) of about 0.01 (`test_the_mean_...`)
MODELS = bam_viz.available_models()


@pytest.fixture(scope="module", params=MODELS)
def model(request):
    return bam_viz.load(request.param)


@pytest.fixture(scope="module")
def result(model):
    return model.explain(TEXT, n_samples=S, seed=0)


def shown_layers(r) -> list[int]:
    return list(r.stochastic_layers) or [0]


def test_every_family_of_the_registry_ships_in_the_zoo():
    shipped = {zoo.read_card(zoo.model_folder(name))["config"]["attention"]["family"] for name in MODELS}
    assert shipped == set(families.names())


def test_rows_sum_as_the_caption_says(result):
    for layer in shown_layers(result):
        caption = captions.sampled_maps_caption(result, layer, 0)
        rows = result.sample_weights[:, layer].double().sum(-1)                 # (S, H, T)
        if "only on average" not in caption:                 # a family's draws, or a deterministic layer's
            assert "each row sums to 1)" in caption or not result.stochastic_layers
            torch.testing.assert_close(rows, torch.ones_like(rows), rtol=0, atol=1e-5)
            continue
        # dropout: 1 only on average, anything from 0 to 1/(1 - p)
        top = float(re.search(r"1/\(1 − p\) = ([0-9.]+)", caption)[1])
        assert "each row sums to 1 only on average, to anything from 0 to" in caption
        assert rows.min() >= 0 and rows.max() <= top + 0.005
        assert (rows - 1).abs().max() > 0.05                                   # the rows do not all sum to 1
        n = rows.numel()
        assert abs(float(rows.mean()) - 1) < 4 * float(rows.std()) / n**0.5  # E[keep / (1 - p)] = 1


def test_weights_lie_where_the_caption_says(result):
    for layer in shown_layers(result):
        caption = captions.sampled_maps_caption(result, layer, 0)
        grid = captions.layer_head_caption(result)
        w = result.sample_weights[:, layer]
        assert w.min() >= 0
        if "a weight can exceed 1" in caption:
            top = float(re.search(r"1/\(1 − p\) = ([0-9.]+)", caption)[1])
            assert 1 < w.max() <= top + 0.005
            assert "the most a weight's std can be" not in caption + grid
        else:
            assert w.max() <= WEIGHT_RANGE[1] + 1e-6
            if result.stochastic_layers:
                assert "the most a weight's std can be" in caption and "the most a weight's std can be" in grid


def test_a_dropped_weight_is_0_and_a_kept_one_is_scaled_as_the_caption_says():
    r = bam_viz.load("mc-dropout").explain(TEXT, n_samples=S, seed=0)
    first = r.stochastic_layers[0]              # its scores are the deterministic pass's: softmax(ψ) is fixed
    caption = captions.sampled_maps_caption(r, first, 0)
    p = float(re.search(r"probability p = ([0-9.]+)", caption)[1])
    scale = float(re.search(r"1/\(1 − p\) = ([0-9.]+)", caption)[1])
    w, soft = r.sample_weights[:, first].double(), r.softmax_weights[first].double().expand(S, -1, -1, -1)
    kept = w > 0
    torch.testing.assert_close(w[kept], soft[kept] / (1 - p), rtol=1e-5, atol=1e-30)
    assert scale == round(1 / (1 - p), 2)
    dropped = float((~kept).double().mean())
    assert abs(dropped - p) < 4 * (p * (1 - p) / kept.numel()) ** 0.5


def test_a_std_past_its_scale_is_said(model, result):
    for layer in result.stochastic_layers:
        caption = captions.sampled_maps_caption(result, layer, 0)
        std = result.sample_weights[:, layer, 0].double().std(0)               # the std map (ddof 1)
        assert ("a std can pass" in caption or "like a std past" in caption) == bool(std.max() > STD_RANGE[1])
    if result.stochastic_layers:
        few = model.explain(TEXT, n_samples=2, seed=0)
        layer = few.stochastic_layers[-1]
        std = few.sample_weights[:, layer, 0].double().std(0)
        caption = captions.sampled_maps_caption(few, layer, 0)
        assert ("a std can pass" in caption or "like a std past" in caption) == bool(std.max() > STD_RANGE[1])


def test_the_mean_is_softmax_where_no_caption_says_otherwise(result):
    """At the first stochastic layer (its scores, and so softmax(ψ), are the deterministic pass's), the
    top key's weight averaged over the heads and queries of each draw: a family whose E[w] is softmax(ψ)
    keeps it there, one whose normalising pulls E[w] towards uniform pulls it below, and the caption
    says which."""
    if not result.stochastic_layers:
        assert torch.equal(result.sample_weights[0], result.softmax_weights)
        return
    layer = result.stochastic_layers[0]
    w, soft = result.sample_weights[:, layer].double(), result.softmax_weights[layer].double()
    top = soft.argmax(-1, keepdim=True)                                        # (H, T, 1)
    d = (w.gather(-1, top.expand(S, *top.shape)) - soft.gather(-1, top)).mean((1, 2, 3))   # (S,)
    t = float(d.mean() / (d.std() / S**0.5))
    caption = captions.sampled_maps_caption(result, layer, 0)
    if "the mean of the normalised weights is not softmax(ψ)" in caption:
        assert t < -4
        assert "towards uniform, the more as " + families.get(result.family).mean_pull in caption
    else:
        assert abs(t) < 4


def test_the_live_maps_carry_the_weights_the_caption_speaks_of():
    """The page's maps come through `wire.pack`, whose u2 carries [0, 1]: a weight that dropout scaled
    past 1 reaches the page as it is, as the live caption (`FrameResult`'s) says it can."""
    from bam_viz.live import grid as live
    from bam_viz.live.frames import MAP_PANELS
    from bam_viz.live.result import FrameResult

    g = live.LiveGrid(bam_viz.load("mc-dropout"), TEXT, 8, 0)
    frame = g.frame(0)
    drawn = {(layer, head): maps[head, 4:] for layer, maps in frame.maps.items() for head in range(len(maps))}
    layer, head = max(drawn, key=lambda at: drawn[at].max())                   # the largest weight drawn
    header, arrays = live.unpack(live.inside_payload(g, 0, 0, layer, head, 0, 1))
    sampled = arrays["maps"][0, len(MAP_PANELS):]                              # (k, W, W)
    np.testing.assert_array_equal(sampled, drawn[layer, head][: header["map_samples"]].astype(np.float32))
    assert sampled.max() > 1
    assert "a weight can exceed 1" in captions.sampled_maps_caption(FrameResult(g, 0), layer, head)
