"""The predictors that `evaluate` scores: one protocol, its adapters, and temperature scaling.

A predictor names its K classes (`classes`; the sentiment pair `bam_viz.core.task.CLASSES` for
VADER and the shipped zoo, `classes_of` for one that names none) and returns class probabilities in
their order, both as S attention samples per sentence (N, S, K) and as one mean-field pass (N, K).
The adapters wrap the VADER baseline, a bam_viz model, a memo of predictions already made, and
temperature scaling (Guo et al. 2017) of another predictor.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from bam_viz.core import metrics
from bam_viz.core.task import CLASSES


class Predictor(Protocol):
    name: str
    classes: tuple[str, ...]

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        """(N, S, K) probabilities in the order of `classes`, one row per attention sample."""
        ...

    def softmax_probs(self, texts: list[str]) -> np.ndarray:
        """(N, K) f(softmax): the deterministic pass."""
        ...


def classes_of(predictor: Any) -> tuple[str, ...]:
    """The classes of `predictor` (or of a model): its own, else the sentiment pair."""
    return tuple(getattr(predictor, "classes", CLASSES))


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor, without importing torch here
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


class VaderPredictor:
    """The rule-based VADER analyser (Hutto & Gilbert 2014) as a baseline: P(positive) = (compound + 1) / 2.

    VADER is deterministic, so S = 1 and the mean field equals the sample; its entropy is not a
    calibrated uncertainty, only a reference point.
    """

    name = "vader"
    classes = CLASSES

    def __init__(self) -> None:
        self._analyser = None

    def _scores(self, texts: list[str]) -> np.ndarray:
        if self._analyser is None:
            # Imported here so the library does not need vaderSentiment unless the baseline is run.
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

            self._analyser = SentimentIntensityAnalyzer()
        p = np.array([(self._analyser.polarity_scores(t)["compound"] + 1.0) / 2.0 for t in texts])
        return np.stack([1.0 - p, p], axis=-1)  # (N, 2) in the order of CLASSES

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        return self._scores(texts)[:, None, :]

    def softmax_probs(self, texts: list[str]) -> np.ndarray:
        return self._scores(texts)


class ModelPredictor:
    """Adapter over a bam_viz model: `predict_samples` (N, S, K) and `predict_softmax` (N, K), in the
    order of the model's classes.

    `hyper` (attention hyperparameters at inference, e.g. shape_k) is passed through to both
    calls and named in the predictor's name ("bam-wc@shape_k=1"), so its results never pass for
    the model's trained configuration.
    """

    def __init__(self, model: Any, **hyper: Any) -> None:
        self.model = model
        self.hyper = hyper
        self.classes = classes_of(model)
        self.name = str(model.name) + "".join(f"@{k}={v:g}" for k, v in sorted(hyper.items()))

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        return _to_numpy(self.model.predict_samples(texts, n_samples=n_samples, seed=seed, **self.hyper))

    def softmax_probs(self, texts: list[str]) -> np.ndarray:
        return _to_numpy(self.model.predict_softmax(texts, **self.hyper))


class MemoPredictor:
    """Remembers each sentence's predictions, so that evaluating several corpora in one run does not
    recompute the movie reference sentences every corpus shares. A sentence keeps the draws of the
    first batch it was predicted in (one wrapper serves one run, hence one seed)."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor
        self.name, self.classes = predictor.name, classes_of(predictor)
        self._samples: dict[tuple[str, int], np.ndarray] = {}
        self._means: dict[str, np.ndarray] = {}

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if (t, n_samples) not in self._samples]
        if todo:
            for t, row in zip(todo, _to_numpy(self.predictor.sample_probs(todo, n_samples, seed)), strict=True):
                self._samples[(t, n_samples)] = row
        return np.stack([self._samples[(t, n_samples)] for t in texts])

    def softmax_probs(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._means]
        if todo:
            for t, row in zip(todo, _to_numpy(self.predictor.softmax_probs(todo)), strict=True):
                self._means[t] = row
        return np.stack([self._means[t] for t in texts])


def temper(probs: np.ndarray, temperature: float) -> np.ndarray:
    """Temperature scaling (Guo et al. 2017, sec. 4.2) of probabilities along the last axis:
    softmax(log p / T). T > 1 softens, T < 1 sharpens; the argmax never changes."""
    logits = np.log(np.clip(np.asarray(probs, dtype=np.float64), 1e-300, None)) / temperature
    logits -= logits.max(axis=-1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=-1, keepdims=True)


class TemperedPredictor:
    """`predictor` with every attention sample's probabilities tempered by one temperature T, as
    temperature scaling does to a deterministic network's logits (the samples are then averaged)."""

    def __init__(self, predictor: Predictor, temperature: float) -> None:
        if not np.isfinite(temperature) or temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.predictor, self.temperature = predictor, float(temperature)
        self.name, self.classes = f"{predictor.name}@T={self.temperature:.3g}", classes_of(predictor)

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        return temper(_to_numpy(self.predictor.sample_probs(texts, n_samples, seed)), self.temperature)

    def softmax_probs(self, texts: list[str]) -> np.ndarray:
        return temper(_to_numpy(self.predictor.softmax_probs(texts)), self.temperature)


def fit_temperature(sample_probs: np.ndarray, labels: np.ndarray, lo: float = 0.05, hi: float = 20.0) -> float:
    """The T minimising the NLL of the tempered Monte Carlo predictive mean_s temper(p_s, T) on
    labelled (N, S, K) samples: golden-section search on log T in [lo, hi]. For one sample per
    sentence the NLL is convex in 1/T (a one-parameter logistic regression); for averaged samples
    it is not guaranteed to be, and a result at an end of the bracket says the optimum is beyond."""
    sample_probs = np.asarray(sample_probs, dtype=np.float64)

    def loss(log_t: float) -> float:
        return metrics.nll(temper(sample_probs, float(np.exp(log_t))).mean(axis=1), labels)

    a, b = np.log(lo), np.log(hi)
    ratio = (np.sqrt(5.0) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    for _ in range(60):                     # the bracket shrinks by 0.618 each step: ~1e-12 wide
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return float(np.exp((a + b) / 2))
