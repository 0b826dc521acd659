"""The attention layer: gradients, masks, traces, seeds, hyperparameter overrides, finiteness."""

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from bam_viz import families
from bam_viz.nn.attention import AttentionConfig, BayesianAttention, Mode, Trace


def config(family, prior="contextual", **values):
    """AttentionConfig of `family` with those of `values` that are its own hyperparameters."""
    every = {n for f in families.names() for n in families.get(f).hyper_names}
    assert set(values) <= every, set(values) - every
    names = families.get(family).hyper_names
    return AttentionConfig(family, prior, hyper={k: v for k, v in values.items() if k in names})


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
    layer = BayesianAttention(3, 4, config(family, shape_k=5.0, concentration=10.0))
    out, _ = layer(q, k, v, mask, n_samples=4, generator=torch.Generator().manual_seed(0))
    out.pow(2).sum().backward()
    for t in (q, k):
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet", "categorical"])
def test_a_mask_with_no_padding_changes_nothing(family):
    # The layer skips its masked fills when every key is real; the draws and traces must be those
    # of the masked path. A padded mask still zeroes its keys.
    q, k, v, _ = qkv(B=2, H=2, T=5)
    layer = BayesianAttention(2, 4, config(family, "contextual", shape_k=2.0, sigma=0.8))

    def run(mask):
        out, t = layer(q, k, v, mask, n_samples=3, generator=torch.Generator().manual_seed(5), trace=Trace.FULL)
        return out, t.weights, t.kl, t.prior_sample_weights

    for a, b in zip(run(None), run(torch.ones(2, 5, dtype=torch.bool)), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    padded = torch.ones(2, 5, dtype=torch.bool)
    padded[1, 3:] = False
    weights = run(padded)[1].view(3, 2, 2, 5, 5)
    assert weights[:, 1, ..., 3:].abs().max() == 0 and weights[:, 0, ..., 3:].abs().max() > 0


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet", "categorical"])
def test_same_seed_same_samples_and_batched_equals_loop_in_distribution(family):
    q, k, v, mask = qkv(B=1, H=1, T=4)
    layer = BayesianAttention(1, 4, config(family, shape_k=2.0, sigma=0.8, concentration=3.0))

    def weights(n, seed):
        _, t = layer(q, k, v, mask, n_samples=n, generator=torch.Generator().manual_seed(seed), trace=Trace.FULL)
        return t.weights

    torch.testing.assert_close(weights(8, 11), weights(8, 11), rtol=0, atol=0)
    assert not torch.equal(weights(8, 11), weights(8, 12))
    n = 1000
    batched = weights(n, 1)[:, 0, 1]                                        # (S, T) one query row
    g = torch.Generator().manual_seed(2)
    looped = torch.stack([layer(q, k, v, mask, generator=g, trace=Trace.FULL)[1].weights[0, 0, 1]
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
    layer = BayesianAttention(3, 4, AttentionConfig("weibull", hyper={"shape_k": 10.0}))
    before = {n: p.clone() for n, p in layer.state_dict().items()}
    _, t1 = layer(q, k, v, mask, n_samples=64, generator=torch.Generator().manual_seed(0), trace=Trace.FULL)
    _, t2 = layer(q, k, v, mask, n_samples=64, generator=torch.Generator().manual_seed(0), trace=Trace.FULL,
                  hyper=layer.config.with_hyper(shape_k=0.5))
    def spread(t):  # std over samples (rows are sample-major: s * B + b)
        return t.weights.view(64, 2, *t.weights.shape[1:]).std(0).mean()

    assert spread(t2) > 3 * spread(t1)   # smaller k, wider posterior
    for n, p in layer.state_dict().items():
        assert torch.equal(p, before[n])
    assert layer.config.hyper.shape_k == 10.0
    unknown = r"unknown hyperparameters \['shape'\] for weibull attention; known: shape_k, beta"
    with pytest.raises(ValueError, match=unknown):
        layer.config.with_hyper(shape=1.0)
    with pytest.raises(ValueError, match="shape_k must be a positive finite number"):
        layer.config.with_hyper(shape_k=float("nan"))
    with pytest.raises(ValueError, match="hyperparameters of lognormal attention given to a weibull layer"):
        layer(q, k, v, mask, hyper=families.get("lognormal").hyper())


def test_config_holds_only_its_familys_hyperparameters():
    assert AttentionConfig("weibull").hyper == families.get("weibull").hyper()
    assert AttentionConfig("dirichlet", hyper={"concentration": 3}).hyper.concentration == 3.0
    with pytest.raises(ValueError, match=r"unknown hyperparameters \['sigma'\] for weibull attention"):
        AttentionConfig("weibull", hyper={"sigma": 0.5})
    with pytest.raises(ValueError, match="known: none"):
        AttentionConfig("softmax", hyper={"shape_k": 2.0})
    with pytest.raises(ValueError, match="concentration must be a positive finite number"):
        AttentionConfig("dirichlet", hyper={"concentration": -1.0})
    with pytest.raises(ValueError, match="unknown attention family"):
        AttentionConfig("gaussian")
    with pytest.raises(ValueError, match="unknown prior"):
        AttentionConfig("weibull", prior="learned")
    c = AttentionConfig("lognormal", "constant", 8, {"sigma": 0.7})
    assert AttentionConfig.from_dict(c.to_dict()) == c
    assert c.to_dict() == {"family": "lognormal", "prior": "constant", "prior_hidden": 8,
                           "sigma": 0.7, "prior_sigma": 1.0}


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet"])
def test_trace_contract(family):
    q, k, v, mask = qkv()
    layer = BayesianAttention(3, 4, AttentionConfig(family))
    out, t = layer(q, k, v, mask, n_samples=5, generator=torch.Generator().manual_seed(0), trace=Trace.FULL)
    assert out.shape == (10, 3, 6, 4)
    assert t.weights.shape == t.prior_sample_weights.shape == (10, 3, 6, 6)
    assert t.softmax_weights.shape == t.prior_weights.shape == t.scores.shape == (2, 3, 6, 6)
    assert t.kl.shape == (2, 3) and (t.kl >= -1e-4).all()
    for w in (t.weights, t.prior_sample_weights, t.softmax_weights, t.prior_weights):
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        assert (w[1::2, ..., 4:] == 0).all()  # padded keys of the second sentence get no weight
    torch.testing.assert_close(t.softmax_weights, (t.scores.masked_fill(~mask[:, None, None], -1e9)).softmax(-1))


def slider_value(draw, spec):
    """A value anywhere in a hyperparameter's range, spread on its slider's scale."""
    if spec.scale == "log":      # exp(log(high)) can round above high
        return min(max(math.exp(draw(st.floats(math.log(spec.low), math.log(spec.high)))), spec.low), spec.high)
    return draw(st.floats(spec.low, spec.high))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(families.names()),
    data=st.data(),
    T=st.integers(1, 512),
    pad=st.integers(0, 5),
    scale=st.floats(0.0, 30.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_finite_over_the_full_slider_ranges(family, data, T, pad, scale, seed):
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
    fam = families.get(family)
    hyper = fam.hyper({spec.name: slider_value(data.draw, spec) for spec in fam.hyper_specs})
    out, t = layer(q, k, v, mask, n_samples=2, generator=g, hyper=hyper, trace=Trace.FULL)
    assert torch.isfinite(out).all()
    for name in ("weights", "softmax_weights", "prior_weights", "prior_sample_weights"):
        assert torch.isfinite(getattr(t, name)).all(), name
    # The KL is exact, so past float64's range (a Dirichlet weight of e^-1000 under a prior that
    # expects it) it is +inf, which the page shows as a bound; never NaN, never negative.
    assert not torch.isnan(t.kl).any() and (t.kl >= -1e-9).all()
    assert torch.isfinite(t.kl).all() or family == "dirichlet"
    torch.testing.assert_close(t.weights.sum(-1), torch.ones(t.weights.shape[:-1]), atol=1e-4, rtol=0)
    for p in list(t.posterior_params.values()) + list(t.prior_params.values()):
        assert torch.isfinite(p).all()


def test_constant_prior_is_uniform_over_valid_keys_and_contextual_prior_reads_keys():
    q, k, v, mask = qkv()
    const = BayesianAttention(3, 4, AttentionConfig("weibull", prior="constant"))
    assert const.prior_net is None
    _, t = const(q, k, v, mask, trace=Trace.FULL)
    torch.testing.assert_close(t.prior_weights[0], torch.full((3, 6, 6), 1 / 6))
    torch.testing.assert_close(t.prior_weights[1, ..., :4], torch.full((3, 6, 4), 1 / 4))
    ctx = BayesianAttention(3, 4, AttentionConfig("weibull", prior="contextual"))
    torch.nn.init.normal_(ctx.prior_net.out, generator=torch.Generator().manual_seed(0))
    _, t1 = ctx(q, k, v, mask, trace=Trace.FULL)
    _, t2 = ctx(q * 3, k, v, mask, trace=Trace.FULL)     # queries do not enter the prior
    torch.testing.assert_close(t1.prior_weights, t2.prior_weights)
    _, t3 = ctx(q, k.flip(2), v, mask, trace=Trace.FULL)
    assert not torch.allclose(t1.prior_weights, t3.prior_weights)


# ---- trace levels and modes --------------------------------------------------------------------
def next_numbers(g):
    return torch.rand(4, generator=g)


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet"])
def test_trace_levels_record_what_they_name_and_draw_the_same_weights(family):
    q, k, v, mask = qkv()
    layer = BayesianAttention(3, 4, AttentionConfig(family)).eval()
    torch.nn.init.normal_(layer.prior_net.out, generator=torch.Generator().manual_seed(1))

    def run(level):
        g = torch.Generator().manual_seed(0)
        out, t = layer(q, k, v, mask, n_samples=5, generator=g, trace=level)
        return out, t, next_numbers(g)

    (out_f, full, _), (out_s, stats_, g_stats), (out_p, samples, g_samples), (out_n, none, g_none) = (
        run(level) for level in (Trace.FULL, Trace.STATS, Trace.SAMPLES, Trace.NONE))
    for out in (out_s, out_p, out_n):
        torch.testing.assert_close(out, out_f, rtol=0, atol=0)
    assert none is None                                   # eval, nothing asked
    # STATS: everything FULL records but the prior draws, which are the weights themselves.
    assert stats_.prior_sample_weights is stats_.weights
    torch.testing.assert_close(stats_.kl, full.kl, rtol=0, atol=0)
    for name in full.posterior_params:
        torch.testing.assert_close(stats_.posterior_params[name], full.posterior_params[name], rtol=0, atol=0)
    # SAMPLES: the weights and log pi per output row; no KL, no prior draws, and the generator
    # moves on as in an untraced pass (FULL draws the prior from it as well).
    torch.testing.assert_close(samples.weights, full.weights, rtol=0, atol=0)
    assert samples.prior_sample_weights is None and (samples.kl == 0).all()
    assert samples.prior_log_probs.shape == (10, 3, 1, 6)
    torch.testing.assert_close(samples.prior_log_probs.exp().expand(10, 3, 6, 6),
                               full.prior_weights.repeat(5, 1, 1, 1))
    assert torch.equal(g_samples, g_none) and torch.equal(g_stats, g_none)


def test_training_reports_the_kl_without_a_trace():
    q, k, v, mask = qkv()
    layer = BayesianAttention(3, 4, AttentionConfig("weibull"))
    _, full = layer.eval()(q, k, v, mask, generator=torch.Generator().manual_seed(0), trace=Trace.FULL)
    _, t = layer.train()(q, k, v, mask, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(t.kl, full.kl)
    softmax = BayesianAttention(3, 4, AttentionConfig("softmax")).train()
    assert softmax(q, k, v, mask)[1] is None                # no prior, nothing to learn


@pytest.mark.parametrize("family", families.names())
def test_mean_mode_is_softmax_and_draws_nothing(family):
    q, k, v, mask = qkv()
    layer = BayesianAttention(3, 4, AttentionConfig(family))
    g = torch.Generator().manual_seed(0)
    out, t = layer(q, k, v, mask, n_samples=5, generator=g, mode=Mode.MEAN, trace=Trace.STATS)
    assert out.shape == (2, 3, 6, 4)                        # one pass, whatever n_samples
    torch.testing.assert_close(t.weights, t.softmax_weights, rtol=0, atol=0)
    torch.testing.assert_close(t.weights, t.scores.masked_fill(~mask[:, None, None], -math.inf).softmax(-1))
    assert torch.equal(next_numbers(g), next_numbers(torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("family", [n for n in families.names() if families.get(n).stochastic])
def test_first_queries_alone_get_the_full_pass_rows_or_are_refused(family):
    q, k, v, mask = qkv()
    layer = BayesianAttention(3, 4, AttentionConfig(family))
    g_full, g_first = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    full, _ = layer(q, k, v, mask, n_samples=3, generator=g_full)
    if not families.get(family).row_sliceable:
        with pytest.raises(ValueError, match="cannot be sliced by query row"):
            layer(q[..., :1, :], k, v, mask, n_samples=3, generator=g_first)
        return
    first, _ = layer(q[..., :1, :], k, v, mask, n_samples=3, generator=g_first)
    torch.testing.assert_close(first, full[..., :1, :])
    assert torch.equal(next_numbers(g_full), next_numbers(g_first))
