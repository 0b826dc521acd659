"""Attributions and the label posterior for K classes (bam_viz.inference.attribution,
bam_viz.inference.posterior) on the real MiniLM with a random K-output head (`why_k_models`):
K = 3 and K = 50, targets by name, by index and by default, completeness, and Bayes' rule against
a direct computation and against Monte Carlo.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from why_k_models import random_head_model

from bam_viz.inference.attribution import TOLERANCE, attribute
from bam_viz.inference.explain import lower_states
from bam_viz.inference.posterior import describe, label_posterior

TEXT = "A dull, lifeless film with one brilliant scene."


@pytest.fixture(scope="module")
def k3():
    return random_head_model(3)


@pytest.fixture(scope="module")
def k50():
    return random_head_model(50)


@pytest.fixture(scope="module")
def c3():
    return random_head_model(3, "categorical")


@pytest.fixture(scope="module")
def c50():
    return random_head_model(50, "categorical")


def predicted_class(model, n_samples: int, seed: int = 0) -> int:
    return int(model.predict([TEXT], n_samples=n_samples, seed=seed)[0].argmax())


def assert_complete(a, model, n_samples: int):
    """Completeness (Sundararajan et al. 2017) per network, f(x) the recorded draw's P(target)."""
    S = n_samples
    assert a.probs.shape == a.baseline_probs.shape == a.delta.shape == (S + 1,)
    torch.testing.assert_close(a.probs[:S], model.predict_samples([TEXT], n_samples=S, seed=0)[0, :, a.target_index],
                               rtol=0, atol=0)
    torch.testing.assert_close(a.probs[S], model.predict_softmax([TEXT])[0, a.target_index], rtol=0, atol=1e-6)
    change = a.probs - a.baseline_probs                                                  # f(x) - f(baseline)
    total = torch.cat([a.samples, a.softmax[None]]).sum(-1)
    assert change.abs().max() > 5e-3, change                                             # a change to account for
    assert (total - change).abs().max() < min(TOLERANCE, 0.1 * change.abs().max()), (total, change)


# ---- attributions ------------------------------------------------------------------------------
def test_the_default_target_is_the_predicted_class_and_completeness_holds(k3):
    a = attribute(k3, TEXT, n_samples=4)
    assert a.target_index == predicted_class(k3, 4) and a.target == k3.classes[a.target_index]
    assert_complete(a, k3, 4)


def test_a_class_by_name_is_the_class_by_index_and_the_classes_add_up_to_nothing(k3):
    """P sums to one over the classes and IG is linear in f: at the same nodes, the K attributions
    of one network add up to that of a constant, zero. A target read from the wrong column would not."""
    by_name = attribute(k3, TEXT, n_samples=2, steps=8, tolerance=None, target="b")
    by_index = attribute(k3, TEXT, n_samples=2, steps=8, tolerance=None, target=1)
    assert (by_name.target, by_name.target_index) == (by_index.target, by_index.target_index) == ("b", 1)
    assert torch.equal(by_name.samples, by_index.samples) and torch.equal(by_name.probs, by_index.probs)
    first = attribute(k3, TEXT, n_samples=2, steps=8, tolerance=None, target=0)
    last = attribute(k3, TEXT, n_samples=2, steps=8, tolerance=None, target=-1)          # from the end, as in Python
    assert (first.target, last.target, last.target_index) == ("a", "c", 2)
    per_class = [first, by_name, last]
    torch.testing.assert_close(sum(a.probs for a in per_class), torch.ones(3), rtol=0, atol=1e-6)
    for part in ("samples", "softmax"):
        total = sum(getattr(a, part) for a in per_class)
        assert getattr(first, part).abs().max() > 1e-3
        torch.testing.assert_close(total, torch.zeros_like(total), rtol=0, atol=1e-5)


def test_fifty_classes_by_name_and_by_default(k50):
    a = attribute(k50, TEXT, n_samples=2, target="c49")
    assert (a.target, a.target_index) == ("c49", 49)
    assert_complete(a, k50, 2)
    default = attribute(k50, TEXT, n_samples=2, steps=4, tolerance=None)
    assert default.target_index == predicted_class(k50, 2) != 49
    assert default.target == k50.classes[default.target_index]


def test_the_attention_attribution_of_a_k_class_target_is_complete(k3):
    m = attribute(k3, TEXT, n_samples=2, steps=16, target="c", layer=4, tolerance=None).attention
    maps = torch.cat([m.samples, m.softmax[None]])
    change = maps.sum((1, 2, 3)) - m.delta                                             # f(A) - f(0)
    assert change.abs().min() > 1e-3 and m.delta.abs().max() < 1e-4, (change, m.delta)


@pytest.mark.parametrize("target", ["neutral", 3, -4, True, 1.5, "", ["a"]])
def test_a_bad_target_is_refused_naming_the_classes(k3, target):
    with pytest.raises(ValueError, match=r"target must be a class of the model \('a', 'b', 'c'\), its index "
                                         r"\(0 to 2\), or None / 'predicted'"):
        attribute(k3, TEXT, target=target)
    with pytest.raises(ValueError, match=r"\('a', 'b', 'c'\)"):
        label_posterior(k3, TEXT, target=target)


# ---- the label posterior -----------------------------------------------------------------------
def exact_pieces(model):
    """p(z|x) (T,), p(y|x,z) (T, K) and p(y|x) (K,) in float64, straight from exact_log_marginal."""
    lower = lower_states(model, TEXT)
    with torch.inference_mode():
        log_marginal, log_pz, log_lik = model.exact_log_marginal(lower.x, lower.mask)
    return log_pz[0].double().exp().numpy(), log_lik[0].double().exp().numpy(), log_marginal[0].double().exp().numpy()


def assert_a_posterior(lp, K: int, atol: float = 1e-12):
    """Each label's row sums to one over the keys (to `atol`: sampled rows are float32 weights), and
    sum_y p(y|x) posterior_y = prior (an identity of the estimate too, to float64 rounding)."""
    T = len(lp.tokens)
    assert lp.posterior.shape == lp.log_lik.shape == (K, T) and lp.log_marginal.shape == (K,)
    np.testing.assert_allclose(lp.posterior.sum(-1), 1.0, atol=atol, rtol=0)
    np.testing.assert_allclose(np.exp(lp.log_marginal).sum(), 1.0, atol=1e-9, rtol=0)
    np.testing.assert_allclose(np.exp(lp.log_marginal) @ lp.posterior, lp.prior, atol=1e-12, rtol=0)


@pytest.mark.parametrize("K", [3, 50])
def test_the_exact_posterior_is_bayes_rule_for_every_label(c3, c50, K):
    m = {3: c3, 50: c50}[K]
    lp = label_posterior(m, TEXT)
    assert lp.method == "exact" and lp.labels == m.classes
    assert_a_posterior(lp, K)
    pz, lik, p_y = exact_pieces(m)
    joint = pz[:, None] * lik                                                             # (T, K)
    np.testing.assert_allclose(lp.posterior, (joint / joint.sum(0)).T, atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.exp(lp.log_marginal), p_y, atol=1e-6, rtol=0)
    # Told different labels, the row moves differently: the labels are not one row repeated.
    assert np.abs(lp.posterior - lp.posterior[:1]).max() > 1e-3
    assert lp.target == int(np.argmax(p_y)) and lp.target_label == m.classes[lp.target]


def test_the_importance_estimate_converges_to_the_exact_posterior_for_three_labels(c3):
    """As for two labels (tests/test_posterior.py): the delta method's variance of the
    self-normalised estimate, E_p[(p(y|z)/p(y))^2 (1{z=j} - pi_j)^2] / S, known exactly here; a
    fixed seed stays within 4 standard errors at every key and label."""
    exact = label_posterior(c3, TEXT)
    pz, lik, p_y = exact_pieces(c3)
    T = len(pz)
    indicator = np.eye(T)[:, None, :]                                                    # (z, 1, j)
    variance = np.einsum("z,zy,zyj->yj", pz, (lik / p_y) ** 2, (indicator - exact.posterior[None]) ** 2)
    errors = {}
    for S in (64, 1024):
        iw = label_posterior(c3, TEXT, n_samples=S, seed=0, method="importance")
        assert iw.method == "importance" and ((iw.ess >= 1) & (iw.ess <= S + 1e-9)).all()
        assert_a_posterior(iw, 3, atol=1e-12)
        err = np.abs(iw.posterior - exact.posterior)
        assert (err <= 4 * np.sqrt(variance / S)).all(), (S, err.max())
        errors[S] = err.max()
    assert errors[1024] < errors[64]


def test_fifty_labels_by_monte_carlo_are_bayes_rule_over_the_samples_drawn(k50):
    """At 8 samples: each label's row is the samples' rows weighted by p(y | x, z_s), the samples and the
    top layer's [CLS] rows those explain() draws for the same seed (the explorer's, not the estimator)."""
    S, seed = 8, 2
    r = k50.explain(TEXT, n_samples=S, seed=seed, cache=False)
    probs = r.sample_probs.double().numpy()                                                 # (S, K)
    rows = r.sample_weights[:, -1, :, 0].double().numpy()                                   # (S, H, T)
    lp = label_posterior(k50, TEXT, n_samples=S, seed=seed)
    assert lp.method == "importance" and lp.n_samples == S and lp.layer == 5
    assert_a_posterior(lp, 50, atol=1e-6)
    np.testing.assert_allclose(np.exp(lp.sample_log_lik), probs, atol=1e-6, rtol=0)
    weights = probs / probs.sum(0)                                                          # (S, K) w_s(y)
    np.testing.assert_allclose(lp.posterior_heads, np.einsum("sy,sht->yht", weights, rows), atol=1e-6, rtol=0)
    np.testing.assert_allclose(lp.ess, probs.sum(0) ** 2 / (probs**2).sum(0), rtol=1e-6)
    assert lp.target == int(probs.mean(0).argmax())


def test_the_label_shown_by_name_by_index_and_by_default(c3):
    lp = label_posterior(c3, TEXT)
    predicted = int(np.argmax(lp.log_marginal))
    assert lp.target == predicted
    named = label_posterior(c3, TEXT, target="b")
    assert (named.target, named.target_label) == (1, "b")
    np.testing.assert_array_equal(named.posterior, lp.posterior)          # the same numbers, another label shown
    assert lp.with_target(-1).target == 2 and lp.with_target("a").target == 0
    assert named.with_target(None).target == named.with_target("predicted").target == predicted
    assert describe(named) == describe(lp, "b") != describe(lp, "a")
    with pytest.raises(ValueError, match=r"\('a', 'b', 'c'\)"):
        lp.with_target("z")
