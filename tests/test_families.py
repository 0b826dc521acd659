"""The attention families: the registry, hyperparameters, and each family's samplers, KL and
densities against torch.distributions (the oracle) and closed forms."""

import math
import pickle

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import gammainc, gammaln
from torch.distributions import Dirichlet, kl_divergence

from bam_viz import families
from bam_viz.families import AttentionFamily, Hyper, HyperSpec
from bam_viz.families.sampling import (
    categorical_sample,
    dirichlet_rsample,
    log_gamma_rsample,
    log_lognormal_rsample,
    log_weibull_rsample,
    masked_log_softmax,
    normalize,
    normalize_log,
)

N = 200_000
STOCHASTIC = [n for n in families.names() if families.get(n).stochastic]
DETERMINISTIC = [n for n in families.names() if not families.get(n).stochastic]
WITH_DENSITY = [n for n in families.names() if families.get(n).has_density]


def scores_row(T=5, seed=0, dtype=torch.float64):
    return torch.randn(T, generator=torch.Generator().manual_seed(seed), dtype=dtype) * 1.5


def hyper_at(family, where):
    """Every hyperparameter of `family` at its default or at the middle of its slider range."""
    return family.hyper({s.name: s.default if where == "default" else s.middle for s in family.hyper_specs})


def torch_draws(dist, n, seed):
    """n draws from a torch.distributions object, whose samplers read only the global generator:
    seeded inside fork_rng so that no other test sees the change."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return dist.sample((n,))


# ---- the registry --------------------------------------------------------------------------------
def test_names_are_the_registered_families_in_order():
    assert families.names() == ("softmax", "weibull", "lognormal", "dirichlet", "categorical")
    for name in families.names():
        fam = families.get(name)
        assert isinstance(fam, AttentionFamily) and fam.name == name
        assert fam.label and fam.source


def test_get_of_an_unknown_name_names_the_choices():
    with pytest.raises(ValueError, match="unknown attention family 'gaussian'") as err:
        families.get("gaussian")
    for name in families.names():
        assert repr(name) in str(err.value)


class _Toy(AttentionFamily):
    name = "toy"
    label = "toy"
    source = "this test"
    stochastic = False


def test_register_adds_a_family_once_and_refuses_a_non_family():
    try:
        toy = families.register(_Toy())
        assert families.get("toy") is toy and families.names()[-1] == "toy"
        with pytest.raises(ValueError, match="registered already"):
            families.register(_Toy())
    finally:
        families.unregister("toy")
    assert "toy" not in families.names()
    with pytest.raises(ValueError, match="registered already"):
        families.register(families.get("weibull").__class__())
    with pytest.raises(TypeError, match="AttentionFamily"):
        families.register("weibull")
    with pytest.raises(TypeError, match="AttentionFamily"):
        families.register(_Toy)          # the class, not an instance


def test_register_refuses_repeated_hyperparameter_names():
    class Twice(_Toy):
        name = "twice"
        hyper_specs = (HyperSpec("a", 1.0, 0.5, 2.0, "linear", "a", "a"),
                       HyperSpec("a", 1.0, 0.5, 2.0, "linear", "a", "a"))

    with pytest.raises(ValueError, match="repeat"):
        families.register(Twice())
    assert "twice" not in families.names()


def test_all_slider_specs_lists_each_slider_name_once():
    specs = families.all_slider_specs()
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    expected = {s.name for n in families.names() for s in families.get(n).hyper_specs if s.slider}
    assert set(names) == expected
    assert "prior_sigma" not in names and "prior_concentration" not in names   # slider=False


# ---- hyperparameters -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", families.names())
def test_hyper_specs_are_well_formed(name):
    fam = families.get(name)
    assert len(set(fam.hyper_names)) == len(fam.hyper_names)
    for s in fam.hyper_specs:
        assert 0 < s.low <= s.default <= s.high and s.low < s.high
        assert s.low < s.middle < s.high
        assert s.scale in ("log", "linear") and s.label and s.help
        assert fam.spec(s.name) is s
        assert fam.hyper()[s.name] == s.default          # a new Hyper holds the defaults
    assert fam.slider_specs == tuple(s for s in fam.hyper_specs if s.slider)
    with pytest.raises(KeyError):
        fam.spec("no_such_name")


def test_hyper_names_per_family():
    assert {n: families.get(n).hyper_names for n in families.names()} == {
        "softmax": (), "weibull": ("shape_k", "beta"), "lognormal": ("sigma", "prior_sigma"),
        "dirichlet": ("concentration", "prior_concentration"), "categorical": (),
    }


def test_hyper_spec_refuses_a_bad_scale_or_a_default_out_of_range():
    with pytest.raises(ValueError, match="scale"):
        HyperSpec("x", 1.0, 0.5, 2.0, "cubic", "x", "x")
    for low, default, high in [(0.5, 3.0, 2.0), (0.5, 0.1, 2.0), (0.0, 1.0, 2.0), (1.0, 1.0, 1.0)]:
        with pytest.raises(ValueError, match="low <= default <= high"):
            HyperSpec("x", default, low, high, "linear", "x", "x")
    assert HyperSpec("x", 1.0, 0.01, 100.0, "log", "x", "x").middle == pytest.approx(1.0)
    assert HyperSpec("x", 1.0, 0.5, 1.5, "linear", "x", "x").middle == pytest.approx(1.0)


def test_hyper_is_hashable_and_immutable_and_compares_by_family_and_values():
    weibull = families.get("weibull")
    h = weibull.hyper(shape_k=2.0)
    assert isinstance(h, Hyper) and h.family == "weibull"
    assert h == weibull.hyper({"shape_k": 2}) and hash(h) == hash(weibull.hyper({"shape_k": 2}))
    assert {h: 1}[weibull.hyper(beta=1.0, shape_k=2.0)] == 1
    assert h != weibull.hyper(shape_k=3.0)
    assert families.get("softmax").hyper() != families.get("categorical").hyper()   # both empty
    with pytest.raises(AttributeError, match="immutable"):
        h.shape_k = 3.0
    with pytest.raises(AttributeError, match="immutable"):
        h.family = "lognormal"
    with pytest.raises(TypeError):
        h["shape_k"] = 3.0
    assert h.shape_k == h["shape_k"] == 2.0 and dict(h) == {"beta": 1.0, "shape_k": 2.0} and len(h) == 2
    with pytest.raises(AttributeError, match="no hyperparameter 'sigma'"):
        _ = h.sigma
    with pytest.raises(KeyError):
        _ = h["sigma"]
    assert pickle.loads(pickle.dumps(h)) == h


def test_hyper_replace_validates_and_leaves_the_original():
    h = families.get("lognormal").hyper(sigma=0.5)
    r = h.replace(sigma=1.5, prior_sigma=None)
    assert r.sigma == 1.5 and r.prior_sigma == h.prior_sigma and h.sigma == 0.5
    assert h.replace() == h
    with pytest.raises(ValueError, match=r"unknown hyperparameters \['shape_k'\] for lognormal attention; "
                                         r"known: sigma, prior_sigma"):
        h.replace(shape_k=2.0)
    for bad in (float("nan"), float("inf"), 0.0, -1.0, "wide"):
        with pytest.raises(ValueError, match="sigma must be a positive finite number"):
            h.replace(sigma=bad)
    with pytest.raises(ValueError, match="known: none"):
        families.get("softmax").hyper(shape_k=1.0)


def test_hyper_validates_values_given_as_a_mapping():
    weibull = families.get("weibull")
    assert weibull.hyper({"shape_k": "2.5"}).shape_k == 2.5
    with pytest.raises(ValueError, match="beta must be a positive finite number"):
        weibull.hyper({"beta": -1.0})
    with pytest.raises(ValueError, match="unknown hyperparameters"):
        weibull.hyper({"concentration": 1.0})


@pytest.mark.parametrize("name", families.names())
def test_posterior_part_leaves_out_prior_only_names(name):
    fam = families.get(name)
    h = hyper_at(fam, "middle")
    part = dict(h.posterior_part())
    assert set(part) == {s.name for s in fam.hyper_specs if not s.prior_only}
    assert all(part[k] == h[k] for k in part)
    for s in fam.hyper_specs:
        changed = h.replace(**{s.name: s.high})
        # A prior-only value leaves the posterior's cache key alone; any other changes it.
        assert (changed.posterior_part() == h.posterior_part()) == s.prior_only


# ---- distributions: means ------------------------------------------------------------------------
@pytest.mark.parametrize("family,hyper", [
    ("weibull", {"shape_k": 0.7}), ("weibull", {"shape_k": 3.0}), ("weibull", {"shape_k": 50.0}),
    ("lognormal", {"sigma": 0.1}), ("lognormal", {"sigma": 1.0}),
    ("dirichlet", {"concentration": 0.5}), ("dirichlet", {"concentration": 20.0}),
    ("categorical", {}),
])
def test_posterior_mean_is_softmax(family, hyper):
    s = scores_row()
    fam = families.get(family)
    q = fam.posterior(s, fam.hyper(**hyper))
    expected = s.softmax(-1)
    mean = q.probs if family == "categorical" else q.mean
    torch.testing.assert_close(mean, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", STOCHASTIC)
@pytest.mark.parametrize("where", ["default", "middle"])
def test_posterior_and_prior_means_over_valid_keys(name, where):
    fam = families.get(name)
    h = hyper_at(fam, where)
    s, logits = scores_row(seed=1), scores_row(seed=2)
    mask = torch.tensor([True, True, False, True, False])
    for dist, x in ((fam.posterior(s, h, mask), s), (fam.prior(logits, h, mask), logits)):
        mean = dist.probs if name == "categorical" else dist.mean
        torch.testing.assert_close(mean, masked_log_softmax(x, mask).exp(), rtol=1e-9, atol=1e-12)
        # Zero, up to the smallest normal float that Weibull and Dirichlet parameters are clamped to.
        assert (mean[~mask] <= 2 * torch.finfo(mean.dtype).tiny).all()


@pytest.mark.parametrize("family,hyper", [
    ("weibull", {"beta": 1e-2}), ("weibull", {"beta": 3.0}), ("lognormal", {"prior_sigma": 0.7}),
    ("dirichlet", {"prior_concentration": 4.0}),
])
def test_prior_mean_is_pi(family, hyper):
    logits = scores_row(seed=9)
    fam = families.get(family)
    p = fam.prior(logits, fam.hyper(**hyper))
    torch.testing.assert_close(p.mean, logits.softmax(-1), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_a_deterministic_family_has_no_distributions_and_no_sampler(name):
    fam = families.get(name)
    h, s = fam.hyper(), scores_row()
    with pytest.raises(ValueError, match="deterministic"):
        fam.posterior(s, h)
    with pytest.raises(ValueError, match="no prior"):
        fam.prior(s, h)
    with pytest.raises(NotImplementedError):
        fam.sample(s.log_softmax(-1), h, None, torch.Generator().manual_seed(0))
    # Its prior draw is the prior mean pi itself.
    torch.testing.assert_close(fam.sample_prior(s.log_softmax(-1), h, None, None), s.softmax(-1))


# ---- the samplers, against closed forms and SciPy ------------------------------------------------
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
    weibull = families.get("weibull")
    q = weibull.posterior(s, weibull.hyper(shape_k=shape_k))
    torch.testing.assert_close(q.variance, var)
    torch.testing.assert_close(weibull.log_scale(s.log_softmax(-1), shape_k), log_scale)


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
    lognormal = families.get("lognormal")
    torch.testing.assert_close(lognormal.posterior(s, lognormal.hyper(sigma=sigma)).variance, var)


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
    dirichlet = families.get("dirichlet")
    torch.testing.assert_close(dirichlet.posterior(s, dirichlet.hyper(concentration=concentration)).variance, var)
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


def test_implicit_reparameterisation_gradient_is_unbiased():
    # d/d alpha E[G] = 1 for G ~ Gamma(alpha, 1); the implicit gradient must average to it.
    log_alpha = torch.full((50_000,), math.log(0.4), dtype=torch.float64, requires_grad=True)
    G = log_gamma_rsample(log_alpha, torch.Generator().manual_seed(7)).exp()
    (grad,) = torch.autograd.grad(G.sum(), log_alpha)
    d_dalpha = grad / log_alpha.exp()
    assert abs(d_dalpha.mean().item() - 1.0) < 0.05


def test_categorical_sampler_frequencies():
    s = scores_row()
    g = torch.Generator().manual_seed(5)
    z = categorical_sample(s.log_softmax(-1).expand(N, -1), g)
    assert torch.equal(z.sum(-1), torch.ones(N, dtype=z.dtype))
    p = s.softmax(-1)
    assert ((z.mean(0) - p).abs() <= 6 * (p * (1 - p) / N).sqrt()).all()


# ---- each family's sampler against its torch.distributions object -------------------------------
MASK = torch.tensor([True, True, True, False, True])
N_ORACLE = 20_000


def assert_same_law(ours, oracle, name, expect_same=True):
    """Normalised draws (n, T) from the family and from torch: per key, KS for continuous weights,
    selection frequencies (5 standard errors) for one-hot ones. With expect_same=False, assert that
    some key tells the two apart (the comparison has power)."""
    assert ours.shape == oracle.shape
    same = []
    for j in range(ours.shape[-1]):
        a, b = ours[:, j].double(), oracle[:, j].double()
        if name == "categorical":
            p = (a.mean() + b.mean()) / 2
            same.append(abs(float(a.mean() - b.mean())) <= 5 * math.sqrt(2 * p * (1 - p) / len(a)) + 1e-9)
        elif (a == 0).all() and (b == 0).all():                   # a padded key
            same.append(True)
        else:
            # Below 1e-300 a weight is zero to double precision: S itself underflows there, which
            # torch clamps to the smallest normal float and our log-space draws leave at 0.
            a, b = a.clamp_min(1e-300), b.clamp_min(1e-300)
            same.append(stats.ks_2samp(a.numpy(), b.numpy(), method="asymp").pvalue > 1e-4)
    assert all(same) if expect_same else not all(same), same


def oracle_weights(name, dist, n, seed, mask):
    draws = torch_draws(dist, n, seed)
    if name == "categorical":                                      # chosen key indices -> one-hot
        return torch.nn.functional.one_hot(draws, MASK.shape[-1]).double()
    return normalize(draws, mask)              # S -> w = S / sum S (Dirichlet draws are weights already)


@pytest.mark.parametrize("name", STOCHASTIC)
@pytest.mark.parametrize("where", ["default", "middle"])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("side", ["posterior", "prior"])
def test_samplers_agree_with_their_torch_distributions(name, where, masked, side):
    """`sample` follows `posterior(...)` and `sample_prior` follows `prior(...)`: the torch
    objects are the oracle. The comparison can fail: draws at another value of a hyperparameter
    that side reads are told apart."""
    fam, mask = families.get(name), (MASK if masked else None)
    h = hyper_at(fam, where)
    posterior = side == "posterior"
    logits = scores_row(seed=3 if posterior else 4)
    log_p = masked_log_softmax(logits, mask).expand(N_ORACLE, -1)
    draw = fam.sample if posterior else fam.sample_prior
    seed = 10 if posterior else 12
    ours = draw(log_p, h, mask, torch.Generator().manual_seed(seed))
    assert torch.isfinite(ours).all()
    torch.testing.assert_close(ours.sum(-1), torch.ones(N_ORACLE, dtype=ours.dtype))
    if masked:
        assert (ours[:, ~MASK] == 0).all()
    dist = fam.posterior(logits, h, mask) if posterior else fam.prior(logits, h, mask)
    oracle = oracle_weights(name, dist, N_ORACLE, seed + 1, mask)
    assert_same_law(ours, oracle, name)
    for spec in fam.hyper_specs:
        if spec.prior_only != posterior:
            x = h[spec.name]
            other = h.replace(**{spec.name: x * 8 if x * 8 <= spec.high else x / 8})   # inside the range
            wrong = draw(log_p, other, mask, torch.Generator().manual_seed(seed))
            assert_same_law(wrong, oracle, name, expect_same=False)


@pytest.mark.parametrize("name", STOCHASTIC)
def test_sample_is_reproducible_from_the_generator(name):
    fam = families.get(name)
    log_p = scores_row().log_softmax(-1).expand(3, 4, -1)
    h = fam.hyper()

    def draw(seed):
        return fam.sample(log_p, h, None, torch.Generator().manual_seed(seed))

    torch.testing.assert_close(draw(1), draw(1), rtol=0, atol=0)
    assert not torch.equal(draw(1), draw(2))


@pytest.mark.parametrize("name", STOCHASTIC)
def test_drawn_rows_keeps_the_full_draws_first_rows_or_is_refused(name):
    fam = families.get(name)
    log_p = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64).log_softmax(-1)
    h = fam.hyper()
    g_full, g_part = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    full = fam.sample(log_p, h, None, g_full)
    if not fam.row_sliceable:
        with pytest.raises(ValueError, match="cannot be sliced"):
            fam.sample(log_p[..., :1, :], h, None, g_part, drawn_rows=6)
        return
    part = fam.sample(log_p[..., :1, :], h, None, g_part, drawn_rows=6)
    torch.testing.assert_close(part, full[..., :1, :], rtol=0, atol=0)
    # And the generator moved on exactly as in the full pass.
    assert torch.equal(torch.rand(4, generator=g_full), torch.rand(4, generator=g_part))


# ---- statistics: the KL and parameters the layer reports, against torch -------------------------
def random_inputs(masked, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, 3, 6, 6, generator=g, dtype=torch.float64) * 2
    prior_logits = torch.randn(2, 3, 1, 6, generator=g, dtype=torch.float64) * 2
    mask = None
    if masked:
        mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
        mask[1, ..., 4:] = False
    return scores, prior_logits, mask


@pytest.mark.parametrize("name", ["weibull", "lognormal", "dirichlet"])
@pytest.mark.parametrize("where", ["default", "middle", "low", "high"])
@pytest.mark.parametrize("masked", [False, True])
def test_statistics_kl_is_torchs_kl_of_posterior_and_prior(name, where, masked):
    fam = families.get(name)
    if where in ("low", "high"):
        h = fam.hyper({s.name: getattr(s, where) for s in fam.hyper_specs})
    else:
        h = hyper_at(fam, where)
    scores, prior_logits, mask = random_inputs(masked)
    log_p, log_pi = masked_log_softmax(scores, mask), masked_log_softmax(prior_logits, mask)
    valid = torch.ones_like(log_p, dtype=torch.bool) if mask is None else mask.expand_as(log_p)
    st = fam.statistics(log_p, log_pi, valid, h)
    # Per cell, as the layer reads it: broadcast to the cells and summed over the valid ones.
    kl = torch.broadcast_to(st.kl, log_p.shape)
    assert torch.isfinite(kl[valid]).all()
    q, p = fam.posterior(scores, h, mask), fam.prior(prior_logits, h, mask)
    if name == "dirichlet":
        # One KL per row, spread evenly over the row's valid keys.
        kl_rows = kl.masked_fill(~valid, 0.0).sum(-1)
        torch.testing.assert_close(kl[valid], (kl_rows.unsqueeze(-1) / valid.sum(-1, keepdim=True))
                                   .expand_as(kl)[valid])
        if mask is None:
            expected = kl_divergence(q, p)
        else:  # over the valid keys only: those of the second sentence are the first four
            expected = torch.stack([
                kl_divergence(Dirichlet(q.concentration[0]), Dirichlet(p.concentration[0])),
                kl_divergence(Dirichlet(q.concentration[1, ..., :4]), Dirichlet(p.concentration[1, ..., :4])),
            ])
        torch.testing.assert_close(kl_rows, expected, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(st.posterior["concentration"][valid], q.concentration[valid])
        torch.testing.assert_close(st.prior["concentration"][valid], p.concentration.expand_as(log_p)[valid])
        return
    assert st.kl.shape == log_p.shape
    expected = kl_divergence(q, p)                                 # per cell
    torch.testing.assert_close(kl[valid], expected[valid], rtol=1e-9, atol=1e-9)
    if name == "weibull":
        torch.testing.assert_close(st.posterior["scale"][valid], q.scale[valid])
        torch.testing.assert_close(st.posterior["shape_k"], q.concentration)
        torch.testing.assert_close(st.prior["alpha"][valid], p.concentration.expand_as(log_p)[valid])
        torch.testing.assert_close(st.prior["beta"], p.rate.expand_as(log_p))
    else:
        torch.testing.assert_close(st.posterior["loc"][valid], q.loc[valid])
        torch.testing.assert_close(st.posterior["sigma"], q.scale)
        torch.testing.assert_close(st.prior["loc"][valid], p.loc.expand_as(log_p)[valid])
        torch.testing.assert_close(st.prior["sigma"], p.scale.expand_as(log_p))


@pytest.mark.parametrize("name", [n for n in families.names() if not families.get(n).learned_prior])
def test_a_family_without_a_learned_prior_reports_no_kl(name):
    fam = families.get(name)
    scores, prior_logits, _ = random_inputs(False)
    log_p, log_pi = scores.log_softmax(-1), prior_logits.log_softmax(-1)
    st = fam.statistics(log_p, log_pi, torch.ones_like(log_p, dtype=torch.bool), fam.hyper())
    assert (st.kl == 0).all() and st.kl.shape == log_p.shape and st.posterior == st.prior == {}


# ---- key marginals for the density panel, against torch ------------------------------------------
@pytest.mark.parametrize("name", families.names())
def test_key_marginals_match_the_torch_objects(name):
    fam = families.get(name)
    h = hyper_at(fam, "middle")
    scores, prior_logits, _ = random_inputs(False, seed=1)
    log_p, log_pi = scores.log_softmax(-1), prior_logits.log_softmax(-1)
    st = fam.statistics(log_p, log_pi, torch.ones_like(log_p, dtype=torch.bool), h)
    row = (1, 2, 3)                                                # batch, head, query
    got = fam.key_marginals({k: v[row] for k, v in st.posterior.items()},
                            {k: v[row] for k, v in st.prior.items()}, 0)
    if not fam.has_density:
        assert got is None
        return
    q, p = fam.posterior(scores, h), fam.prior(prior_logits, h)
    for key in range(6):
        mq, mp = fam.key_marginals({k: v[row] for k, v in st.posterior.items()},
                                   {k: v[row] for k, v in st.prior.items()}, key)
        pi_row = (1, 2, 0)
        for marginal, dist, at in ((mq, q, row), (mp, p, pi_row)):
            assert marginal.mean() == pytest.approx(float(dist.mean[at][key]), rel=1e-7)
            assert marginal.var() == pytest.approx(float(dist.variance[at][key]), rel=1e-6)


def test_a_marginal_is_its_frozen_distribution():
    """`Marginal` binds a SciPy distribution's parameters without freezing one: the same numbers."""
    from scipy import stats

    from bam_viz.families.base import Marginal

    for dist, params in ((stats.weibull_min, {"c": 0.7, "scale": 2.5}), (stats.gamma, {"a": 0.3, "scale": 4.0}),
                         (stats.lognorm, {"s": 1.3, "scale": 0.2}), (stats.beta, {"a": 0.5, "b": 7.0})):
        ours, frozen = Marginal(dist, **params), dist(**params)
        x = frozen.ppf([0.01, 0.3, 0.9])
        np.testing.assert_array_equal(ours.ppf([0.01, 0.3, 0.9]), x)
        np.testing.assert_array_equal(ours.logpdf(x), frozen.logpdf(x))
        assert ours.mean() == frozen.mean() and ours.var() == frozen.var()


# ---- one cell's distributions from its parameters ------------------------------------------------
CELLWISE = ["weibull", "lognormal"]          # a score distribution per attention cell


@pytest.mark.parametrize("name", CELLWISE)
@pytest.mark.parametrize("where", ["default", "middle"])
def test_cell_distributions_are_the_reported_parameters_as_torch_objects(name, where):
    fam = families.get(name)
    h = hyper_at(fam, where)
    scores, prior_logits, _ = random_inputs(False, seed=2)
    log_p, log_pi = scores.log_softmax(-1), prior_logits.log_softmax(-1)
    st = fam.statistics(log_p, log_pi, torch.ones_like(log_p, dtype=torch.bool), h)
    q, p = fam.cell_distributions(st.posterior, st.prior)
    torch.testing.assert_close(kl_divergence(q, p), st.kl, rtol=1e-9, atol=1e-9)
    # The same laws as the layer's own objects (built from scores and prior logits) ...
    torch.testing.assert_close(q.mean, fam.posterior(scores, h).mean, rtol=1e-9, atol=0)
    torch.testing.assert_close(p.mean, fam.prior(prior_logits, h).mean.expand_as(p.mean), rtol=1e-9, atol=0)
    # ... and as the density panel's SciPy marginals, at each one's quartiles.
    row = (1, 2, 3)
    for key in range(6):
        mq, mp = fam.key_marginals({k: v[row] for k, v in st.posterior.items()},
                                   {k: v[row] for k, v in st.prior.items()}, key)
        for marginal, dist in ((mq, q), (mp, p)):
            x = torch.tensor(marginal.ppf([0.25, 0.5, 0.75]), dtype=torch.float64)
            got = dist.log_prob(x.reshape(3, 1, 1, 1, 1))[:, 1, 2, 3, key]
            assert np.allclose(got.numpy(), marginal.logpdf(x.numpy()), rtol=1e-9)


@pytest.mark.parametrize("name", [n for n in families.names() if n not in CELLWISE])
def test_a_family_without_cell_distributions_says_so(name):
    with pytest.raises(ValueError, match="no distribution per attention cell"):
        families.get(name).cell_distributions({}, {})


def test_density_variable_names_what_the_marginal_is_of():
    assert families.get("dirichlet").density_variable == "weight w_ij"
    for name in WITH_DENSITY:
        if name != "dirichlet":
            assert families.get(name).density_variable == "unnormalised score S_ij"


# ---- normalisation -------------------------------------------------------------------------------
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


def test_normalize_log_of_a_row_with_no_valid_key_is_uniform_not_nan():
    w = normalize_log(torch.zeros(1, 4), torch.zeros(1, 4, dtype=torch.bool))
    torch.testing.assert_close(w, torch.full((1, 4), 0.25))


# ---- the Deng et al. identities ------------------------------------------------------------------
def test_categorical_elbo_gap_is_kl_to_exact_posterior():
    categorical = families.get("categorical")
    g = torch.Generator().manual_seed(6)
    log_prior = torch.randn(7, generator=g, dtype=torch.float64).log_softmax(-1)
    log_lik = torch.randn(7, generator=g, dtype=torch.float64).log_softmax(-1) - 0.3
    log_q = torch.randn(7, generator=g, dtype=torch.float64).log_softmax(-1)
    log_py = categorical.exact_log_marginal(log_prior, log_lik)
    post = categorical.exact_posterior(log_prior, log_lik)
    kl = (log_q.exp() * (log_q - post)).sum()
    gap = log_py - categorical.elbo(log_q, log_prior, log_lik)
    assert abs(float(gap - kl)) < 1e-6
    assert gap > 0
    # The bound is tight at the exact posterior.
    assert abs(float(log_py - categorical.elbo(post, log_prior, log_lik))) < 1e-12
    # And the marginal is the brute-force sum.
    assert abs(float(log_py) - math.log(sum(math.exp(a + b) for a, b in zip(log_prior, log_lik, strict=True)))) < 1e-12
