"""Every prior/posterior KL against Monte Carlo, and against SciPy where it has the distributions."""

import math

import pytest
import torch
from scipy import integrate, stats
from torch.distributions import Dirichlet, Gamma, LogNormal, Weibull, kl_divergence

import bam_viz  # noqa: F401  registers KL(Weibull || Gamma)
from bam_viz.kl import DIRICHLET_KL_FLOOR, kl_dirichlet, kl_lognormal, kl_weibull_gamma

GRID = [  # (k, lambda, alpha, beta)
    (0.5, 1.0, 1.0, 1.0), (1.0, 0.3, 0.2, 2.0), (3.0, 0.05, 0.05, 1.0), (10.0, 0.2, 2.0, 10.0),
    (50.0, 0.01, 0.01, 1.0), (2.0, 5.0, 3.0, 0.5), (0.8, 0.1, 1e-3, 1e-2),
]


def mc_kl(q, p, n=400_000, seed=0):
    torch.manual_seed(seed)  # torch.distributions' samplers read the global generator
    x = q.sample((n,))
    d = q.log_prob(x) - p.log_prob(x)
    return d.mean().item(), d.std().item() / math.sqrt(n)


@pytest.mark.parametrize("k,lam,alpha,beta", GRID)
def test_weibull_gamma_kl_matches_monte_carlo(k, lam, alpha, beta):
    q = Weibull(torch.tensor(lam, dtype=torch.float64), torch.tensor(k, dtype=torch.float64))
    p = Gamma(torch.tensor(alpha, dtype=torch.float64), torch.tensor(beta, dtype=torch.float64))
    closed = kl_divergence(q, p).item()  # dispatches to our registered closed form
    est, se = mc_kl(q, p)
    assert abs(closed - est) <= 5 * se + 1e-3, (closed, est, se)
    assert closed >= 0


@pytest.mark.parametrize("k,lam,alpha,beta", GRID[:5])
def test_weibull_gamma_kl_matches_scipy_quadrature(k, lam, alpha, beta):
    q, p = stats.weibull_min(c=k, scale=lam), stats.gamma(a=alpha, scale=1 / beta)
    # Integrate over q's bulk (mass outside is < 2e-12), where quad can see a peaked density.
    lo, hi = q.ppf(1e-12), q.isf(1e-12)
    val, _ = integrate.quad(lambda x: q.pdf(x) * (q.logpdf(x) - p.logpdf(x)), lo, hi, limit=500,
                            points=[q.median()])
    closed = kl_weibull_gamma(torch.tensor(math.log(lam), dtype=torch.float64), k, torch.tensor(alpha,
                              dtype=torch.float64), torch.tensor(beta, dtype=torch.float64)).item()
    assert abs(closed - val) < 1e-5 * max(1.0, abs(val))


def test_weibull_gamma_kl_is_zero_only_when_nothing_can_match():
    # Weibull(k=1) is Exponential = Gamma(1): KL must vanish there (every constant kept).
    kl = kl_divergence(Weibull(torch.tensor(2.0), torch.tensor(1.0)), Gamma(torch.tensor(1.0), torch.tensor(0.5)))
    assert abs(kl.item()) < 1e-6


def test_weibull_gamma_kl_broadcasts_over_batches():
    q = Weibull(torch.rand(4, 3) + 0.1, torch.tensor(2.0))
    p = Gamma(torch.rand(3) + 0.1, torch.tensor(1.0))
    assert kl_divergence(q, p).shape == (4, 3)


@pytest.mark.parametrize("mu_q,s_q,mu_p,s_p", [(-2.0, 0.3, -1.5, 1.0), (0.0, 1.0, 0.0, 1.0), (-5.0, 2.0, 1.0, 0.2)])
def test_lognormal_kl_matches_monte_carlo_and_torch(mu_q, s_q, mu_p, s_p):
    q = LogNormal(torch.tensor(mu_q, dtype=torch.float64), torch.tensor(s_q, dtype=torch.float64))
    p = LogNormal(torch.tensor(mu_p, dtype=torch.float64), torch.tensor(s_p, dtype=torch.float64))
    ours = kl_lognormal(torch.tensor(mu_q, dtype=torch.float64), s_q, torch.tensor(mu_p, dtype=torch.float64), s_p)
    torch.testing.assert_close(ours, kl_divergence(q, p))
    est, se = mc_kl(q, p)
    assert abs(ours.item() - est) <= 5 * se + 1e-4


@pytest.mark.parametrize("a,b", [
    ([0.5, 2.0, 3.0], [1.0, 1.0, 1.0]), ([10.0, 0.1, 5.0], [0.3, 0.3, 0.3]), ([50.0, 20.0, 30.0], [4.0, 3.0, 3.0]),
])
def test_dirichlet_kl_matches_torch_and_monte_carlo(a, b):
    a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    ours = kl_dirichlet(a.log(), b.log())
    torch.testing.assert_close(ours, kl_divergence(Dirichlet(a), Dirichlet(b)))
    est, se = mc_kl(Dirichlet(a), Dirichlet(b), n=200_000)
    assert abs(ours.item() - est) <= 5 * se + 1e-3


def test_dirichlet_kl_with_mask_equals_kl_of_the_valid_keys():
    a = torch.tensor([[2.0, 0.5, 3.0, 7.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, 1.5, 0.2, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False]])
    torch.testing.assert_close(kl_dirichlet(a.log(), b.log(), mask),
                               kl_divergence(Dirichlet(a[:, :3]), Dirichlet(b[:, :3])))


def test_dirichlet_kl_floor_is_inactive_above_it():
    a = torch.tensor([DIRICHLET_KL_FLOOR * 10, 1.0, 2.0], dtype=torch.float64)
    b = torch.tensor([0.5, 0.5, 0.5], dtype=torch.float64)
    torch.testing.assert_close(kl_dirichlet(a.log(), b.log()), kl_divergence(Dirichlet(a), Dirichlet(b)))


def test_module_kl_matches_distribution_objects():
    """The layer's KL (from log parameters) equals torch's KL of the public distribution objects."""
    from bam_viz import families
    from bam_viz.attention import AttentionConfig, BayesianAttention, Trace

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    for family, hyper in [("weibull", dict(shape_k=3.0, beta=2.0)), ("lognormal", dict(sigma=0.4, prior_sigma=0.9))]:
        layer = BayesianAttention(2, 4, AttentionConfig(family, hyper=hyper)).double()
        torch.nn.init.normal_(layer.prior_net.out, generator=g)
        _, t = layer(q, k, v, trace=Trace.FULL)
        prior_logits = layer.prior_logits(k)
        fam = families.get(family)
        # A Hyper built here from the same numbers, not the layer's own: the layer must have read them.
        h = fam.hyper(hyper)
        d_q, d_p = fam.posterior(t.scores, h), fam.prior(prior_logits, h)
        expected = kl_divergence(d_q, d_p).sum((-1, -2))
        torch.testing.assert_close(t.kl, expected)
