"""Bad input to the library's entry points is a ValueError or TypeError that names the argument,
raised before any tensor is made, the same on every model (never a torch or tokenizer error)."""

from __future__ import annotations

import pytest

import bam_viz
from bam_viz.core import inputs
from bam_viz.inference.sweep import sweep
from bam_viz.live import grid as live

MODELS = ("softmax", "categorical", "bam-wc")

BAD_CALLS = [
    # (keyword arguments to predict, error type, words the message must hold)
    ({"n_samples": 0}, ValueError, "n_samples must be at least 1"),
    ({"n_samples": -3}, ValueError, "n_samples must be at least 1"),
    ({"n_samples": 1.5}, TypeError, "n_samples must be an int"),
    ({"n_samples": True}, TypeError, "n_samples must be an int"),
    ({"seed": 2**64}, ValueError, "seed must be between 0 and 2**63 - 1"),
    ({"seed": -1}, ValueError, "seed must be between 0"),
    ({"seed": "7"}, TypeError, "seed must be an int"),
    ({"bogus": 1.0}, ValueError, "unknown hyperparameters ['bogus']"),
]

BAD_TEXTS = [
    ([], ValueError, "texts is empty"),
    ("a film", TypeError, "pass [text] for one"),
    ([None], TypeError, "texts[0] must be a str, not NoneType"),
    ([b"bytes"], TypeError, "texts[0] must be a str, not bytes"),
    (["fine", "   "], ValueError, "texts[1] is empty"),
    (["bad \ud800 surrogate"], ValueError, "lone surrogate at character 4"),
]


@pytest.fixture(scope="module", params=MODELS)
def model(request):
    return bam_viz.load(request.param)


@pytest.mark.parametrize("kwargs, error, words", BAD_CALLS)
def test_bad_arguments_are_named(model, kwargs, error, words):
    with pytest.raises(error) as caught:
        model.predict(["A fine film."], **kwargs)
    assert words in str(caught.value)
    with pytest.raises(error) as caught:
        model.explain("A fine film.", **kwargs)
    assert words in str(caught.value)


@pytest.mark.parametrize("texts, error, words", BAD_TEXTS)
def test_bad_texts_are_named(model, texts, error, words):
    with pytest.raises(error) as caught:
        model.predict(texts)
    assert words in str(caught.value)
    with pytest.raises(error) as caught:
        model.predict_softmax(texts)
    assert words in str(caught.value)


@pytest.mark.parametrize("text, error", [(None, TypeError), (b"x", TypeError), ("", ValueError),
                                         (" \n", ValueError), ("\udfff", ValueError)])
def test_every_single_text_entry_point_checks_it(text, error):
    m = bam_viz.load("bam-wc")
    for call in (lambda: m.explain(text), lambda: sweep(m, text, "shape_k"), lambda: live.LiveGrid(m, text, 4, 0)):
        with pytest.raises(error):
            call()


def test_good_values_pass_unchanged():
    import numpy as np

    assert inputs.check_n_samples(np.int64(5)) == 5 and inputs.check_seed(inputs.MAX_SEED) == inputs.MAX_SEED
    assert inputs.check_texts(("a", "b")) == ["a", "b"]
    assert inputs.check_text("héllo 😍") == "héllo 😍"
    with pytest.raises(ValueError, match="at most 64"):
        inputs.check_n_samples(65, upper=64)


def test_an_explain_too_large_is_refused_before_it_allocates(monkeypatch):
    """n_samples=1000 at 128 tokens would hold 4.4 GiB of attention weights: refused at once, with
    how many samples fit; a smaller budget set in the environment is obeyed."""
    import time

    m = bam_viz.load("bam-wc")
    long_text = " ".join(["good"] * 200)                                # cut to 128 tokens
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"n_samples=1000 at 128 tokens would hold 4.4 GB .* at most 227 samples"):
        m.explain(long_text, n_samples=1000)
    assert time.perf_counter() - t0 < 5                                   # refused, not computed
    monkeypatch.setenv(inputs.BUDGET_ENV, "0.1")                       # 64 samples at 6 tokens: 0.6 MB
    with pytest.raises(ValueError, match="over the 0.1 MB budget"):
        m.explain("A fine film.", n_samples=64)
    monkeypatch.setenv(inputs.BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match="must be a number of megabytes"):
        m.explain("A fine film.", n_samples=2)
    monkeypatch.delenv(inputs.BUDGET_ENV)
    assert m.explain(long_text, n_samples=64).n_samples == 64            # the explorer's largest request
