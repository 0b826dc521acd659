"""The Monte Carlo intervals the pages show, estimate ± t SE with t at the samples drawn
(`metrics.interval_multiplier`), against simulation: how often each covers what it estimates at a
preview's 8 samples, a whole frame's 32 and 4. docs/estimates.md ("Intervals at the samples drawn") has
the figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bam_viz.core import metrics

REPLICATIONS = 20000            # coverage to about 0.2%: a case near 93% is decided


def test_the_multiplier_is_students_t_at_s_minus_1_degrees_of_freedom() -> None:
    for S in (2, 3, 4, 8, 16, 32, 64, 256, 20_000):
        assert metrics.interval_multiplier(S) == pytest.approx(stats.t.ppf(0.975, S - 1), rel=1e-12)
    assert math.isnan(metrics.interval_multiplier(1)) and math.isnan(metrics.interval_multiplier(0))
    assert metrics.interval_multiplier(8) == pytest.approx(2.365, abs=1e-3)
    assert metrics.interval_multiplier(20_000) == pytest.approx(stats.norm.ppf(0.975), abs=1e-3)


def _mean_coverage(alpha: tuple[float, float], S: int, z: float, seed: int = 17) -> float:
    """How often E[f(z)] ± z SE, and the same of the gap to a fixed f(softmax) (`paired_gap_se`), cover
    the true mean, the S per-sample probabilities of the class ~ Beta(alpha): one number, as the two
    intervals are one shifted by a constant."""
    p = np.random.default_rng(seed).beta(*alpha, size=(REPLICATIONS, S))
    truth, reference = alpha[0] / sum(alpha), 0.5
    se = np.array([metrics.mean_se(x) for x in p])
    paired = np.array([metrics.paired_gap_se(x, reference) for x in p])
    np.testing.assert_allclose(se, paired, rtol=1e-9)
    return float(np.mean(np.abs(p.mean(1) - truth) <= z * se))


@pytest.mark.parametrize("S", [4, 8, 32])
@pytest.mark.parametrize("alpha", [(50.0, 50.0), (2.0, 2.0)])
def test_a_mean_and_its_paired_gap_cover_at_the_samples_drawn(alpha, S) -> None:
    """The band around E[f(z)] and the gap to the deterministic pass: t at S - 1 df covers at least
    93% at 4, 8 and 32 samples, where ± 2 SE does not at 4."""
    covered = _mean_coverage(alpha, S, metrics.interval_multiplier(S))
    assert covered >= 0.93, f"coverage {covered:.3f}"
    if S == 4:
        assert _mean_coverage(alpha, S, 2.0) < 0.90


def test_predictions_piled_against_1_cover_at_32_samples() -> None:
    """Skewed per-sample probabilities (Beta(18, 2)): t covers at 32 samples, a little under 93% at 8
    (docs/estimates.md gives both)."""
    assert _mean_coverage((18.0, 2.0), 32, metrics.interval_multiplier(32)) >= 0.93
    assert _mean_coverage((18.0, 2.0), 8, metrics.interval_multiplier(8)) > _mean_coverage((18.0, 2.0), 8, 2.0)


# Deng's gap E[f(z)] - f(E[w]) on a toy attention: normalised lognormal scores over 6 keys (as the
# lognormal family draws them), f a logistic read-out of the weights; f(E[w]) at the samples' mean.
TOY_SCORES = np.array([1.0, 0.5, 0.0, -0.5, 0.0, 0.3])
TOY_SIGMA = 1.0
TOY_READOUT = np.array([4.0, -3.0, 2.0, -1.0, 0.5, 3.0])
TOY_BIAS = -0.5


def _deng_gaps(S: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gap, its jackknife SE (`metrics.jackknife_gap_se`) and the delta method's SE over
    REPLICATIONS toy sentences of S samples. The delta method, made here by hand for comparison,
    linearises f(E[w]): each sample's slope l_s = grad f(E[w]) . (w_s - E[w]), SE = sd(f(z_s) - l_s) / sqrt(S)."""
    eps = np.random.default_rng(seed).standard_normal((REPLICATIONS, S, TOY_SCORES.size))
    w = np.exp(TOY_SCORES + TOY_SIGMA * eps)
    w /= w.sum(-1, keepdims=True)                                           # (R, S, T) the sampled weights

    def f(weights):
        return 1 / (1 + np.exp(-(weights @ TOY_READOUT + TOY_BIAS)))

    mean = w.mean(1)                                                        # (R, T) E[w]
    p, at_mean = f(w), f(mean)                                              # (R, S) f(z_s), (R,) f(E[w])
    loo = f((w.sum(1, keepdims=True) - w) / (S - 1))                        # (R, S) f(E[w]_(-s))
    se = np.array([metrics.jackknife_gap_se(p[r], loo[r]) for r in range(REPLICATIONS)])
    slopes = (at_mean * (1 - at_mean))[:, None] * ((w - mean[:, None]) @ TOY_READOUT)   # (R, S) l_s
    delta = (p - slopes).std(1, ddof=1) / math.sqrt(S)
    return p.mean(1) - at_mean, se, delta


def test_deng_gap_interval_covers_at_32_samples_and_the_jackknife_beats_the_delta_method_below() -> None:
    """Against the gap's mean over the replications at the same S (what many seeds average to): t
    covers at least 93% at 32 samples; at 4 and 8 it covers more than ± 2 SE and more than the same t
    with the delta method's SE, which drops f(E[w])'s second-order spread; under 93% still, on
    lognormal weights this skewed (docs/estimates.md)."""
    for S in (4, 8, 32):
        gap, se, delta = _deng_gaps(S, seed=18 + S)
        miss, z = np.abs(gap - gap.mean()), metrics.interval_multiplier(S)
        t_covers, two_covers, delta_covers = (np.mean(miss <= k * e) for k, e in ((z, se), (2, se), (z, delta)))
        if S == 32:
            assert t_covers >= 0.93, t_covers
        else:
            assert t_covers >= two_covers + 0.02 and t_covers >= delta_covers + 0.005, (S, t_covers, two_covers,
                                                                                      delta_covers)


# Deng's gap on many heads: f the mean over HEADS of sigmoid(4 x_h - 1), each x_h ~ Beta(5, 5) its own
# head's weight on one key, so the true gap E[f(x)] - f(E[x]) is one head's, from SciPy's Beta.
HEADS = 16
HEAD_BETA = (5.0, 5.0)
HEAD_SLOPE, HEAD_BIAS = 4.0, -1.0


def _head_readout(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-(HEAD_SLOPE * x + HEAD_BIAS)))).mean(-1)


def _head_gaps(S: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The S-sample gap, its jackknife SE and the jackknife's bias-corrected gap over REPLICATIONS draws
    of the many-head toy, and the true gap."""
    x = np.random.default_rng(seed).beta(*HEAD_BETA, size=(REPLICATIONS, S, HEADS))
    p, at_mean = _head_readout(x), _head_readout(x.mean(1))                 # (R, S), (R,)
    loo = _head_readout((x.sum(1, keepdims=True) - x) / (S - 1))            # (R, S)
    se = np.array([metrics.jackknife_gap_se(p[r], loo[r]) for r in range(REPLICATIONS)])
    corrected = np.array([metrics.jackknife_corrected_gap(p[r], at_mean[r], loo[r]) for r in range(REPLICATIONS)])
    beta = stats.beta(*HEAD_BETA)
    one_head = beta.expect(lambda v: _head_readout(np.asarray(v)[..., None]))           # E f(x), one head
    truth = one_head - float(_head_readout(np.array([beta.mean()])))
    return p.mean(1) - at_mean, se, corrected, truth


def test_deng_gap_jackknife_covers_the_s_sample_gap_and_falls_short_of_the_true_gap_by_1_over_s() -> None:
    """Many heads, a gap well beyond its error: t with the jackknife's SE covers the S-sample gap's own
    mean about 95% at 4, 8 and 32 samples. That mean is not Deng's gap (S -> infinity): f(E[w]) at S
    samples is off by about a 1/S share of the gap, the second-order term of E[f(mean of S)], so
    the S-sample gap is about the true one times 1 - 1/S, and the interval covers the true gap less
    often than 95%, the less the fewer the samples. The jackknife's bias-corrected gap averages the
    true one (docs/estimates.md)."""
    covers_truth = []
    for S in (4, 8, 32):
        gap, se, corrected, truth = _head_gaps(S, seed=40 + S)
        z = metrics.interval_multiplier(S)
        assert abs(np.mean(np.abs(gap - gap.mean()) <= z * se) - 0.95) <= 0.015, S
        assert gap.mean() / truth == pytest.approx(1 - 1 / S, abs=0.025), S      # higher orders: 0.73 at S = 4
        assert corrected.mean() / truth == pytest.approx(1, abs=0.015), S
        covers_truth.append(np.mean(np.abs(gap - truth) <= z * se))
    assert covers_truth[0] < covers_truth[1] < covers_truth[2] < 0.93, covers_truth
