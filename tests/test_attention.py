"""The attention families: moments against closed forms, gradients, reproducibility, finiteness."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import gammainc, gammaln

from bam_viz.attention import (
    AttentionConfig,
    BayesianAttention,
    categorical_elbo,
    categorical_sample,
    dirichlet_rsample,
    exact_log_marginal,
    exact_posterior,
    log_gamma_rsample,
    log_lognormal_rsample,
    log_weibull_rsample,
    normalize,
    normalize_log,
    posterior,
    prior,
)

N = 200_000


def scores_row(T=5, seed=0, dtype=torch.float64):
    return torch.randn(T, generator=torch.Generator().manual_seed(seed), dtype=dtype) * 1.5


@pytest.mark.parametrize("family,hyper", [
    ("weibull", {"shape_k": 0.7}), ("weibull", {"shape_k": 3.0}), ("weibull", {"shape_k": 50.0}),
    ("lognormal", {"sigma": 0.1}), ("lognormal", {"sigma": 1.0}),
    ("dirichlet", {"concentration": 0.5}), ("dirichlet", {"concentration": 20.0}),
    ("categorical", {}),
])
def test_posterior_mean_is_softmax(family, hyper):
    s = scores_row()
    q = posterior(s, family, **hyper)
    expected = s.softmax(-1)
    mean = q.probs if family == "categorical" else q.mean
    torch.testing.assert_close(mean, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shape_k", [0.5, 2.0, 10.0, 200.0])
def test_weibull_sampler_moments_and_law(shape_k):
    s = scores_row()
    g = torch.Generator().manual_seed(1)
    log_scale = s.log_softmax(-1) - math.lgamma(1 + 1 / shape_k)
    S = log_weibull_rsample(log_scale.expand(N, -1), shape_k, g).exp()
    lam = log_scale.exp()
    mean = lam * math.gamma(1 + 1 / shape_k)
    var = lam**2 * (math.gamma(1 + 2 / shape_k) - math.gamma(1 + 1 / shape_k) ** 2)
    # Monte Carlo within 5 standard errors (the variance's via the fourth moment).
    se_mean = (var / N).sqrt()
    assert ((S.mean(0) - mean).abs() <= 5 * se_mean).all()
    torch.testing.assert_close(S.mean(0), s.softmax(-1), rtol=0, atol=float(5 * se_mean.max()))
    m4 = lam**4 * math.gamma(1 + 4 / shape_k) - 4 * mean * lam**3 * math.gamma(1 + 3 / shape_k) \
        + 6 * mean**2 * lam**2 * math.gamma(1 + 2 / shape_k) - 3 * mean**4
    se_var = ((m4 - var**2) / N).sqrt()
    assert ((S.var(0) - var).abs() <= 6 * se_var).all()
    # And the law itself, against SciPy.
    ks = stats.kstest(S[:5000, 0].numpy(), stats.weibull_min(c=shape_k, scale=float(lam[0])).cdf)
    assert ks.pvalue > 1e-3
    # torch's own distribution agrees with the closed forms.
    q = posterior(s, "weibull", shape_k=shape_k)
    torch.testing.assert_close(q.variance, var)


@pytest.mark.parametrize("sigma", [0.05, 0.5, 1.5])
def test_lognormal_sampler_moments(sigma):
    s = scores_row()
    g = torch.Generator().manual_seed(2)
    loc = s.log_softmax(-1) - sigma**2 / 2
    S = log_lognormal_rsample(loc.expand(N, -1), sigma, g).exp()
    mean = s.softmax(-1)
    var = (math.exp(sigma**2) - 1) * torch.exp(2 * loc + sigma**2)
    assert ((S.mean(0) - mean).abs() <= 6 * (var / N).sqrt()).all()
    # log S is exactly normal: check its variance (robust to the heavy tail of S).
    assert abs(S.log().var(0).mean().item() - sigma**2) < 0.02 * sigma**2
    torch.testing.assert_close(posterior(s, "lognormal", sigma=sigma).variance, var)


@pytest.mark.parametrize("concentration", [0.3, 5.0, 300.0])
def test_dirichlet_sampler_moments(concentration):
    s = scores_row()
    g = torch.Generator().manual_seed(3)
    log_a = math.log(concentration) + s.log_softmax(-1)
    w = dirichlet_rsample(log_a.expand(N, -1), None, g)
    p = s.softmax(-1)
    var = p * (1 - p) / (concentration + 1)
    assert ((w.mean(0) - p).abs() <= 6 * (var / N).sqrt()).all()
    assert ((w.var(0) - var).abs() <= 0.05 * var + 1e-6).all()
    torch.testing.assert_close(posterior(s, "dirichlet", concentration=concentration).variance, var)
    ks = stats.kstest(w[:5000, 1].numpy(), stats.beta(float(log_a.exp()[1]), float(concentration - log_a.exp()[1])).cdf)
    assert ks.pvalue > 1e-3


@pytest.mark.parametrize("alpha", [1e-3, 0.05, 0.7, 4.0])
def test_log_gamma_sampler_matches_scipy(alpha):
    g = torch.Generator().manual_seed(4)
    logG = log_gamma_rsample(torch.full((20_000,), math.log(alpha), dtype=torch.float64), g)
    assert torch.isfinite(logG).all()
    # P(log G <= t) = P(alpha, e^t) (regularised incomplete gamma); for e^t below double range it
    # is e^(alpha t) / Gamma(alpha + 1) to first order.
    def cdf(t):
        return np.where(t > -700, gammainc(alpha, np.exp(np.maximum(t, -700))),
                        np.exp(alpha * t - gammaln(alpha + 1)))

    ks = stats.kstest(logG.numpy(), cdf)
    assert ks.pvalue > 1e-3


def test_categorical_sampler_frequencies():
    s = scores_row()
    g = torch.Generator().manual_seed(5)
    z = categorical_sample(s.log_softmax(-1).expand(N, -1), g)
    assert torch.equal(z.sum(-1), torch.ones(N, dtype=z.dtype))
    p = s.softmax(-1)
    assert ((z.mean(0) - p).abs() <= 6 * (p * (1 - p) / N).sqrt()).all()


@pytest.mark.parametrize("family,hyper", [
    ("weibull", {"beta": 1e-2}), ("weibull", {"beta": 3.0}), ("lognormal", {"sigma": 0.7}),
    ("dirichlet", {"concentration": 4.0}),
])
def test_prior_mean_is_pi(family, hyper):
    logits = scores_row(seed=9)
    p = prior(logits, family, **hyper)
    torch.testing.assert_close(p.mean, logits.softmax(-1), rtol=1e-9, atol=1e-12)


def test_normalize_and_mask():
    S = torch.tensor([[1.0, 3.0, 4.0], [2.0, 2.0, 100.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    w = normalize(S, mask)
    torch.testing.assert_close(w, torch.tensor([[0.125, 0.375, 0.5], [0.5, 0.5, 0.0]]))
    torch.testing.assert_close(normalize_log(S.log(), mask), w)
    # Normalising over all keys, not l != i: the diagonal counts.
    assert w[0, 0] > 0


def test_normalize_log_finite_where_exp_underflows():
    log_S = torch.tensor([[-2000.0, -2001.0, -3000.0]])
    w = normalize_log(log_S)
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(), torch.tensor(1.0))
    assert w[0, 0] > w[0, 1]


# ---- the Deng et al. identities --------------------------------------------------------------
def test_categorical_elbo_gap_is_kl_to_exact_posterior():
    g = torch.Generator().manual_seed(6)
    log_prior = torch.randn(7, generator=g, dtype=torch.float64).log_softmax(-1)
    log_lik = torch.randn(7, generator=g, dtype=torch.float64).log_softmax(-1) - 0.3
    log_q = torch.randn(7, generator=g, dtype=torch.float64).log_softmax(-1)
    log_py = exact_log_marginal(log_prior, log_lik)
    post = exact_posterior(log_prior, log_lik)
    kl = (log_q.exp() * (log_q - post)).sum()
    gap = log_py - categorical_elbo(log_q, log_prior, log_lik)
    assert abs(float(gap - kl)) < 1e-6
    assert gap > 0
    # The bound is tight at the exact posterior.
    assert abs(float(log_py - categorical_elbo(post, log_prior, log_lik))) < 1e-12
    # And the marginal is the brute-force sum.
    assert abs(float(log_py) - math.log(sum(math.exp(a + b) for a, b in zip(log_prior, log_lik, strict=True)))) < 1e-12


# ---- the layer ---------------------------------------------------------------------------------
def qkv(B=2, H=3, T=6, d=4, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    t = [torch.randn(B, H, T, d, generator=g, requires_grad=requires_grad) for _ in range(3)]
    mask = torch.ones(B, T, dtype=torch.bool)
    if B > 1:
        mask[1, T - 2:] = False
    return (*t, mask)


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet"])
def test_gradients_flow_through_rsample_to_scores(family):
    q, k, v, mask = qkv(requires_grad=True)
    layer = BayesianAttention(3, 4, AttentionConfig(family, shape_k=5.0, concentration=10.0))
    out, _ = layer(q, k, v, mask, n_samples=4, generator=torch.Generator().manual_seed(0))
    out.pow(2).sum().backward()
    for t in (q, k):
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet", "categorical"])
def test_a_mask_with_no_padding_changes_nothing(family):
    # The layer skips its masked fills when every key is real; the draws and traces must be those
    # of the masked path. A padded mask still zeroes its keys.
    q, k, v, _ = qkv(B=2, H=2, T=5)
    layer = BayesianAttention(2, 4, AttentionConfig(family, prior="contextual", shape_k=2.0, sigma=0.8))

    def run(mask):
        out, t = layer(q, k, v, mask, n_samples=3, generator=torch.Generator().manual_seed(5), trace=True)
        return out, t.weights, t.kl, t.prior_sample_weights

    for a, b in zip(run(None), run(torch.ones(2, 5, dtype=torch.bool)), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    padded = torch.ones(2, 5, dtype=torch.bool)
    padded[1, 3:] = False
    weights = run(padded)[1].view(3, 2, 2, 5, 5)
    assert weights[:, 1, ..., 3:].abs().max() == 0 and weights[:, 0, ..., 3:].abs().max() > 0


def test_implicit_reparameterisation_gradient_is_unbiased():
    # d/d alpha E[G] = 1 for G ~ Gamma(alpha, 1); the implicit gradient must average to it.
    log_alpha = torch.full((50_000,), math.log(0.4), dtype=torch.float64, requires_grad=True)
    G = log_gamma_rsample(log_alpha, torch.Generator().manual_seed(7)).exp()
    (grad,) = torch.autograd.grad(G.sum(), log_alpha)
    d_dalpha = grad / log_alpha.exp()
    assert abs(d_dalpha.mean().item() - 1.0) < 0.05


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet", "categorical"])
def test_same_seed_same_samples_and_batched_equals_loop_in_distribution(family):
    q, k, v, mask = qkv(B=1, H=1, T=4)
    layer = BayesianAttention(1, 4, AttentionConfig(family, shape_k=2.0, sigma=0.8, concentration=3.0))

    def weights(n, seed):
        _, t = layer(q, k, v, mask, n_samples=n, generator=torch.Generator().manual_seed(seed), trace=True)
        return t.weights

    torch.testing.assert_close(weights(8, 11), weights(8, 11), rtol=0, atol=0)
    assert not torch.equal(weights(8, 11), weights(8, 12))
    n = 1000
    batched = weights(n, 1)[:, 0, 1]                                        # (S, T) one query row
    g = torch.Generator().manual_seed(2)
    looped = torch.stack([layer(q, k, v, mask, generator=g, trace=True)[1].weights[0, 0, 1]
                          for _ in range(n)])
    for j in range(4):
        a, b = batched[:, j].double(), looped[:, j].double()
        if family == "categorical":  # one-hot draws: compare selection frequencies
            p = (a.mean() + b.mean()) / 2
            assert abs(a.mean() - b.mean()) <= 5 * math.sqrt(2 * p * (1 - p) / n) + 1e-9
        else:
            assert stats.ks_2samp(a.numpy(), b.numpy(), method="asymp").pvalue > 1e-4


def test_hyperparameters_override_without_touching_weights():
    q, k, v, mask = qkv()
    layer = BayesianAttention(3, 4, AttentionConfig("weibull", shape_k=10.0))
    before = {n: p.clone() for n, p in layer.state_dict().items()}
    _, t1 = layer(q, k, v, mask, n_samples=64, generator=torch.Generator().manual_seed(0), trace=True)
    _, t2 = layer(q, k, v, mask, n_samples=64, generator=torch.Generator().manual_seed(0), trace=True,
                  hyper={"shape_k": 0.5})
    def spread(t):  # std over samples (rows are sample-major: s * B + b)
        return t.weights.view(64, 2, *t.weights.shape[1:]).std(0).mean()

    assert spread(t2) > 3 * spread(t1)   # smaller k, wider posterior
    for n, p in layer.state_dict().items():
        assert torch.equal(p, before[n])
    with pytest.raises(ValueError, match="unknown hyperparameters"):
        layer(q, k, v, mask, hyper={"shape": 1.0})
    with pytest.raises(ValueError, match="positive"):
        layer(q, k, v, mask, hyper={"shape_k": float("nan")})


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet"])
def test_trace_contract(family):
    q, k, v, mask = qkv()
    layer = BayesianAttention(3, 4, AttentionConfig(family))
    out, t = layer(q, k, v, mask, n_samples=5, generator=torch.Generator().manual_seed(0), trace=True)
    assert out.shape == (10, 3, 6, 4)
    assert t.weights.shape == t.prior_sample_weights.shape == (10, 3, 6, 6)
    assert t.mean_weights.shape == t.prior_weights.shape == t.scores.shape == (2, 3, 6, 6)
    assert t.kl.shape == (2, 3) and (t.kl >= -1e-4).all()
    for w in (t.weights, t.prior_sample_weights, t.mean_weights, t.prior_weights):
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        assert (w[1::2, ..., 4:] == 0).all()  # padded keys of the second sentence get no weight
    torch.testing.assert_close(t.mean_weights, (t.scores.masked_fill(~mask[:, None, None], -1e9)).softmax(-1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(["weibull", "lognormal", "dirichlet", "categorical", "softmax"]),
    log_k=st.floats(math.log(0.2), math.log(1000.0)),
    sigma=st.floats(0.01, 3.0),
    log_beta=st.floats(math.log(1e-4), math.log(1e4)),
    log_conc=st.floats(math.log(0.05), math.log(1e4)),
    T=st.integers(1, 512),
    pad=st.integers(0, 5),
    scale=st.floats(0.0, 30.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_finite_over_the_full_slider_ranges(family, log_k, sigma, log_beta, log_conc, T, pad, scale, seed):
    g = torch.Generator().manual_seed(seed)
    H, d = 2, 4
    q = torch.randn(1, H, T, d, generator=g) * scale
    k = torch.randn(1, H, T, d, generator=g) * scale
    v = torch.randn(1, H, T, d, generator=g)
    mask = torch.ones(1, T, dtype=torch.bool)
    mask[0, T - min(pad, T - 1):] = False if pad and T > 1 else True
    layer = BayesianAttention(H, d, AttentionConfig(family, prior="contextual"))
    if layer.prior_net is not None:  # a trained-looking, non-uniform prior
        torch.nn.init.normal_(layer.prior_net.out, generator=g)
    hyper = dict(shape_k=math.exp(log_k), sigma=sigma, beta=math.exp(log_beta), concentration=math.exp(log_conc),
                 prior_sigma=sigma, prior_concentration=math.exp(log_conc))
    out, t = layer(q, k, v, mask, n_samples=2, generator=g, hyper=hyper, trace=True)
    assert torch.isfinite(out).all()
    for name in ("weights", "mean_weights", "prior_weights", "prior_sample_weights", "kl"):
        assert torch.isfinite(getattr(t, name)).all(), name
    torch.testing.assert_close(t.weights.sum(-1), torch.ones(t.weights.shape[:-1]), atol=1e-4, rtol=0)
    for p in list(t.posterior_params.values()) + list(t.prior_params.values()):
        assert torch.isfinite(p).all()


def test_constant_prior_is_uniform_over_valid_keys_and_contextual_prior_reads_keys():
    q, k, v, mask = qkv()
    const = BayesianAttention(3, 4, AttentionConfig("weibull", prior="constant"))
    assert const.prior_net is None
    _, t = const(q, k, v, mask, trace=True)
    torch.testing.assert_close(t.prior_weights[0], torch.full((3, 6, 6), 1 / 6))
    torch.testing.assert_close(t.prior_weights[1, ..., :4], torch.full((3, 6, 4), 1 / 4))
    ctx = BayesianAttention(3, 4, AttentionConfig("weibull", prior="contextual"))
    torch.nn.init.normal_(ctx.prior_net.out, generator=torch.Generator().manual_seed(0))
    _, t1 = ctx(q, k, v, mask, trace=True)
    _, t2 = ctx(q * 3, k, v, mask, trace=True)     # queries do not enter the prior
    torch.testing.assert_close(t1.prior_weights, t2.prior_weights)
    _, t3 = ctx(q, k.flip(2), v, mask, trace=True)
    assert not torch.allclose(t1.prior_weights, t3.prior_weights)
