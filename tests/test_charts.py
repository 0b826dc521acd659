"""Chart builders and captions, on synthetic results of every family; no browser."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from fake_result import make_fake_result
from scipy import stats

from bam_viz import families
from bam_viz.core.labels import LABELS
from bam_viz.core.metrics import interval_multiplier
from bam_viz.core.text import display_token
from bam_viz.plots import captions, explorer, kit, style, tokens
from bam_viz.plots.format import se_digits, signed, with_se
from bam_viz.plots.wording import Facts, count

FAMILIES = ["weibull", "lognormal", "dirichlet", "categorical", "softmax", "mc-dropout"]


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
        "prior_posterior": explorer.prior_posterior_figure(r, layer, head, query),
        "density": explorer.key_density_figure(r, layer, head, query, key),
        "maps": explorer.sampled_maps_figure(r, layer, head),
        "prediction": explorer.prediction_figure(r),
        "entropy": explorer.entropy_figure(r),
        "spread": explorer.layer_head_figure(r, "spread", selected=(layer, head)),
        "kl": explorer.layer_head_figure(r, "kl", selected=(layer, head)),
    }


def all_captions(r, layer, head=0, query=0, key=1):
    key = min(key, len(r.tokens) - 1)
    return [
        captions.prior_posterior_caption(r, layer, head, query),
        captions.key_density_caption(r, layer, head, query, key),
        captions.sampled_maps_caption(r, layer, head),
        captions.prediction_caption(r),
        captions.layer_head_caption(r),
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
    assert names == [LABELS["prior_mean"], LABELS["posterior_mean"], LABELS["prior_pi"], LABELS["softmax_weights"]]
    assert all(len(t.x) == len(r.tokens) for t in f["prior_posterior"].data)
    S = r.sample_weights.shape[0]
    heatmaps = [t for t in f["maps"].data if isinstance(t, go.Heatmap)]
    assert len(heatmaps) == 3 + min(3, S)
    assert [t.name for t in heatmaps[:2]] == [LABELS["posterior_mean"], LABELS["softmax_weights"]]
    assert heatmaps[2].name.startswith("std")
    pred_names = [t.name for t in f["prediction"].data]
    assert {LABELS["mean_attention"], LABELS["softmax"], "E[f(z)]: average over samples"} <= set(pred_names)
    assert sum(f["prediction"].data[0].y) == S
    # aleatoric + epistemic: the expected entropy and the plug-in MI, which stack to H[E p]
    assert [t.name for t in f["entropy"].data] == [LABELS["aleatoric"], LABELS["epistemic"]]
    assert [t.x[0] for t in f["entropy"].data] == [r.expected_entropy, r.mutual_information_plugin]
    assert sum(t.x[0] for t in f["entropy"].data) == pytest.approx(r.predictive_entropy, abs=1e-12)
    density_lines = [t.name for t in f["density"].data]
    if family in ("weibull", "lognormal", "dirichlet"):
        assert density_lines == ["prior", "posterior q"]
        assert max(f["density"].data[1].y) > 0
    else:
        assert density_lines == []  # a message instead of curves
        assert f["density"].layout.annotations


def test_the_three_predictions_sit_at_their_values_in_their_own_styles():
    r = fake("weibull")
    assert len({float(r.mc_probs[1]), float(r.mean_attention_probs[1]), float(r.softmax_probs[1])}) == 3
    fig = explorer.prediction_figure(r)
    lines = {t.name: t for t in fig.data}
    expected = {"E[f(z)]: average over samples": r.mc_probs, LABELS["mean_attention"]: r.mean_attention_probs,
                LABELS["softmax"]: r.softmax_probs}
    for name, probs in expected.items():
        assert list(lines[name].x) == pytest.approx([float(probs[1])] * 2), name
    styles = {(lines[name].line.color, lines[name].line.dash) for name in expected}
    assert len(styles) == 3                                      # told apart by colour and dash


def row_labels(fig: go.Figure, trace) -> list[str]:
    """The y tick labels of a layers x heads trace's rows."""
    labels = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext, strict=True))
    return [labels[y] for y in trace.y]


def test_deterministic_layers_read_as_such():
    r = fake("weibull")                                          # layers 4, 5 stochastic of 6
    for which in ("spread", "kl"):
        fig = explorer.layer_head_figure(r, which)
        det = [t for t in fig.data if t.name == "deterministic"][0]
        assert row_labels(fig, det) == [f"layer {i} (deterministic)" for i in range(4)]
        main = [t for t in fig.data if t.name == which][0]
        assert row_labels(fig, main) == ["layer 4", "layer 5"]
    assert "deterministic" in captions.prior_posterior_caption(r, 0, 0, 0)
    fig = explorer.key_density_figure(r, 0, 0, 0, 1)
    assert "deterministic" in fig.layout.annotations[0].text
    r = fake("softmax")
    fig = explorer.layer_head_figure(r, "kl")
    assert [t.name for t in fig.data] == ["deterministic"]
    assert "deterministic" in captions.layer_head_caption(r)


@pytest.mark.parametrize("T", [1, 2, 128])
def test_sizes(T):
    r = fake("weibull", T=T, S=4, L=2, H=3)
    for fig in all_figures(r, 1).values():
        assert_finite(fig)
    maps = explorer.sampled_maps_figure(r, 1, 0)
    shown = T if T <= style.MAX_TICK_TOKENS else style.TOKEN_WINDOW      # a long sentence shows a window
    assert np.asarray(maps.data[0].z).shape == (shown, shown)
    # All maps share one pair of category axes, every token labelled.
    layout = maps.to_dict()["layout"]
    assert not any(k.startswith(("xaxis", "yaxis")) and k[5:] for k in layout)
    assert layout["xaxis"]["showticklabels"] is layout["yaxis"]["showticklabels"] is True


def test_small_multiples_share_one_pair_of_axes():
    r = fake("weibull", T=3, S=5, L=1, H=1, stochastic_layers=[0], tokens=["[CLS]", "good", "[SEP]"])
    fig = explorer.sampled_maps_figure(r, 0, 0, n_show=4)           # 7 maps: rows of 3, 3, then 1
    maps = [t for t in fig.data if t.type == "heatmap"]
    xcats, ycats = list(fig.layout.xaxis.categoryarray), list(fig.layout.yaxis.categoryarray)
    # every map's categories are on the axes, in blocks that do not overlap, and read as the tokens
    blocks = {(tuple(t.x), tuple(t.y)) for t in maps}
    assert len(blocks) == len(maps) == 7
    for t in maps:
        assert set(t.x) <= set(xcats) and set(t.y) <= set(ycats)
        assert [x.replace(style.ZERO_WIDTH, "") for x in t.x] == ["[CLS]", "good", "[SEP]"]
    assert len(set(xcats)) == len(xcats) == 3 * 3 + 2 * 1 and len(ycats) == 3 * 3 + 2 * 1
    # map i sits in row i // 3, column i % 3, and its title over it
    for i, t in enumerate(maps):
        row, col = divmod(i, 3)
        assert xcats.index(t.x[0]) == col * 4 and ycats.index(t.y[0]) == row * 4
        assert fig.layout.annotations[i].text == t.name
    assert [t.name for t in maps[:3]] == [LABELS["posterior_mean"], LABELS["softmax_weights"], "std over 5 samples"]


def test_extreme_weights_and_huge_kl():
    r = fake("weibull", T=5, S=6, L=2, H=2)
    one_hot = torch.zeros_like(r.sample_weights)
    one_hot[..., 0] = 1.0                                        # all mass on [CLS]: zeros and ones
    r.sample_weights = one_hot
    r.prior_sample_weights = one_hot.clone()
    r.softmax_weights = one_hot[0].clone()
    r.kl = torch.tensor([[1e30, float("inf")], [float("nan"), 0.0]])
    r.stochastic_layers = [0, 1]
    r.sample_probs = torch.tensor([[0.0, 1.0]] * 3 + [[1.0, 0.0]] * 3)
    r.mc_probs = r.sample_probs.mean(0)
    r.softmax_probs = r.mean_attention_probs = torch.tensor([0.0, 1.0])
    r.mean_attention_loo_probs = None
    figs = all_figures(r, 1)
    for fig in figs.values():
        assert_finite(fig)
    kl = [t for t in figs["kl"].data if t.name == "kl"][0]
    assert np.max(kl.customdata) >= 1e30                         # huge but drawn: hover says it
    assert kl.zmin == 0.0 and kl.zmax == pytest.approx(style.KL_DECADES) and np.max(kl.z) > kl.zmax  # top colour
    kl = [t for t in explorer.layer_head_figure(r, "kl", relative=True).data if t.name == "kl"][0]
    assert kl.zmin == 0.0 and kl.zmax >= 1e30                   # the relative range holds it
    texts = all_captions(r, 1)
    assert all("nan" not in c.lower() for c in texts)


def test_weights_nan_do_not_blank_the_maps():
    r = fake("lognormal", T=4, S=3, L=1, H=1, stochastic_layers=[0])
    r.sample_weights[0, 0, 0, 0, 0] = float("nan")
    r.softmax_weights[0, 0, 1, 1] = float("inf")
    for fig in all_figures(r, 0).values():
        assert_finite(fig)


HOSTILE = ["[CLS]", "<script>alert(1)</script>", "a&b", "<b>", "the", "the", "\u200b", "\x07", "שלום",
           "[SEP]"]


def test_tokens_are_escaped_and_unique_on_axes():
    r = fake("weibull", T=len(HOSTILE), tokens=HOSTILE)
    labels = tokens.axis_labels(HOSTILE)
    assert len(set(labels)) == len(labels)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in labels
    assert "a&amp;b" in labels and "&lt;b&gt;" in labels
    assert "4·the" in labels and "5·the" in labels
    assert "\\u200b" in labels and "\\u0007" in labels and "שלום" in labels
    for fig in (explorer.prior_posterior_figure(r, 5, 0, 0), explorer.sampled_maps_figure(r, 5, 0)):
        for trace in fig.data:
            axes = [trace.x, trace.y]
            for value in (v for axis in axes if axis is not None for v in axis):
                if isinstance(value, str):
                    assert "<" not in value and ">" not in value.replace("&gt;", "")
    title = explorer.prior_posterior_figure(r, 5, 0, 1).layout.title.text
    assert "<script>" not in title and "&lt;script&gt;" in title


def test_captions_are_plain_text_with_tokens_as_shown():
    """A caption is plain text: a token appears as `display_token` shows it, neither escaped nor
    marked up; a page that renders Markdown escapes the whole caption (views/text.py)."""
    r = fake("weibull", T=len(HOSTILE), tokens=HOSTILE)
    text = captions.prior_posterior_caption(r, 5, 0, 1)
    assert "the query “<script>alert(1)</script>” looks at them" in text
    assert "**" not in text and "\\<" not in text                   # no Markdown emphasis, no escapes
    assert display_token("") == "\u2205"


def test_captions_mention_the_numbers():
    r = fake("weibull")
    cap = captions.prediction_caption(r)
    for probs in (r.mc_probs, r.mean_attention_probs, r.softmax_probs):
        assert f"{float(probs[1]):.3f}" in cap
    assert f"E[f(z)] − f(E[w]) = {r.gap:+.3f} ± {r.se.gap:.3f}" in cap
    assert f"E[f(z)] − f(softmax) = {r.gap_softmax:+.3f} ± {r.se.gap_softmax:.3f}" in cap
    shift = float(r.mean_attention_probs[1] - r.softmax_probs[1])
    assert f"f(E[w]) − f(softmax) = {signed(shift)}" in cap
    assert f"{r.mutual_information:.3f}" in cap and "bias-corrected by the jackknife" in cap
    assert f"{r.expected_entropy:.3f}" in cap
    cap = captions.prior_posterior_caption(r, 5, 0, 0)
    post = r.posterior_mean_weights[5, 0, 0]
    top = int(post.argmax())
    assert f"{float(post[top]):.2f} on average" in cap
    assert f"the deterministic pass gives it {float(r.softmax_weights[5, 0, 0, top]):.2f}" in cap
    cap = captions.layer_head_caption(r)
    assert f"{float(r.spread[4:].max()):.3f}" in cap and f"{float(r.kl[4:].max()):.3g}" in cap
    cap = captions.sampled_maps_caption(r, 5, 0)
    assert f"{float(r.sample_weights[:, 5, 0].std(0).max()):.3f}" in cap
    assert "shape_k = 10" in captions.key_density_caption(r, 5, 0, 0, 1)


def test_selected_head_is_marked():
    r = fake("weibull")
    fig = explorer.layer_head_figure(r, "spread", selected=(5, 3))
    marker = [t for t in fig.data if t.name == "selected"][0]
    assert list(marker.x) == [3] and list(marker.y) == [5]
    heads = dict(zip(fig.layout.xaxis.tickvals, fig.layout.xaxis.ticktext, strict=True))
    assert heads == {0: "0", 3: "3", 6: "6", 9: "9"} and fig.layout.xaxis.title.text == "head"
    assert fig.layout.yaxis.ticktext[5] == "layer 5"
    with pytest.raises(ValueError):
        explorer.layer_head_figure(r, "entropy")


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


def test_relative_colour_spans_the_stochastic_range_only():
    r = fake("weibull")                                          # layers 4, 5 stochastic of 6
    r.kl = 988.0 + torch.rand(r.kl.shape, generator=torch.Generator().manual_seed(1))
    r.kl[:4] = 0.0
    caption = captions.layer_head_caption(r, relative=True)
    for which, values in (("kl", r.kl), ("spread", r.spread)):
        fig = explorer.layer_head_figure(r, which, relative=True)
        main = [t for t in fig.data if t.name == which][0]
        assert main.zmin == pytest.approx(float(values[4:].min()))
        assert main.zmax == pytest.approx(float(values[4:].max()))
        ticks = main.colorbar.ticktext
        assert float(ticks[0]) == pytest.approx(float(values[4:].min()), rel=1e-3)
        assert "relative" in main.colorbar.title.text
        assert f"{which} {ticks[0]} to {ticks[-1]}".replace("kl", "KL") in caption   # as the colour bar says
    assert "relative" in caption
    assert "absolute" in captions.layer_head_caption(r)
    r.kl = torch.full(r.kl.shape, 5.0)                           # all equal: a valid, non-empty range
    main = [t for t in explorer.layer_head_figure(r, "kl", relative=True).data if t.name == "kl"][0]
    assert main.zmin < 5.0 < main.zmax


def colour_positions(trace) -> np.ndarray:
    """Where each cell's value falls on its trace's colour scale: 0 bottom, 1 top (clipped)."""
    return np.clip((np.asarray(trace.z, dtype=float) - trace.zmin) / (trace.zmax - trace.zmin), 0.0, 1.0)


def test_colour_scales_are_fixed_per_quantity_unless_relative():
    r = fake("weibull")
    for which, lo, hi in (("spread", *style.STD_RANGE), ("kl", 0.0, style.KL_DECADES)):
        main = [t for t in explorer.layer_head_figure(r, which).data if t.name == which][0]
        assert (main.zmin, main.zmax) == pytest.approx((lo, hi))
        title = main.colorbar.title.text
        assert f"{hi:g}" in title or "10⁶" in title                # the range is stated
    maps = explorer.sampled_maps_figure(r, 5, 0).layout
    assert (maps.coloraxis.cmin, maps.coloraxis.cmax) == style.WEIGHT_RANGE
    assert (maps.coloraxis2.cmin, maps.coloraxis2.cmax) == style.STD_RANGE
    assert "0 to 1" in maps.coloraxis.colorbar.title.text and "0 to 0.5" in maps.coloraxis2.colorbar.title.text
    relative = explorer.sampled_maps_figure(r, 5, 0, relative=True)
    axis = relative.layout.coloraxis2
    assert axis.cmax == pytest.approx(np.asarray(relative.data[2].z).max()) and "relative" in axis.colorbar.title.text


def slider_extremes(family: str) -> list[dict]:
    """The trained values, then each hyperparameter at each end of its slider."""
    spec = families.get("softmax" if family == "mc-dropout" else family)
    return [{}] + [{name: getattr(spec.spec(name), end)} for name in spec.hyper_names for end in ("low", "high")]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_bars_are_monte_carlo_means_with_the_softmax_marked(family):
    """Each bar is the mean of its draws (the normalised weights' Monte Carlo mean, not the softmax),
    with a marker on it at its softmax: pi on the prior's, softmax(psi) on the posterior's."""
    for hyper in slider_extremes(family):
        r = fake(family, hyper=hyper)
        for layer in sorted({0, *r.stochastic_layers}):
            fig = explorer.prior_posterior_figure(r, layer, 0, 1)
            prior_bar, post_bar, pi, soft = fig.data
            assert_finite(fig)
            mean = lambda t: kit.finite(t.double().mean(0))  # noqa: E731
            np.testing.assert_allclose(post_bar.y, mean(r.sample_weights[:, layer, 0, 1]), rtol=1e-6, atol=1e-30)
            np.testing.assert_allclose(prior_bar.y, mean(r.prior_draws(layer, 0)[:, 1]), rtol=1e-6, atol=1e-30)
            np.testing.assert_array_equal(soft.y, kit.finite(r.softmax_weights[layer, 0, 1]))
            np.testing.assert_array_equal(pi.y, kit.finite(r.prior_weights[layer, 0, 1]))
            assert (soft.type, pi.type) == ("scatter", "scatter") and soft.mode == pi.mode == "markers"
            # each marker on its own bar: grouped like the bars, with the same gap
            assert soft.offsetgroup == post_bar.offsetgroup != pi.offsetgroup == prior_bar.offsetgroup
            assert fig.layout.barmode == fig.layout.scattermode == "group"
            assert fig.layout.scattergap == fig.layout.bargap
            caption = captions.prior_posterior_caption(r, layer, 0, 1)
            if layer in r.stochastic_layers and r.n_samples >= 2:
                post = kit.finite(r.posterior_mean_weights[layer, 0, 1])
                assert f"{post[int(post.argmax())]:.2f} on average" in caption, (hyper, layer)


def test_the_maps_begin_with_the_monte_carlo_mean_then_the_softmax():
    for family in FAMILIES:
        r = fake(family)
        layer = r.stochastic_layers[-1] if r.stochastic_layers else 0
        maps = [t for t in explorer.sampled_maps_figure(r, layer, 0).data if t.type == "heatmap"]
        np.testing.assert_allclose(maps[0].z, r.sample_weights[:, layer, 0].double().mean(0).numpy(), rtol=1e-6)
        np.testing.assert_array_equal(maps[1].z, r.softmax_weights[layer, 0].double().numpy())


@pytest.mark.parametrize("family", ["mc-dropout", "softmax"])
def test_without_drawn_attention_the_two_gaps_are_one(family):
    r = fake(family)
    assert r.gap == r.gap_softmax
    caption = captions.prediction_caption(r)
    assert "f(E[w]) − f(softmax)" not in caption
    if family == "mc-dropout":
        assert "f(E[z]) is the deterministic pass" in caption
    else:
        assert "E[f(z)], f(E[w]) and f(softmax) coincide" in caption


def test_the_sweep_draws_both_references_and_says_how_the_mi_is_estimated():
    s = _sweep([0.2, -0.001, 0.01, 0.0, 0.0])
    lines = {t.name: t for t in explorer.sweep_figure(s).data}
    np.testing.assert_array_equal(lines[LABELS["mean_attention"]].y, s.p_mean_attention)
    np.testing.assert_array_equal(lines[LABELS["softmax"]].y, s.p_softmax)
    mi = lines["mutual information (nats), bias-corrected (jackknife)"]
    assert min(mi.y) == 0.0 and mi.customdata[1][0] == -0.001      # drawn from 0, hovered as estimated
    assert lines[LABELS["mean_attention"]].line.dash != lines[LABELS["softmax"]].line.dash


@pytest.fixture(scope="module")
def bam_wc():
    import bam_viz

    return bam_viz.load("bam-wc")


TEXT = "The acting is superb, but the plot is a tedious mess."


def test_a_near_certain_std_map_is_pale_and_an_uncertain_one_is_not(bam_wc):
    """At k = 1000 the Weibull is nearly a point mass: its std map must read as no uncertainty,
    unlike k = 0.2, and not be stretched to the same orange."""
    layer = bam_wc.config.stochastic_layers[-1]
    std = {}
    for k in (1000.0, 0.2):
        r = bam_wc.explain(TEXT, 16, seed=0, shape_k=k)
        fig = explorer.sampled_maps_figure(r, layer, 0)
        trace = [t for t in fig.data if t.type == "heatmap" and t.name.startswith("std")][0]
        axis = fig.layout.coloraxis2
        assert (axis.cmin, axis.cmax) == style.STD_RANGE       # the same fixed scale at both k
        std[k] = np.asarray(trace.z).max() / axis.cmax           # top of the map, as a share of the scale
    assert std[1000.0] < 0.01                                    # near the bottom
    assert std[0.2] > 0.3
    relative = explorer.sampled_maps_figure(bam_wc.explain(TEXT, 16, seed=0, shape_k=1000.0), layer, 0, relative=True)
    assert relative.layout.coloraxis2.cmax < 0.01                # only on request: stretched to its own max


def test_a_constant_spread_grid_does_not_span_the_colour_scale():
    """Every head of a hard alignment varies alike: values equal but for float32 rounding must not
    be drawn as yellow against purple."""
    r = fake("categorical")                                      # layer 5 alone stochastic
    r.spread = torch.zeros(r.kl.shape)
    r.spread[5] = 0.01461 + 1e-9 * torch.arange(r.kl.shape[1])
    for relative in (False, True):
        main = [t for t in explorer.layer_head_figure(r, "spread", relative=relative).data if t.name == "spread"][0]
        positions = colour_positions(main)
        assert np.ptp(positions) < 1e-3, relative                # one colour for one value
        assert positions.max() < (0.1 if not relative else 0.6)  # fixed: near the bottom; relative: the middle
    assert "varies alike" in captions.layer_head_caption(r)


def test_at_small_k_the_bars_leave_the_softmax_and_stay_inside_their_whiskers(bam_wc):
    """bam-wc at k = 0.2 on "A glorious mess.", layer 5 head 0, [CLS], the lesson's 32 samples: the
    normalised weights' mean is far from softmax(psi) (0.41 on [CLS]), beyond its 95% interval on the
    key it attends to most; the bars are that mean, the markers the softmax."""
    r = bam_wc.explain("A glorious mess.", 32, seed=0, shape_k=0.2)
    layer, head, query = 5, 0, 0
    fig = explorer.prior_posterior_figure(r, layer, head, query)
    prior_bar, post_bar, pi, soft = fig.data
    mean = r.sample_weights[:, layer, head, query].double().mean(0).numpy()
    np.testing.assert_allclose(post_bar.y, mean, rtol=1e-6)
    np.testing.assert_array_equal(post_bar.y, kit.finite(r.posterior_mean_weights[layer, head, query]))
    np.testing.assert_array_equal(soft.y, kit.finite(r.softmax_weights[layer, head, query]))
    np.testing.assert_allclose(prior_bar.y, r.prior_draws(layer, head)[:, query].double().mean(0).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(pi.y, kit.finite(r.prior_weights[layer, head, query]))
    assert np.abs(post_bar.y - soft.y).max() > 0.1                # the bars moved with k; the markers did not
    for bar in (prior_bar, post_bar):
        lo, hi = np.asarray(bar.customdata).T
        assert (lo <= bar.y).all() and (bar.y <= hi).all()        # inside their 5-95% whiskers
    caption = captions.prior_posterior_caption(r, layer, head, query)
    top = int(mean.argmax())
    assert f"{r.posterior_mean_weights[layer, head, query, top]:.2f} on average" in caption
    assert "towards uniform, the more as k shrinks" in caption
    maps = [t for t in explorer.sampled_maps_figure(r, layer, head).data if t.type == "heatmap"]
    np.testing.assert_allclose(maps[0].z, r.sample_weights[:, layer, head].double().mean(0).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(maps[1].z, kit.finite(r.softmax_weights[layer, head]))
    cap = captions.prediction_caption(r)
    assert f"f(E[w]) = {float(r.mean_attention_probs[1]):.3f}" in cap
    assert f"f(softmax) = {float(r.softmax_probs[1]):.3f}" in cap
    assert " ".join(with_se(r, "gap", r.gap, sign=True)) in cap
    assert " ".join(with_se(r, "gap_softmax", r.gap_softmax, sign=True)) in cap


def test_kl_colour_bar_ticks_are_distinct(bam_wc):
    r = fake("weibull")
    r.kl = 2574.6 + 0.8 * torch.rand(r.kl.shape, generator=torch.Generator().manual_seed(0))
    smallest_beta = bam_wc.explain(TEXT, 8, seed=0, beta=families.get("weibull").spec("beta").low)
    for result in (r, smallest_beta):
        for relative in (False, True):
            main = [t for t in explorer.layer_head_figure(result, "kl", relative=relative).data if t.name == "kl"][0]
            labels = list(main.colorbar.ticktext)
            assert len(set(labels)) == len(labels) == len(main.colorbar.tickvals), labels
            assert main.zmin <= min(main.colorbar.tickvals) and max(main.colorbar.tickvals) <= main.zmax


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet"])
def test_density_is_on_log10_axis_with_a_bounded_y(family):
    r = fake(family)
    fig = explorer.key_density_figure(r, 5, 0, 0, 1)
    densities = r.key_densities(5, 0, 0, 1)
    assert fig.layout.xaxis.title.text.replace("<br>", " ") == densities["label"] and "log10" in densities["label"]
    assert list(fig.layout.yaxis.range) == [0.0, 1.08]
    for trace, which in zip(fig.data, ("prior", "posterior"), strict=True):
        assert max(trace.y) == pytest.approx(1.0)
        np.testing.assert_allclose(trace.customdata, densities[which])
    assert "log10" in captions.key_density_caption(r, 5, 0, 0, 1)


def test_density_none_gives_a_message(monkeypatch):
    r = fake("weibull")
    monkeypatch.setattr(type(r), "key_densities", lambda self, *args, **kw: None)
    fig = explorer.key_density_figure(r, 5, 0, 0, 1)
    assert not fig.data and "no continuous density" in fig.layout.annotations[0].text.replace("<br>", " ")
    go.Figure(fig.to_dict())


def test_spread_is_computed_once_per_result(monkeypatch):
    r = fake("weibull")
    calls = []
    real = torch.Tensor.sqrt_             # one call per computation of the spread
    monkeypatch.setattr(torch.Tensor, "sqrt_", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    explorer.layer_head_figure(r, "spread")
    captions.layer_head_caption(r)
    explorer.layer_head_figure(r, "spread", selected=(5, 0))
    assert len(calls) == 1
    explorer.layer_head_figure(fake("weibull", seed=1), "spread")
    assert len(calls) == 2


def test_density_overflow_gives_a_message_not_an_error():
    r = fake("dirichlet", T=4, L=1, H=1, stochastic_layers=[0])
    r.posterior_params["concentration"][0, 0, 0] = torch.tensor([1e-300, 1e-300, 1e300, 1e-300])
    fig = explorer.key_density_figure(r, 0, 0, 0, 0)
    assert_finite(fig)


def test_signed_never_prints_minus_zero():
    assert signed(-0.0001) == "+0.000" and signed(0.0) == "+0.000"
    assert signed(-0.0126) == "-0.013" and signed(0.2) == "+0.200"
    r = fake("weibull")
    r.mc_probs = torch.tensor([0.5, 0.5])
    r.mean_attention_probs, r.softmax_probs = torch.tensor([0.50001, 0.49999]), torch.tensor([0.49999, 0.50001])
    caption = captions.prediction_caption(r)
    assert "E[f(z)] − f(E[w]) = +0.000 ±" in caption and "E[f(z)] − f(softmax) = +0.000 ±" in caption


@pytest.mark.parametrize("total, epistemic, says", [
    (0.05, 0.04, "sure"),                 # under a tenth of ln 2, whatever its split
    (0.40, 0.25, "from attention"),
    (0.40, 0.10, "sentence itself mixed"),
])
def test_the_uncertainty_verdict_follows_the_numbers(total, epistemic, says):
    """The verdict reads the entropy bar: its total H[E p] and its plug-in split, not the headline's
    bias-corrected MI (here larger, enough to turn every verdict had it been read)."""
    class R:
        predictive_entropy, expected_entropy, mutual_information_plugin = total, total - epistemic, epistemic
        mutual_information = 2 * epistemic + 0.1
        classes = ["negative", "positive"]
    assert says in captions.uncertainty_verdict(R())


def test_sure_is_a_tenth_of_the_largest_entropy_over_the_models_classes():
    class R:
        predictive_entropy, expected_entropy = 0.3, 0.3       # a tenth of ln 50 is 0.39, of ln 2 0.069
        mutual_information_plugin = mutual_information = 0.0
        classes = [f"c{c}" for c in range(50)]
    assert "sure" in captions.uncertainty_verdict(R())
    R.classes = ["negative", "positive"]
    assert "sure" not in captions.uncertainty_verdict(R())


def test_the_prediction_caption_ends_with_its_verdict():
    r = fake("weibull")
    assert captions.prediction_caption(r).endswith(captions.uncertainty_verdict(r))


# ---- the panel bugs ------------------------------------------------------------------------------
def test_a_lone_stochastic_layer_sits_on_its_own_row():
    """categorical is stochastic in layer 5 alone. plotly.js places a one-row heatmap on a category
    axis by its raw label, away from its tick and the selection square: rows are numbers on linear
    axes instead, each heatmap a run of consecutive layers, so row y spans [y - 0.5, y + 0.5]."""
    for r, selected in ((fake("categorical"), (5, 2)),
                        (fake("weibull", stochastic_layers=[1, 3, 4]), (3, 0)),
                        (fake("weibull", H=1, L=2, stochastic_layers=[1]), (1, 0))):
        L, H = r.kl.shape
        fig = explorer.layer_head_figure(r, "spread", selected=selected)
        layout = fig.layout
        assert layout.yaxis.type is None and layout.xaxis.type is None           # linear, not category
        assert list(layout.yaxis.tickvals) == list(range(L)) and list(layout.yaxis.range) == [L - 0.5, -0.5]
        assert list(layout.xaxis.tickvals) == list(range(0, H, 3)) and list(layout.xaxis.range) == [-0.5, H - 0.5]
        rows = []
        for t in fig.data:
            if t.type == "heatmap":
                assert list(t.y) == list(range(t.y[0], t.y[0] + len(t.y))), t.y      # consecutive
                assert list(t.x) == list(range(H)) and np.asarray(t.z).shape == (len(t.y), H)
                rows += list(t.y)
        assert sorted(rows) == list(range(L))                                         # each row once
        main = [t for t in fig.data if t.name == "spread"]
        assert sorted(y for t in main for y in t.y) == r.stochastic_layers
        assert all(row_labels(fig, t) == [f"layer {y}" for y in t.y] for t in main)
        marker = [t for t in fig.data if t.name == "selected"][0]
        assert (marker.x[0], marker.y[0]) == (selected[1], selected[0])


@pytest.mark.parametrize("family", ["mc-dropout", "categorical"])
def test_the_density_message_fits_a_narrow_column(family):
    """plotly never wraps an annotation: a one-line message centred in the density column was cut
    off on both sides. Lines stay within MESSAGE_CHARS, with every word kept."""
    r = fake(family)
    fig = explorer.key_density_figure(r, r.stochastic_layers[-1], 0, 0, 1)
    text = fig.layout.annotations[0].text
    lines = text.split("<br>")
    assert len(lines) > 1 and all(len(line) <= style.MESSAGE_CHARS for line in lines), lines
    assert " ".join(lines) == Facts.of(r).no_density(r.stochastic_layers[-1])
    long = kit.message_figure("word " * 400).layout.annotations[0].text.split("<br>")
    assert all(len(line) <= style.MESSAGE_CHARS for line in long) and long[-1].endswith("…")
    assert 20 * len(long) <= 380 - 60                                               # fits the height


def test_one_sample_of_a_stochastic_layer_is_not_called_deterministic():
    r = fake("weibull", S=1)                                     # layers 4, 5 stochastic
    for caption in all_captions(r, 5):
        rest = caption.replace("ordinary, deterministic attention", "").replace("deterministic pass", "")
        assert "deterministic" not in rest, caption
    assert "1 attention sample was drawn" in captions.sampled_maps_caption(r, 5, 0)
    assert "1 attention sample" in captions.layer_head_caption(r)
    assert "deterministic" in captions.sampled_maps_caption(r, 0, 0)             # layer 0 is


def test_mc_dropout_has_no_grey_rows_and_no_prior():
    r = fake("mc-dropout")                                       # every layer stochastic, family softmax
    assert r.family == "softmax" and r.stochastic_layers == list(range(6))
    caption = captions.layer_head_caption(r)
    assert "grey rows" not in caption and "Every layer is stochastic through dropout" in caption
    assert "no prior" in caption and "moved furthest" not in caption and "KL 0" not in caption
    kl = explorer.layer_head_figure(r, "kl", selected=(0, 0))
    assert {t.name for t in kl.data} == {"no prior", "selected"} and "no learned prior" in kl.layout.title.text
    assert "no prior" in captions.prior_posterior_caption(r, 3, 0, 0)
    assert "Dropout" in captions.key_density_caption(r, 3, 0, 0, 1)
    cat = captions.layer_head_caption(fake("categorical"))
    assert "learns no separate prior" in cat and "moved furthest" not in cat
    assert "samples from" in captions.prior_posterior_caption(fake("categorical"), 5, 0, 0)
    assert "moved furthest" in captions.layer_head_caption(fake("weibull"))


def test_singular_and_plural():
    assert "Only layer 5 is stochastic;" in captions.layer_head_caption(fake("categorical"))
    assert "Only layers 4 and 5 are stochastic;" in captions.layer_head_caption(fake("weibull"))
    assert "Only layers 3, 4 and 5 are stochastic;" in captions.layer_head_caption(
        fake("weibull", stochastic_layers=[3, 4, 5]))
    one = fake("weibull", S=1)
    assert explorer.prediction_figure(one).layout.title.text.endswith("across 1 attention sample")
    assert explorer.prediction_figure(fake("weibull")).layout.title.text.endswith("across 8 attention samples")
    assert explorer.sampled_maps_figure(one, 5, 0).data[2].name == "std over 1 sample"
    assert "1 attention samples" not in " ".join(all_captions(one, 5) + all_captions(fake("softmax"), 5))
    assert count(1, "sample") == "1 sample" and count(0, "sample") == "0 samples"


FACTS = {   # family: (stochastic layers, has a density, prior)
    "weibull": ((4, 5), True, "learned"), "lognormal": ((4, 5), True, "learned"),
    "dirichlet": ((4, 5), True, "learned"), "categorical": ((5,), False, "alignment"),
    "softmax": ((), False, "none"), "mc-dropout": ((0, 1, 2, 3, 4, 5), False, "none"),
}


@pytest.mark.parametrize("family", FACTS)
def test_the_caption_facts_come_from_the_registry(family):
    facts = Facts.of(fake(family))
    layers, density, prior = FACTS[family]
    assert (facts.stochastic_layers, facts.has_density, facts.prior) == (layers, density, prior)
    assert facts.dropout == (family == "mc-dropout")
    assert (facts.no_prior() is None) == (prior == "learned")
    assert (facts.no_density(5) is None) == density
    assert facts.deterministic(5) is None if layers else "no stochastic layer" in facts.deterministic(5)


def test_every_caption_goes_through_the_facts(monkeypatch):
    """One home for what the panel captions say about a model: each asks `Facts.of`."""
    names = ["prior_posterior_caption", "key_density_caption", "sampled_maps_caption", "prediction_caption",
             "layer_head_caption"]
    r = fake("weibull")
    real = Facts.of.__func__
    calls = []
    monkeypatch.setattr(Facts, "of", classmethod(lambda cls, res: calls.append(1) or real(cls, res)))
    for name in names:
        calls.clear()
        fn = getattr(captions, name)
        n_args = fn.__code__.co_argcount - len(fn.__defaults__ or ())
        fn(r, *[5, 0, 0, 1][:n_args - 1])
        assert calls, f"{name} does not use Facts"


def _sweep(mi, trained=3.0):
    from bam_viz.inference.sweep import Sweep

    values = np.array([0.2, 1.0, 3.0, 10.0, 1000.0])
    p = np.array([0.4, 0.5, 0.6, 0.62, 0.62])
    return Sweep(name="shape_k", values=values, p_mc=p, p_mc_se=np.array([0.05, 0.02, 0.01, 0.0, 0.0]),
                 p_mean_attention=np.array([0.45, 0.55, 0.61, 0.62, 0.62]), p_softmax=np.full(5, 0.62),
                 mutual_information=np.asarray(mi, dtype=float), trained=trained, scale="log", n_samples=32, seed=0)


def test_sweep_figure_marks_the_band_and_both_values():
    s = _sweep([0.2, 0.05, 0.01, 0.0, 0.0])
    fig = explorer.sweep_figure(s, current=1.0)
    validated = go.Figure(fig.to_dict())
    assert json.loads(validated.to_json()) == json.loads(fig.to_json())
    band = fig.data[0]
    assert band.fill == "toself" and len(band.x) == 10
    t = stats.t.ppf(0.975, s.n_samples - 1)                # the 95% interval at the sweep's 32 samples
    np.testing.assert_allclose(band.y[:5], np.clip(s.p_mc + t * s.p_mc_se, 0, 1))
    np.testing.assert_allclose(band.y[5:], np.clip(s.p_mc - t * s.p_mc_se, 0, 1)[::-1])
    assert band.name == LABELS["mc_band"] == "E[f(z)], 95% interval (t, S − 1 df)"
    assert fig.layout.xaxis.type == "log"
    assert sorted(round(shape.x0, 6) for shape in fig.layout.shapes) == [1.0, 3.0]
    # on a log axis plotly places annotations by log10 of the value
    assert sorted(round(a.x, 6) for a in fig.layout.annotations) == [0.0, round(np.log10(3.0), 6)]
    one = explorer.sweep_figure(s, current=3.0)
    assert len(one.layout.shapes) == 1 and "now = trained" in one.layout.annotations[0].text


def test_sweep_caption_reads_the_numbers():
    busy = captions.sweep_caption(_sweep([0.2, 0.05, 0.01, 0.0, 0.0]), current=1.0)
    assert "disagree most at shape_k = 0.2 (mutual information 0.200 nats, bias-corrected (jackknife))" in busy
    calm = captions.sweep_caption(_sweep([0.0, 0.0, 0.0, 0.0, 0.0]), current=1.0)
    assert "agree everywhere" in calm
    assert "E[f(z)] = 0.500 ± 0.020, f(E[w]) = 0.550 and f(softmax) = 0.620" in calm


# ---- long sentences: a window of tokens ---------------------------------------------------------
def test_the_token_window_keeps_cls_and_sep_and_a_run_between():
    W, most = style.TOKEN_WINDOW, style.MAX_TICK_TOKENS
    assert W < most
    assert tokens.token_window(most, 5) == list(range(most)) and tokens.window_starts(most) == []
    assert tokens.token_window(most + 1, 5) == [0, *range(5, 5 + W - 2), most]
    assert tokens.token_window(128, 60) == [0, *range(60, 60 + W - 2), 127]
    assert tokens.window_starts(128) == list(range(1, 128 - W + 2))
    for start in tokens.window_starts(128):                     # every start the control offers fits
        window = tokens.token_window(128, start)
        assert len(window) == W and window[0] == 0 and window[-1] == 127
    assert tokens.token_window(128, -5) == tokens.token_window(128, 1)          # clamped at both ends
    assert tokens.token_window(128, 10_000) == tokens.token_window(128, 128 - W + 1)
    assert tokens.window_around(128, 0) == 1 and tokens.window_around(128, 127) == 128 - W + 1
    middle = tokens.token_window(128, tokens.window_around(128, 64))[1:-1]
    assert middle[len(middle) // 2] == 64                       # the query in the middle of its run
    assert tokens.window_label(128, 41) == f"41–{41 + W - 3}"


def test_a_long_sentence_shows_a_window_of_real_weights():
    T, W, layer = 128, style.TOKEN_WINDOW, 5
    r = fake("weibull", T=T, S=4)
    shown = tokens.token_window(T, 60)
    cells = np.ix_(shown, shown)
    labels = [tokens.axis_labels(r.tokens)[i] for i in shown]
    fig = explorer.sampled_maps_figure(r, layer, 0, shown=shown)
    maps = [t for t in fig.data if t.type == "heatmap"]
    for t in maps:
        assert np.asarray(t.z).shape == (W, W)
        for axis in (t.x, t.y):
            assert [label.replace(style.ZERO_WIDTH, "") for label in axis] == labels
    # every cell is the real weight: no renormalising over the keys shown
    np.testing.assert_allclose(maps[0].z, r.sample_weights[:, layer, 0].double().mean(0).numpy()[cells], rtol=1e-6)
    np.testing.assert_allclose(maps[1].z, r.softmax_weights[layer, 0].double().numpy()[cells])
    np.testing.assert_allclose(maps[2].z, r.sample_weights[:, layer, 0].double().std(0).numpy()[cells])
    np.testing.assert_allclose(maps[3].z, r.sample_weights[0, layer, 0].double().numpy()[cells])
    assert np.asarray(maps[0].z).sum(-1).max() < 1.0
    layout = fig.layout
    assert layout.xaxis.showticklabels and layout.yaxis.showticklabels
    assert len(layout.xaxis.tickvals) == 3 * W and len(layout.yaxis.tickvals) == 2 * W   # 6 maps, 3 across
    assert f"{W} of {T} tokens (0, 60–{60 + W - 3} and 127)" in layout.title.text
    # the default on a long sentence is the window from [CLS]; the title says so too
    default = explorer.sampled_maps_figure(r, layer, 0)
    assert np.asarray(default.data[0].z).shape == (W, W) and f"{W} of {T} tokens" in default.layout.title.text
    bars = explorer.prior_posterior_figure(r, layer, 0, 70, shown=shown)
    prior_mean = r.prior_draws(layer, 0)[:, 70].double().mean(0)
    post_mean = r.sample_weights[:, layer, 0, 70].double().mean(0)
    expected = (prior_mean, post_mean, r.prior_weights[layer, 0, 70], r.softmax_weights[layer, 0, 70])
    for t, weights in zip(bars.data, expected, strict=True):
        assert list(t.x) == labels
        np.testing.assert_allclose(t.y, weights.double().numpy()[shown], rtol=1e-6)
    assert bars.layout.xaxis.showticklabels and f"{W} of {T} keys" in bars.layout.title.text
    assert len(explorer.prior_posterior_figure(r, layer, 0, 70).data[0].x) == W    # default: around the query


def test_a_short_sentence_shows_every_token_as_before():
    r = fake("weibull", T=10)
    every = list(range(10))
    for build in (lambda shown: explorer.sampled_maps_figure(r, 5, 0, shown=shown),
                  lambda shown: explorer.prior_posterior_figure(r, 5, 0, 3, shown=shown)):
        fig = build(None)
        assert fig.to_json() == build(every).to_json()
        assert " of 10 " not in fig.layout.title.text
    np.testing.assert_allclose(explorer.sampled_maps_figure(r, 5, 0).data[0].z, r.posterior_mean_weights[5, 0].double())
    for caption in (captions.sampled_maps_caption(r, 5, 0), captions.prior_posterior_caption(r, 5, 0, 3)):
        assert " of 10 " not in caption and "not shown" not in caption
    assert "each row sums to 1)" in captions.sampled_maps_caption(r, 5, 0)


@pytest.mark.parametrize("shown", [[], [0, 0, 1], [0, 10], [-1, 2]])
def test_shown_tokens_are_checked(shown):
    r = fake("weibull", T=10)
    with pytest.raises(ValueError, match="distinct token indices"):
        explorer.sampled_maps_figure(r, 5, 0, shown=shown)
    with pytest.raises(ValueError, match="distinct token indices"):
        explorer.prior_posterior_figure(r, 5, 0, 0, shown=shown)


def test_window_captions_say_how_much_weight_is_shown():
    T, W = 128, style.TOKEN_WINDOW
    r = fake("weibull", T=T, S=4)
    shown = tokens.token_window(T, 60)
    mean = r.posterior_mean_weights[5, 0].double().numpy()
    cap = captions.sampled_maps_caption(r, 5, 0, shown=shown)
    assert f"{W} of {T} tokens" in cap and "each row sums to 1 over all its keys" in cap
    assert f"{mean[np.ix_(shown, shown)].sum(-1).mean():.2f} on average" in cap
    std = r.sample_weights[:, 5, 0].double().std(0).numpy()[np.ix_(shown, shown)]
    assert f"std {std.max():.3f}" in cap                        # the most uncertain cell shown
    query = 70
    cap = captions.prior_posterior_caption(r, 5, 0, query, shown=shown)
    assert f"{W} of {T} keys" in cap
    assert f"hold {mean[query, shown].sum():.2f} of the query's mean attention E[w]" in cap
    for top, inside in ((62, True), (12, False)):                 # “film” in the window, then left of it
        weights = r.sample_weights.clone()
        weights[:, 5, 0, query] = 0.1 / (T - 1)
        weights[:, 5, 0, query, top] = 0.9
        r = dataclasses.replace(r, sample_weights=weights)        # a new result: E[w] is cached
        cap = captions.prior_posterior_caption(r, 5, 0, query, shown=shown)
        assert "attends most to “film”" in cap and ("is not among the bars shown" in cap) is not inside
    for deterministic in (captions.sampled_maps_caption(r, 0, 0, shown=shown),
                          captions.prior_posterior_caption(r, 0, 0, query, shown=shown)):
        assert f"{W} of {T}" in deterministic


def _with_samples(r, p_positive, at_mean=0.5):
    """`r` with these P(positive) samples, f(E[w]) = f(softmax) = `at_mean` and no jackknife
    replicates: both gaps' SE is then the paired one."""
    probs = torch.tensor([[1 - p, p] for p in p_positive])
    at = torch.tensor([1 - at_mean, at_mean])
    return dataclasses.replace(r, sample_probs=probs, mc_probs=probs.mean(0), n_samples=len(p_positive),
                               softmax_probs=at, mean_attention_probs=at, mean_attention_loo_probs=None)


def test_with_se_gives_value_and_error_to_the_same_decimals():
    r = _with_samples(fake("weibull"), [0.2, 0.4, 0.9, 0.5], at_mean=0.6)      # SE 0.147
    assert with_se(r, "p_target", 0.5) == ("0.500", "± 0.147")
    assert with_se(r, "gap", r.gap, sign=True) == (signed(r.gap, 3), "± 0.147")
    tiny = _with_samples(fake("weibull"), [0.5001, 0.5002, 0.5003, 0.5004])
    assert with_se(tiny, "p_target", 0.50025) == ("0.50025", "± 0.00006")   # never "± 0.000"
    one = _with_samples(fake("weibull"), [0.7])
    assert with_se(one, "p_target", 0.7)[1] == "needs ≥ 2 samples"
    assert "at least 2 samples" in captions.se_help(one, "p_target")
    assert with_se(fake("softmax"), "gap", 0.0)[1] == "exact"
    assert "deterministic" in captions.se_help(fake("softmax"), "gap")
    assert "jackknife" in captions.se_help(r, "mutual_information")


def test_the_gap_verdict_is_its_t_interval_at_the_samples_drawn():
    noisy = _with_samples(fake("weibull"), [0.2, 0.4, 0.9, 0.5], at_mean=0.6)    # |gap| 0.1 < 0.29
    assert "not distinguishable from zero" in captions.monte_carlo_caption(noisy)
    # |gap| 0.1 beyond 2 SE (0.082) but inside t(3 df) SE (0.130): at 4 samples its sign is noise
    few = _with_samples(fake("weibull"), [0.6, 0.7, 0.8, 0.7], at_mean=0.6)
    assert 2 * few.se.gap < abs(few.gap) < interval_multiplier(4) * few.se.gap and few.gap_distinguishable is False
    assert "± 0.130, includes 0" in captions.monte_carlo_caption(few)
    many = _with_samples(fake("weibull"), [0.6, 0.7, 0.8, 0.7] * 8, at_mean=0.6)   # 32 samples: SE 0.0127
    assert many.gap_distinguishable is True and "± 0.026, excludes 0" in captions.monte_carlo_caption(many)
    clear = _with_samples(fake("weibull"), [0.80, 0.81, 0.79, 0.80], at_mean=0.6)  # |gap| 0.2 > 0.01
    assert "The gap E[f(z)] − f(E[w]) is distinguishable from zero" in captions.monte_carlo_caption(clear)
    assert "Raise n_samples" in captions.monte_carlo_caption(_with_samples(fake("weibull"), [0.7]))
    assert "exact" in captions.monte_carlo_caption(fake("softmax"))


def test_one_decimals_rule_for_a_value_and_its_error():
    assert [se_digits(se) for se in (None, 0.0, 0.004, 0.001, 0.0009, 0.00006, 1e-9)] == [3, 3, 3, 3, 4, 5, 6]
    assert se_digits(0.04, digits=1) == 2


def test_the_gap_sentence_is_the_headline_verdict():
    sure = captions.gap_sentence(True, "0.010")
    assert sure == ("The gap E[f(z)] − f(E[w]) is distinguishable from zero: its 95% interval (t, S − 1 df), "
                    "± 0.010, excludes 0.")
    assert LABELS["interval"] in sure and LABELS["interval"] in LABELS["mc_band"] and "2 SE" not in sure
    unsure = captions.gap_sentence(False, "0.290")
    assert unsure.startswith("The gap E[f(z)] − f(E[w]) is not distinguishable from zero: its 95% interval "
                             "(t, S − 1 df), ± 0.290, includes 0")
    assert unsure.endswith("cannot be told from Monte Carlo noise.")
    assert captions.gap_sentence(False, "0.290", remedy=True).endswith("noise; the interval narrows as 1/√n_samples.")
    noisy = _with_samples(fake("weibull"), [0.2, 0.4, 0.9, 0.5], at_mean=0.6)
    half = interval_multiplier(4) * noisy.se.gap                                # t(3 df) = 3.18
    shown = f"{half:.{se_digits(half)}f}"
    assert captions.gap_sentence(False, shown, remedy=True) in captions.monte_carlo_caption(noisy)


OLD_NAMES = [   # what `bam_viz.charts` offered, and what notebooks used of it
    "Facts", "axis_labels", "count", "entropy_figure", "is_stochastic", "key_density_caption", "key_density_figure",
    "layer_head_caption", "layer_head_figure", "mi_estimator", "monte_carlo_caption", "prediction_caption",
    "prediction_figure", "prior_posterior_caption", "prior_posterior_figure", "sampled_maps_caption",
    "sampled_maps_figure", "se_help", "signed", "sweep_caption", "sweep_figure", "token_window",
    "uncertainty_verdict", "window_around", "window_label", "window_starts", "with_se", "display_token",
    "MAX_TICK_TOKENS", "TOKEN_WINDOW", "ZERO_WIDTH", "MESSAGE_CHARS", "KL_DECADES", "STD_RANGE", "WEIGHT_RANGE",
    "PRIOR_COLOUR", "POSTERIOR_COLOUR", "_np", "_figure", "_message_figure", "_axis", "_layout", "_margin",
    "_label_px", "_ticks", "_se_digits",
]


def test_the_old_import_paths_still_resolve():
    import bam_viz.charts as old
    import bam_viz.plots

    for name in OLD_NAMES:
        assert getattr(old, name) is not None, name
    assert old.prior_posterior_figure is explorer.prior_posterior_figure is bam_viz.plots.prior_posterior_figure
    assert old._np is kit.finite and old.with_se is with_se and old.Facts is Facts
    assert bam_viz.plots.layer_head_caption is captions.layer_head_caption
    with pytest.raises(AttributeError, match="views/text.py"):
        old.md_escape                                                       # noqa: B018 (a page helper now)
    with pytest.raises(AttributeError):
        old.no_such_name                                                    # noqa: B018


# ---- K classes: the class shown, and the predictive distribution over all of them --------------
def _validated(fig: go.Figure) -> go.Figure:
    assert json.loads(go.Figure(fig.to_dict()).to_json()) == json.loads(fig.to_json())
    return fig


@pytest.mark.parametrize("n_classes", [3, 50])
def test_the_prediction_panels_show_the_target_class_out_of_k(n_classes):
    import math

    r = fake("weibull", S=16, n_classes=n_classes)
    mc = r.sample_probs.double().mean(0)
    assert r.target == r.predicted == int(mc.argmax())
    for t in sorted({0, r.predicted, n_classes - 1}):
        v = r.for_target(t)
        fig = _validated(explorer.prediction_figure(v))
        assert fig.layout.title.text.startswith(f"P(c{t}) across") and fig.layout.xaxis.title.text == f"P(c{t})"
        each = next(d for d in fig.data if d.name == "each sample")
        np.testing.assert_allclose(each.x, r.sample_probs[:, t].double().numpy(), rtol=1e-6)
        lines = {d.name: d.x[0] for d in fig.data if getattr(d, "mode", None) == "lines"}
        assert lines[style.PREDICTION_MC] == pytest.approx(float(mc[t]), abs=1e-6)
        assert lines[LABELS["mean_attention"]] == pytest.approx(float(r.mean_attention_probs[t]))
        assert fig.layout.shapes[0].x0 == pytest.approx(1 / n_classes)               # chance
        cap = captions.prediction_caption(v)
        assert f"gives its own P(c{t})" in cap and f"at most ln {n_classes} = {math.log(n_classes):.3f}" in cap
        assert (f"the model's answer: c{t}" if t == r.predicted else f"the model's answer is c{r.predicted}") in cap
        assert " ".join(with_se(v, "gap", float(mc[t] - r.mean_attention_probs[t]), sign=True)) in cap
    entropy = _validated(explorer.entropy_figure(r))
    assert f"(at most ln {n_classes} = {math.log(n_classes):.3f})" in entropy.layout.title.text
    assert entropy.layout.xaxis.range[1] == pytest.approx(max(math.log(n_classes), r.predictive_entropy) * 1.02,
                                                          rel=1e-3)


@pytest.mark.parametrize("n_classes", [2, 3, 10, 11, 50])
def test_the_predictive_distribution_is_every_class_or_the_top_ones_the_target_and_the_rest(n_classes):
    from bam_viz.plots.classes import class_figure, rest_label, shown_classes

    r = fake("weibull", S=16, n_classes=n_classes)
    mc = kit.finite(r.mc_probs)
    least = int(np.argmin(mc))
    fig = _validated(class_figure(r.for_target(least)))
    bars, marks = fig.data[0], fig.data[1]
    top, rest = shown_classes(mc, least)
    shown = [r.classes[c] for c in top]
    assert list(bars.y) == list(marks.y) == shown and least in top
    np.testing.assert_allclose(bars.x, mc[top])
    np.testing.assert_allclose(marks.x, kit.finite(r.softmax_probs)[top])
    assert [c == style.MC_COLOUR for c in bars.marker.color] == [c == least for c in top]
    lo = np.quantile(kit.finite(r.sample_probs), 0.05, axis=0)
    np.testing.assert_allclose(np.asarray(bars.x) - np.asarray(bars.error_x.arrayminus), lo[top], atol=1e-12)
    if n_classes <= style.CLASS_BARS:
        assert rest == [] and len(fig.data) == 2 and sorted(top) == list(range(n_classes))
        assert list(bars.x) == sorted(bars.x, reverse=True)                 # most probable on top
    else:
        assert len(top) == style.CLASS_BARS - 1 and sorted(top + rest) == list(range(n_classes))
        summed = fig.data[2]
        assert list(summed.y) == [rest_label(len(rest))] and summed.x[0] == pytest.approx(mc[rest].sum())
        assert min(mc[top[:-1]]) >= max(mc[rest])                           # the most probable, then the target
    assert fig.layout.height == 110 + 26 * (len(top) + bool(rest))


def test_class_names_reach_a_figure_escaped_and_a_caption_as_text():
    from bam_viz.plots.classes import class_figure

    r = fake("weibull", S=8, n_classes=3)
    r.classes = ["<b>bold</b>", "a & b", "zero\u200bwidth"]
    fig = class_figure(r)
    assert set(fig.data[0].y) == {"&lt;b&gt;bold&lt;/b&gt;", "a &amp; b", "zero\\u200bwidth"}
    for t, shown in ((0, "P(&lt;b&gt;bold&lt;/b&gt;)"), (2, "P(zero\\u200bwidth)")):
        assert explorer.prediction_figure(r.for_target(t)).layout.xaxis.title.text == shown
    assert "gives its own P(<b>bold</b>)" in captions.prediction_caption(r.for_target(0))   # plain text


def test_the_sweep_is_of_one_named_class():
    s = dataclasses.replace(_sweep([0.2, 0.05, 0.01, 0.0, 0.0]), classes=("a", "b", "<c>"), target=2)
    fig = _validated(explorer.sweep_figure(s, current=1.0))
    assert fig.layout.title.text.startswith("P(&lt;c&gt;) and the mutual information")
    assert fig.layout.yaxis.title.text == "P(&lt;c&gt;)"
    assert "Green: E[f(z)] of P(<c>)" in captions.sweep_caption(s, current=1.0)
    assert explorer.sweep_figure(_sweep([0.2, 0.05, 0.01, 0.0, 0.0])).layout.yaxis.title.text == "P(positive)"
