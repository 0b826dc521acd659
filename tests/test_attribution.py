"""Integrated Gradients per attention sample (bam_viz.inference.attribution) and the noise tape that holds a
sample fixed along the path (bam_viz.families.sampling.NoiseTape): closed forms on a linear stand-in
model and on the Gamma quantile, completeness on every zoo model, exactness of the replayed draws."""

import threading
from types import SimpleNamespace

import pytest
import scipy.special
import torch
import torch.nn as nn

import bam_viz
from bam_viz import families
from bam_viz.core.cache import WORK
from bam_viz.families.sampling import NoiseTape, _StandardGamma, categorical_sample, draw, gamma_at_quantile
from bam_viz.inference.attribution import BASELINE, attribute, row_bytes
from bam_viz.nn.attention import Mode, probe, tile

SHORT = ["a gorgeous, witty, seductive movie.", "the plot is thin and the jokes fall flat.",
         "not bad at all"]
_models: dict = {}
_done: dict = {}


def model(name):
    if name not in _models:
        _models[name] = bam_viz.load(name)
    return _models[name]


def attributed(name, text, **kw):
    """attribute() once per (model, text, options) in this module: several tests read one result."""
    key = (name, text, tuple(sorted(kw.items())))
    if key not in _done:
        _done[key] = attribute(model(name), text, **kw)
    return _done[key]


# ---- the closed form: a model whose P(positive) is linear in the embeddings -------------------------
class LinearModel:
    """BamClassifier's surface around p = 1/2 + (1 + eps_s / 10) sum_t w_t . x_t, eps_s ~ N(0, 1) per
    sample (drawn through the tape), 1 for the softmax pass: the IG of token t in sample s is exactly
    (1 + eps_s / 10) w_t . (x_t - x'_t), whatever the quadrature."""

    stochastic, first_stochastic, n_layers, n_heads, name = True, 1, 1, 1, "linear"
    classes = ("negative", "positive")
    attention_family = SimpleNamespace(hard_alignment=False)
    device = torch.device("cpu")

    def __init__(self, C=6, T=5, size=1.0):
        g = torch.Generator().manual_seed(0)
        embeddings = nn.Embedding(20, C)
        with torch.no_grad():
            embeddings.weight.copy_(torch.randn(20, C, generator=g))
        self.bert = SimpleNamespace(embeddings=embeddings, config=SimpleNamespace(hidden=C), layers=[])
        self.w = size * torch.randn(T, C, generator=g) / (20 * C)    # p stays inside (0, 1) at size 1
        self.tokenizer = SimpleNamespace(pad_id=0, encode=lambda text: (
            [1, *(3 + len(word) for word in text.split())][: T - 1] + [2], ["[CLS]", *text.split(), "[SEP]"], False))

    def hyper(self, **h):
        if h:
            raise ValueError(f"unknown hyperparameters {sorted(h)} for linear attention; known: none")
        return {}

    def eval(self):
        return self

    def lower(self, ids, mask, embedded=None):
        return (self.bert.embeddings(ids) if embedded is None else embedded), []

    def upper(self, x, mask, *, n_samples=1, generator=None, mode=Mode.SAMPLE, hyper=None):
        if mode is Mode.MEAN:
            scale = x.new_ones(x.shape[0])
        else:
            x = tile(x, n_samples)
            scale = 1 + draw(torch.randn, (x.shape[0],), x, generator) / 10
        p = 0.5 + scale * (x * self.w).sum((1, 2))
        return torch.stack([torch.log1p(-p), torch.log(p)], -1), [], None


def test_ig_of_a_linear_function_is_its_closed_form():
    m = LinearModel()
    a = attribute(m, "one three seven", n_samples=4, seed=11, steps=3, target="positive")
    ids = torch.tensor([m.tokenizer.encode("one three seven")[0]])
    base = ids.clone()
    base[:, 1:-1] = 0
    per_token = ((m.bert.embeddings(ids) - m.bert.embeddings(base))[0] * m.w).sum(-1).detach()   # (T,)
    scale = 1 + torch.randn(4, generator=torch.Generator().manual_seed(11)) / 10             # the recorded draws
    torch.testing.assert_close(a.samples, scale[:, None] * per_token, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(a.softmax, per_token, rtol=1e-4, atol=1e-7)
    assert a.delta.abs().max() < 1e-5
    assert per_token[0] == 0 and per_token[-1] == 0 and per_token[1:-1].abs().min() > 0   # [CLS], [SEP] kept
    assert a.baseline == BASELINE and a.tokens == ["[CLS]", "one", "three", "seven", "[SEP]"]


def test_attribution_works_inside_inference_mode_and_no_grad():
    """Captum 0.9 cannot take gradients of inference tensors: attribute() leaves inference mode itself."""
    m = LinearModel()
    plain = attribute(m, "one three seven", n_samples=2, steps=3)
    with torch.inference_mode():
        inside = attribute(m, "one three seven", n_samples=2, steps=3)
    with torch.no_grad():
        quiet = attribute(m, "one three seven", n_samples=2, steps=3)
    assert torch.equal(inside.samples, plain.samples) and torch.equal(quiet.samples, plain.samples)


def test_a_probability_that_is_not_finite_is_an_error_not_a_nan():
    with pytest.raises(ValueError, match="the prediction of linear is not finite"):
        attribute(LinearModel(size=1e3), "one three seven", n_samples=2, steps=3)     # p far outside (0, 1)


def test_a_model_whose_replayed_pass_draws_less_than_the_recorded_one_is_refused():
    class DrawsOnlyForSeveralSamples(LinearModel):
        def upper(self, x, mask, *, n_samples=1, generator=None, mode=Mode.SAMPLE, hyper=None):
            if n_samples > 1:
                draw(torch.rand, (n_samples,), x, generator)
            return super().upper(x, mask, n_samples=n_samples, generator=generator, mode=mode, hyper=hyper)

    with pytest.raises(RuntimeError, match="fewer draws than the recorded one"):
        attribute(DrawsOnlyForSeveralSamples(), "one three seven", n_samples=2, steps=3)


# ---- the noise tape ---------------------------------------------------------------------------------
def test_a_recording_tape_draws_what_the_generator_draws_and_a_replay_gives_each_row_its_sample():
    fam = families.get("weibull")
    log_p = torch.randn(3, 2, 5, 5, generator=torch.Generator().manual_seed(1)).log_softmax(-1)
    plain_g, tape = torch.Generator().manual_seed(5), NoiseTape(torch.Generator().manual_seed(5))
    plain = fam.sample(log_p, fam.hyper(), None, plain_g)
    recorded = fam.sample(log_p, fam.hyper(), None, tape)
    assert torch.equal(plain, recorded) and len(tape) == 1
    assert torch.equal(torch.rand(3, generator=plain_g), torch.rand(3, generator=tape.generator))
    rows = torch.tensor([2, 0, 1, 2, 2])
    replay = tape.replay(rows)
    assert torch.equal(fam.sample(log_p[rows], fam.hyper(), None, replay), recorded[rows]) and replay.complete
    # The same noise at new scores: the sample is a function of them (here, a sharper softmax).
    sharper = (2 * log_p).log_softmax(-1)
    again = fam.sample(sharper[rows], fam.hyper(), None, tape.replay(rows))
    assert not torch.allclose(again, recorded[rows])
    torch.testing.assert_close(again, fam.sample(sharper, fam.hyper(), None,
                                                 torch.Generator().manual_seed(5))[rows])


def test_a_replay_that_is_not_the_recorded_pass_is_refused():
    like = torch.zeros(())
    tape = NoiseTape(torch.Generator().manual_seed(0))
    draw(torch.rand, (2, 3), like, tape)
    with pytest.raises(RuntimeError, match="not the same pass"):
        draw(torch.rand, (2, 4), like, tape.replay(torch.tensor([0, 1])))
    with pytest.raises(RuntimeError, match="not the same pass"):
        draw(torch.rand, (3, 3), like, tape.replay(torch.tensor([0, 1])))
    replay = tape.replay(torch.tensor([1]))
    assert not replay.complete
    draw(torch.rand, (1, 3), like, replay)
    assert replay.complete
    with pytest.raises(RuntimeError, match="made only 1"):
        draw(torch.rand, (1, 3), like, replay)
    with pytest.raises(RuntimeError, match="replay a recording tape"):
        replay.replay(torch.tensor([0]))


def test_a_replayed_categorical_draw_keeps_its_key_whatever_the_probabilities():
    log_p = torch.tensor([[0.0, -9.0, -9.0], [-9.0, -9.0, 0.0]]).log_softmax(-1)
    tape = NoiseTape(torch.Generator().manual_seed(0))
    z = categorical_sample(log_p, tape)
    assert torch.equal(z, torch.eye(3)[[0, 2]])
    flipped = log_p.flip(-1)             # would draw the other keys almost surely
    assert torch.equal(categorical_sample(flipped[[1, 0, 1]], tape.replay(torch.tensor([1, 0, 1]))), z[[1, 0, 1]])


def test_dropout_replays_its_mask():
    from bam_viz.nn.attention import dropout

    x = torch.ones(2, 50)
    tape = NoiseTape(torch.Generator().manual_seed(3))
    kept = dropout(x, 0.3, tape)
    assert 0 < (kept == 0).sum() < 100
    replayed = dropout(5 * x[[1, 1, 0]], 0.3, tape.replay(torch.tensor([1, 1, 0])))
    torch.testing.assert_close(replayed, 5 * kept[[1, 1, 0]], rtol=1e-6, atol=0)


def test_a_gamma_draw_replayed_at_a_new_shape_keeps_its_cdf_value_and_its_implicit_gradient():
    g = torch.Generator().manual_seed(0)
    alpha = (1 + 60 * torch.rand(400, generator=g, dtype=torch.float64) ** 2)
    tape = NoiseTape(torch.Generator().manual_seed(1))
    x = _StandardGamma.apply(alpha, tape)
    rows = torch.arange(400)
    torch.testing.assert_close(_StandardGamma.apply(alpha, tape.replay(rows)), x, rtol=1e-13, atol=0)
    tape32 = NoiseTape(torch.Generator().manual_seed(1))             # the model's float32: the very same draw
    x32 = _StandardGamma.apply(alpha.float(), tape32)
    assert torch.equal(_StandardGamma.apply(alpha.float(), tape32.replay(rows)), x32)
    u = scipy.special.gammainc(alpha.numpy(), x.numpy())
    moved = (alpha * torch.exp(torch.randn(400, generator=g, dtype=torch.float64))).clamp_min(1.0).requires_grad_()
    y = _StandardGamma.apply(moved, tape.replay(rows))
    assert (y != x).all()
    # To torch's own gammainc, which agrees with SciPy's to 2e-9.
    torch.testing.assert_close(torch.as_tensor(scipy.special.gammainc(moved.detach().numpy(), y.detach().numpy())),
                               torch.as_tensor(u), rtol=1e-8, atol=1e-12)
    # The backward is dx/dalpha at fixed u: the derivative of the quantile function, numerically, to
    # the accuracy of torch's _standard_gamma_grad (its series and asymptotic forms: 3e-4 here).
    grad, = torch.autograd.grad(y.sum(), moved)
    a, h = moved.detach().numpy(), 1e-6
    numeric = (scipy.special.gammaincinv(a + h, u) - scipy.special.gammaincinv(a - h, u)) / (2 * h)
    torch.testing.assert_close(grad, torch.as_tensor(numeric), rtol=1e-3, atol=1e-8)


def test_gamma_at_quantile_reaches_either_tail():
    alpha0 = torch.tensor([1.0, 1.0, 30.0, 30.0], dtype=torch.float64)
    u = torch.tensor([1e-30, 1 - 1e-12, 1e-20, 1 - 1e-14], dtype=torch.float64)
    lower = u < 0.5
    log_tail = torch.where(lower, u, 1 - u).log()
    x0 = torch.as_tensor(scipy.special.gammaincinv(alpha0.numpy(), u.numpy()))
    alpha = torch.tensor([80.0, 40.0, 1.0, 2.0], dtype=torch.float64)
    x = gamma_at_quantile(alpha, log_tail, lower, alpha0, x0)
    expected = [scipy.special.gammaincinv(a, v) if v < 0.5 else scipy.special.gammainccinv(a, 1 - v)
                for a, v in zip(alpha.tolist(), u.tolist(), strict=True)]
    torch.testing.assert_close(x, torch.tensor(expected, dtype=torch.float64), rtol=1e-8, atol=0)


# ---- the zoo ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", bam_viz.available_models())
def test_every_sample_is_the_predicted_draw_and_completeness_holds(name):
    m = model(name)
    at_32 = []
    for text in SHORT:
        a = attributed(name, text)
        S = 8
        assert a.samples.shape == (S, len(a.tokens)) and a.delta.shape == a.probs.shape == (S + 1,)
        # By default the class attributed is the predicted one, E[f(z)]'s argmax over these samples.
        drawn = m.predict_samples([text], n_samples=S, seed=0)[0]                  # (S, K)
        assert a.steps == 32 and a.target_index == int(drawn.mean(0).argmax())
        assert a.target == m.classes[a.target_index]
        # The recording pass is predict_samples' pass: the same numbers, not merely close ones.
        assert torch.equal(a.probs[:S], drawn[:, a.target_index])
        torch.testing.assert_close(a.probs[S], m.predict_softmax([text])[0, a.target_index], rtol=0, atol=1e-6)
        # Captum's f(x) is the replayed network's: it is the recorded draw's, to float32 rounding.
        replayed_fx = a.samples.sum(-1) - a.delta[:S] + a.baseline_probs[:S]
        torch.testing.assert_close(replayed_fx, a.probs[:S], rtol=0, atol=1e-5)
        assert a.delta.abs().max() < 0.01, (text, a.delta)
        at_32.append(a.nodes == 32)
    # A network integrated again with more nodes (see the next test) is the exception.
    assert torch.cat(at_32).float().mean() >= 2 / 3


def test_a_network_whose_nodes_miss_completeness_is_integrated_again_with_more():
    """Why `tolerance` exists: along the path to "not bad at all", bam-lc's P goes from 0.2 at the
    baseline down to 0.02, then from 0.04 to 0.92 between alpha = 0.54 and 0.66: a bump in dP/dalpha
    that 32 Gauss-Legendre nodes, 0.05 apart mid-path, under-resolve (|delta| up to 0.034, in the
    softmax pass too); 64 nodes integrate it to 1e-4."""
    text = SHORT[2]
    plain = attribute(model("bam-lc"), text, tolerance=None)
    refined = attributed("bam-lc", text)
    missed = plain.delta.abs() >= 0.01
    assert missed.any() and (plain.nodes == 32).all()
    assert torch.equal(refined.nodes > 32, missed) and refined.delta.abs().max() < 0.01
    kept = ~missed[:-1]                                               # networks done at 32 nodes are unchanged
    assert torch.equal(refined.samples[kept], plain.samples[kept])


def test_a_deterministic_model_has_one_network_repeated():
    a = attributed("softmax", SHORT[0])
    assert a.samples.shape == (8, len(a.tokens)) and a.samples.stride(0) == 0       # a view of one row
    torch.testing.assert_close(a.samples[0], a.softmax, rtol=0, atol=1e-6)       # softmax: f(softmax) = f(z)
    assert torch.equal(a.band[0], a.band[1]) and torch.equal(a.mean, a.samples[0])


def test_the_band_spans_the_samples():
    a = attributed("bam-wc", SHORT[0])
    assert a.band.shape == (2, len(a.tokens))
    lo, hi = a.samples.min(0).values, a.samples.max(0).values
    assert (lo <= a.band[0]).all() and (a.band[0] <= a.band[1]).all() and (a.band[1] <= hi).all()
    assert (a.band[1] - a.band[0]).max() > 0 and torch.equal(a.mean, a.samples.mean(0))
    m = attributed("bam-wc", SHORT[0], n_samples=4, steps=16, layer=4).attention
    assert m.band.shape == (2, *m.samples.shape[1:]) and torch.equal(m.mean, m.samples.mean(0))
    assert (m.band[0] <= m.band[1]).all() and (m.band[1] - m.band[0]).max() > 0


def test_the_same_seed_gives_the_same_attribution_and_others_differ():
    m = model("bam-wc")
    a = attribute(m, SHORT[2], seed=3, steps=4, tolerance=None)
    b = attribute(m, SHORT[2], seed=3, steps=4, tolerance=None)
    c = attribute(m, SHORT[2], seed=4, steps=4, tolerance=None)
    assert torch.equal(a.samples, b.samples) and torch.equal(a.delta, b.delta)
    assert not torch.allclose(a.samples, c.samples, atol=1e-4)
    assert torch.equal(a.softmax, c.softmax)                # no noise in the deterministic pass


def test_targets_negative_positive_and_predicted():
    m = model("categorical")
    pos = attribute(m, SHORT[1], steps=4, target="positive", tolerance=None)
    neg = attribute(m, SHORT[1], steps=4, target=0, tolerance=None)
    # P(negative) = 1 - P(positive), and IG is linear in f: the attributions change sign.
    torch.testing.assert_close(neg.samples, -pos.samples, rtol=0, atol=1e-6)
    torch.testing.assert_close(neg.probs, 1 - pos.probs, rtol=0, atol=1e-6)
    predicted = attribute(m, SHORT[1], steps=4, target="predicted", tolerance=None)
    expected = "positive" if pos.probs[:-1].mean() > 0.5 else "negative"
    assert predicted.target == expected and neg.target == "negative"
    assert (neg.target_index, pos.target_index, predicted.target_index) == (0, 1, m.classes.index(expected))
    default = attribute(m, SHORT[1], steps=4, tolerance=None)
    assert default.target == expected and torch.equal(default.samples, predicted.samples)


def test_chunks_cut_by_the_working_memory_give_the_same_attribution(monkeypatch):
    m = model("bam-lc")
    whole = attribute(m, SHORT[2], n_samples=3, steps=8, tolerance=None)
    T = len(whole.tokens)
    rows = []
    upper = m.upper

    def counted(x, *args, **kw):
        rows.append(x.shape[0])
        return upper(x, *args, **kw)

    monkeypatch.setattr(m, "upper", counted)
    monkeypatch.setattr(WORK, "_budget", 3 * 4 * row_bytes(m, T))     # three path points of S + 1 = 4 rows
    chunked = attribute(m, SHORT[2], n_samples=3, steps=8, tolerance=None)
    assert max(rows) == 3 * 3 and 2 * 3 in rows                        # 8 points: 3, 3 and 2 of 3 samples
    torch.testing.assert_close(chunked.samples, whole.samples, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(chunked.delta, whole.delta, rtol=0, atol=1e-6)
    monkeypatch.setattr(WORK, "_budget", 3 * row_bytes(m, T))         # S + 1 = 3 rows: two samples
    with pytest.raises(ValueError, match=r"over the working memory .* at most 2 samples fit"):
        attribute(m, SHORT[2], n_samples=3)


@pytest.mark.parametrize("name, hyper", [("bam-wc", {"shape_k": 0.2}), ("dirichlet", {"concentration": 0.05}),
                                         ("dirichlet", {"concentration": 1e4}), ("bam-lc", {"sigma": 3.0})])
def test_extreme_hyperparameters_give_finite_attributions(name, hyper):
    a = attribute(model(name), SHORT[2], n_samples=4, steps=4, tolerance=None, **hyper)
    assert all(torch.isfinite(t).all() for t in (a.samples, a.softmax, a.delta, a.probs))


# ---- attention attribution --------------------------------------------------------------------------
@pytest.mark.parametrize("name, layer", [("bam-wc", 5), ("bam-lc", 3), ("bam-wc", 1), ("mc-dropout", 2),
                                         ("dirichlet", 5), ("softmax", 2)])
def test_attention_attribution_is_complete_and_zero_where_the_weights_are(name, layer):
    """On "not bad at all", where zeroing these layers' attention moves P by 0.015 to 0.6, the maps sum
    to f(A) - f(0) within 1e-4 at 32 nodes (scaling A is a gentle path: 1e-7 is typical)."""
    m, S = model(name), 4
    a = attribute(m, SHORT[2], n_samples=S, steps=32, layer=layer, tolerance=None).attention
    T, H = len(m.tokenize(SHORT[2])), m.n_heads
    assert a.layer == layer and a.softmax.shape == (H, T, T) and a.samples.shape == (S, H, T, T)
    assert a.weights.shape == (S + 1, H, T, T) and a.delta.shape == (S + 1,) and (a.nodes == 32).all()
    maps = torch.cat([a.samples, a.softmax[None]])
    change = maps.sum((1, 2, 3)) - a.delta                            # f(A) - f(0), per network
    assert change.abs().min() > 0.01 and a.delta.abs().max() < 1e-4, (change, a.delta)
    assert (maps[a.weights == 0] == 0).all() and (maps != 0).any()
    if layer == m.n_layers - 1:           # only [CLS]'s row is read in the top layer
        assert (maps[:, :, 1:] == 0).all()
    if name == "dirichlet":               # whose sampled pass draws every row all the same: each on the simplex
        rows = a.weights[:S, :, 1:]       # (a draw's smallest weights can underflow float32 to 0)
        torch.testing.assert_close(rows.sum(-1), torch.ones(rows.shape[:-1]), rtol=0, atol=1e-5)
    if name == "mc-dropout":              # dropout zeroes weights in the sampled networks, not in the mean
        assert (a.weights[:S] == 0).any() and not (a.weights[S] == 0).any()
    if m.stochastic and layer < m.first_stochastic:   # one A for every network, sample s's layers above
        assert torch.equal(a.weights[0], a.weights[1]) and not torch.allclose(a.samples[0], a.samples[1])


def test_a_probe_holding_weights_of_another_shape_is_refused():
    from bam_viz.inference.attribution import _Networks

    m = model("softmax")
    ids = torch.tensor([m.tokenizer.encode(SHORT[0])[0]])
    nets = _Networks(m, ids, 1, 0, m.hyper(), 2)
    with pytest.raises(RuntimeError, match="the probe holds"), nets.probing(torch.zeros(1, m.n_heads, 3, 3)):
        m.predict_softmax([SHORT[0]])


def test_a_probe_touches_only_its_own_thread():
    m = model("softmax")
    expected = m.predict_softmax([SHORT[0]])
    core = m.bert.layers[2].attention.self.core
    seen = []

    def other():
        seen.append(m.predict_softmax([SHORT[0]]))

    with probe(core, torch.zeros_like):
        inside = m.predict_softmax([SHORT[0]])
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
    # Not bit-equal: another test's background frames may leave this pass fewer intra-op threads, and
    # another summation order; zeros in one layer move even this sure sentence well past rounding.
    assert (inside - expected).abs().max() > 1e-6
    torch.testing.assert_close(seen[0], expected, atol=1e-7, rtol=0)


# ---- input checks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, error, message", [
    ({"text": 3}, TypeError, "text must be a str"),
    ({"text": "   "}, ValueError, "text is empty"),
    ({"n_samples": 0}, ValueError, "n_samples must be at least 1"),
    ({"n_samples": 2.0}, TypeError, "n_samples must be an int"),
    ({"seed": -1}, ValueError, "seed must be between 0"),
    ({"steps": 1}, ValueError, "steps must be between 2 and 512"),
    ({"steps": 513}, ValueError, "steps must be between 2 and 512"),
    ({"steps": 32.0}, TypeError, "steps must be an int"),
    ({"target": "neutral"}, ValueError, r"target must be a class of the model \('negative', 'positive'\), its index"),
    ({"target": 2}, ValueError, r"\('negative', 'positive'\), its index \(0 to 1\), or None / 'predicted'"),
    ({"target": -3}, ValueError, r"\('negative', 'positive'\), its index \(0 to 1\).*got -3"),
    ({"target": True}, ValueError, r"\('negative', 'positive'\).*got True"),
    ({"layer": 6}, ValueError, "layer must be between 0 and 5"),
    ({"layer": -1}, ValueError, "layer must be between 0 and 5"),
    ({"layer": "2"}, TypeError, "layer must be an int"),
    ({"shape_k": 3.0}, ValueError, "unknown hyperparameters"),
    ({"tolerance": 0.0}, ValueError, "tolerance must be a positive finite number or None"),
    ({"tolerance": "0.1"}, TypeError, "tolerance must be a number or None"),
])
def test_bad_inputs_are_refused_with_the_librarys_messages(kw, error, message):
    args = {"text": SHORT[0], **kw}
    with pytest.raises(error, match=message):
        attribute(model("softmax"), args.pop("text"), **args)


def test_hyperparameters_are_validated_and_the_alignment_layer_refused():
    with pytest.raises(ValueError, match="shape_k must be between"):
        attribute(model("bam-wc"), SHORT[0], shape_k=1e9)
    with pytest.raises(ValueError, match="hard alignment"):
        attribute(model("categorical"), SHORT[0], layer=5)


def test_the_path_goes_through_the_embedding_output_as_layer_integrated_gradients_would():
    """attribute() runs Captum's IntegratedGradients on the embedding module's output (no hook on the
    shared model); Captum's LayerIntegratedGradients on that module gives the same attributions."""
    from captum.attr import LayerIntegratedGradients

    from bam_viz.inference.attribution import _Networks

    m, text = model("bam-wc"), SHORT[2]
    ours = attribute(m, text, n_samples=2, seed=3, steps=16, tolerance=None, target="positive")
    ids = torch.tensor([m.tokenizer.encode(text)[0]])
    baseline = torch.full_like(ids, m.tokenizer.pad_id)
    baseline[:, 0], baseline[:, -1] = ids[:, 0], ids[:, -1]
    with torch.inference_mode(False):
        nets = _Networks(m, ids, 2, 3, m.hyper(), None)
        nets.record()
        lig = LayerIntegratedGradients(nets.batch([0, 1, 2]).of_ids, m.bert.embeddings)
        theirs = lig.attribute(ids.expand(3, -1), baselines=baseline.expand(3, -1), target=1, n_steps=16,
                               method="gausslegendre").sum(-1).detach()
    torch.testing.assert_close(torch.cat([ours.samples, ours.softmax[None]]), theirs, rtol=1e-4, atol=1e-6)


def test_an_attribution_leaves_other_threads_passes_alone():
    """The app's sessions share one model: predictions made in another thread while an attribution
    runs are the predictions made alone. On one intra-op thread, as the app runs torch
    (views/state.py): two Python threads sharing torch's pool of two may each find it busy and run a
    region inline, in another order of sums, and differ in the last bit for that reason alone."""
    m = model("bam-wc")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _predictions_beside_an_attribution(m)
    finally:
        torch.set_num_threads(threads)


def _predictions_beside_an_attribution(m):
    alone = m.predict_samples(SHORT, n_samples=4, seed=1)
    seen, stop = [], threading.Event()

    def other():
        while not stop.is_set():
            seen.append(m.predict_samples(SHORT, n_samples=4, seed=1))

    t = threading.Thread(target=other)
    t.start()
    try:
        attribute(m, SHORT[0], n_samples=4, seed=0, steps=16, layer=4, tolerance=None)
    finally:
        stop.set()
        t.join()
    assert seen and all(torch.equal(s, alone) for s in seen)
