"""bam_viz.theory: every panel's number reproduced, every closed form checked against SciPy or Monte
Carlo, the real-model parts against the model's own entry points, and the lab's rules: its sliders
offer what they offered, and it asks the family registry rather than naming a family."""

from __future__ import annotations

import ast
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from scipy import integrate, stats

import bam_viz
from bam_viz import families, theory, zoo
from bam_viz.bench.theory import run_theory_bench
from bam_viz.inference import gaps
from bam_viz.inference.explain import DEFAULT_RNG, lower_states, sample_generator
from bam_viz.nn.attention import Mode, probe
from bam_viz.theory.common import log_grid

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TEXT = json.loads((ROOT / "views" / "examples.json").read_text())
DEFAULT_TEXT = next(e["text"] for e in DEFAULT_TEXT["examples"] if e["category"] == DEFAULT_TEXT["default"])


@pytest.fixture(scope="module")
def bam_wc():
    return bam_viz.load("bam-wc")


@pytest.fixture(scope="module")
def categorical():
    return bam_viz.load("categorical")


def validated(fig: go.Figure) -> None:
    """Builders skip plotly's validation for speed (bam_viz.plots.kit.figure): re-validating must change nothing."""
    again = go.Figure(fig.to_dict())
    assert json.loads(again.to_json()) == json.loads(fig.to_json())


# ---- 1. Jensen's gap -------------------------------------------------------------------------------
def test_deng_et_al_examples_exactly():
    sigmoid = theory.jensen_gap("sigmoid", theory.TwoPoint(0, 4, 0.5))
    assert round(sigmoid.f_of_mean, 3) == 0.881 and round(sigmoid.mean_of_f, 3) == 0.741
    square = theory.jensen_gap("square", theory.TwoPoint(0, 2, 0.5))
    assert square.f_of_mean == pytest.approx(1.0, abs=1e-12) and square.mean_of_f == pytest.approx(2.0, abs=1e-12)
    assert "0.881" in theory.jensen_caption(sigmoid) and "0.741" in theory.jensen_caption(sigmoid)


@pytest.mark.parametrize("function", list(theory.FUNCTIONS))
@pytest.mark.parametrize("mean, sd", [(0.0, 1.0), (1.5, 2.5), (-2.0, 0.3)])
def test_gauss_hermite_agrees_with_monte_carlo(function, mean, sd):
    g = theory.jensen_gap(function, theory.Gaussian(mean, sd))
    mc, se = theory.monte_carlo_mean(function, theory.Gaussian(mean, sd), n=200_000, seed=1)
    assert abs(g.mean_of_f - mc) < 4 * se + 1e-12
    if function == "square":                    # E[z^2] = m^2 + s^2
        assert g.mean_of_f == pytest.approx(mean**2 + sd**2, rel=1e-12)


@pytest.mark.parametrize("function", list(theory.FUNCTIONS))
def test_the_quadrature_holds_at_the_sliders_widest_gaussians(function):
    """Against SciPy's adaptive quadrature at the widest sd the sliders offer, where tanh's poles at
    +-i pi/2 slow Gauss-Hermite down most: within 1e-5, far below the caption's third decimal."""
    from scipy import integrate, stats

    controls = {c.name: c.options for c in theory.CONTROLS}
    f, sd = theory.FUNCTIONS[function][0], max(controls["jensen_sd"])
    for mean in (min(controls["jensen_mean"]), 0.0, 0.5, max(controls["jensen_mean"])):
        exact = integrate.quad(lambda z, m=mean: f(np.array(z)) * stats.norm.pdf(z, m, sd), mean - 12 * sd,
                               mean + 12 * sd, limit=400, epsabs=1e-13)[0]
        assert theory.jensen_gap(function, theory.Gaussian(mean, sd)).mean_of_f == pytest.approx(exact, abs=1e-5)


def test_the_gap_has_jensens_sign_for_a_convex_function():
    for dist in (theory.TwoPoint(-1, 3, 0.3), theory.Gaussian(0.5, 2.0)):
        for f in ("square", "softplus"):
            assert theory.jensen_gap(f, dist).gap > 0


@pytest.mark.parametrize("make, match", [
    (lambda: theory.TwoPoint(0, 4, 1.5), "probability"),
    (lambda: theory.Gaussian(0, 0), "sd must be positive"),
    (lambda: theory.Gaussian(float("nan"), 1), "finite"),
    (lambda: theory.jensen_gap("cube", theory.Gaussian(0, 1)), "unknown function"),
])
def test_bad_inputs_say_what_to_do(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ---- 1b. the per-layer gap on real models ---------------------------------------------------------
def _alone_by_hand(model, text, layer, n_samples, seed):
    """Only `layer` samples, every other stochastic layer at softmax(psi), its weights recorded by a
    probe: P(positive) per sample (S,), f(E[w]) with that layer at its recorded weights' mean, and the
    leave-one-out replicates f(E_{-s}[w]) made one pass at a time."""
    lower = lower_states(model, text)
    x, mask = lower.x, lower.mask
    hyper = model.hyper()
    g, seen = sample_generator(DEFAULT_RNG, seed, model.device), []            # explain()'s draws
    with torch.inference_mode():
        with probe(model.bert.layers[layer].attention.self.core, lambda w: (seen.append(w), w)[1]):
            h, m = x, mask
            for i in range(model.first_stochastic, model.n_layers):
                mode = Mode.SAMPLE if i == layer else Mode.MEAN
                h, m, _ = model.bert.layers[i](h, m, n_samples=n_samples if i == layer else 1, generator=g, mode=mode,
                                               hyper=hyper, cls_only=i == model.n_layers - 1)
            p = model.head(h[:, 0]).softmax(-1)[:, 1].double()
        (w,) = seen

        def at(weights):
            return float(gaps.given_weights_pass(model, x, mask, {layer: weights}, hyper).softmax(-1)[0, 1])

        mean = at(w.mean(0, keepdim=True))
        loo = [at(torch.cat([w[:s], w[s + 1:]]).mean(0, keepdim=True)) for s in range(n_samples)]
    return p.numpy(), mean, np.array(loo)


def test_all_together_is_explains_pass_and_numbers(bam_wc):
    S, seed = 64, 3
    g = theory.layer_gaps(bam_wc, DEFAULT_TEXT, n_samples=S, seed=seed)
    r = bam_wc.explain(DEFAULT_TEXT, n_samples=S, seed=seed, target="positive")   # the lab shows P(positive)
    t = g.together
    assert g.layers == tuple(sorted(bam_wc.config.stochastic_layers)) and t.sampling == g.layers
    assert t.mc == pytest.approx(float(r.mc_probs[1]), abs=1e-6)
    assert g.softmax == pytest.approx(float(r.softmax_probs[1]), abs=1e-6) == t.softmax
    assert t.mean_attention == pytest.approx(float(r.mean_attention_probs[1]), abs=1e-6)
    assert t.gap == pytest.approx(r.gap, abs=1e-6) and t.gap_softmax == pytest.approx(r.gap_softmax, abs=1e-6)
    assert t.gap_se == pytest.approx(r.se.gap, rel=1e-4)
    assert t.gap_softmax_se == pytest.approx(r.se.gap_softmax, rel=1e-4)
    assert t.mc_se == pytest.approx(r.se.p_target, rel=1e-4)
    # Weibull weights do not average to softmax(psi): the two references part, beyond the error.
    assert abs(t.mean_attention - g.softmax) > 1e-3 and abs(t.gap) > 4 * t.gap_se
    assert all(c.mc_se > 0 and c.gap_se > 0 and c.gap_softmax_se > 0 for c in g.cases) and g.noise == "attention"
    again = theory.layer_gaps(bam_wc, DEFAULT_TEXT, n_samples=S, seed=seed)
    assert again == g                                           # an explicit generator: reproducible
    other = theory.layer_gaps(bam_wc, DEFAULT_TEXT, n_samples=S, seed=seed + 1)
    assert [c.mc for c in other.cases] != [c.mc for c in g.cases] and other.together.gap != t.gap


@pytest.mark.parametrize("which", [0, -1])          # the first stochastic layer, and the top one ([CLS] rows)
def test_one_layer_alone_is_a_hand_made_pass_at_its_mean_weights(bam_wc, which):
    S, seed = 16, 5
    g = theory.layer_gaps(bam_wc, DEFAULT_TEXT, n_samples=S, seed=seed)
    layer, case = g.layers[which], g.cases[which]
    p, mean, loo = _alone_by_hand(bam_wc, DEFAULT_TEXT, layer, S, seed)
    assert case.name == f"layer {layer}" and case.sampling == (layer,)
    assert case.mc == pytest.approx(p.mean(), abs=1e-6)
    assert case.mc_se == pytest.approx(p.std(ddof=1) / math.sqrt(S), rel=1e-4)
    assert case.mean_attention == pytest.approx(mean, abs=1e-6)
    assert case.gap_softmax == pytest.approx(p.mean() - g.softmax, abs=1e-6)
    assert case.gap_softmax_se == pytest.approx(np.std(p - g.softmax, ddof=1) / math.sqrt(S), rel=1e-4)
    # The gap's SE is the jackknife of E[f(z)] - f(E[w]) over S leave-one-out passes, here made one at
    # a time (the lab makes them as one batch).
    replicates = (p.sum() - p) / (S - 1) - loo
    jackknife = math.sqrt((S - 1) / S * np.sum((replicates - replicates.mean()) ** 2))
    assert case.gap_se == pytest.approx(jackknife, rel=1e-3)


def test_one_stochastic_layer_alone_is_the_whole_model(categorical):
    g = theory.layer_gaps(categorical, DEFAULT_TEXT, n_samples=512, seed=0)
    assert g.layers == (5,)
    alone, t = g.cases[0], g.together
    for name in ("mc", "mc_se", "mean_attention", "softmax", "gap_se", "gap_softmax_se"):
        assert getattr(alone, name) == pytest.approx(getattr(t, name), abs=1e-9), name
    # The categorical alignment's gap on this sentence is far beyond its Monte Carlo error.
    assert abs(t.gap) > 4 * t.gap_se and abs(t.gap_softmax) > 4 * t.gap_softmax_se
    assert "one stochastic layer" in theory.layer_gap_caption(g)


def test_mc_dropout_samples_dropout_and_its_two_gaps_are_one_and_a_deterministic_model_is_refused():
    mc = bam_viz.load("mc-dropout")
    g = theory.layer_gaps(mc, "Fine.", n_samples=16)
    assert g.noise == "dropout" and len(g.layers) == 6
    for c in (*g.cases, g.together):
        assert c.mc_se > 0 and c.mean_attention == c.softmax == g.softmax
        assert c.gap == c.gap_softmax and c.gap_se == c.gap_softmax_se
    r = mc.explain("Fine.", n_samples=16, seed=0)
    assert g.together.gap == pytest.approx(r.gap, abs=1e-6) and g.together.gap_se == pytest.approx(r.se.gap, rel=1e-4)
    caption = theory.layer_gap_caption(g)
    assert "also f(E[z])" in caption and "f(E[w])" not in caption
    fig = theory.layer_gap_figure(g)
    assert len(fig.data) == 1 and "deterministic pass" in fig.data[0].name
    with pytest.raises(ValueError, match="deterministic"):
        theory.layer_gaps(bam_viz.load("softmax"), "Fine.")
    with pytest.raises(ValueError, match="empty"):
        theory.layer_gaps(mc, "   ")


def test_the_layer_gap_figure_shows_both_gaps_with_their_intervals(bam_wc):
    g = theory.layer_gaps(bam_wc, DEFAULT_TEXT, n_samples=16, seed=1)
    fig = theory.layer_gap_figure(g)
    cases = (*g.cases, g.together)
    deng, softmax = fig.data
    assert fig.layout.barmode == "group"
    assert "E[f(z)] − f(E[w])" in deng.name and "Monte Carlo mean" in deng.name
    assert "E[f(z)] − f(softmax)" in softmax.name and "deterministic pass" in softmax.name
    assert list(deng.x) == [f"layer {i}" for i in g.layers] + ["all together"] == list(softmax.x)
    assert list(deng.y) == pytest.approx([c.gap for c in cases])
    assert list(softmax.y) == pytest.approx([c.gap_softmax for c in cases])
    t = stats.t.ppf(0.975, 15)                             # 95% intervals at the 16 samples drawn
    assert list(deng.error_y.array) == pytest.approx([t * c.gap_se for c in cases])
    assert list(softmax.error_y.array) == pytest.approx([t * c.gap_softmax_se for c in cases])
    caption = theory.layer_gap_caption(g)
    assert "Green: Deng's gap E[f(z)] − f(E[w])" in caption and "red: E[f(z)] − f(softmax)" in caption
    assert "Monte Carlo mean" in caption and "mean attention" not in caption
    assert f"f(softmax) = {g.softmax:.3f}" in caption and f"f(E[w]) = {g.together.mean_attention:.3f}" in caption


# ---- 2. exact marginal, posterior and the ELBO ----------------------------------------------------
@pytest.fixture(scope="module")
def alignment(categorical):
    return theory.alignment(categorical, DEFAULT_TEXT)


@pytest.mark.parametrize("label", [0, 1])
def test_log_marginal_minus_elbo_is_the_kl_to_the_posterior(alignment, label):
    rng = np.random.default_rng(0)
    T = len(alignment.tokens)
    qs = [np.log(rng.dirichlet(np.full(T, a))) for a in (0.2, 1.0, 5.0)]
    qs += [alignment.log_q(label, t) for t in (0.0, 0.3, 0.7)]
    log_marginal = alignment.log_marginal(label)
    for log_q in qs:
        elbo, kl = alignment.elbo(label, log_q), alignment.kl_to_posterior(label, log_q)
        assert abs(log_marginal - elbo - kl) < 1e-6
        assert kl > 1e-6 and elbo < log_marginal
    # The ELBO peaks, at log p(y|x), at the exact posterior.
    assert alignment.elbo(label, alignment.log_posterior(label)) == pytest.approx(log_marginal, abs=1e-9)
    path = theory.elbo_path(alignment, label, 1.0)
    assert path.kl == pytest.approx(0.0, abs=1e-9) and path.elbos.max() == pytest.approx(log_marginal, abs=1e-9)
    assert np.all(np.diff(path.elbos) > -1e-12)                 # rises all the way along the path


def test_the_path_runs_from_the_prior_to_the_posterior(alignment):
    assert np.allclose(alignment.log_q(1, 0.0), alignment.log_prior, atol=1e-12)
    assert np.allclose(alignment.log_q(1, 1.0), alignment.log_posterior(1), atol=1e-12)
    with pytest.raises(ValueError, match="prior"):
        alignment.log_q(1, 1.5)


def test_the_exact_marginal_is_what_sampling_z_estimates(categorical, alignment):
    """p(y|x) by enumeration against the model's Monte Carlo predictive over drawn alignments."""
    samples = categorical.predict_samples([DEFAULT_TEXT], n_samples=4000, seed=0)[0, :, 1].double()
    se = float(samples.std() / math.sqrt(len(samples)))
    assert abs(math.exp(alignment.log_marginal(1)) - float(samples.mean())) < 4 * se
    assert np.exp(alignment.log_prior).sum() == pytest.approx(1.0, abs=1e-12)


def test_alignment_needs_a_hard_alignment(bam_wc):
    with pytest.raises(ValueError, match="categorical"):
        theory.alignment(bam_wc, DEFAULT_TEXT)


# ---- 3. attention as posterior inference ----------------------------------------------------------
def test_the_exact_answer_is_bayes_rule_with_gaussian_keys():
    toy = theory.ExchangeableToy(noise=0.8)
    d = toy.draw(5, 50, np.random.default_rng(0))
    like = np.stack([stats.multivariate_normal(mu, toy.noise**2 * np.eye(2)).pdf(d.query) for mu in toy.means], 1)
    bayes = toy.mixing[d.z] * like
    assert np.allclose(toy.exact(d), bayes / bayes.sum(1, keepdims=True), atol=1e-12)
    assert np.allclose(toy.limit(d, toy.matched_temperature), toy.exact(d))


def test_the_tokens_follow_the_mixing_weights():
    toy = theory.ExchangeableToy()
    d = toy.draw(20_000, 6, np.random.default_rng(1))
    for z, comps in zip(d.z, d.components, strict=True):
        share = np.bincount(comps, minlength=toy.n_classes) / comps.size
        se = np.sqrt(toy.mixing[z] * (1 - toy.mixing[z]) / comps.size)
        assert np.all(np.abs(share - toy.mixing[z]) < 4 * se)


def test_attention_tends_to_its_closed_form_limit_at_any_temperature():
    """The N -> oo limit (the key noise cancels in the ratio) checked by Monte Carlo at large N."""
    toy = theory.ExchangeableToy()
    d = toy.draw(200_000, 4, np.random.default_rng(2))
    for ratio in (0.5, 1.0, 2.0):
        tau = ratio * toy.matched_temperature
        assert np.abs(toy.attention(d, tau) - toy.limit(d, tau)).max() < 0.02
    assert np.allclose(toy.attention(d, 1.0).sum(1), 1.0)


def test_matched_attention_error_falls_with_n():
    sweep = theory.toy_sweep(theory.ExchangeableToy(), 1.0, seed=0)
    assert sweep.fit.slope < 0 and sweep.fit.high < 0            # the interval excludes 0
    assert sweep.fit.low < -0.35                                 # consistent with the N^-1/2 rate
    assert sweep.limit_error == pytest.approx(0.0, abs=1e-12)
    assert "matched temperature" in theory.toy_caption(sweep)


@pytest.mark.parametrize("ratio", [0.5, 2.0])
def test_a_wrong_temperature_stops_at_the_error_of_its_limit(ratio):
    matched = theory.toy_sweep(theory.ExchangeableToy(), 1.0, seed=5)
    wrong = theory.toy_sweep(theory.ExchangeableToy(), ratio, seed=5)
    assert wrong.limit_error > 0.05
    # The mean error is at least the error of the mean (Jensen): never below the limit's, whatever N.
    assert np.all(wrong.mean_error > 0.9 * wrong.limit_error)
    assert matched.mean_error[-1] < 0.5 * wrong.limit_error
    assert "wrong limit" in theory.toy_caption(wrong)


def test_loglog_fit_recovers_a_known_power_law():
    rng = np.random.default_rng(0)
    n = np.array(theory.TOY_N, dtype=float)
    fit = theory.loglog_fit(n, 0.7 * n**-0.5 * np.exp(0.05 * rng.standard_normal(n.size)))
    assert fit.low < -0.5 < fit.high and fit.high - fit.low < 0.2
    with pytest.raises(ValueError):
        theory.loglog_fit([1, 2], [0.1, 0.05])


def test_one_example_is_a_distribution_over_components():
    ex = theory.toy_example(theory.ExchangeableToy(), 64, 1.0, seed=3)
    for answer in (ex.attention, ex.exact, ex.bayes):
        assert answer.shape == (3,) and answer.sum() == pytest.approx(1.0)
    assert ex.weights.shape == (64,) and ex.weights.sum() == pytest.approx(1.0)


# ---- 4. BAM's distributions -----------------------------------------------------------------------
WEIBULL_CASES = [(3.0, 0.3, 0.5, 1.0), (0.7, 0.05, 2.0, 4.0), (10.0, 1.2, 0.1, 0.3)]
LOGNORMAL_CASES = [(-1.0, 0.3, -1.5, 1.0), (0.5, 1.2, -2.0, 0.4)]


@pytest.mark.parametrize("k, lam, alpha, beta", WEIBULL_CASES)
def test_weibull_gamma_against_scipy(k, lam, alpha, beta):
    pair = theory.score_pair("weibull", k, lam, alpha, beta)
    q, p = stats.weibull_min(c=k, scale=lam), stats.gamma(a=alpha, scale=1 / beta)
    s = torch.tensor(q.ppf([0.01, 0.3, 0.7, 0.99]), dtype=torch.float64)
    assert np.allclose(pair.posterior.log_prob(s).exp(), q.pdf(s.numpy()), rtol=1e-10)
    assert np.allclose(pair.prior.log_prob(s).exp(), p.pdf(s.numpy()), rtol=1e-10)
    u = torch.tensor([0.05, 0.5, 0.95], dtype=torch.float64)
    assert np.allclose(theory.reparameterise(pair, u), q.ppf(u.numpy()), rtol=1e-10)
    kl_quad, _ = integrate.quad(lambda x: q.pdf(x) * (q.logpdf(x) - p.logpdf(x)), 0, np.inf, limit=200)
    assert pair.kl() == pytest.approx(kl_quad, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("mu, s, mu_p, s_p", LOGNORMAL_CASES)
def test_lognormal_pair_against_scipy(mu, s, mu_p, s_p):
    pair = theory.score_pair("lognormal", mu, s, mu_p, s_p)
    q, p = stats.lognorm(s=s, scale=math.exp(mu)), stats.lognorm(s=s_p, scale=math.exp(mu_p))
    x = torch.tensor(q.ppf([0.01, 0.5, 0.99]), dtype=torch.float64)
    assert np.allclose(pair.posterior.log_prob(x).exp(), q.pdf(x.numpy()), rtol=1e-10)
    assert np.allclose(pair.prior.log_prob(x).exp(), p.pdf(x.numpy()), rtol=1e-10)
    kl_quad, _ = integrate.quad(lambda v: q.pdf(v) * (q.logpdf(v) - p.logpdf(v)), 0, np.inf, limit=200)
    assert pair.kl() == pytest.approx(kl_quad, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("pair", [theory.score_pair("weibull", *c) for c in WEIBULL_CASES]
                         + [theory.score_pair("lognormal", *c) for c in LOGNORMAL_CASES])
def test_closed_form_kl_within_the_monte_carlo_error(pair):
    check = theory.kl_check(pair, n=50_000, seed=1)
    assert abs(check.closed_form - check.monte_carlo) < 4 * check.se
    draws = theory.reparameterise(pair, torch.rand(4000, generator=torch.Generator().manual_seed(2),
                                                   dtype=torch.float64))
    assert stats.kstest(draws.numpy(), lambda x: pair.posterior.cdf(torch.as_tensor(x)).numpy()).pvalue > 1e-3


def test_normalised_spread_tends_to_one_scores_spread():
    shapes = np.array([1.0, 3.0, 10.0])
    for family in ("weibull", "lognormal"):
        sp = theory.normalised_spread(family, shapes if family == "weibull" else shapes / 10,
                                      n_keys=(2, 200), n_draws=4000, seed=0)
        ref = (stats.weibull_min(c=sp.shapes) if family == "weibull" else stats.lognorm(s=sp.shapes))
        assert np.allclose(sp.score_cv, ref.std() / ref.mean(), rtol=1e-10)
        assert np.all(sp.cv[0] < sp.cv[1])                    # two keys damp the noise more than 200
        assert np.allclose(sp.cv[1], sp.score_cv, rtol=0.15)   # at N = 200: nearly one score's own CV
        # Less randomness for larger k (Weibull) or smaller sigma (Lognormal), at every N.
        order = 1 if family == "weibull" else -1
        assert np.all(np.diff(sp.cv[:, ::order], axis=1) < 0)


@pytest.mark.parametrize("make", [lambda: theory.score_pair("weibull", -1, 1, 1, 1),
                                  lambda: theory.score_pair("lognormal", 0, 0, 0, 1),
                                  lambda: theory.score_pair("lognormal", 0, 1, 0),
                                  lambda: theory.score_pair("gamma", 1, 1), lambda: theory.normalised_spread("gamma")])
def test_bad_distribution_parameters_are_refused(make):
    with pytest.raises(ValueError):
        make()


# ---- 5. weight-space against attention-space ------------------------------------------------------
def test_the_table_is_the_cards_metrics():
    rows = {r.model: r for r in theory.uncertainty_table()}
    assert rows["mc-dropout"].space == "weight space" and rows["bam-wc"].space == "attention space"
    for name, row in rows.items():
        metrics = zoo.read_card(zoo.model_folder(name))["metrics"]
        assert row.nll == metrics["movies_test"]["nll"] and row.ece == metrics["movies_test"]["ece"]
        assert row.auroc_ood_mi == pytest.approx(np.mean([metrics[f"{c}_test"]["auroc_ood_mi"]
                                                          for c in theory.OOD_CORPORA]))


def test_the_caption_names_the_better_side_of_each_measure():
    rows = theory.uncertainty_table()
    text = theory.uncertainty_caption(rows)
    weight = next(r for r in rows if r.space == "weight space")
    best_nll = min((r for r in rows if r.space == "attention space"), key=lambda r: r.nll)
    better = weight.model if weight.nll < best_nll.nll else "attention-space noise"
    assert re.search(rf"so {re.escape(better)} is better on [^;.]*NLL", text) or (
        better == "attention-space noise" and "attention-space noise on NLL" in text)
    assert "one training seed" in text


def test_a_card_without_metrics_gives_no_half_row(tmp_path):
    for name in ("mc-dropout", "bam-wc"):
        (tmp_path / name).mkdir()
        shutil.copy(zoo.PRETRAINED / name / "card.json", tmp_path / name / "card.json")
    card = json.loads((tmp_path / "bam-wc" / "card.json").read_text())
    del card["metrics"]["nyt_test"]
    (tmp_path / "bam-wc" / "card.json").write_text(json.dumps(card))
    assert [r.model for r in theory.uncertainty_table(["mc-dropout", "bam-wc"], tmp_path)] == ["mc-dropout"]


def test_the_seed_spread_is_the_one_measured_in_results_md():
    """Read by an independent parse of docs/results.md's seed table: the larger sd of each column."""
    results = (ROOT / "docs" / "results.md").read_text()
    table = results[results.index("## Spread over training seeds"):]
    table = table[:table.index("\n## ", 3)]
    spread = theory.seed_spread()
    for key, column in (("nll", 4), ("ece", 5)):
        sds = [float(m) for m in re.findall(r"± (\d\.\d+)", "\n".join(
            line.split("|")[column] for line in table.splitlines() if line.startswith("| softmax |")
            or line.startswith("| bam-wc |")))]
        assert spread[key] == max(sds)
    assert set(spread) == {"nll", "ece"}                  # no AUROC has a seed spread


def test_the_seed_spread_reads_its_table_and_decides_the_caption(tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\n## Spread over training seeds\n\nText.\n\n"
                   "| model | seeds | ECE | NLL |\n|---|---|---|---|\n"
                   "| a | 3 | 0.050 ± 0.002 (0.05, 0.05, 0.05) | 0.3 ± 0.100 (0.2, 0.3, 0.4) |\n"
                   "| b | 3 | 0.040 ± 0.030 (0.01, 0.04, 0.07) | 0.3 ± 0.010 (0.3, 0.3, 0.3) |\n\n"
                   "## Next\n\n| NLL |\n|---|\n| 9 ± 9.000 |\n")
    assert theory.seed_spread(doc) == {"nll": 0.1, "ece": 0.03}
    assert theory.seed_spread(tmp_path / "missing.md") == {}
    rows = theory.uncertainty_table()
    assert "spread of a difference" not in theory.uncertainty_caption(rows)
    assert "within the spread" in theory.uncertainty_caption(rows, {"nll": 10.0})
    assert "beyond the spread" in theory.uncertainty_caption(rows, {"nll": 0.0})


def test_two_models_differ_against_the_spread_of_a_difference_of_two_seeds():
    """Each model is one seed: their difference spreads by √2 × one seed's sd. A margin between one
    and √2 seed sds is within it; the caption says which spread it used."""
    rows = theory.uncertainty_table()
    weight = next(r for r in rows if r.space == "weight space")
    best = min((r for r in rows if r.space == "attention space"), key=lambda r: r.nll)
    margin = abs(best.nll - weight.nll)
    between = theory.uncertainty_caption(rows, {"nll": margin / 1.2})      # sd < margin < √2 sd
    assert f"within the spread of a difference between two training seeds, √2 × {margin / 1.2:.3f}" in between
    assert f"= {math.sqrt(2) * margin / 1.2:.3f})" in between
    assert "beyond the spread of a difference" in theory.uncertainty_caption(rows, {"nll": margin / 1.5})
    # the spread of a difference of two independent seeds, by simulation: √2 × one seed's sd
    seeds = np.random.default_rng(0).normal(0.0, 0.01, size=(2, 200_000))
    assert np.std(seeds[0] - seeds[1]) == pytest.approx(math.sqrt(2) * 0.01, rel=0.01)


# ---- every figure, and the bench ------------------------------------------------------------------
def test_every_figure_passes_plotly_validation(bam_wc, alignment):
    toy = theory.ExchangeableToy()
    ex = theory.toy_example(toy, 32)
    pair = theory.score_pair("weibull", 2.0, 0.3, 0.5, 1.0)
    check = theory.kl_check(pair, n=1000)
    sp = theory.normalised_spread("lognormal", [0.1, 0.5], n_keys=(2, 5), n_draws=100)
    figures = [
        theory.jensen_figure(theory.jensen_gap("tanh", theory.Gaussian(0.3, 1.2))),
        theory.jensen_figure(theory.jensen_gap("softplus", theory.TwoPoint(-2, 1, 0.2))),
        theory.layer_gap_figure(theory.layer_gaps(bam_wc, DEFAULT_TEXT, n_samples=8)),
        theory.layer_gap_figure(theory.layer_gaps(bam_viz.load("mc-dropout"), DEFAULT_TEXT, n_samples=4)),
        theory.alignment_figure(alignment, theory.elbo_path(alignment, 0, 0.5)),
        theory.elbo_figure(theory.elbo_path(alignment, 0, 0.5)),
        theory.toy_keys_figure(ex), theory.toy_estimate_figure(ex),
        theory.toy_error_figure(theory.toy_sweep(toy, 2.0, n_draws=20), 32),
        theory.density_figure(pair, check), theory.reparam_figure(pair),
        theory.density_figure(theory.score_pair("lognormal", 0, 1, 0, 2), check),
        theory.spread_figure(sp, 0.3), theory.uncertainty_figure(theory.uncertainty_table()),
    ]
    for fig in figures:
        validated(fig)


def test_token_labels_reach_plotly_escaped(categorical):
    al = theory.alignment(categorical, "<b>bold</b> & fine")
    ticks = theory.alignment_figure(al, theory.elbo_path(al, 1, 0.5)).data[1].x
    assert any("&lt;" in t for t in ticks) and not any("<" in t for t in ticks)


# The page's sliders: (first value, last value, how many, default). A changed grid changes what the
# page offers and what an old link snaps to.
SLIDER_GRIDS = {
    "jensen_low": (-6, 6, 25, 0), "jensen_high": (-6, 6, 25, 4), "jensen_p": (0, 1, 21, 0.5),
    "jensen_mean": (-4, 4, 33, 0), "jensen_sd": (0.1, 4, 21, 1), "q_t": (0, 1, 21, 0.5),
    "toy_n": (4, 1024, 9, 64), "toy_noise": (0.5, 2, 7, 1), "toy_temp": (0.125, 8, 13, 1),
    "w_k": (0.2, 50, 31, 3), "w_scale": (0.01, 5, 34, 0.3), "g_alpha": (0.05, 20, 33, 0.5),
    "g_beta": (0.1, 20, 30, 1), "ln_loc": (-4, 2, 61, -1), "ln_sigma": (0.05, 3, 23, 0.3),
    "ln_prior_loc": (-4, 2, 61, -1.5), "ln_prior_sigma": (0.05, 3, 23, 1),
}


def test_the_sliders_offer_what_they_offered():
    assert [c.name for c in theory.CONTROLS] == list(SLIDER_GRIDS)
    for c in theory.CONTROLS:
        assert (c.options[0], c.options[-1], len(c.options), c.default) == SLIDER_GRIDS[c.name], c.name
        assert list(c.options) == sorted(set(c.options)) and all(isinstance(o, float) for o in c.options)
    # The shape sliders' defaults are the zoo's trained values, and the spread is computed at their values.
    for family, panel in theory.PAIRS.items():
        recipe = next(r for r in zoo.RECIPES.values() if r.family == family)
        assert panel.shape.control.default == recipe.attention.hyper[panel.shape.name]


def test_the_model_lists_are_the_zoos():
    assert theory.GAP_MODELS == ("bam-wc", "bam-lc", "dirichlet", "categorical", "mc-dropout")
    assert list(theory.SPACES) == list(zoo.RECIPES) and theory.SPACES["softmax"] == "none (deterministic)"
    assert theory.ALIGNMENT_MODEL == "categorical"


def family_branches(source: str) -> list[str]:
    """Where `source` compares with a registered family's name or asks isinstance of a family class."""
    names = set(families.names())
    classes = {type(families.get(n)).__name__ for n in names}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found += [f"line {node.lineno}: compares with {side.value!r}" for side in (node.left, *node.comparators)
                      if isinstance(side, ast.Constant) and side.value in names]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            if any(getattr(a, "id", getattr(a, "attr", None)) in classes for a in ast.walk(node.args[1])):
                found.append(f"line {node.lineno}: isinstance of a family class")
    return found


def test_the_lab_asks_the_registry_and_names_no_family():
    """What differs between families comes from the family objects or from the panels' data."""
    found = {p.name: family_branches(p.read_text()) for p in sorted((ROOT / "bam_viz" / "theory").glob("*.py"))}
    assert not any(found.values()), found
    bad = "if pair.family == 'weibull' or 'lognormal' != f:\n    x = isinstance(f, (int, fam.WeibullFamily))\n"
    assert len(family_branches(bad)) == 3


def test_a_pair_is_described_by_its_panel():
    w = theory.score_pair("weibull", 3.0, 0.3, 0.5, 1.0)
    assert w.describe() == "q = Weibull(k = 3, λ = 0.3), p = Gamma(α = 0.5, β = 1)"
    ln = theory.score_pair("lognormal", -1.0, 0.3, -1.5, 1.0)
    assert ln.describe() == "q = Lognormal(μ = -1, σ = 0.3), p = Lognormal(μ = -1.5, σ = 1)"
    assert "Fan et al. eq. 9" in theory.score_caption(w, theory.kl_check(w, n=100))
    for family, calmer in (("weibull", "larger k"), ("lognormal", "smaller σ")):
        sp = theory.normalised_spread(family, n_keys=(2, 5), n_draws=50)
        assert f"and {calmer} makes attention less random" in theory.spread_caption(sp, sp.shapes[3])


def test_controls_offer_their_default_and_snap():
    c = theory.Control("k", "k", log_grid(0.2, 50), 3.0)
    assert 3.0 in c.options and c.snap(2.99) == 3.0 and c.snap(1e9) == 50.0


def test_bench_reports_every_panel():
    out = run_theory_bench(repeats=2)
    assert set(out["panels"]) == {"jensen", "elbo", "inference_n", "inference_noise_or_temperature", "bam",
                                  "space_first_view"}
    for panel in out["panels"].values():
        assert 0 < panel["median_ms"] <= panel["p95_ms"]
    assert {"layer_gaps_bam_wc_ms", "alignment_categorical_ms"} <= set(out["once"])


def test_the_bench_command_runs_the_theory_bench(tmp_path, capsys):
    from bam_viz import cli

    out = tmp_path / "theory.json"
    assert cli.main(["bench", "--theory", "--repeats", "2", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written == json.loads(capsys.readouterr().out)
    assert set(written["panels"]) == set(run_theory_bench(repeats=1)["panels"])
