"""ExplainResult: summaries of the predictive and the key densities, against Monte Carlo."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from fake_result import make_fake_result

import bam_viz
from bam_viz.core import metrics
from bam_viz.families.sampling import log_gamma_rsample, log_lognormal_rsample, log_weibull_rsample
from bam_viz.inference.explain import explain
from bam_viz.inference.result import ExplainResult, Note


def make(family, post, prior, sample_probs, L=2, H=1, T=3, target=1):
    """A result of `sample_probs` (S, C); `target` 1 is "positive" for two classes."""
    S = sample_probs.shape[0]
    C = sample_probs.shape[1]
    classes = ["negative", "positive"] if C == 2 else [f"c{c}" for c in range(C)]
    w = torch.full((L, H, T, T), 1 / T)
    return ExplainResult(
        text="x", tokens=["[CLS]", "x", "[SEP]"], classes=classes, model_name="m", family=family, target=target,
        stochastic_layers=[1], hyper={}, n_samples=S, seed=0, truncated=False,
        sample_weights=w.expand(S, *w.shape), softmax_weights=w, prior_weights=w,
        prior_sample_weights=w.expand(S, *w.shape), kl=torch.zeros(L, H), sample_probs=sample_probs,
        mc_probs=sample_probs.mean(0), softmax_probs=sample_probs.mean(0), mean_attention_probs=sample_probs.mean(0),
        posterior_params={k: torch.full((L, H, T, T), v) for k, v in post.items()},
        prior_params={k: torch.full((L, H, T, T), v) for k, v in prior.items()},
    )


def test_entropy_decomposition():
    probs = torch.tensor([[0.9, 0.1], [0.1, 0.9]])
    r = make("weibull", {"shape_k": 2.0, "scale": 0.3}, {"alpha": 0.5, "beta": 1.0}, probs)
    h = -(0.5 * math.log(0.5)) * 2
    assert abs(r.predictive_entropy - h) < 1e-6
    expected = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert abs(r.expected_entropy - expected) < 1e-6
    assert abs(r.mutual_information_plugin - (h - expected)) < 1e-6
    assert r.gap == pytest.approx(0.0) and r.gap_softmax == pytest.approx(0.0)


@pytest.mark.parametrize("family,post,prior", [
    ("weibull", {"shape_k": 10.0, "scale": 0.2}, {"alpha": 0.05, "beta": 1.0}),
    ("weibull", {"shape_k": 0.5, "scale": 0.01}, {"alpha": 3.0, "beta": 30.0}),
    ("lognormal", {"loc": -2.0, "sigma": 0.3}, {"loc": -1.0, "sigma": 1.0}),
])
def test_key_densities_match_monte_carlo_histograms(family, post, prior):
    r = make(family, post, prior, torch.full((4, 2), 0.5))
    d = r.key_densities(1, 0, 0, 1, n_points=400)
    x, dx = d["x"], d["x"][1] - d["x"][0]
    assert d["label"].startswith("log10")
    g = torch.Generator().manual_seed(0)
    n = 200_000
    if family == "weibull":
        q = log_weibull_rsample(torch.full((n,), math.log(post["scale"]), dtype=torch.float64), post["shape_k"], g)
        p = log_gamma_rsample(torch.full((n,), math.log(prior["alpha"]), dtype=torch.float64), g) \
            - math.log(prior["beta"])
    else:
        q = log_lognormal_rsample(torch.full((n,), post["loc"], dtype=torch.float64), post["sigma"], g)
        p = log_lognormal_rsample(torch.full((n,), prior["loc"], dtype=torch.float64), prior["sigma"], g)
    for name, log_s in (("posterior", q), ("prior", p)):
        u = (log_s / math.log(10)).numpy()
        # Probability of the middle third of the grid: density integral vs sample frequency.
        a, b = x[len(x) // 3], x[2 * len(x) // 3]
        inside = (x >= a) & (x <= b)
        integral = d[name][inside].sum() * dx
        freq = ((u >= a) & (u <= b)).mean()
        assert abs(integral - freq) < 0.02 + 0.02 * freq, (name, integral, freq)
    # The posterior's bulk is on the grid.
    assert d["posterior"].sum() * dx > 0.97


def test_key_densities_none_where_there_is_no_density():
    r = make("weibull", {"shape_k": 2.0, "scale": 0.3}, {"alpha": 0.5, "beta": 1.0}, torch.full((2, 2), 0.5))
    assert r.key_densities(0, 0, 0, 1) is None          # a deterministic layer
    r.posterior_params = {}
    assert r.key_densities(1, 0, 0, 1) is None


def test_key_densities_finite_at_extremes():
    for post, prior in [({"shape_k": 1000.0, "scale": 1e-30}, {"alpha": 1e-8, "beta": 1e-4}),
                        ({"shape_k": 0.2, "scale": 0.5}, {"alpha": 1e4, "beta": 1e4})]:
        r = make("weibull", post, prior, torch.full((2, 2), 0.5))
        d = r.key_densities(1, 0, 0, 1)
        assert all(np.isfinite(d[k]).all() for k in ("x", "posterior", "prior"))
    r = make("dirichlet", {"concentration": 1e-9}, {"concentration": 1e4}, torch.full((2, 2), 0.5))
    d = r.key_densities(1, 0, 0, 1)
    assert all(np.isfinite(d[k]).all() for k in ("x", "posterior", "prior"))


def test_spread_is_the_mean_sample_std_and_a_sampler_result_needs_no_tensor():
    probs = torch.tensor([[0.7, 0.3], [0.2, 0.8], [0.5, 0.5]])
    r = make("weibull", {"shape_k": 2.0, "scale": 0.3}, {"alpha": 0.5, "beta": 1.0}, probs)
    g = torch.Generator().manual_seed(0)
    w = torch.rand(3, 2, 1, 3, 3, generator=g).softmax(-1)
    r.sample_weights = w
    torch.testing.assert_close(r.spread, w.std(0).mean((-1, -2)))     # the two-pass formula
    # A result built with a prior sampler draws heads on demand and assembles the full tensor once.
    asked = []

    def sampler(layer, head):
        asked.append((layer, head))
        return torch.full((3, 3, 3), float(layer + 1) / 3)

    fields = {f: getattr(r, f) for f in (
        "text", "tokens", "classes", "model_name", "family", "stochastic_layers", "hyper", "n_samples", "seed",
        "truncated", "sample_weights", "softmax_weights", "prior_weights", "kl", "sample_probs", "mc_probs",
        "softmax_probs", "mean_attention_probs")}
    lazy = ExplainResult(**fields, prior_sampler=sampler)
    assert lazy.prior_draws(1, 0)[0, 0, 0] == pytest.approx(2 / 3) and asked == [(1, 0)]
    lazy.prior_draws(1, 0)
    assert asked == [(1, 0)]                                            # drawn once
    assert lazy.prior_sample_weights.shape == (3, 2, 1, 3, 3) and asked == [(1, 0), (0, 0)]
    with pytest.raises(ValueError, match="prior_sampler"):
        ExplainResult(**fields)


# ---- the explorer's downloads: one layer and head, the settings in a header and the file name ----
def _with_mean_field(r: ExplainResult, p_positive: float) -> ExplainResult:
    """`r` with f(softmax) = f(E[w]) = p_positive and no leave-one-out values (as where no attention is drawn)."""
    p = torch.tensor([1 - p_positive, p_positive])
    return dataclasses.replace(r, softmax_probs=p, mean_attention_probs=p)


def test_standard_errors_by_hand():
    p = [0.2, 0.4, 0.9, 0.5]                                             # mean 0.5, sum of squares 0.26
    probs = torch.tensor([[1 - x, x] for x in p], dtype=torch.float64)
    r = _with_mean_field(make("weibull", {}, {}, probs), 0.6)
    se = r.se
    assert se.n_samples == 4
    assert se.p_target == pytest.approx(math.sqrt(0.26 / 3 / 4))
    assert se.gap == se.gap_softmax == pytest.approx(se.p_target)      # f(softmax) is a constant
    assert r.gap == pytest.approx(-0.1) and r.gap_distinguishable is False  # 0.1 < 3.18 * 0.147, t at 3 df
    replicates = np.array([metrics.mutual_information(np.delete(probs.numpy(), i, 0)[None])[0] for i in range(4)])
    jackknife = math.sqrt(3 / 4 * np.sum((replicates - replicates.mean()) ** 2))     # (S-1)/S sum of squares
    assert se.mutual_information == pytest.approx(jackknife)
    plug_in = metrics.mutual_information(probs.numpy()[None])[0]
    assert r.mutual_information == pytest.approx(4 * plug_in - 3 * replicates.mean())  # bias-corrected
    assert r.mutual_information_plugin == pytest.approx(plug_in)
    close = torch.tensor([[0.2, 0.8], [0.18, 0.82], [0.19, 0.81], [0.21, 0.79]])
    assert _with_mean_field(make("weibull", {}, {}, close), 0.6).gap_distinguishable is True


def test_standard_errors_are_none_when_not_estimable_and_zero_when_exact():
    one = make("weibull", {}, {}, torch.tensor([[0.3, 0.7]]))
    assert (one.se.p_target, one.se.gap, one.se.gap_softmax, one.se.mutual_information) == (None,) * 4
    assert one.gap_distinguishable is None
    two = make("weibull", {}, {}, torch.tensor([[0.3, 0.7], [0.6, 0.4]]))
    assert two.se.gap_softmax == pytest.approx(0.15)
    assert two.se.gap is None and two.se.mutual_information is None                  # a jackknife needs 3
    same = make("weibull", {}, {}, torch.tensor([[0.3, 0.7]] * 5))
    assert (same.se.p_target, same.se.gap, same.se.gap_softmax, same.se.mutual_information) == (0.0,) * 4
    exact = make_fake_result("softmax", S=1)                             # deterministic: no Monte Carlo
    assert exact.stochastic_layers == [] and exact.se.gap == 0.0 and exact.gap_distinguishable is False
    assert "p_target" in exact.se.estimator and "jackknife" in exact.se.estimator


def test_standard_errors_match_the_spread_over_seeds():
    """On a real model, the SE that one result reports against the sd of its estimate over seeds.

    With n = 30 seeds the sd over seeds is itself uncertain by a factor of about
    exp(±1/sqrt(2(n-1))) = exp(±0.13) for normal values: the ratio must lie within 3.5 of those,
    [0.63, 1.58]. The root mean square SE is compared: the squared SE estimates the variance
    (unbiased for a mean; conservative for the jackknife), the mean SE is lower by Jensen."""
    model = bam_viz.load("bam-wc")
    text, n_seeds = "A quietly moving film.", 30
    results = [model.explain(text, n_samples=32, seed=s, shape_k=0.5).for_target("positive") for s in range(n_seeds)]
    tolerance = math.exp(3.5 / math.sqrt(2 * (n_seeds - 1)))
    for quantity, estimate in (("p_target", lambda r: float(r.mc_probs[r.target])),
                               ("gap", lambda r: r.gap), ("gap_softmax", lambda r: r.gap_softmax),
                               ("mutual_information", lambda r: r.mutual_information)):
        spread = np.std([estimate(r) for r in results], ddof=1)
        rms_se = math.sqrt(np.mean([getattr(r.se, quantity) ** 2 for r in results]))
        assert 1 / tolerance < spread / rms_se < tolerance, (quantity, spread, rms_se)


def test_a_note_reads_as_its_text_and_says_whether_it_is_a_warning():
    """The page picks st.warning by `note.warning`, never by the note's words (the library knows no page)."""
    import pickle

    cut, remark = Note("The text is longer than this model's maximum.", warning=True), Note("No prior.")
    assert cut == "The text is longer than this model's maximum." and cut.warning and not remark.warning
    assert pickle.loads(pickle.dumps(cut)).warning is True and pickle.loads(pickle.dumps(cut)) == cut
    r = dataclasses.replace(make("weibull", {}, {}, torch.tensor([[0.3, 0.7]])), notes=["typed by hand"])
    assert isinstance(r.notes[0], Note) and r.notes[0].warning is False     # plain strings become remarks
    model = bam_viz.load("bam-wc")
    long = model.explain("good " * (model.max_tokens + 10), n_samples=2)
    assert long.truncated and [n.warning for n in long.notes] == [True]
    assert not model.explain("A fine film.", n_samples=2).notes
    assert [n.warning for n in bam_viz.load("softmax").explain("A fine film.", n_samples=1).notes] == [False]


# ---- K classes: every one-class number is for the target class -----------------------------------
THREE = torch.tensor([[0.2, 0.5, 0.3], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.2, 0.4, 0.4]], dtype=torch.float64)


def _three(target=None) -> ExplainResult:
    """Four samples over three classes, E[f(z)] = (0.2, 0.45, 0.35), with f(softmax) and f(E[w]) apart."""
    r = make("weibull", {}, {}, THREE, target=target)
    return dataclasses.replace(r, softmax_probs=torch.tensor([0.25, 0.4, 0.35]),
                               mean_attention_probs=torch.tensor([0.3, 0.3, 0.4]))


def test_the_target_is_a_name_an_index_or_the_predicted_class():
    r = _three()
    assert r.classes == ["c0", "c1", "c2"] and r.target == r.predicted == 1 and r.target_name == "c1"
    assert _three("c2").target == 2 and _three(-1).target == 2 and _three(0).target == 0
    assert _three("predicted").target == 1
    for bad, match in (("c3", "no class 'c3': the classes are 'c0', 'c1', 'c2'"), (3, "no class index"),
                       (1.5, "no class index"), (True, "a class name, an index or None"),
                       ([1], "a class name, an index or None")):
        with pytest.raises(ValueError, match=match):
            _three(bad)
        with pytest.raises(ValueError, match=match):
            r.for_target(bad)


def test_each_class_has_its_own_gaps_and_errors_by_hand():
    r = _three()
    p = THREE.numpy()
    mc, soft, mean = p.mean(0), np.array([0.25, 0.4, 0.35]), np.array([0.3, 0.3, 0.4])
    mi = r.se.mutual_information
    gaps = []
    for t in range(3):
        v = r.for_target(t)
        assert v.target == t and v.classes is r.classes
        assert v.gap == pytest.approx(mc[t] - mean[t], abs=1e-7) and v.gap_softmax == pytest.approx(mc[t] - soft[t],
                                                                                                   abs=1e-7)
        assert v.se.p_target == pytest.approx(p[:, t].std(ddof=1) / 2)
        assert v.se.gap_softmax == pytest.approx((p[:, t] - soft[t]).std(ddof=1) / 2)
        assert v.se.gap == v.se.gap_softmax                           # no leave-one-out values: f(E[w]) held fixed
        assert v.se.mutual_information == mi and v.mutual_information == r.mutual_information   # one for all
        np.testing.assert_allclose(r.class_errors[:, t], [v.se.p_target, v.se.gap, v.se.gap_softmax])
        gaps.append(v.gap)
    assert sum(gaps) == pytest.approx(0.0, abs=1e-6)                  # the probabilities sum to 1 each way
    assert r.target == 1 and r.gap == pytest.approx(mc[1] - mean[1], abs=1e-7)   # the views left r alone


def test_a_view_for_another_class_shares_the_tensors_and_what_was_computed():
    r = make_fake_result("weibull", S=6, n_classes=5, target="c0")
    v = r.for_target("c3")
    assert r.for_target(0) is r and v is not r and v.target == 3 and r.target == 0
    assert v.sample_weights is r.sample_weights and v.posterior_mean_weights is r.posterior_mean_weights
    assert v.spread is r.spread and v._prior_heads is r._prior_heads
    assert v.se != r.se and v.se.mutual_information == r.se.mutual_information
    assert v.for_target(None).target == r.predicted == int(r.mc_probs.argmax())


@pytest.mark.parametrize("which", ["three_classes", "fifty_classes"])
def test_explain_on_k_classes_is_for_the_target_by_name_by_index_and_by_default(which, request):
    """A random K-class head on the real MiniLM: the gap and its errors for each way of naming the
    target are those of its column, by hand from the result's own samples; the cached pass serves
    every class."""
    model = request.getfixturevalue(which)
    K, text, S = model.n_classes, "A quietly moving film.", 8
    r = explain(model, text, n_samples=S, seed=2)
    probs = r.sample_probs.double()                                            # (S, K)
    mc = probs.mean(0)
    assert r.classes == list(model.classes) and r.mc_probs.shape == (K,) and r.target == int(mc.argmax())
    assert mc.max() > 1.5 / K                                                  # a predicted class, not a tie
    for target, t in (("c2", 2), (K - 1, K - 1), (-K, 0), (None, int(mc.argmax())), ("predicted", int(mc.argmax()))):
        v = explain(model, text, n_samples=S, seed=2, target=target)
        assert v.target == t and v.target_name == f"c{t}"
        assert v.gap == pytest.approx(float(mc[t] - v.mean_attention_probs[t]), abs=1e-6)
        assert v.gap_softmax == pytest.approx(float(mc[t] - v.softmax_probs[t]), abs=1e-6)
        assert v.se.p_target == pytest.approx(float(probs[:, t].std() / math.sqrt(S)), rel=1e-6)
        without = (probs[:, t].sum() - probs[:, t]) / (S - 1) - v.mean_attention_loo_probs[:, t].double()   # (S,)
        jackknife = math.sqrt((S - 1) / S * float(((without - without.mean()) ** 2).sum()))
        assert v.se.gap == pytest.approx(jackknife, rel=1e-6)
        assert (v.gap, v.se) == (r.for_target(target).gap, r.for_target(target).se)
    with pytest.raises(ValueError, match="no class 'positive'"):
        explain(model, text, target="positive")
    with pytest.raises(ValueError, match="no class index"):
        explain(model, text, target=K)
