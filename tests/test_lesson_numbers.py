"""Every number the shipped lessons quote about a model is what the page shows for that step: each is
made here by the library (`explain()`, whose draws are the page's for the same seed,
tests/test_browser_local.py and tests/test_frame_graph.py; the Theory lab's `layer_gaps`) and must
appear in the step's prose as the lesson rounds it. Numbers that are closed forms (a Weibull's
coefficient of variation, σ(2)) are the Theory lab's own, tested there."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch

import bam_viz
from bam_viz.core.metrics import interval_multiplier
from bam_viz.theory import deng2018_jensen

LESSONS = Path(__file__).resolve().parents[1] / "lessons"
TEXT = "A glorious mess."
CLS, MESS = 0, 3                         # token indices of "[CLS] a glorious mess . [SEP]"


def prose(lesson: str, step: int) -> str:
    s = tomllib.loads((LESSONS / f"{lesson}.toml").read_text(encoding="utf-8"))["steps"][step]
    return " ".join((s.get("text", "") + " " + s.get("reveal", {}).get("answer", "")).split())


def num(x: float, digits: int = 2) -> str:
    """As the lessons write a number: its digits, a minus sign (U+2212) for a negative."""
    return f"{x:.{digits}f}".replace("-", "−")


@pytest.fixture(scope="module")
def seen():
    """The numbers of the lessons' explorer steps (bam-wc, 32 samples, seed 0) and of the Theory lab's
    layer-by-layer gaps (256 samples, seed 0)."""
    model = bam_viz.load("bam-wc")

    def at(k: float, beta: float = 1.0):
        return model.explain(TEXT, n_samples=32, seed=0, shape_k=k, beta=beta, target="positive", cache=False)

    return {"k3": at(3.0), "k02": at(0.2), "k1000": at(1000.0), "beta100": at(3.0, 100.0),
            "layers": deng2018_jensen.layer_gaps(model, TEXT, n_samples=256, seed=0)}


def _mean_max(r, head: int) -> float:
    return float(r.sample_weights[:, 5, head, CLS].max(-1).values.mean())          # layer 5, query [CLS]


def _quantiles(r, head: int, key: int) -> tuple[float, float]:
    w = r.sample_weights[:, 5, head, CLS, key].double()
    return float(torch.quantile(w, 0.05)), float(torch.quantile(w, 0.95))


def test_one_sentence_32_readings(seen):
    p = seen["k3"].sample_probs[:, 1]
    text = prose("attention-random-variable", 0)
    assert f"from about {num(p.min())} to {num(p.max())}" in text
    assert f"E[f(z)] ≈ {num(p.mean(), 3)}" in text


def test_turn_the_noise_up(seen):
    text = prose("attention-random-variable", 2)
    most, at_3 = num(_mean_max(seen["k02"], 0)), num(_mean_max(seen["k3"], 0))
    assert f"about {most} of it on average here, against {at_3}" in text
    w = seen["k02"].sample_weights[:, 5, 0, CLS].double()
    low, high = torch.quantile(w, 0.05, dim=0), torch.quantile(w, 0.95, dim=0)
    assert (low < 0.005).all() and "start at 0 on every key" in text               # 0 to two decimals
    assert f"reach about {num(high.min(), 1)} to nearly 1" in text and high.max() > 0.95


def test_the_mean_of_a_ratio(seen):
    text = prose("attention-random-variable", 3)
    k3, k02 = seen["k3"], seen["k02"]
    e_w = float(k3.sample_weights[:, 5, 0, CLS, CLS].mean())
    assert f"E[w] ≈ {num(e_w)} against softmax(ψ) ≈ {num(k3.softmax_weights[5, 0, CLS, CLS])}" in text
    assert f"about {num(k02.sample_weights[:, 5, 0, CLS, CLS].mean())} for `[CLS]`" in text


def test_back_to_softmax(seen):
    r = seen["k1000"]
    text = prose("attention-random-variable", 5)
    assert 1e-7 <= r.mutual_information < 1e-6 and "a few ten-millionths of a nat" in text
    p = r.sample_probs[:, 1]
    assert float(p.max() - p.min()) < 0.002 and "within 0.002 of each other" in text
    for x in (p.mean(), r.mean_attention_probs[1], r.softmax_probs[1]):
        assert num(x, 4) == "0.6515"
    assert "all about 0.6515" in text


def test_the_prior_knows_no_query(seen):
    low, high = _quantiles(seen["k3"], 9, MESS)
    mean = float(seen["k3"].sample_weights[:, 5, 9, CLS, MESS].mean())
    assert f"about {num(mean)} of `[CLS]`'s attention on *mess* (5–95% of the draws: {num(low)} to {num(high)})" \
        in prose("prior-posterior-gap", 0)


def test_beta_leaves_the_prediction(seen):
    p, q = seen["k3"].sample_probs[:, 1].mean(), seen["beta100"].sample_probs[:, 1].mean()
    assert float(p) == float(q) and f"E[f(z)] is still {num(p, 3)}" in prose("prior-posterior-gap", 1)


def test_the_gap_at_k_3_and_at_k_0_2(seen):
    k3, k02 = seen["k3"], seen["k02"]
    text = prose("prior-posterior-gap", 4)
    mc, mean = num(k3.sample_probs[:, 1].mean(), 3), num(k3.mean_attention_probs[1], 3)
    assert f"E[f(z)] ≈ {mc} against f(E[w]) ≈ {mean}" in text
    assert f"a gap of about {num(k3.gap, 3)} with a standard error of about {num(k3.se.gap, 3)}" in text
    assert abs(k3.gap) > 2 * k3.se.gap and "its sign is not sampling noise" in text
    text = prose("prior-posterior-gap", 5)
    mc, mean = num(k02.sample_probs[:, 1].mean(), 3), num(k02.mean_attention_probs[1], 3)
    assert f"E[f(z)] ≈ {mc} while f(E[w]) ≈ {mean}" in text
    assert f"to about {num(k02.gap)}" in text and round(k02.gap / k3.gap) == 12 and "twelvefold" in text


def test_which_layer_makes_the_gap(seen):
    gaps = seen["layers"]
    alone = [c.mc - c.mean_attention for c in gaps.cases]
    together = gaps.together.mc - gaps.together.mean_attention
    text = prose("prior-posterior-gap", 6)
    largest = int(np.argmax(np.abs(alone)))
    case = gaps.cases[largest]
    half = interval_multiplier(gaps.n_samples) * case.gap_se
    assert f"Layer {gaps.layers[largest]}: alone it gives a Deng gap of {num(alone[largest], 3)} " \
           f"(95% interval ± {num(half, 3)})" in text
    assert all(abs(g) > interval_multiplier(gaps.n_samples) * c.gap_se
               for g, c in zip(alone, gaps.cases, strict=True))
    assert f"alone the three give {num(alone[0], 3)}, {num(alone[1], 3)} and {num(alone[2], 3)}" in text
    assert f"which sum to {num(sum(alone), 3)}, while with all three sampling the gap is {num(together, 3)}" in text
