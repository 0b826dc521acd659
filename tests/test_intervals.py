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


def _deng_gaps(S: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The gap and its delta-method SE (`metrics.delta_gap_se`) over REPLICATIONS toy sentences of S samples."""
    eps = np.random.default_rng(seed).standard_normal((REPLICATIONS, S, TOY_SCORES.size))
    w = np.exp(TOY_SCORES + TOY_SIGMA * eps)
    w /= w.sum(-1, keepdims=True)                                           # (R, S, T) the sampled weights
    f = 1 / (1 + np.exp(-(w @ TOY_READOUT + TOY_BIAS)))                      # (R, S) f(z_s)
    mean = w.mean(1)                                                        # (R, T) E[w]
    at_mean = 1 / (1 + np.exp(-(mean @ TOY_READOUT + TOY_BIAS)))            # (R,) f(E[w])
    slopes = (at_mean * (1 - at_mean))[:, None] * ((w - mean[:, None]) @ TOY_READOUT)   # (R, S) l_s
    se = np.array([metrics.delta_gap_se(f[r], slopes[r]) for r in range(REPLICATIONS)])
    return f.mean(1) - at_mean, se


def test_deng_gap_interval_covers_at_32_samples_and_t_helps_below() -> None:
    """Against the gap's mean over the replications at the same S (what many seeds average to): t
    covers at least 93% at 32 samples; at 4 and 8 it covers clearly more than ± 2 SE, yet under 93%,
    because the delta method drops f(E[w])'s second-order spread (docs/estimates.md)."""
    for S in (4, 8, 32):
        gap, se = _deng_gaps(S, seed=18 + S)
        miss = np.abs(gap - gap.mean())
        t_covers, two_covers = np.mean(miss <= metrics.interval_multiplier(S) * se), np.mean(miss <= 2 * se)
        if S == 32:
            assert t_covers >= 0.93, t_covers
        else:
            assert t_covers >= two_covers + 0.03, (S, t_covers, two_covers)
