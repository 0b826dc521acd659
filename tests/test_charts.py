"""Chart builders and captions, on synthetic results of every family; no browser."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from fake_result import make_fake_result

from bam_viz import charts

FAMILIES = ["weibull", "lognormal", "dirichlet", "categorical", "softmax"]


def fake(family: str, **kw):
    if family == "softmax":
        kw.setdefault("S", 1)
    return make_fake_result(family, **kw)


def trace_arrays(fig: go.Figure):
    """Every numeric array a trace carries (x, y, z, error bars, customdata)."""
    for trace in fig.data:
        for name in ("x", "y", "z", "customdata"):
            value = getattr(trace, name, None)
            if value is not None:
                yield trace.name, name, value
        err = getattr(trace, "error_y", None)
        if err is not None and err.array is not None:
            yield trace.name, "error_y", err.array
            yield trace.name, "error_y-", err.arrayminus


def assert_finite(fig: go.Figure):
    for trace_name, field, value in trace_arrays(fig):
        arr = np.asarray(value, dtype=object).ravel()
        numbers = [v for v in arr if isinstance(v, (int, float, np.number))]
        assert all(v is not None for v in arr), f"{trace_name}.{field} has None"
        assert np.all(np.isfinite(np.asarray(numbers, dtype=float))), f"{trace_name}.{field} not finite"


def all_figures(r, layer, head=0, query=0, key=1):
    key = min(key, len(r.tokens) - 1)
    return {
        "prior_posterior": charts.prior_posterior_figure(r, layer, head, query),
        "density": charts.key_density_figure(r, layer, head, query, key),
        "maps": charts.sampled_maps_figure(r, layer, head),
        "prediction": charts.prediction_figure(r),
        "entropy": charts.entropy_figure(r),
        "spread": charts.layer_head_figure(r, "spread", selected=(layer, head)),
        "kl": charts.layer_head_figure(r, "kl", selected=(layer, head)),
    }


def all_captions(r, layer, head=0, query=0, key=1):
    key = min(key, len(r.tokens) - 1)
    return [
        charts.prior_posterior_caption(r, layer, head, query),
        charts.key_density_caption(r, layer, head, query, key),
        charts.sampled_maps_caption(r, layer, head),
        charts.prediction_caption(r),
        charts.layer_head_caption(r),
    ]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("which_layer", ["stochastic", "deterministic"])
def test_every_chart_builds_finite(family, which_layer):
    r = fake(family)
    layer = r.stochastic_layers[-1] if which_layer == "stochastic" and r.stochastic_layers else 0
    for name, fig in all_figures(r, layer).items():
        assert isinstance(fig, go.Figure), name
        assert_finite(fig)
    for caption in all_captions(r, layer):
        assert isinstance(caption, str) and caption


@pytest.mark.parametrize("family", FAMILIES)
def test_expected_traces(family):
    r = fake(family)
    layer = r.stochastic_layers[-1] if r.stochastic_layers else 0
    f = all_figures(r, layer)
    names = [t.name for t in f["prior_posterior"].data]
    assert names == ["prior mean π_j", "posterior mean"]
    assert all(len(t.x) == len(r.tokens) for t in f["prior_posterior"].data)
    S = r.sample_weights.shape[0]
    heatmaps = [t for t in f["maps"].data if isinstance(t, go.Heatmap)]
    assert len(heatmaps) == 2 + min(4, S)
    assert heatmaps[0].name.startswith("mean") and heatmaps[1].name.startswith("std")
    pred_names = [t.name for t in f["prediction"].data]
    assert "f(E[z]): mean attention" in pred_names and "E[f(z)]: average over samples" in pred_names
    assert sum(f["prediction"].data[0].y) == S
    entropy_total = sum(t.x[0] for t in f["entropy"].data)
    assert entropy_total == pytest.approx(r.predictive_entropy, abs=1e-6)
    density_lines = [t.name for t in f["density"].data]
    if family in ("weibull", "lognormal", "dirichlet"):
        assert density_lines == ["prior", "posterior q"]
        assert max(f["density"].data[1].y) > 0
    else:
        assert density_lines == []  # a message instead of curves
        assert f["density"].layout.annotations


def test_mean_field_and_mc_lines_sit_at_their_values():
    r = fake("weibull")
    fig = charts.prediction_figure(r)
    lines = {t.name: t for t in fig.data}
    assert lines["f(E[z]): mean attention"].x[0] == pytest.approx(float(r.mean_field_probs[1]))
    assert lines["E[f(z)]: average over samples"].x[0] == pytest.approx(float(r.mc_probs[1]))


def test_deterministic_layers_read_as_such():
    r = fake("weibull")                                          # layers 4, 5 stochastic of 6
    for which in ("spread", "kl"):
        fig = charts.layer_head_figure(r, which)
        det = [t for t in fig.data if t.name == "deterministic"][0]
        assert list(det.y) == [f"layer {i} (deterministic)" for i in range(4)]
        main = [t for t in fig.data if t.name == which][0]
        assert list(main.y) == ["layer 4", "layer 5"]
    assert "deterministic" in charts.prior_posterior_caption(r, 0, 0, 0)
    fig = charts.key_density_figure(r, 0, 0, 0, 1)
    assert "deterministic" in fig.layout.annotations[0].text
    r = fake("softmax")
    fig = charts.layer_head_figure(r, "kl")
    assert [t.name for t in fig.data] == ["deterministic"]
    assert "deterministic" in charts.layer_head_caption(r)


@pytest.mark.parametrize("T", [1, 2, 128])
def test_sizes(T):
    r = fake("weibull", T=T, S=4, L=2, H=3)
    for fig in all_figures(r, 1).values():
        assert_finite(fig)
    maps = charts.sampled_maps_figure(r, 1, 0)
    assert np.asarray(maps.data[0].z).shape == (T, T)
    # All maps share one pair of category axes: labelled unless there are too many tokens.
    layout = maps.to_dict()["layout"]
    assert not any(k.startswith(("xaxis", "yaxis")) and k[5:] for k in layout)
    assert layout["xaxis"]["showticklabels"] == layout["yaxis"]["showticklabels"] == (T <= charts.MAX_TICK_TOKENS)


def test_small_multiples_share_one_pair_of_axes():
    r = fake("weibull", T=3, S=5, L=1, H=1, stochastic_layers=[0], tokens=["[CLS]", "good", "[SEP]"])
    fig = charts.sampled_maps_figure(r, 0, 0, n_show=5)           # 7 maps: rows of 3, 3, then 1
    maps = [t for t in fig.data if t.type == "heatmap"]
    xcats, ycats = list(fig.layout.xaxis.categoryarray), list(fig.layout.yaxis.categoryarray)
    # every map's categories are on the axes, in blocks that do not overlap, and read as the tokens
    blocks = {(tuple(t.x), tuple(t.y)) for t in maps}
    assert len(blocks) == len(maps) == 7
    for t in maps:
        assert set(t.x) <= set(xcats) and set(t.y) <= set(ycats)
        assert [x.replace(charts.ZERO_WIDTH, "") for x in t.x] == ["[CLS]", "good", "[SEP]"]
    assert len(set(xcats)) == len(xcats) == 3 * 3 + 2 * 1 and len(ycats) == 3 * 3 + 2 * 1
    # map i sits in row i // 3, column i % 3, and its title over it
    for i, t in enumerate(maps):
        row, col = divmod(i, 3)
        assert xcats.index(t.x[0]) == col * 4 and ycats.index(t.y[0]) == row * 4
        assert fig.layout.annotations[i].text == t.name
    assert [t.name for t in maps[:2]] == ["mean (posterior)", "std over 5 samples"]


def test_extreme_weights_and_huge_kl():
    r = fake("weibull", T=5, S=6, L=2, H=2)
    one_hot = torch.zeros_like(r.sample_weights)
    one_hot[..., 0] = 1.0                                        # all mass on [CLS]: zeros and ones
    r.sample_weights = one_hot
    r.prior_sample_weights = one_hot.clone()
    r.mean_weights = one_hot[0].clone()
    r.kl = torch.tensor([[1e30, float("inf")], [float("nan"), 0.0]])
    r.stochastic_layers = [0, 1]
    r.sample_probs = torch.tensor([[0.0, 1.0]] * 3 + [[1.0, 0.0]] * 3)
    r.mc_probs = r.sample_probs.mean(0)
    r.mean_field_probs = torch.tensor([0.0, 1.0])
    figs = all_figures(r, 1)
    for fig in figs.values():
        assert_finite(fig)
    kl = [t for t in figs["kl"].data if t.name == "kl"][0]
    assert np.max(kl.z) >= 1e30                                  # huge but drawn, and the colour range holds it
    assert kl.zmin == 0.0 and kl.zmax >= 1e30
    captions = all_captions(r, 1)
    assert all("nan" not in c.lower() for c in captions)


def test_weights_nan_do_not_blank_the_maps():
    r = fake("lognormal", T=4, S=3, L=1, H=1, stochastic_layers=[0])
    r.sample_weights[0, 0, 0, 0, 0] = float("nan")
    r.mean_weights[0, 0, 1, 1] = float("inf")
    for fig in all_figures(r, 0).values():
        assert_finite(fig)


HOSTILE = ["[CLS]", "<script>alert(1)</script>", "a&b", "<b>", "the", "the", "\u200b", "\x07", "שלום",
           "[SEP]"]


def test_tokens_are_escaped_and_unique_on_axes():
    r = fake("weibull", T=len(HOSTILE), tokens=HOSTILE)
    labels = charts.axis_labels(HOSTILE)
    assert len(set(labels)) == len(labels)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in labels
    assert "a&amp;b" in labels and "&lt;b&gt;" in labels
    assert "4·the" in labels and "5·the" in labels
    assert "\\u200b" in labels and "\\u0007" in labels and "שלום" in labels
    for fig in (charts.prior_posterior_figure(r, 5, 0, 0), charts.sampled_maps_figure(r, 5, 0)):
        for trace in fig.data:
            axes = [trace.x, trace.y]
            for value in (v for axis in axes if axis is not None for v in axis):
                if isinstance(value, str):
                    assert "<" not in value and ">" not in value.replace("&gt;", "")
    title = charts.prior_posterior_figure(r, 5, 0, 1).layout.title.text
    assert "<script>" not in title and "&lt;script&gt;" in title


def test_captions_escape_markdown():
    r = fake("weibull", T=len(HOSTILE), tokens=HOSTILE)
    text = charts.prior_posterior_caption(r, 5, 0, 1)
    assert "<script>" not in text and "\\<script\\>" in text
    assert charts.md_escape("$x$ *a* :red[b]") == "\\$x\\$ \\*a\\* \\:red\\[b\\]"
    assert charts.token_option(HOSTILE, 7) == "7: \\u0007"
    assert charts.display_token("") == "\u2205"


def test_captions_mention_the_numbers():
    r = fake("weibull")
    cap = charts.prediction_caption(r)
    assert f"{float(r.mc_probs[1]):.3f}" in cap and f"{float(r.mean_field_probs[1]):.3f}" in cap
    assert f"{r.gap:+.3f}" in cap and f"{r.mutual_information:.3f}" in cap
    assert f"{r.expected_entropy:.3f}" in cap
    cap = charts.prior_posterior_caption(r, 5, 0, 0)
    post = r.mean_weights[5, 0, 0]
    assert f"{float(post.max()):.2f}" in cap
    cap = charts.layer_head_caption(r)
    assert f"{float(r.spread[4:].max()):.3f}" in cap and f"{float(r.kl[4:].max()):.3g}" in cap
    cap = charts.sampled_maps_caption(r, 5, 0)
    assert f"{float(r.sample_weights[:, 5, 0].std(0).max()):.3f}" in cap
    assert "shape_k = 10" in charts.key_density_caption(r, 5, 0, 0, 1)


def test_selected_head_is_marked():
    r = fake("weibull")
    fig = charts.layer_head_figure(r, "spread", selected=(5, 3))
    marker = [t for t in fig.data if t.name == "selected"][0]
    assert list(marker.x) == ["head 3"] and list(marker.y) == ["layer 5"]
    with pytest.raises(ValueError):
        charts.layer_head_figure(r, "entropy")


def test_figures_serialise():
    """Streamlit sends figures as JSON: each must serialise without plotly validation errors."""
    r = fake("dirichlet", T=6)
    for fig in all_figures(r, 5).values():
        assert fig.to_json()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("T", [1, 7, 50])
def test_figures_pass_plotly_validation(family, T):
    """Builders skip plotly's validation for speed; re-validating must find nothing to reject and
    nothing to rewrite (a shorthand such as a colour-scale name that only plotly.py expands would
    reach plotly.js as is)."""
    r = fake(family, T=T)
    for layer in sorted({0, *r.stochastic_layers}):
        for name, fig in all_figures(r, layer).items():
            try:
                validated = go.Figure(fig.to_dict())
            except (ValueError, TypeError) as err:
                pytest.fail(f"{family}, T={T}, layer {layer}, {name}: {err}")
            assert json.loads(validated.to_json()) == json.loads(fig.to_json()), (family, T, layer, name)


def test_validation_check_can_fail():
    """The guard above: an invalid property in an unvalidated figure is caught on re-validation."""
    fig = go.Figure({"data": [{"type": "bar", "x": [1], "colour": "red"}], "layout": {}}, _validate=False)
    with pytest.raises(ValueError):
        go.Figure(fig.to_dict())
    fig = go.Figure({"data": [{"type": "heatmap", "z": [[1]], "colorscale": "Oranges"}], "layout": {}},
                    _validate=False)
    assert json.loads(go.Figure(fig.to_dict()).to_json()) != json.loads(fig.to_json())


def test_kl_colour_spans_the_stochastic_range_only():
    r = fake("weibull")                                          # layers 4, 5 stochastic of 6
    r.kl = 988.0 + torch.rand(r.kl.shape, generator=torch.Generator().manual_seed(1))
    for which, values in (("kl", r.kl), ("spread", r.spread)):
        fig = charts.layer_head_figure(r, which)
        main = [t for t in fig.data if t.name == which][0]
        assert main.zmin == pytest.approx(float(values[4:].min()))
        assert main.zmax == pytest.approx(float(values[4:].max()))
        assert main.colorbar.ticktext[0] == f"{float(values[4:].min()):.4g}"
    caption = charts.layer_head_caption(r)
    assert "relative" in caption and f"{float(r.kl[4:].min()):.4g}" in caption
    r.kl = torch.full(r.kl.shape, 5.0)                           # all equal: a valid, non-empty range
    main = [t for t in charts.layer_head_figure(r, "kl").data if t.name == "kl"][0]
    assert main.zmax > main.zmin == 5.0


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet"])
def test_density_is_on_log10_axis_with_a_bounded_y(family):
    r = fake(family)
    fig = charts.key_density_figure(r, 5, 0, 0, 1)
    densities = r.key_densities(5, 0, 0, 1)
    assert fig.layout.xaxis.title.text == densities["label"] and "log10" in densities["label"]
    assert list(fig.layout.yaxis.range) == [0.0, 1.08]
    for trace, which in zip(fig.data, ("prior", "posterior"), strict=True):
        assert max(trace.y) == pytest.approx(1.0)
        np.testing.assert_allclose(trace.customdata, densities[which])
    assert "log10" in charts.key_density_caption(r, 5, 0, 0, 1)


def test_density_none_gives_a_message(monkeypatch):
    r = fake("weibull")
    monkeypatch.setattr(type(r), "key_densities", lambda self, *args, **kw: None)
    fig = charts.key_density_figure(r, 5, 0, 0, 1)
    assert not fig.data and "no continuous density" in fig.layout.annotations[0].text
    go.Figure(fig.to_dict())


def test_spread_is_computed_once_per_result(monkeypatch):
    r = fake("weibull")
    calls = []
    real = torch.Tensor.sqrt_             # one call per computation of the spread
    monkeypatch.setattr(torch.Tensor, "sqrt_", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    charts.layer_head_figure(r, "spread")
    charts.layer_head_caption(r)
    charts.layer_head_figure(r, "spread", selected=(5, 0))
    assert len(calls) == 1
    charts.layer_head_figure(fake("weibull", seed=1), "spread")
    assert len(calls) == 2


def test_density_overflow_gives_a_message_not_an_error():
    r = fake("dirichlet", T=4, L=1, H=1, stochastic_layers=[0])
    r.posterior_params["concentration"][0, 0, 0] = torch.tensor([1e-300, 1e-300, 1e300, 1e-300])
    fig = charts.key_density_figure(r, 0, 0, 0, 0)
    assert_finite(fig)


def test_signed_never_prints_minus_zero():
    assert charts.signed(-0.0001) == "+0.000" and charts.signed(0.0) == "+0.000"
    assert charts.signed(-0.0126) == "-0.013" and charts.signed(0.2) == "+0.200"
    r = fake("weibull")
    r.mc_probs, r.mean_field_probs = torch.tensor([0.5, 0.5]), torch.tensor([0.50001, 0.49999])
    assert "The gap, +0.000," in charts.prediction_caption(r)


@pytest.mark.parametrize("total, epistemic, says", [
    (0.05, 0.04, "sure"),                 # under a tenth of ln 2, whatever its split
    (0.40, 0.25, "from attention"),
    (0.40, 0.10, "sentence itself mixed"),
])
def test_the_uncertainty_verdict_follows_the_numbers(total, epistemic, says):
    class R:
        predictive_entropy, mutual_information = total, epistemic
    assert says in charts.uncertainty_verdict(R())


def test_the_prediction_caption_ends_with_its_verdict():
    r = fake("weibull")
    assert charts.prediction_caption(r).endswith(charts.uncertainty_verdict(r))
