"""The entropy panel (`bam_viz.plots.wording.entropy_parts`): its total is H[E p], the result's
`predictive_entropy`, never above ln K, in the Plotly figure, the prediction caption and the live
page's payload alike; its two parts, the expected entropy and the plug-in mutual information, add up
to it; the headline's bias-corrected MI, a different number, is said beside it by name.

Checked over probability tables Hypothesis makes, and on the real cases where the bar once stacked
the bias-corrected MI and passed ln 2: the view of the lesson "Attention as a random variable" at
k = 0.2 with seed 2 (its own seed 0 gives 0.663 with explain()'s draws) and a short sentence at 8 samples."""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from fake_result import make_fake_result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bam_viz.core.labels import LABELS
from bam_viz.live.frames import STATS, class_stats
from bam_viz.plots import captions, explorer
from bam_viz.plots.format import se_digits
from bam_viz.plots.wording import entropy_mi_note, entropy_parts, headline_mi

LESSON = Path(__file__).resolve().parents[1] / "lessons" / "attention-random-variable.toml"
# The probabilities are float32, as a result's are: a row sums to 1 within a few 1e-8, and the
# entropy of their mean can pass ln K by as much (2e-9 on the symmetric table below).
FLOAT32_SLACK = 1e-6


@functools.lru_cache(maxsize=8)
def _base(n_classes: int):
    return make_fake_result("weibull", T=3, L=2, H=1, S=4, n_classes=n_classes)


def with_table(table: np.ndarray):
    """A stochastic result whose attention samples give the (S, K) predictive distributions `table`."""
    probs = torch.from_numpy(np.asarray(table, dtype=np.float32))
    return dataclasses.replace(_base(probs.shape[1]), sample_probs=probs, mc_probs=probs.mean(0),
                               n_samples=probs.shape[0], mean_attention_loo_probs=None)


def check_panel(r) -> None:
    """The total every home shows is H[E p] <= ln K, and the parts add up to it."""
    K = len(r.classes)
    parts = entropy_parts(r)
    assert parts.total == r.predictive_entropy <= math.log(K) + FLOAT32_SLACK
    assert parts.aleatoric == r.expected_entropy and parts.epistemic == r.mutual_information_plugin
    assert parts.aleatoric + parts.epistemic == pytest.approx(parts.total, abs=1e-12)
    fig = explorer.entropy_figure(r)
    assert [t.name for t in fig.data] == [LABELS["aleatoric"], LABELS["epistemic"]]
    assert sum(t.x[0] for t in fig.data) == pytest.approx(parts.total, abs=1e-12)
    assert fig.layout.title.text.startswith(f"{LABELS['entropy']} {parts.total:.3f} nats<br>")
    assert f"the predictive entropy H[E p] = {parts.total:.3f} nats" in captions.prediction_caption(r)
    row = dict(zip(STATS, class_stats(r)[r.target], strict=True))     # what the live page's payload carries
    assert (row["predictive_entropy"], row["expected_entropy"], row["mi_plugin"], row["mi"]) == (
        parts.total, parts.aleatoric, parts.epistemic, parts.mutual_information)


SYMMETRIC = [[0.05, 0.95], [0.95, 0.05], [0.3, 0.7], [0.7, 0.3]]     # E p = (1/2, 1/2): H[E p] = ln 2


@st.composite
def tables(draw):
    """(S, K) rows of probabilities, some near one-hot or with exact zeros, K from 2 to 6."""
    S, K = draw(st.integers(1, 12)), draw(st.integers(2, 6))
    raw = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 1.0), st.floats(0.0, 1e-4)),
                                 min_size=S * K, max_size=S * K))).reshape(S, K)
    raw[raw.sum(1) == 0, draw(st.integers(0, K - 1))] = 1.0
    return raw / raw.sum(1, keepdims=True)


@settings(max_examples=80, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(tables())
@example(np.array(SYMMETRIC))
def test_the_total_is_h_of_the_mean_never_above_ln_k(table):
    check_panel(with_table(table))


def test_stacking_the_bias_corrected_mi_would_pass_the_bound():
    """The symmetric table is a case the old bar got wrong: the expected entropy plus the headline's
    bias-corrected MI is above ln 2, and the headline's MI is said beside the bar, by name."""
    r = with_table(np.array(SYMMETRIC))
    parts = entropy_parts(r)
    assert parts.aleatoric + parts.mutual_information > math.log(2) + 0.05
    assert parts.mutual_information > parts.epistemic
    number = headline_mi(r)                     # as the headline's metric writes it, to its SE's decimals
    assert abs(float(number) - parts.mutual_information) <= 0.5 * 10.0 ** -se_digits(r.se.mutual_information)
    note = entropy_mi_note(r)
    assert note == LABELS["entropy_mi"].format(mi=number)
    assert explorer.entropy_figure(r).layout.annotations[0].text.replace("<br>", " ") == note
    caption = captions.prediction_caption(r)
    assert f"The headline's mutual information, {number}, is bias-corrected" in caption


@pytest.mark.parametrize("S", [1, 2])
def test_below_three_samples_the_headline_mi_is_the_plug_in_and_nothing_is_said_beside(S):
    r = with_table(np.array(SYMMETRIC[:S]))
    parts = entropy_parts(r)
    assert parts.mutual_information == parts.epistemic
    assert entropy_mi_note(r) is None and not explorer.entropy_figure(r).layout.annotations
    assert "The headline's mutual information is the plug-in: its jackknife needs 3 samples." in (
        captions.prediction_caption(r))


# ---- the real cases ----------------------------------------------------------------------------
def lesson_view() -> dict:
    """The view of the lesson's step "Turn the noise up": bam-wc at k = 0.2, its samples and seed."""
    step = tomllib.loads(LESSON.read_text(encoding="utf-8"))["steps"][2]
    assert step["title"] == "Turn the noise up"
    return step["view"]


def cases():
    view = lesson_view()
    yield view["model"], view["text"], view["n_samples"], 2, view["shape_k"], view["beta"]
    yield "bam-wc", "The movie was fine, I guess.", 8, 0, 0.2, 1.0


@pytest.mark.slow
@pytest.mark.parametrize("model_name, text, n_samples, seed, shape_k, beta", list(cases()))
def test_the_cases_the_old_bar_passed_ln_2_on(model_name, text, n_samples, seed, shape_k, beta):
    """Explain()'s figure and caption, the live page's payload and a live frame's caption, at a case
    where the expected entropy plus the bias-corrected MI is above ln 2."""
    import bam_viz
    from bam_viz.core.grids import nearest_index
    from bam_viz.live import grid as live

    model = bam_viz.load(model_name)
    r = model.explain(text, n_samples=n_samples, seed=seed, shape_k=shape_k, beta=beta)
    assert r.expected_entropy + r.mutual_information > math.log(2)           # the old total passed ln 2
    check_panel(r)
    assert r.predictive_entropy < math.log(2)
    grid = live.LiveGrid(model, text, n_samples, seed)
    i = nearest_index(grid.values, shape_k, grid.posterior_spec.scale == "log")
    j = nearest_index(grid.prior_values, beta, grid.prior_spec.scale == "log")
    assert grid.values[i] == pytest.approx(shape_k) and grid.prior_values[j] == pytest.approx(beta)
    grid.frame(i)
    header, arrays = live.unpack(live.summary_payload(grid, i, target=r.target))
    shown = dict(zip(header["stats"], arrays["stats"][i], strict=True))
    assert shown["predictive_entropy"] == np.float32(r.predictive_entropy) <= np.float32(math.log(2))
    assert shown["expected_entropy"] == np.float32(r.expected_entropy)
    assert shown["mi_plugin"] == np.float32(r.mutual_information_plugin)
    frame = live.FrameResult(grid, i, j, r.target)
    assert captions.prediction_caption(frame) == captions.prediction_caption(r)
