"""The classifier's contracts: explain() shapes and meaning, seeds, caching, padding, training signal.

Built from the recipes with fresh (untrained) adapters, so these tests do not depend on the zoo.
"""

import pytest
import torch

from bam_viz.inference import export
from bam_viz.model import BamClassifier
from bam_viz.nn.attention import Mode, Trace
from bam_viz.train import loss_terms
from bam_viz.zoo import RECIPES

TEXT = "Not the best film of the year, but the cast is wonderful."
FAMILIES = ["softmax", "mc-dropout", "bam-wc", "bam-lc", "dirichlet", "categorical"]


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    out = {}
    for name in FAMILIES:
        m = BamClassifier(RECIPES[name]).eval()
        # Untrained LoRA starts at zero; perturb the head so predictions are not all 50/50.
        torch.nn.init.normal_(m.head.weight, std=0.5)
        out[name] = m
    return out


@pytest.mark.parametrize("name", FAMILIES)
def test_explain_contract(models, name):
    m = models[name]
    r = m.explain(TEXT, n_samples=6, seed=3)
    T, L, H = len(r.tokens), m.n_layers, m.n_heads
    assert r.tokens[0] == "[CLS]" and r.tokens[-1] == "[SEP]"
    assert r.classes == ["negative", "positive"]
    assert r.sample_weights.shape == r.prior_sample_weights.shape == (6, L, H, T, T)
    assert r.softmax_weights.shape == r.prior_weights.shape == (L, H, T, T)
    assert r.kl.shape == (L, H) and r.sample_probs.shape == (6, 2)
    for w in (r.sample_weights, r.prior_sample_weights, r.softmax_weights, r.prior_weights):
        assert torch.isfinite(w).all()
        if w.dim() == 5 and m.config.mc_dropout:
            # Dropout on the weights: in layer 0 (same input for every sample) each weight is
            # either dropped or the mean weight rescaled by 1 / (1 - p).
            kept = r.softmax_weights[0].expand_as(w[:, 0]) / (1 - m.config.dropout)
            assert torch.all((w[:, 0] == 0) | torch.isclose(w[:, 0], kept, atol=1e-6))
            continue
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5, rtol=0)
    torch.testing.assert_close(r.mc_probs, r.sample_probs.mean(0))
    torch.testing.assert_close(r.softmax_probs, m.predict_softmax([TEXT])[0], atol=1e-5, rtol=0)
    # Deterministic layers repeat their weights over the samples.
    for layer in range(L):
        if layer not in r.stochastic_layers:
            w = r.sample_weights[:, layer]
            assert torch.equal(w, w[:1].expand_as(w))
    if m.stochastic:
        top = max(r.stochastic_layers)
        assert r.sample_weights[:, top].std(0).max() > 0
    assert export.full_json(r)["tokens"] == r.tokens
    assert export.weights_csv(r).count("\n") == 1 + 6 * L * H * T * T


@pytest.mark.parametrize("name", ["bam-wc", "bam-lc", "dirichlet", "categorical", "mc-dropout"])
def test_same_seed_same_result_other_seed_other_samples(models, name):
    m = models[name]
    a, b, c = m.explain(TEXT, 8, seed=1), m.explain(TEXT, 8, seed=1), m.explain(TEXT, 8, seed=2)
    assert torch.equal(a.sample_weights, b.sample_weights) and torch.equal(a.sample_probs, b.sample_probs)
    assert not torch.equal(a.sample_weights, c.sample_weights)


def test_softmax_is_deterministic(models):
    m = models["softmax"]
    a, b = m.explain(TEXT, 4, seed=1), m.explain(TEXT, 4, seed=2)
    assert torch.equal(a.sample_probs, b.sample_probs)
    torch.testing.assert_close(a.mc_probs, a.softmax_probs)
    torch.testing.assert_close(a.mc_probs, a.mean_attention_probs)
    assert not m.stochastic and m.hyper_names == []


def test_sliders_change_the_samples_not_the_weights(models):
    m = models["bam-wc"]
    before = {k: v.clone() for k, v in m.state_dict().items()}
    wide = m.explain(TEXT, 16, seed=0, shape_k=0.5)
    narrow = m.explain(TEXT, 16, seed=0, shape_k=500.0)
    assert wide.spread[3:].mean() > 5 * narrow.spread[3:].mean()
    assert wide.hyper["shape_k"] == 0.5 and narrow.hyper["beta"] == RECIPES["bam-wc"].attention.hyper.beta
    assert all(torch.equal(v, before[k]) for k, v in m.state_dict().items())
    # beta moves only the prior: posterior draws are unchanged, prior draws are not.
    lo, hi = m.explain(TEXT, 16, seed=0, beta=1e-3), m.explain(TEXT, 16, seed=0, beta=1e3)
    torch.testing.assert_close(lo.softmax_weights, hi.softmax_weights)
    assert not torch.allclose(lo.prior_sample_weights[:, 3:], hi.prior_sample_weights[:, 3:])
    # The prior draws have generators of their own, so the posterior's samples and the prediction
    # are the very same numbers, whatever beta is.
    assert torch.equal(lo.sample_weights, hi.sample_weights) and torch.equal(lo.sample_probs, hi.sample_probs)


@pytest.mark.parametrize("name", FAMILIES)
def test_explain_samples_what_predict_samples(models, name):
    """With predict()'s stream (rng="torch"), explain()'s E[f(z)] is predict()'s: explain() spends the
    seed's generator on the posterior alone (prior draws have their own), and predict's [CLS]-only top
    layer draws the same numbers."""
    m = models[name]
    r = m.explain(TEXT, 6, seed=3, rng="torch")
    p = m.predict_samples([TEXT], n_samples=6, seed=3)[0]
    torch.testing.assert_close(r.sample_probs, p, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["bam-wc", "bam-lc", "dirichlet"])
def test_prior_draws_per_head_are_seeded_and_independent_of_order(models, name):
    m = models[name]
    a, b, c = m.explain(TEXT, 8, seed=1), m.explain(TEXT, 8, seed=1), m.explain(TEXT, 8, seed=2)
    head_first = a.prior_draws(4, 7).clone()           # one head drawn before anything else
    full = b.prior_sample_weights                       # every head, in order
    assert torch.equal(head_first, full[:, 4, 7])
    assert torch.equal(a.prior_sample_weights, full)
    assert not torch.allclose(full[:, 3:], c.prior_sample_weights[:, 3:])
    assert not torch.allclose(full[:, 4, 7], full[:, 4, 8])   # heads do not share draws
    # below the first stochastic layer nothing is drawn: the mean weights repeat
    torch.testing.assert_close(full[:, :3], a.softmax_weights[:3].expand_as(full[:, :3]))


def test_prior_draws_average_to_the_prior_mean(models):
    """Normalised Gamma(beta * pi_j) draws are Dirichlet(beta * pi): their mean is pi. In the first
    stochastic layer the keys, and so pi, are the same in every sample."""
    m = models["bam-wc"]
    prior_net = m.bert.layers[3].attention.self.core.prior_net
    saved = prior_net.out.detach().clone()
    try:
        with torch.no_grad():   # the untrained prior is uniform; make pi far from it
            prior_net.out.copy_(torch.randn(saved.shape, generator=torch.Generator().manual_seed(0)) * 3)
        m.clear_caches()
        r = m.explain(TEXT, 3000, seed=0, beta=2.0)
    finally:
        with torch.no_grad():
            prior_net.out.copy_(saved)
        m.clear_caches()
    draws = r.prior_draws(3, 5)                                               # (S, T, T)
    pi = r.prior_weights[3, 5]
    assert pi[0].max() > 3 / pi.shape[-1]                                     # not uniform
    torch.testing.assert_close(draws.mean(0), pi, atol=0.015, rtol=0)
    assert torch.allclose(draws.sum(-1), torch.ones(draws.shape[:2]), atol=1e-5)


def test_lower_layers_are_cached_per_text(models, monkeypatch):
    m = models["bam-wc"]
    m.clear_caches()
    calls = []
    original = m.lower
    monkeypatch.setattr(m, "lower", lambda *a, **k: calls.append(1) or original(*a, **k))
    m.explain(TEXT, 4, seed=0)
    m.explain(TEXT, 4, seed=0, shape_k=3.0)
    m.explain(TEXT, 4, seed=5, beta=7.0)
    assert len(calls) == 1


def test_a_beta_move_reuses_the_sampled_pass_and_nothing_else(models, monkeypatch):
    m = models["bam-wc"]
    m.clear_caches()
    sampled = []
    original = m.upper
    monkeypatch.setattr(m, "upper", lambda *a, **k: (k.get("trace") is Trace.SAMPLES and sampled.append(k["hyper"]))
                        or original(*a, **k))
    a = m.explain(TEXT, 6, seed=2, beta=0.5)
    b = m.explain(TEXT, 6, seed=2, beta=50.0)
    assert len(sampled) == 1                                    # the S-sample pass ran once
    assert torch.equal(a.sample_weights, b.sample_weights) and torch.equal(a.sample_probs, b.sample_probs)
    assert not torch.allclose(a.kl[3:], b.kl[3:])               # what beta changes is recomputed
    assert not torch.allclose(a.prior_sample_weights[:, 3:], b.prior_sample_weights[:, 3:])
    assert b.hyper["beta"] == 50.0
    # and the reuse is exact: the same as computing it afresh
    m.clear_caches()
    fresh = m.explain(TEXT, 6, seed=2, beta=50.0)
    assert torch.equal(fresh.sample_weights, b.sample_weights) and torch.equal(fresh.kl, b.kl)
    assert torch.equal(fresh.prior_sample_weights, b.prior_sample_weights)
    # anything the posterior reads misses the cache: shape_k, seed, sample count, text
    for kw in ({"shape_k": 5.0}, {"seed": 3}, {"n_samples": 7}, {"text": TEXT + "!"}):
        sampled.clear()
        m.explain(**{"text": TEXT, "n_samples": 6, "seed": 2, "beta": 50.0, **kw})
        assert len(sampled) == 1, kw
    m.train()                                                   # weights may change: caches go
    assert not m.explain_cache.sampled and not m.explain_cache.lower and not m.explain_cache.deterministic
    m.eval()


@pytest.mark.parametrize("name", FAMILIES)
def test_the_deterministic_pass_is_made_once_per_sentence_and_exact_at_any_hyper(models, name, monkeypatch):
    """A live grid's frames are explain() at one slider value after another: the Mode.MEAN pass runs
    once per sentence, and a result at other hyperparameters (its KL, the distributions' parameters,
    f(softmax), the softmax and prior weights) is bit for bit what a fresh pass gives."""
    m = models[name]
    m.clear_caches()
    passes = []
    original = m.upper
    monkeypatch.setattr(m, "upper", lambda *a, **k: (k.get("mode") is Mode.MEAN and k.get("trace") is Trace.STATS
                                                     and passes.append(1)) or original(*a, **k))
    specs = m.slider_specs
    low = {s.name: s.low * 2 for s in specs}
    high = {s.name: s.high / 2 for s in specs}
    a = m.explain(TEXT, 3, seed=1, **low)
    b = m.explain(TEXT, 3, seed=1, **high)
    assert len(passes) == 1
    m.clear_caches()
    fresh = m.explain(TEXT, 3, seed=1, **high)
    assert len(passes) == 2
    for field in ("kl", "softmax_weights", "prior_weights", "softmax_probs", "mean_attention_probs", "sample_probs"):
        assert torch.equal(getattr(b, field), getattr(fresh, field)), field
    for params in ("posterior_params", "prior_params"):
        got, want = getattr(b, params), getattr(fresh, params)
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want), params
    if m.attention_family.learned_prior:
        assert not torch.equal(a.kl, b.kl)                      # the KL moved with the hyperparameters
    assert torch.equal(a.softmax_probs, b.softmax_probs)        # f(softmax) does not


def test_padding_in_a_batch_changes_nothing(models):
    m = models["bam-lc"]
    texts = ["Great.", "An overlong, meandering and ultimately pointless exercise in style over substance."]
    batched = m.predict_softmax(texts)
    alone = torch.cat([m.predict_softmax([t]) for t in texts])
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=0)


def test_predict_is_the_mean_of_sampled_predictions(models):
    m = models["bam-wc"]
    s = m.predict_samples([TEXT, "Dreadful."], n_samples=5, seed=0)
    assert s.shape == (2, 5, 2)
    torch.testing.assert_close(m.predict([TEXT, "Dreadful."], n_samples=5, seed=0), s.mean(1))


def test_categorical_enumeration_equals_the_monte_carlo_limit(models):
    m = models["categorical"]
    ids, mask = m.tokenizer.batch([TEXT])
    with torch.inference_mode():
        x, _ = m.lower(ids, mask)
        log_marginal, log_pz, log_lik = m.exact_log_marginal(x, mask)
    exact = log_marginal.exp()[0]
    torch.testing.assert_close(exact.sum(), torch.tensor(1.0))
    mc = m.predict_samples([TEXT], n_samples=4000, seed=0)[0].mean(0)
    assert (mc - exact).abs().max() < 0.01


def test_empty_text_is_refused_and_long_text_truncated(models):
    m = models["bam-wc"]
    with pytest.raises(ValueError, match="empty"):
        m.explain("   \n ")
    r = m.explain("good " * 400, n_samples=2)
    assert r.truncated and len(r.tokens) == m.max_tokens and r.notes
    # The note names both counts: the word pieces the text has and those kept.
    kept = m.max_tokens - 2
    assert (f"it has 400 word pieces, and only the first {kept} (with [CLS] and [SEP], {m.max_tokens} tokens) "
            f"were kept; the last {400 - kept} were left out") in r.notes[0]
    assert not m.explain("good " * kept, n_samples=2).truncated      # exactly the maximum: nothing cut
    assert m.explain("good " * (kept + 1), n_samples=2).notes[0].startswith("The text is longer")


@pytest.mark.parametrize("name", ["bam-wc", "bam-lc", "dirichlet", "categorical", "softmax"])
def test_training_loss_reaches_adapters_head_and_priors(models, name):
    m = models[name].train()
    try:
        ids, mask = m.tokenizer.batch([TEXT, "Dreadful."])
        assert not mask.all()  # the short text is padded
        nll, kl = loss_terms(m, ids, mask, torch.tensor([1, 0]), torch.Generator().manual_seed(0))
        (nll + 0.1 * kl).backward()
        grads = {n: p.grad for n, p in m.named_parameters() if p.requires_grad}
        assert all(torch.isfinite(g).all() for g in grads.values() if g is not None)  # padded batch
        assert grads["head.weight"].abs().sum() > 0
        # B starts at zero (Hu et al. 2022), so the first gradient reaches B, not A.
        assert any("lora_b" in n and g is not None and g.abs().sum() > 0 for n, g in grads.items())
        if m.attention_family.learned_prior:
            assert kl > 0
            assert any("prior_net" in n and g is not None and g.abs().sum() > 0 for n, g in grads.items())
    finally:
        m.zero_grad(set_to_none=True)
        m.eval()


def test_merged_adapters_compute_the_same_function():
    m = BamClassifier(RECIPES["bam-lc"]).eval()
    g = torch.Generator().manual_seed(0)
    for name, p in m.named_parameters():
        if "lora_b" in name:
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    before = m.predict_softmax([TEXT, "Dreadful."])
    m.merge_adapters()
    torch.testing.assert_close(m.predict_softmax([TEXT, "Dreadful."]), before, atol=1e-5, rtol=0)
    assert set(m.trainable_state_dict()) == {n for n, p in m.named_parameters() if p.requires_grad}
    m.train()  # training ignores the merged copy: gradients still reach the adapters
    ids, mask = m.tokenizer.batch([TEXT])
    nll, _ = loss_terms(m, ids, mask, torch.tensor([1]), g)
    nll.backward()
    assert any("lora_a" in n and p.grad is not None and p.grad.abs().sum() > 0 for n, p in m.named_parameters())


@pytest.mark.parametrize("name", ["bam-wc", "bam-lc", "dirichlet", "mc-dropout", "categorical"])
@pytest.mark.parametrize("training", [False, True])
def test_untiled_first_layer_draws_exactly_what_tiled_input_draws(models, name, training):
    """upper() computes the first sampled layer's scores once per sentence and lets the core tile
    them; the draws, logits and KL must equal those of S tiled copies of the input."""
    m = models[name].train(training)
    try:
        ids, mask = m.tokenizer.batch([TEXT, "Dreadful."])
        with torch.no_grad():
            x, _ = m.lower(ids, mask)
            S = 3
            logits, _, kl = m.upper(x, mask, n_samples=S, generator=torch.Generator().manual_seed(4))
            ref_logits, _, ref_kl = m.upper(x.repeat(S, 1, 1), mask.repeat(S, 1), n_samples=1,
                                            generator=torch.Generator().manual_seed(4))
    finally:
        m.eval()
    assert logits.shape == (S * 2, 2)
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(kl, ref_kl, atol=1e-5, rtol=1e-5)
    # and the samples differ from one another (the tiling did not copy one draw S times)
    assert not torch.allclose(logits[0], logits[2])


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("mode", [Mode.SAMPLE, Mode.MEAN])
def test_top_layer_from_cls_alone_computes_what_every_row_computes(models, name, mode):
    """Without a trace, the top layer attends from [CLS] only. The logits must equal the full
    pass's, and the generator must end where the full pass leaves it (the same Monte Carlo stream
    behind every published figure); the query projection must then see one row per sentence."""
    m = models[name]
    ids, mask = m.tokenizer.batch([TEXT, "Dreadful."])
    seen = []
    top_query = m.bert.layers[-1].attention.self.query
    hook = top_query.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].shape[1]))
    try:
        with torch.inference_mode():
            x, _ = m.lower(ids, mask)
            g_fast, g_full = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
            fast, _, _ = m.upper(x, mask, n_samples=4, generator=g_fast, mode=mode)
            sliced_rows = seen[-1] if seen else None
            full, _, _ = m.upper(x, mask, n_samples=4, generator=g_full, mode=mode, cls_only=False)
    finally:
        hook.remove()
    torch.testing.assert_close(fast, full, atol=1e-5, rtol=0)
    assert torch.equal(g_fast.get_state(), g_full.get_state())
    if name in ("categorical", "softmax"):
        # categorical: its top layer is the latent alignment, a path of its own; softmax: every
        # layer is deterministic and runs in lower(), upper() has nothing to do.
        return
    if name in ("bam-wc", "bam-lc") or mode is Mode.MEAN:
        assert sliced_rows == 1          # the fast path did run
    elif name == "dirichlet":
        assert sliced_rows == ids.shape[1]   # Gamma rejection draws cannot be sliced by row

