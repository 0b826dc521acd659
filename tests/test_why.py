"""bam_viz.plots.why: the Why section's pictures, without a browser."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import pytest

from bam_viz.inference.posterior import NOISE_SES
from bam_viz.plots import why

HOSTILE = "<img src=x onerror=alert(1)>"


def raw_text(fig) -> str:
    """Every string of the figure as plotly.js receives it, unescaped (`to_json` writes < as \\u003c,
    which would hide a tag from a search for it)."""
    return json.dumps(fig.to_dict(), default=str, ensure_ascii=False)


def strip(tokens, mean, low=None, high=None, softmax=None, target="positive"):
    mean = np.asarray(mean, dtype=float)
    return why.token_strip_html(tokens, mean, mean if low is None else low, mean if high is None else high,
                                mean if softmax is None else softmax, target)


def test_tokens_are_escaped_text_never_markup():
    out = strip(["[CLS]", HOSTILE, '"quoted" & <b>', "[SEP]"], [0.0, 0.1, -0.1, 0.0])
    assert "<img" not in out and "<b>" not in out and "onerror=alert(1)>" not in out
    assert html.escape(HOSTILE, quote=False) in out                 # shown, as text
    # Attribute values (the tooltips) are quoted and escaped: no quote can close them early.
    for title in re.findall(r'title="([^"]*)"', out):
        assert "<" not in title and ">" not in title


def test_colours_are_zero_centred_on_a_fixed_scale():
    s = why.ATTRIBUTION_SCALE
    assert why.colour(0.0) == "#ffffff"
    assert why.colour(s) == "#{:02x}{:02x}{:02x}".format(*why.POSITIVE_RGB)
    assert why.colour(-s) == "#{:02x}{:02x}{:02x}".format(*why.NEGATIVE_RGB)
    assert why.colour(10 * s) == why.colour(s) and why.colour(-10 * s) == why.colour(-s)   # clipped
    assert why.colour(s / 2) not in (why.colour(s), "#ffffff")
    assert why.colour(float("nan")) == "#ffffff"


def test_the_band_is_drawn_where_its_numbers_say():
    out = strip(["a"], [0.0], low=[-why.ATTRIBUTION_SCALE / 2], high=[why.ATTRIBUTION_SCALE],
                softmax=[why.ATTRIBUTION_SCALE / 5])
    band = re.search(r'class="bv-range" style="left:([\d.]+)%;width:([\d.]+)%"', out)
    assert (float(band[1]), float(band[2])) == (25.0, 75.0)            # -scale/2 -> 25%, +scale -> 100%
    assert 'class="bv-dot" style="left:50.0%"' in out                  # the mean, at zero
    assert 'class="bv-softmax" style="left:60.0%"' in out              # f(softmax)'s, at a fifth of the scale
    assert "<svg" not in out                                           # plain boxes (views/why_view.py says why)
    assert f"{why.ATTRIBUTION_SCALE / 5:+.3f} at the deterministic pass f(softmax)" in out
    assert "at the deterministic pass f(softmax)" in why.legend_html("positive")
    assert "mean attention" not in out + why.legend_html("positive")


def test_bad_arrays_are_refused_or_drawn_finite():
    with pytest.raises(ValueError, match="3 tokens"):
        why.token_strip_html(["a", "b", "c"], np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2), "positive")
    out = strip(["a", "b"], [float("nan"), float("inf")])
    assert "nan" not in out.lower() and "inf" not in out.lower()


def test_figures_are_valid_plotly_and_escape_tokens():
    tokens = ["[CLS]", HOSTILE, "good", "[SEP]"]
    T = len(tokens)
    lp = SimpleNamespace(tokens=tokens, labels=("negative", "positive"), method="importance",
                         prior=np.full(T, 1 / T), posterior=np.array([[0.1, 0.6, 0.2, 0.1], [0.1, 0.1, 0.7, 0.1]]),
                         log_lik=np.log(np.full((2, T), 0.5)), shift_se=np.full((2, T), 0.02))
    rng = np.random.default_rng(0)
    figures = [why.label_posterior_figure(lp),
               why.attention_attribution_figure(tokens, rng.dirichlet(np.ones(T), T), rng.normal(size=(T, T)),
                                                rng.random((T, T)), 5, 0),
               why.attention_attribution_figure(tokens, rng.dirichlet(np.ones(T), T), np.zeros((T, T)), None, 2, 3)]
    for fig in figures:
        go.Figure(fig.to_dict())                                       # plotly's own validation
        assert "<img" not in raw_text(fig) and html.escape(HOSTILE, quote=False) in raw_text(fig)
    assert len(figures[1].data) == 3 and len(figures[2].data) == 2
    attribution = figures[1].data[1]
    assert attribution.zmin == -attribution.zmax                       # zero-centred


# ---- K classes ----------------------------------------------------------------------------------
def posterior_of(labels, target=None, tokens=("[CLS]", "good", "film", "[SEP]")):
    """A LabelPosterior over `labels` whose rows differ label by label (prior uniform)."""
    from bam_viz.inference.posterior import LabelPosterior

    K, T = len(labels), len(tokens)
    rng = np.random.default_rng(1)
    posterior = rng.dirichlet(np.ones(T), K)
    p_y = rng.dirichlet(np.ones(K))
    return LabelPosterior(tokens=tuple(tokens), labels=tuple(labels), prior=p_y @ posterior, posterior=posterior,
                          log_lik=np.log(np.full((K, T), 0.5)), log_marginal=np.log(p_y), method="importance",
                          ess=np.full(K, 30.0), n_samples=64, layer=5, target=target,
                          shift_se=rng.uniform(0.01, 0.05, (K, T)))


HOSTILE_CLASS = "<b>bold</b> %{x} & <img src=x onerror=alert(1)>"


def test_two_labels_are_drawn_together_more_only_the_one_shown():
    binary = why.label_posterior_figure(posterior_of(("negative", "positive")))
    assert [d.name for d in binary.data] == ["p(z | x): not told", "p(z | x, y = negative)", "p(z | x, y = positive)"]
    lp = posterior_of(("a", "b", "c"), target="b")
    fig = why.label_posterior_figure(lp)
    assert why.shown_labels(lp) == [1] and [d.name for d in fig.data] == ["p(z | x): not told", "p(z | x, y = b)"]
    np.testing.assert_allclose(fig.data[1].y, lp.posterior[1])
    assert "y = b" in fig.layout.title.text
    fifty = posterior_of([f"c{i:02d}" for i in range(50)])                       # by default the predicted label
    predicted = int(np.argmax(fifty.log_marginal))
    assert why.shown_labels(fifty) == [predicted]
    assert why.label_posterior_figure(fifty).data[1].name == f"p(z | x, y = c{predicted:02d})"


def test_class_names_are_text_in_every_figure_and_never_a_template():
    lp = posterior_of(("plain", HOSTILE_CLASS, "other"), target=1)
    rng = np.random.default_rng(0)
    T = len(lp.tokens)
    figures = [why.label_posterior_figure(lp),
               why.label_posterior_figure(posterior_of((HOSTILE_CLASS, "plain"))),
               why.attention_attribution_figure(list(lp.tokens), rng.dirichlet(np.ones(T), T), rng.normal(size=(T, T)),
                                                None, 4, 0, HOSTILE_CLASS)]
    escaped = html.escape(HOSTILE_CLASS, quote=False)
    for fig in figures:
        go.Figure(fig.to_dict())
        text = raw_text(fig)
        assert "<img" not in text and "<b>bold" not in text and escaped in text
        for trace in fig.data:                                        # the name is data, never in the template
            assert "%{x} &" not in (trace.hovertemplate or "")
    assert escaped in figures[0].layout.title.text and escaped in figures[2].layout.title.text
    assert figures[0].data[1].customdata[0][1] == escaped
    out = why.legend_html(HOSTILE_CLASS) + strip(["[CLS]", "a", "[SEP]"], [0.0, 0.1, 0.0], target=HOSTILE_CLASS)
    assert "<img" not in out and "<b>bold" not in out and escaped in out


def test_an_estimates_whiskers_are_its_noise_band_and_the_exact_posterior_has_none():
    """The whisker on each posterior bar spans NOISE_SES standard errors of that key's shift: the
    band within which describe() names no word. The hover shows the shift and its s.e."""
    lp = posterior_of(("negative", "positive"))
    fig = why.label_posterior_figure(lp)
    for k, bar in enumerate(fig.data[1:]):
        np.testing.assert_allclose(bar.error_y.array, NOISE_SES * lp.shift_se[k])
        np.testing.assert_allclose([row[2] for row in bar.customdata], lp.posterior[k] - lp.prior)
        np.testing.assert_allclose([row[3] for row in bar.customdata], lp.shift_se[k])
        assert "s.e. %{customdata[3]" in bar.hovertemplate
    assert fig.data[0].error_y.array is None                          # the prior's bar is the reference
    exact = why.label_posterior_figure(replace(lp, method="exact", ess=None, n_samples=None, shift_se=None))
    assert all(bar.error_y.array is None for bar in exact.data) and "(exact)" in exact.layout.title.text
