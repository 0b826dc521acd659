"""The predictor adapters, the memo, and temperature scaling: `bam_viz.evaluation.predictors`."""

from __future__ import annotations

import numpy as np
import pytest
from test_evaluate import FakePredictor

from bam_viz.core import metrics
from bam_viz.evaluation import predictors as pr


class FakeModel:
    """Stands in for a bam_viz model: torch tensors out, hyperparameters recorded."""

    name = "fake-model"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def predict_samples(self, texts, n_samples, seed, **hyper):
        import torch

        self.calls.append(("samples", {"n_samples": n_samples, "seed": seed, **hyper}))
        return torch.full((len(texts), n_samples, 2), 0.5, dtype=torch.float32)

    def predict_softmax(self, texts, **hyper):
        import torch

        self.calls.append(("mean_field", hyper))
        return torch.tensor([[0.25, 0.75]] * len(texts))


def test_model_predictor_adapter() -> None:
    model = FakeModel()
    predictor = pr.ModelPredictor(model, temperature=0.5)
    assert predictor.name == "fake-model@temperature=0.5"     # never mistaken for the trained model
    assert pr.ModelPredictor(model).name == "fake-model"
    samples = predictor.sample_probs(["a", "b"], n_samples=3, seed=7)
    assert isinstance(samples, np.ndarray) and samples.shape == (2, 3, 2) and samples.dtype == np.float64
    np.testing.assert_allclose(predictor.softmax_probs(["a"]), [[0.25, 0.75]])
    assert model.calls == [
        ("samples", {"n_samples": 3, "seed": 7, "temperature": 0.5}),
        ("mean_field", {"temperature": 0.5}),
    ]


def test_temper_keeps_the_argmax_and_t1_is_the_identity() -> None:
    p = np.array([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]])
    np.testing.assert_allclose(pr.temper(p, 1.0), p)
    soft, sharp = pr.temper(p, 3.0), pr.temper(p, 0.3)
    assert (soft.argmax(1) == p.argmax(1)).all() and (sharp.argmax(1)[:2] == p.argmax(1)[:2]).all()
    assert soft[0, 0] < 0.9 < sharp[0, 0]
    np.testing.assert_allclose(pr.temper(p, 1e6), 0.5, atol=1e-5)
    np.testing.assert_allclose(soft.sum(1), 1.0)


def test_fit_temperature_recovers_a_known_overconfidence_and_agrees_with_scipy() -> None:
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(0)
    z = rng.normal(scale=2.0, size=20_000)
    labels = (rng.random(z.size) < 1 / (1 + np.exp(-z))).astype(np.int64)    # calibrated at logit z
    p = 1 / (1 + np.exp(-2.5 * z))                                            # 2.5x overconfident
    samples = np.stack([1 - p, p], axis=-1)[:, None, :]
    t = pr.fit_temperature(samples, labels)
    assert t == pytest.approx(2.5, rel=0.05)
    ref = minimize_scalar(lambda lt: metrics.nll(pr.temper(samples, np.exp(lt)).mean(1), labels),
                          bounds=(np.log(0.05), np.log(20)), method="bounded", options={"xatol": 1e-8})
    assert t == pytest.approx(float(np.exp(ref.x)), rel=1e-3)


def test_tempered_predictor_tempers_every_sample_and_refuses_a_nonpositive_temperature() -> None:
    base = FakePredictor()
    tempered = pr.TemperedPredictor(base, 2.0)
    assert tempered.name == "fake@T=2"
    texts = ["Lovely.", "Dull."]
    np.testing.assert_allclose(tempered.sample_probs(texts, 3, seed=1), pr.temper(base.sample_probs(texts, 3, 1), 2.0))
    np.testing.assert_allclose(tempered.softmax_probs(texts), pr.temper(base.softmax_probs(texts), 2.0))
    with pytest.raises(ValueError, match="positive"):
        pr.TemperedPredictor(FakePredictor(), 0.0)


def test_memo_predicts_each_sentence_once() -> None:
    calls: list[str] = []

    class Counting(FakePredictor):
        def sample_probs(self, texts, n_samples, seed):
            calls.extend(texts)
            return super().sample_probs(texts, n_samples, seed)

    memo = pr.MemoPredictor(Counting())
    first = memo.sample_probs(["a", "b", "a"], 4, seed=0)
    again = memo.sample_probs(["b", "c"], 4, seed=9)    # "b" keeps the draws of its first batch
    assert calls == ["a", "b", "c"] and memo.name == "fake"
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(memo.softmax_probs(["c", "a"]), FakePredictor().softmax_probs(["c", "a"]))


def test_every_adapter_names_the_classes_of_what_it_wraps() -> None:
    from test_evaluate import FakeKPredictor

    from bam_viz.core.task import CLASSES

    topics = FakeKPredictor(("a", "b", "c"))
    for predictor in (pr.MemoPredictor(topics), pr.TemperedPredictor(topics, 2.0),
                      pr.MemoPredictor(pr.TemperedPredictor(topics, 0.5))):
        assert predictor.classes == ("a", "b", "c")
    model = FakeModel()
    assert pr.ModelPredictor(model).classes == CLASSES                  # a model that names none: sentiment
    model.classes = ("x", "y", "z", "w")
    assert pr.ModelPredictor(model).classes == ("x", "y", "z", "w")
    assert pr.VaderPredictor().classes == CLASSES == pr.classes_of(FakePredictor())


def test_fit_temperature_recovers_an_overconfidence_over_k_classes() -> None:
    from scipy import special

    rng = np.random.default_rng(3)
    logits = rng.normal(scale=1.5, size=(20_000, 5))
    labels = np.array([rng.choice(5, p=p) for p in special.softmax(logits, axis=1)])   # calibrated at T = 1
    samples = special.softmax(3.0 * logits, axis=1)[:, None, :]                     # 3x overconfident
    assert pr.fit_temperature(samples, labels) == pytest.approx(3.0, rel=0.05)
