"""Every prior/posterior KL against Monte Carlo, and against SciPy where it has the distributions."""

import math

import mpmath  # a dependency of torch's (through sympy)
import pytest
import torch
from scipy import integrate, stats
from torch.distributions import Dirichlet, Gamma, LogNormal, Weibull, kl_divergence

import bam_viz  # noqa: F401  registers KL(Weibull || Gamma)
from bam_viz.families.kl import kl_dirichlet, kl_lognormal, kl_weibull_gamma

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


def test_dirichlet_kl_matches_torch_over_ordinary_concentrations():
    g = torch.Generator().manual_seed(0)
    for n in (2, 3, 7, 30):
        a = torch.rand(50, n, generator=g, dtype=torch.float64) * 100 + 0.01
        b = torch.rand(50, n, generator=g, dtype=torch.float64) * 100 + 0.01
        torch.testing.assert_close(kl_dirichlet(a.log(), b.log()), kl_divergence(Dirichlet(a), Dirichlet(b)),
                                   rtol=1e-11, atol=1e-10)


def mp_kl_dirichlet(log_a, log_b, dps=80):
    """The closed form at `dps` digits from the float64 logs taken as exact: the reference."""
    with mpmath.workdps(dps):
        a = [mpmath.exp(mpmath.mpf(x)) for x in log_a]
        b = [mpmath.exp(mpmath.mpf(x)) for x in log_b]
        a0, b0 = mpmath.fsum(a), mpmath.fsum(b)
        return float(mpmath.loggamma(a0) - mpmath.loggamma(b0) + mpmath.fsum(
            mpmath.loggamma(bj) - mpmath.loggamma(aj) + (aj - bj) * (mpmath.digamma(aj) - mpmath.digamma(a0))
            for aj, bj in zip(a, b, strict=True)))


def dirichlet_logs(concentration, prior_concentration, scores, prior_logits, dtype=torch.float64):
    """log a and log b as the Dirichlet family forms them, from a log_softmax in `dtype`."""
    log_p = torch.tensor(scores, dtype=dtype).log_softmax(-1)
    log_pi = torch.tensor(prior_logits, dtype=dtype).log_softmax(-1)
    return math.log(concentration) + log_p.double(), math.log(prior_concentration) + log_pi.double()


TINY = [  # (log a, log b) per key
    # The issue's cell: a0 = 0.05, two keys at softmax weight e^-30, a uniform prior of 10.
    dirichlet_logs(0.05, 10.0, [0.0, -30.0, -30.0], [0.0, 0.0, 0.0]),
    # a0 = 0.05 and the smallest weights a float32 softmax of finite scores keeps nonzero.
    dirichlet_logs(0.05, 10.0, [0.0, -104.0, -50.0, -3.0], [0.0, 0.0, 1.0, -2.0], torch.float32),
    dirichlet_logs(0.05, 1e4, [0.0, -104.0], [0.0, 20.0], torch.float32),
    # Concentrations that underflow float64 (e^-760) while their logs and the KL stay finite.
    (torch.tensor([-760.0, -1.0, 0.5], dtype=torch.float64), torch.tensor([-60.0, 0.0, 0.0], dtype=torch.float64)),
    # Every concentration tiny, a0 included.
    (torch.tensor([-400.0, -420.0, -401.0], dtype=torch.float64),
     torch.tensor([-2.0, -300.0, 1.0], dtype=torch.float64)),
    # One key holds almost all of a0: 1 - a_j / a0 is tiny for it.
    (torch.tensor([2.0, -40.0, -45.0], dtype=torch.float64), torch.tensor([2.0, -50.0, -60.0], dtype=torch.float64)),
    (torch.tensor([-1e-3, -9.0, -12.0, -700.0], dtype=torch.float64),
     torch.tensor([-1.0, -1.0, 1.0, -5.0], dtype=torch.float64)),
]


@pytest.mark.parametrize("log_a,log_b", TINY)
def test_dirichlet_kl_matches_mpmath_at_tiny_concentrations(log_a, log_b):
    expected = mp_kl_dirichlet(log_a.tolist(), log_b.tolist())
    got = kl_dirichlet(log_a, log_b)
    assert got.dtype == torch.float64
    # exp(log b - log a) is as exact as its float64 argument: eps * |log b - log a| relative.
    assert got.item() == pytest.approx(expected, rel=2e-13, abs=1e-12)


def test_dirichlet_kl_of_the_issue_is_not_floored():
    """The issue's cell, where a floor at 1e-8 on a_j moved the KL by orders of magnitude."""
    log_a, log_b = TINY[0]
    exact = mp_kl_dirichlet(log_a.tolist(), log_b.tolist())
    floored_bound = 1.0 / 1e-8 * 10.0       # b0 / min a_j: what a floor at 1e-8 can reach at most
    assert exact > 1e6 * floored_bound
    assert kl_dirichlet(log_a, log_b).item() == pytest.approx(exact, rel=2e-13)


def test_dirichlet_kl_is_inf_only_beyond_float64():
    log_a = torch.tensor([-705.0, 0.0], dtype=torch.float64)
    finite = kl_dirichlet(log_a, torch.tensor([0.0, 0.0], dtype=torch.float64))       # ~ e^705
    assert math.isfinite(finite.item())
    assert finite.item() == pytest.approx(mp_kl_dirichlet(log_a.tolist(), [0.0, 0.0]), rel=2e-13)
    assert kl_dirichlet(log_a, torch.tensor([6.0, 0.0], dtype=torch.float64)).item() == math.inf   # ~ e^711
    # A valid key with a_j = 0 or b_j = 0: the KL's limit.
    assert kl_dirichlet(torch.tensor([-math.inf, 0.0]), torch.tensor([0.0, 0.0])).item() == math.inf
    assert kl_dirichlet(torch.tensor([0.0, 0.0]), torch.tensor([0.0, -math.inf])).item() == math.inf


def test_dirichlet_kl_masks_padded_keys_whatever_they_hold():
    log_a = torch.tensor([[0.5, -300.0, -math.inf, math.nan],
                          [-math.inf] * 4,
                          [1.5, -math.inf, -math.inf, -math.inf]], dtype=torch.float64, requires_grad=True)
    log_b = torch.tensor([[0.0, 1.0, 3.0, math.inf],
                          [0.0] * 4,
                          [-2.0, 0.0, 0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False, False], [False] * 4, [True, False, False, False]])
    kl = kl_dirichlet(log_a, log_b, mask)
    assert kl[0].item() == pytest.approx(mp_kl_dirichlet(log_a[0, :2].tolist(), log_b[0, :2].tolist()), rel=2e-13)
    assert kl[1].item() == 0.0      # no valid key
    assert kl[2].item() == 0.0      # one valid key: both are the point mass w = 1
    kl.sum().backward()
    for grad in (log_a.grad, log_b.grad):
        assert torch.isfinite(grad).all()
        assert (grad[~mask] == 0).all()


def mp_kl_dirichlet_grad(log_a, log_b, dps=60):
    """d KL / d log a_j = a_j ((a_j - b_j) psi'(a_j) - (a0 - b0) psi'(a0)) and
    d KL / d log b_j = b_j (psi(b_j) - psi(b0) - psi(a_j) + psi(a0)), at `dps` digits."""
    with mpmath.workdps(dps):
        a = [mpmath.exp(mpmath.mpf(x)) for x in log_a]
        b = [mpmath.exp(mpmath.mpf(x)) for x in log_b]
        a0, b0 = mpmath.fsum(a), mpmath.fsum(b)
        da = [aj * ((aj - bj) * mpmath.psi(1, aj) - (a0 - b0) * mpmath.psi(1, a0)) for aj, bj in zip(a, b, strict=True)]
        db = [bj * (mpmath.digamma(bj) - mpmath.digamma(b0) - mpmath.digamma(aj) + mpmath.digamma(a0))
              for aj, bj in zip(a, b, strict=True)]
        return (torch.tensor([float(x) for x in da], dtype=torch.float64),
                torch.tensor([float(x) for x in db], dtype=torch.float64))


@pytest.mark.parametrize("log_a,log_b", TINY + [
    (torch.tensor([0.3, 2.0, -1.0], dtype=torch.float64), torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)),
])
def test_dirichlet_kl_gradient_is_finite_and_exact(log_a, log_b):
    """The training loss backpropagates through this KL: no NaN from a branch left out."""
    log_a, log_b = log_a.clone().requires_grad_(), log_b.clone().requires_grad_()
    kl_dirichlet(log_a, log_b).backward()
    da, db = mp_kl_dirichlet_grad(log_a.tolist(), log_b.tolist())
    assert torch.isfinite(log_a.grad).all() and torch.isfinite(log_b.grad).all()
    # Not to float64 precision: the gradient of digamma is torch's trigamma, which is coarser.
    torch.testing.assert_close(log_a.grad, da, rtol=1e-8, atol=1e-8 * da.abs().max().item())
    torch.testing.assert_close(log_b.grad, db, rtol=1e-8, atol=1e-8 * db.abs().max().item())


def test_dirichlet_kl_is_float64_for_float32_inputs():
    log_a = torch.tensor([0.0, -50.0], requires_grad=True)
    kl = kl_dirichlet(log_a, torch.tensor([0.0, 0.0]))
    assert kl.dtype == torch.float64
    kl.backward()
    assert log_a.grad.dtype == torch.float32


@pytest.mark.parametrize("concentration", [0.05, 1e4])
@pytest.mark.parametrize("prior_concentration", [0.05, 1e4])
def test_dirichlet_statistics_kl_is_exact_at_the_slider_extremes(concentration, prior_concentration):
    """Through the family, from float32 log softmaxes as the layer gives them, down to the smallest
    weight a float32 softmax of finite scores keeps nonzero."""
    from bam_viz import families

    fam = families.get("dirichlet")
    h = fam.hyper(concentration=concentration, prior_concentration=prior_concentration)
    scores = torch.tensor([[0.0, -104.0, -20.0, -1.0, 3.0], [2.0, 0.0, 1.0, -104.0, 0.0]])
    prior_logits = torch.tensor([[0.0, 20.0, 0.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    log_p = scores.masked_fill(~mask, -math.inf).log_softmax(-1)
    log_pi = prior_logits.masked_fill(~mask, -math.inf).log_softmax(-1)
    valid = mask.expand_as(log_p)
    st = fam.statistics(log_p, log_pi, valid, h)
    assert st.kl.dtype == torch.float64
    kl_rows = torch.broadcast_to(st.kl, log_p.shape).masked_fill(~valid, 0.0).sum(-1)
    for row in range(2):
        log_a = math.log(concentration) + log_p[row, :4].double()
        log_b = math.log(prior_concentration) + log_pi[0, :4].double()
        expected = mp_kl_dirichlet(log_a.tolist(), log_b.tolist())
        assert kl_rows[row].item() == pytest.approx(expected, rel=1e-12)
    assert kl_rows[0] > torch.finfo(torch.float32).max     # e^-104 of the posterior where the prior is ~1
    log_a = (math.log(concentration) + log_p.double()).requires_grad_()
    kl_dirichlet(log_a, (math.log(prior_concentration) + log_pi.double()).expand_as(log_a), valid).sum().backward()
    assert torch.isfinite(log_a.grad).all()


def test_module_kl_matches_distribution_objects():
    """The layer's KL (from log parameters) equals torch's KL of the public distribution objects."""
    from bam_viz import families
    from bam_viz.nn.attention import AttentionConfig, BayesianAttention, Trace

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
