"""Fuzzing the public entry points of every zoo model: `predict`, `predict_samples`,
`predict_softmax` and `explain`, over texts, hyperparameters, n_samples and seeds.

The property, for every call: it returns finite outputs of the right shape (probabilities in
[0, 1] that sum to 1; every array and headline number of an ExplainResult finite), or it raises
the documented ValueError / TypeError whose message names the bad argument ("text", "texts[i]",
"n_samples", "seed", the hyperparameter, "unknown hyperparameters"), before any forward pass.
Anything else (a RuntimeError, an IndexError, a tokenizer or torch error, a NaN) fails. The same
bad argument reads the same on every model, whatever its family.

Hypothesis runs derandomized (a fixed seed per test, no example database), so CI sees the same
examples on every run; the valid calls use 1-4 samples so that the file runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import bam_viz
from bam_viz import families, zoo
from bam_viz.core.inputs import BUDGET_ENV, MAX_SEED

MODELS = bam_viz.available_models()
ENTRY_POINTS = ("predict", "predict_samples", "predict_softmax", "explain")
SAMPLED = ("predict", "predict_samples", "explain")              # the entry points that take n_samples, seed
FINE = ["A fine film.", "Not bad at all.", "dull"]
# Sample counts beyond every memory budget at its default: the (N, S, 2) float32 output of one text
# alone is 2 GiB at HUGE. Every entry point must refuse them before its sampled pass.
HUGE = 2**28
WORK_ENV = "BAM_VIZ_WORK_MB"


def fuzz(max_examples: int):
    # No shrinking: a failing example is reported as found, so that a bug costs seconds, not minutes.
    return settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


# ---- models, loaded once for the file ------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def default_budgets():
    """The memory budgets at their defaults, whatever the environment says: HUGE depends on them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(BUDGET_ENV, raising=False)
        mp.delenv(WORK_ENV, raising=False)
        yield


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The fuzzed calls are tiny (1-4 samples of one short text), where one thread is as fast as two,
    and immune to the spin-waits of OpenMP threads on a busy 2-core runner (25-50x slower there)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def zoo_models():
    loaded = {}

    def get(name):
        if name not in loaded:
            loaded[name] = bam_viz.load(name)
        return loaded[name]

    return get


@pytest.fixture(scope="module", params=MODELS)
def model_name(request):
    """The name of each zoo model in turn (hypothesis prints it in a failing example, not the model)."""
    return request.param


@pytest.fixture(scope="module")
def model(model_name, zoo_models):
    return zoo_models(model_name)


def test_every_recipe_of_the_zoo_is_fuzzed():
    assert set(zoo.RECIPES) <= set(MODELS)         # and the shipped models trained on files


# ---- calling an entry point and judging what comes back ------------------------------------------
def reserved_names() -> set[str]:
    """Keyword arguments of the entry points themselves: never hyperparameter names."""
    from bam_viz.model import BamClassifier

    names = {"self"}
    for entry in ENTRY_POINTS:
        names |= {p.name for p in inspect.signature(getattr(BamClassifier, entry)).parameters.values()
                  if p.kind is not inspect.Parameter.VAR_KEYWORD}
    return names


RESERVED = reserved_names()


_ONE = object()


def call(model, entry, text, n_samples=2, seed=0, hyper=None, texts=_ONE):
    """One entry point on `text` (the list ones on `texts`, by default [text])."""
    hyper = hyper or {}
    texts = [text] if texts is _ONE else texts
    if entry == "explain":
        return model.explain(text, n_samples=n_samples, seed=seed, **hyper)
    if entry == "predict_softmax":
        return model.predict_softmax(texts, **hyper)
    return getattr(model, entry)(texts, n_samples=n_samples, seed=seed, **hyper)


@contextlib.contextmanager
def no_forward_pass(model, lower_too: bool = True):
    """Fail if the model runs its sampled pass (and, with `lower_too`, any pass): a bad argument is
    refused before any tensor is made. explain() may tokenize and run the lower layers before it
    refuses a request over the memory budget (that needs the token count): `lower_too=False`."""
    def tripwire(*args, **kwargs):
        raise AssertionError("the forward pass ran: the bad argument was not refused before it")

    model.upper = tripwire
    if lower_too:
        model.lower = tripwire
    try:
        yield
    finally:
        del model.upper
        if lower_too:
            del model.lower


def bad_values(t: torch.Tensor) -> str:
    """How many entries of `t` are not finite, for a failure message (never the whole tensor)."""
    t = t.detach()
    return (f"{int((~torch.isfinite(t)).sum())} of {t.numel()} entries of a {tuple(t.shape)} tensor are not finite "
            f"({int(torch.isnan(t).sum())} NaN)")


def assert_simplex(p: torch.Tensor, what: str, atol: float = 1e-4):
    p = p.detach()
    assert torch.isfinite(p).all(), f"{what}: {bad_values(p)}"
    assert (p >= -1e-7).all() and (p <= 1 + 1e-6).all(), f"{what}: outside [0, 1]: {p.min()}, {p.max()}"
    err = (p.sum(-1) - 1).abs().max()
    assert err <= atol, f"{what}: does not sum to 1 (off by {float(err):.3g})"


def assert_weights(w: torch.Tensor, what: str, model, sampled: bool):
    """Attention weights: finite, non-negative, rows summing to 1. MC dropout drops and rescales
    sampled weights (Gal & Ghahramani 2016): those lie in [0, 1 / (1 - p)] and their rows do not sum to 1."""
    w = w.detach()
    assert torch.isfinite(w).all(), f"{what}: {bad_values(w)}"
    if sampled and model.config.mc_dropout:
        assert (w >= 0).all() and (w <= 1 / (1 - model.config.dropout) + 1e-5).all(), f"{what}: out of range"
    else:
        assert_simplex(w, what, atol=1e-3)


def assert_finite_number(x, what: str):
    assert isinstance(x, float) and math.isfinite(x), f"{what} is {x!r}"


def check_result(model, entry, out, n_texts: int, n_samples: int, seed: int, text=None, hyper=None):
    """The output of a call that had to succeed: shape, finiteness, probabilities."""
    if entry in ("predict", "predict_softmax"):
        assert isinstance(out, torch.Tensor) and out.shape == (n_texts, model.n_classes), \
            f"{entry}: shape {tuple(out.shape)}"
        assert_simplex(out, entry)
    elif entry == "predict_samples":
        assert isinstance(out, torch.Tensor) and out.shape == (n_texts, n_samples, model.n_classes), \
            f"{entry}: shape {tuple(out.shape)}"
        assert_simplex(out, entry)
    else:
        check_explain(model, out, text, n_samples, seed, hyper or {})


def check_explain(model, r, text, S, seed, hyper):
    L, H = model.n_layers, model.n_heads
    T = len(r.tokens)
    assert 2 <= T <= model.max_tokens and r.tokens[0] == "[CLS]" and r.tokens[-1] == "[SEP]", r.tokens
    too_long = model.tokenizer.length(text) > model.max_tokens
    assert r.truncated == too_long and (T == model.max_tokens or not too_long)
    assert any("longer than this model's maximum" in n for n in r.notes) == too_long
    assert r.n_samples == S and r.seed == seed
    assert r.hyper == dict(model.hyper(**hyper))
    # the headline numbers
    K = model.n_classes
    assert r.sample_probs.shape == (S, K) and r.mc_probs.shape == (K,) and r.softmax_probs.shape == (K,)
    for name in ("sample_probs", "mc_probs", "softmax_probs", "mean_attention_probs"):
        assert_simplex(getattr(r, name), f"explain.{name}")
    for name in ("predictive_entropy", "expected_entropy", "mutual_information", "gap"):
        assert_finite_number(getattr(r, name), f"explain.{name}")
    assert -1e-6 <= r.expected_entropy <= r.predictive_entropy + 1e-6 <= math.log(K) + 1e-5
    for name in ("p_target", "gap", "gap_softmax", "mutual_information"):
        v = getattr(r.se, name)
        assert v is None or (math.isfinite(v) and v >= 0), f"explain.se.{name} is {v!r}"
    # the weights the charts draw
    assert r.sample_weights.shape == (S, L, H, T, T)
    assert_weights(r.sample_weights, "explain.sample_weights", model, sampled=True)
    for name in ("softmax_weights", "posterior_mean_weights", "prior_weights"):
        w = getattr(r, name)
        assert w.shape == (L, H, T, T), f"explain.{name}: shape {tuple(w.shape)}"
        # the samples' mean is bounded as they are (MC dropout's rescaled weights too)
        assert_weights(w, f"explain.{name}", model, sampled=name == "posterior_mean_weights")
    torch.testing.assert_close(r.posterior_mean_weights, r.sample_weights.mean(0), atol=1e-6, rtol=0)
    for layer in sorted({0, *r.stochastic_layers}):
        for head in (0, H - 1):
            drawn = r.prior_draws(layer, head)
            assert drawn.shape == (S, T, T)
            assert_weights(drawn, f"explain.prior_draws({layer}, {head})", model, sampled=True)
    assert r.kl.shape == (L, H) and torch.isfinite(r.kl.detach()).all(), f"explain.kl: {bad_values(r.kl)}"
    assert r.spread.shape == (L, H) and torch.isfinite(r.spread.detach()).all(), \
        f"explain.spread: {bad_values(r.spread)}"
    for group in ("posterior_params", "prior_params"):
        for name, v in getattr(r, group).items():
            assert v.shape == (L, H, T, T) and torch.isfinite(v.detach()).all(), \
                f"explain.{group}[{name!r}]: {bad_values(v)}"
    if r.posterior_params and r.stochastic_layers:
        d = r.key_densities(r.stochastic_layers[-1], 0, 0, T - 1)
        for name in ("x", "posterior", "prior"):
            assert np.isfinite(d[name]).all(), f"explain.key_densities()[{name!r}]"


def expect_error(call_it, model, allowed: list[tuple[type, str]], lower_too: bool = True) -> BaseException:
    """Run `call_it()`, which must raise one of `allowed` (type, prefix of the message) before any
    forward pass; returns the exception."""
    with no_forward_pass(model, lower_too):
        try:
            out = call_it()
        except (ValueError, TypeError) as e:
            message = str(e)
            if not any(isinstance(e, kind) and message.startswith(prefix) for kind, prefix in allowed):
                raise AssertionError(f"{type(e).__name__}({message[:300]!r}) does not name the bad argument: "
                                     f"expected one of {[(k.__name__, p) for k, p in allowed]}") from e
            return e
    raise AssertionError(f"accepted, expected one of {allowed}; returned {type(out).__name__}")


# ---- texts ---------------------------------------------------------------------------------------
WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000"
ODD = st.characters(categories=["Mn", "Me", "Mc", "Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "So", "Sk"])
WORDS = st.sampled_from([
    "good", "bad", "not", "film", "!", "😍", "🏳️\u200d🌈", "<b>", "&amp;", "<img src=x onerror=alert(1)>",
    "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "##ing", "\u200b", "\u0301\u0301", "\u202e", "שלום", "مرحبا",
    "\x00", "\ufeff", "超好", "Ωμέγα", "x" * 150, "ﬁne", "１２３", "\U0001f600" * 3, "e\u0301\u0327"])
TEXTS = st.one_of(
    st.text(max_size=60),                                            # anything but lone surrogates
    st.text(ODD, max_size=30),                                        # marks, controls, format, surrogates
    st.text(st.characters(codec=None, exclude_categories=[]), max_size=40),   # any code point at all
    st.text(st.sampled_from(WHITESPACE), max_size=20),                # empty or whitespace only
    st.lists(WORDS, max_size=30).map(" ".join),
    st.lists(WORDS, min_size=140, max_size=260).map(" ".join),       # past 128 tokens: truncated
    st.text(min_size=300, max_size=1500),                            # long, mostly [UNK] or one word
)
NOT_STR = st.sampled_from([None, b"A fine film.", bytearray(b"x"), 42, 3.5, math.nan, True, ["A fine film."],
                           {"text": "x"}, ("A fine film.",), np.str_("x").encode()])
SPECIAL_TEXTS = ["<img src=x onerror=alert(1)>", "<script>alert('x')</script>", "   ", "", "\x00", "\x00" * 10,
                 "\ud800", "a fine \udfff film", "\U0010ffff", "\u200b\u200b", "\u0301" * 50, "\u202eflim a",
                 "good " * 300, "😍" * 600, "[CLS]" * 300, "[SEP] [PAD]", "x" * 4000, "\x1c\x1d\x85\u2028",
                 "A\tfine\r\nfilm.", "\ufeffA fine film."]


def text_problem(text) -> tuple[type, str] | None:
    """What the library must say of `text` (the words after the argument's name), or None."""
    if not isinstance(text, str):
        return TypeError, "must be a str"
    if not text.strip():
        return ValueError, "is empty"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return ValueError, "is not valid Unicode: a lone surrogate"
    return None


@fuzz(max_examples=14)
@given(text=st.one_of(TEXTS, NOT_STR), entry=st.sampled_from(ENTRY_POINTS), position=st.integers(0, 2),
       seed=st.integers(0, MAX_SEED))
@example(text=SPECIAL_TEXTS[0], entry="explain", position=0, seed=0)
@example(text="\ud800", entry="predict", position=1, seed=0)
@example(text="good " * 300, entry="explain", position=0, seed=0)
@example(text="\x00", entry="explain", position=0, seed=1)
def test_any_text(model_name, zoo_models, text, entry, position, seed):
    """Any text, or any non-str, in any position of the list: a finite answer or a named refusal."""
    model = zoo_models(model_name)
    check_text_call(model, text, entry, position, seed)


@pytest.mark.parametrize("text", SPECIAL_TEXTS, ids=lambda t: ascii(t)[:24])
def test_odd_texts(zoo_models, text):
    """The odd texts, on every model and every entry point (alone: test_any_text puts them in lists)."""
    for name in MODELS:
        for entry in ENTRY_POINTS:
            check_text_call(zoo_models(name), text, entry, 0, 0, others=[])


def check_text_call(model, text, entry, position, seed, others=FINE):
    texts = others[:position] + [text] + others[position:]
    problem = text_problem(text)
    if problem is None:
        out = call(model, entry, text, n_samples=2, seed=seed, texts=texts)
        check_result(model, entry, out, len(texts), 2, seed, text)
        return
    kind, words = problem
    name = "text" if entry == "explain" else f"texts[{position}]"
    e = expect_error(lambda: call(model, entry, text, seed=seed, texts=texts), model, [(kind, f"{name} ")])
    assert words in str(e)


@fuzz(max_examples=10)
@given(texts=st.one_of(
    st.sampled_from(["A fine film.", b"A fine film.", None, 7, {"A fine film."}, {"a": 1}, [], (), "",
                     iter(["A fine film."]), np.array(["A fine film."]), torch.tensor([1])]),
    st.lists(st.one_of(TEXTS, NOT_STR), max_size=4),
    st.tuples(st.text(max_size=10), st.text(max_size=10))),
    entry=st.sampled_from(("predict", "predict_samples", "predict_softmax")))
def test_any_list_of_texts(model_name, zoo_models, texts, entry):
    """The list entry points take a non-empty list or tuple of texts, and name the first bad one."""
    model = zoo_models(model_name)
    if isinstance(texts, (str, bytes)):
        expect_error(lambda: call(model, entry, None, texts=texts), model, [(TypeError, "texts must be a list")])
        return
    if not isinstance(texts, (list, tuple)):
        expect_error(lambda: call(model, entry, None, texts=texts), model, [(TypeError, "texts must be a list of str")])
        return
    if not texts:
        expect_error(lambda: call(model, entry, None, texts=texts), model, [(ValueError, "texts is empty")])
        return
    bad = [(i, text_problem(t)) for i, t in enumerate(texts) if text_problem(t) is not None]
    if bad:
        i, (kind, words) = bad[0]
        e = expect_error(lambda: call(model, entry, None, texts=texts), model, [(kind, f"texts[{i}] ")])
        assert words in str(e)
        return
    out = call(model, entry, None, n_samples=2, texts=texts)
    check_result(model, entry, out, len(texts), 2, 0)


# ---- hyperparameters -----------------------------------------------------------------------------
def family_of(model):
    return model.attention_family


UNKNOWN_NAMES = st.one_of(
    st.sampled_from(sorted({s.name for f in families.names() for s in families.get(f).hyper_specs}
                           | {"bogus", "shape", "Shape_K", "shape_k ", "", "β", "k", "__class__", "temperature"})),
    st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
)
EXTREMES = [0.0, -0.0, -1.0, -1e300, math.nan, -math.nan, math.inf, -math.inf, 5e-324, 2.2250738585072014e-308,
            1e-300, 1e-38, 1e-3, 1e3, 1e38, 1e300, 1.7976931348623157e308]
ODD_VALUES = ["2.5", "nan", "wide", "", True, False, 1 + 2j, [1.0], 10**400, Decimal("2.5"), Fraction(5, 2),
              np.float32(2.5), np.float64(math.nan), np.int64(-3), None]


def values_for(spec):
    """Any value for one hyperparameter: the whole float range, the spec's own range and edges,
    ints, strings, numpy scalars, None (keep the trained value)."""
    lo, hi = spec.low, spec.high
    return st.one_of(
        st.floats(),                                                              # incl. nan, inf, subnormals, -0.0
        st.floats(lo, hi),
        st.floats(math.log(lo), math.log(hi)).map(math.exp).filter(lambda v: lo <= v <= hi),
        st.sampled_from(EXTREMES + [lo, hi, spec.default, math.nextafter(lo, 0), math.nextafter(hi, math.inf),
                                    lo / 10, hi * 10]),
        st.integers(-10, 10**6),
        st.sampled_from(ODD_VALUES),
    )


def value_problem(v) -> str | None:
    """'keep' for None; None for a positive finite number; else why it is refused."""
    if v is None:
        return "keep"
    if isinstance(v, bool):
        return "bool"
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        return "not a number"
    return None if math.isfinite(x) and x > 0 else "not positive finite"


def hyper_outcome(model, hyper: dict) -> tuple[list, list]:
    """(hard, soft) for these hyperparameter overrides: `hard` the errors one of which must be
    raised (an unknown name, a value that is not a positive finite number); `soft` the refusals
    allowed, not required, of positive finite values outside the spec's range (the library may
    answer there, but never with a NaN). Both empty: the call must succeed."""
    fam = family_of(model)
    unknown = sorted(set(hyper) - set(fam.hyper_names))
    if unknown:
        return [(ValueError, f"unknown hyperparameters {unknown} for {fam.name} attention")], []
    hard = [(ValueError, f"{k} must be a positive finite number") for k, v in hyper.items()
            if value_problem(v) not in (None, "keep")]
    soft = [(ValueError, f"{k} ") for k, v in hyper.items()
            if value_problem(v) is None and not fam.spec(k).low <= float(v) <= fam.spec(k).high]
    return hard, soft


@st.composite
def hyper_overrides(draw, model):
    fam = family_of(model)
    hyper = {}
    for spec in fam.hyper_specs:
        if draw(st.booleans()):
            hyper[spec.name] = draw(values_for(spec))
    if draw(st.integers(0, 4)) == 0:
        name = draw(UNKNOWN_NAMES.filter(lambda n: n not in RESERVED and n not in fam.hyper_names))
        hyper[name] = draw(st.one_of(st.floats(), st.just(1.0)))
    return hyper


def check_hyper_call(model, entry, hyper, text="Not bad at all, a fine film.", n_samples=2, seed=0):
    hard, soft = hyper_outcome(model, hyper)
    if hard:
        expect_error(lambda: call(model, entry, text, n_samples=n_samples, seed=seed, hyper=hyper), model, hard + soft)
        return
    try:
        out = call(model, entry, text, n_samples=n_samples, seed=seed, hyper=hyper)
    except ValueError as e:
        if not any(str(e).startswith(prefix) for _, prefix in soft):
            raise
        return
    check_result(model, entry, out, 1, n_samples, seed, text, hyper)


@fuzz(max_examples=16)
@given(data=st.data(), entry=st.sampled_from(ENTRY_POINTS), n_samples=st.integers(1, 4), seed=st.integers(0, 99))
def test_any_hyperparameters(model_name, zoo_models, data, entry, n_samples, seed):
    """Any values of the family's hyperparameters (and unknown names): a finite answer or a refusal
    naming the hyperparameter."""
    model = zoo_models(model_name)
    hyper = data.draw(hyper_overrides(model), label="hyper")
    check_hyper_call(model, entry, hyper, n_samples=n_samples, seed=seed)


def edges(spec) -> list[float]:
    """The spec's bounds and the floats just outside them."""
    return [spec.low, spec.high, math.nextafter(spec.low, 0), math.nextafter(spec.high, math.inf)]


@pytest.mark.parametrize("entry", ["predict_samples", "predict_softmax", "explain"])
def test_extreme_hyperparameters_never_give_nan(model, entry):
    """Every hyperparameter alone at each extreme value, and the corners of the spec's box (all of
    them at low or high at once), on a short and a truncated text: a finite answer or a refusal
    naming it; inside the spec's range always a finite answer (the never-a-NaN-chart rule)."""
    fam = family_of(model)
    calls = [({spec.name: v}, "Not bad at all, a fine film.")
             for spec in fam.hyper_specs for v in EXTREMES + edges(spec)]
    corners = [{}]
    for spec in fam.hyper_specs:
        corners = [{**c, spec.name: v} for c in corners for v in (spec.low, spec.high)]
    calls += [(corner, text) for corner in corners for text in ("Not bad at all, a fine film.", "good " * 200)]
    failures = []
    for hyper, text in calls:
        try:
            check_hyper_call(model, entry, hyper, text=text, n_samples=3)
        except Exception as e:             # collected, so that one run lists every failing value
            first = (str(e).splitlines() or [""])[0]
            failures.append(f"{entry}({ascii(text[:12])}..., {hyper}): {type(e).__name__}: {first[:160]}")
    assert not failures, f"{len(failures)} of {len(calls)} calls failed:\n" + "\n".join(failures)


# ---- n_samples and seeds -------------------------------------------------------------------------
N_SAMPLES = st.one_of(
    st.integers(1, 4),
    st.integers(1, 4).map(np.int64),
    st.integers(max_value=0),
    st.integers(min_value=HUGE),
    st.sampled_from([HUGE, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, 10**400, -(10**400)]),
    st.floats(),
    st.sampled_from([True, False, None, "4", b"4", [4], 4 + 0j, Decimal(4), Fraction(4), np.float64(2.0), 2.0]),
)
SEEDS = st.one_of(
    st.integers(0, MAX_SEED),
    st.sampled_from([0, MAX_SEED, np.int64(7), np.uint64(MAX_SEED)]),
    st.integers(max_value=-1),
    st.integers(min_value=MAX_SEED + 1),
    st.sampled_from([-1, MAX_SEED + 1, 2**64, 10**400, np.uint64(2**64 - 1)]),
    st.floats(),
    st.sampled_from([True, False, None, "7", 7.0, Decimal(7), [7]]),
)


def integer_problem(value, name: str, lo: int, hi: int | None) -> tuple[type, str] | None:
    import numbers

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        return TypeError, f"{name} must be an int"
    if value < lo or (hi is not None and value > hi):
        return ValueError, f"{name} must be"
    return None


def n_samples_problem(n):
    problem = integer_problem(n, "n_samples", 1, None)
    if problem is None and n >= HUGE:
        return ValueError, "n_samples"           # "must be at most ..." or the memory budget's message
    return problem


@fuzz(max_examples=30)
@given(n_samples=N_SAMPLES, seed=SEEDS, entry=st.sampled_from(SAMPLED))
@example(n_samples=0, seed=0, entry="predict")
@example(n_samples=HUGE, seed=0, entry="predict")
@example(n_samples=2**63, seed=0, entry="explain")
@example(n_samples=2, seed=2**64, entry="predict_samples")
@example(n_samples=1.0, seed=-1, entry="explain")
def test_any_n_samples_and_seed(model_name, zoo_models, n_samples, seed, entry):
    """Any n_samples and seed: a finite answer of S samples, or a refusal naming the argument,
    made before the sampled pass (a huge n_samples never reaches the allocator)."""
    model = zoo_models(model_name)
    problems = [p for p in (n_samples_problem(n_samples), integer_problem(seed, "seed", 0, MAX_SEED)) if p]
    text = "Not bad at all."
    if not problems:
        out = call(model, entry, text, n_samples=n_samples, seed=seed)
        check_result(model, entry, out, 1, int(n_samples), int(seed), text)
        return
    # explain() may tokenize and run its lower layers before it refuses a sample count over budget.
    huge = integer_problem(n_samples, "n_samples", 1, None) is None and n_samples >= HUGE
    expect_error(lambda: call(model, entry, text, n_samples=n_samples, seed=seed), model, problems,
                 lower_too=not huge)


BATCH_SIZES = [0, -1, 1.5, None, "2", True, 1, np.int64(2), 2**40]


def test_batch_size_is_checked(model):
    """batch_size, a keyword of predict_samples and predict_softmax, is checked like n_samples:
    an int of at least 1 (2**40: larger than the list, one batch), else a named refusal."""
    failures = []
    for entry in ("predict_samples", "predict_softmax"):
        for batch_size in BATCH_SIZES:
            def run(entry=entry, batch_size=batch_size):
                if entry == "predict_samples":
                    return model.predict_samples(FINE, n_samples=2, batch_size=batch_size)
                return model.predict_softmax(FINE, batch_size=batch_size)

            try:
                if not isinstance(batch_size, bool) and isinstance(batch_size, (int, np.integer)) and batch_size >= 1:
                    check_result(model, entry, run(), len(FINE), 2, 0)
                else:
                    kind = TypeError if isinstance(batch_size, (bool, float, str, type(None))) else ValueError
                    expect_error(run, model, [(kind, "batch_size must be")])
            except Exception as e:             # collected: one run lists every failing value
                first = (str(e).splitlines() or [""])[0]
                failures.append(f"{entry}(batch_size={batch_size!r}): {type(e).__name__}: {first[:200]}")
    assert not failures, "\n".join(failures)


# ---- everything at once --------------------------------------------------------------------------
@fuzz(max_examples=12)
@given(data=st.data(), text=st.one_of(TEXTS, NOT_STR), n_samples=st.one_of(st.integers(1, 3), N_SAMPLES),
       seed=st.one_of(st.integers(0, 9), SEEDS), entry=st.sampled_from(ENTRY_POINTS))
def test_any_call(model_name, zoo_models, data, text, n_samples, seed, entry):
    """Every argument drawn at once: with no bad one a finite answer; with some, a refusal that
    names one of them."""
    model = zoo_models(model_name)
    hyper = data.draw(hyper_overrides(model), label="hyper")
    hard, soft = hyper_outcome(model, hyper)
    if (p := text_problem(text)) is not None:
        hard.append((p[0], "text " if entry == "explain" else "texts[0] "))
    if entry == "predict_softmax":
        n_samples, seed = 1, 0                      # it takes neither
    hard += [p for p in (n_samples_problem(n_samples), integer_problem(seed, "seed", 0, MAX_SEED)) if p]
    if not hard:
        check_hyper_call(model, entry, hyper, text=text, n_samples=n_samples, seed=seed)
        return
    huge = integer_problem(n_samples, "n_samples", 1, None) is None and n_samples >= HUGE
    expect_error(lambda: call(model, entry, text, n_samples=n_samples, seed=seed, hyper=hyper), model,
                 hard + soft, lower_too=not huge)


# ---- the same words on every model ---------------------------------------------------------------
def message(call_it) -> str:
    try:
        call_it()
    except (ValueError, TypeError) as e:
        return f"{type(e).__name__}: {e}"
    raise AssertionError("accepted")


BAD_CALLS = [
    # (argument, keyword arguments to `call`)
    ("text", {"text": None}), ("text", {"text": b"x"}), ("text", {"text": 12}), ("text", {"text": " \n\t"}),
    ("text", {"text": ""}), ("text", {"text": "a \ud800 b"}), ("text", {"text": "\udfff"}),
    ("n_samples", {"n_samples": 0}), ("n_samples", {"n_samples": -5}), ("n_samples", {"n_samples": 2.0}),
    ("n_samples", {"n_samples": math.nan}), ("n_samples", {"n_samples": True}), ("n_samples", {"n_samples": "4"}),
    ("n_samples", {"n_samples": 2**31}), ("n_samples", {"n_samples": 10**400}), ("n_samples", {"n_samples": 10**5000}),
    ("n_samples", {"n_samples": -(10**5000)}),
    ("seed", {"seed": -1}), ("seed", {"seed": 2**63}), ("seed", {"seed": 2**64}), ("seed", {"seed": 10**5000}),
    ("seed", {"seed": 1.0}), ("seed", {"seed": None}), ("seed", {"seed": "7"}), ("seed", {"seed": False}),
]


def short(value) -> str:
    """ascii(value) for a test id, cut short (an int of 5000 digits cannot even be printed)."""
    if isinstance(value, int) and abs(value).bit_length() > 64:
        return f"{'-' if value < 0 else ''}int{abs(value).bit_length()}bits"
    return ascii(value)[:30]


@pytest.mark.parametrize("argument, kwargs", BAD_CALLS,
                         ids=[f"{a}={short(next(iter(k.values())))}" for a, k in BAD_CALLS])
def test_a_bad_argument_reads_the_same_on_every_model_and_entry_point(zoo_models, argument, kwargs):
    """The same words on every model, whatever its family; on every entry point but for the name of
    the text ("text" for explain, "texts[0]" for the lists)."""
    kwargs = {"text": "A fine film.", **kwargs}
    entries = ENTRY_POINTS if argument == "text" else SAMPLED
    seen = {}
    for name in MODELS:
        m = zoo_models(name)
        for entry in entries:
            with no_forward_pass(m):
                text = message(lambda m=m, entry=entry: call(m, entry, **kwargs))
            seen.setdefault(text.replace("texts[0]", "text"), []).append(f"{name}.{entry}")
    assert len(seen) == 1, f"different messages for {argument}: {seen}"
    assert argument in next(iter(seen))


@pytest.mark.parametrize("value", [math.nan, -math.inf, math.inf, -1.0, 0.0, -0.0, "wide", True, 10**400, 10**5000,
                                   1 + 2j], ids=short)
def test_a_bad_hyperparameter_value_reads_the_same_on_every_family(zoo_models, value):
    """No two families share a hyperparameter name, so the messages are compared with the name
    replaced: "<name> must be a positive finite number, got nan" for every family and entry point."""
    seen = {}
    for model_name in MODELS:
        m = zoo_models(model_name)
        for spec in family_of(m).hyper_specs:
            for entry in ENTRY_POINTS:
                with no_forward_pass(m):
                    text = message(lambda m=m, e=entry, n=spec.name: call(m, e, "A fine film.", hyper={n: value}))
                assert text.startswith(f"ValueError: {spec.name} must be a positive finite number, got ")
                seen.setdefault(text.replace(spec.name, "<name>", 1), []).append(f"{model_name}.{spec.name}.{entry}")
    assert len(seen) == 1, f"different messages for {value!r}: {seen}"


@pytest.mark.parametrize("unknown", ["bogus", "shape_k", "sigma", "concentration", "prior_sigma", "beta"])
def test_an_unknown_hyperparameter_reads_the_same_on_every_family(zoo_models, unknown):
    """The same words on every family but for the family's name and its list of names."""
    seen = {}
    for model_name in MODELS:
        m = zoo_models(model_name)
        fam = family_of(m)
        if unknown in fam.hyper_names:
            continue
        for entry in ENTRY_POINTS:
            with no_forward_pass(m):
                text = message(lambda m=m, entry=entry: call(m, entry, "A fine film.", hyper={unknown: 1.0}))
            known = ", ".join(fam.hyper_names) or "none"
            expected = f"ValueError: unknown hyperparameters [{unknown!r}] for {fam.name} attention; known: {known}"
            assert text == expected
            normalised = re.sub(r"for \S+ attention; known: .*", "for <family> attention; known: <names>", text)
            seen.setdefault(normalised, []).append(f"{model_name}.{entry}")
    assert len(seen) == 1, seen
