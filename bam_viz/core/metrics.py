"""Classification, calibration and uncertainty metrics over predicted probabilities (numpy + scipy).

Shapes: `probs` is (N, C); where a function also takes sample probabilities (N, S, C) it first
averages over S, i.e. scores the Monte Carlo predictive E_z[p(y|x,z)]. `labels` are ints (N,),
class indices in the order of the probabilities' last axis. Every metric holds for any number of
classes K: calibration is of the top label (the predicted class's probability), the entropies are in
nats and bounded by ln K (`bam_viz.core.task.entropy_bound`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

_LOG_FLOOR = 1e-12
ECE_BINS = 15


def _predictive(probs: np.ndarray) -> np.ndarray:
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim == 3:
        return probs.mean(axis=1)
    if probs.ndim != 2:
        raise ValueError(f"expected probabilities of shape (N, C) or (N, S, C), got {probs.shape}")
    return probs


def _labels(labels: np.ndarray, n: int) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"expected {n} labels, got shape {labels.shape}")
    return labels.astype(np.int64)


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Share of argmax predictions equal to the label."""
    p = _predictive(probs)
    return float(np.mean(p.argmax(axis=1) == _labels(labels, len(p))))


def nll(probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood -1/N sum_i log p_i(y_i) (nats).

    The probability is floored at 1e-12 inside the log only, so one confidently wrong answer costs
    at most log(1e12) ~ 27.6 nats instead of infinity.
    """
    p = _predictive(probs)
    y = _labels(labels, len(p))
    return float(-np.mean(np.log(np.maximum(p[np.arange(len(p)), y], _LOG_FLOOR))))


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Brier score, Brier (1950): 1/N sum_i sum_c (p_ic - 1[y_i = c])^2 (0 best, 2 worst)."""
    p = _predictive(probs)
    y = _labels(labels, len(p))
    onehot = np.zeros_like(p)
    onehot[np.arange(len(p)), y] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = ECE_BINS) -> float:
    """Expected calibration error, Guo et al. (2017) "On Calibration of Modern Neural Networks", eq. 3.

    ECE = sum_b |B_b|/N * |acc(B_b) - conf(B_b)| over `n_bins` equal-width bins of the top-label
    confidence max_c p_ic (the predicted class's probability, for any number of classes K); bin b
    holds confidences in (b/n_bins, (b+1)/n_bins] (the first also holds 0): `reliability_bins`.
    """
    bins = reliability_bins(probs, labels, n_bins)
    if not bins["count"].sum():
        raise ValueError("the ECE needs at least one sentence")
    total = 0.0
    for count, acc, conf in zip(bins["count"], bins["accuracy"], bins["confidence"], strict=True):
        if count:
            total += count * abs(acc - conf)
    return float(total / bins["count"].sum())


def confidence_bins(confidence: np.ndarray, n_bins: int = ECE_BINS) -> np.ndarray:
    """(N,) the ECE bin of each confidence: bin b holds (b/n_bins, (b+1)/n_bins], the first also 0.
    Searched against the edges themselves, which avoids the float error of floor(conf * n_bins)."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, n_bins - 1)


def reliability_bins(probs: np.ndarray, labels: np.ndarray, n_bins: int = ECE_BINS) -> dict[str, np.ndarray]:
    """The reliability diagram (Guo et al. 2017, fig. 1) of the top-label confidence max_c p_ic, over
    the bins of `confidence_bins`, each entry (n_bins,): `low` and `high` (the bin's edges), `count`,
    `confidence` (the mean confidence in it) and `accuracy` (the share whose argmax is the label),
    NaN in an empty bin."""
    p = _predictive(probs)
    y = _labels(labels, len(p))
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(np.float64)
    which = confidence_bins(conf, n_bins)
    count = np.zeros(n_bins, dtype=np.int64)
    mean_conf, accuracy = np.full(n_bins, np.nan), np.full(n_bins, np.nan)
    for b in range(n_bins):
        mask = which == b
        if mask.any():
            count[b] = mask.sum()
            mean_conf[b], accuracy[b] = conf[mask].mean(), correct[mask].mean()
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return {"low": edges[:-1], "high": edges[1:], "count": count, "confidence": mean_conf, "accuracy": accuracy}


def predicted_class(probs_or_predicted: np.ndarray, n_classes: int) -> np.ndarray:
    """(N,) class indices: (N,) indices as given, else the argmax of the predictive mean of (N, K) or
    (N, S, K) probabilities (ties: the first class, as `bam_viz.core.task.resolve_target`)."""
    x = np.asarray(probs_or_predicted)
    if x.ndim == 1:
        predicted = x.astype(np.int64)
        if predicted.size and (predicted.min() < 0 or predicted.max() >= n_classes or (predicted != x).any()):
            raise ValueError(f"predicted classes must be whole indices in [0, {n_classes - 1}]")
        return predicted
    p = _predictive(x)
    if p.shape[1] != n_classes:
        raise ValueError(f"probabilities of {p.shape[1]} classes, expected {n_classes}")
    return p.argmax(axis=1)


def confusion_matrix(probs_or_predicted: np.ndarray, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """(K, K) int counts of sentences by true class (rows) and predicted class (columns); the
    prediction is `predicted_class` of `probs_or_predicted`, the labels are class indices (N,)."""
    predicted = predicted_class(probs_or_predicted, n_classes)
    y = _labels(labels, len(predicted))
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(f"labels must be class indices in [0, {n_classes - 1}]")
    return np.bincount(y * n_classes + predicted, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def per_class(probs_or_predicted: np.ndarray, labels: np.ndarray, n_classes: int) -> dict[str, np.ndarray]:
    """Per class, each (K,): `precision` TP / predicted, `recall` TP / support, `f1` 2 TP / (2 TP +
    FP + FN) (their harmonic mean) and `support` (the sentences labelled so), from `confusion_matrix`.

    A ratio with nothing to divide by is NaN, not 0: the precision of a class never predicted, the
    recall of a class no sentence has, the F1 of a class neither predicted nor present.
    """
    matrix = confusion_matrix(probs_or_predicted, labels, n_classes)
    tp = np.diag(matrix).astype(np.float64)
    support, predicted = matrix.sum(axis=1), matrix.sum(axis=0)

    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        return np.divide(num, den, out=np.full(n_classes, np.nan), where=den > 0)

    return {"precision": ratio(tp, predicted), "recall": ratio(tp, support),
            "f1": ratio(2 * tp, support + predicted), "support": support}


def per_class_recall(probs_or_predicted: np.ndarray, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """(K,) the share of each class's sentences predicted as that class, NaN for a class no sentence
    has (`per_class`); their mean over the classes present is the balanced accuracy."""
    return per_class(probs_or_predicted, labels, n_classes)["recall"]


def auroc(scores: np.ndarray, positives: np.ndarray) -> float:
    """Area under the ROC curve: P(score of a random positive > that of a random negative), ties 1/2.

    Computed as the Mann-Whitney U statistic over average ranks, U / (n_pos n_neg)
    (Hanley & McNeil 1982), which equals sklearn's roc_auc_score. NaN when either class is empty.
    """
    scores = np.asarray(scores, dtype=np.float64)
    positives = np.asarray(positives, dtype=bool)
    if scores.shape != positives.shape or scores.ndim != 1:
        raise ValueError(f"scores {scores.shape} and positives {positives.shape} must be equal 1-D shapes")
    n_pos = int(positives.sum())
    n_neg = len(positives) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = stats.rankdata(scores)  # ties get their average rank, which counts each tie as 1/2
    u = ranks[positives].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (scipy.stats.spearmanr); NaN when either input is constant."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    # scipy warns on constant input, and the correlation is undefined there anyway.
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def entropy(probs: ArrayLike) -> np.ndarray | float:
    """Shannon entropy -sum_c p_c log p_c (nats) along the last axis: a float for one distribution (C,).

    0 log 0 = 0: the limit, and what makes a one-hot distribution exactly certain. Any array-like
    works, a CPU torch tensor included.
    """
    p = np.asarray(probs, dtype=np.float64)
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


def predictive_entropy(probs: np.ndarray) -> np.ndarray:
    """H[E_z p(y|x,z)] per sentence (N,): total uncertainty of the (mean) predictive distribution."""
    return entropy(_predictive(probs))


def expected_entropy(sample_probs: np.ndarray) -> np.ndarray:
    """E_z H[p(y|x,z)] per sentence (N,) from (N, S, C) samples: the aleatoric part (Depeweg et al. 2018)."""
    sample_probs = np.asarray(sample_probs, dtype=np.float64)
    if sample_probs.ndim != 3:
        raise ValueError(f"expected sample probabilities (N, S, C), got {sample_probs.shape}")
    return entropy(sample_probs).mean(axis=1)


MI_ROUNDING = 1e-12


def mutual_information(sample_probs: np.ndarray) -> np.ndarray:
    """I[y; z | x] = H[E_z p] - E_z H[p] per sentence (N,), the epistemic part.

    Depeweg et al. (2018) "Decomposition of Uncertainty in Bayesian Deep Learning", eq. 7 (BALD,
    Houlsby et al. 2011). It is >= 0 by Jensen. Values under 1e-12 nats are rounding error and
    become 0: identical samples (a deterministic model) must not rank sentences by float noise.
    """
    mi = predictive_entropy(sample_probs) - expected_entropy(sample_probs)
    return np.where(mi < MI_ROUNDING, 0.0, mi)


def mutual_information_jackknife(sample_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Jackknife bias-corrected `mutual_information` and its jackknife standard error, per sentence
    (N,) each, from (N, S, C) samples.

    The plug-in MI, the entropy of the mean of S samples less their mean entropy, is biased low:
    the entropy of a mean of S draws is below the entropy of the true mean by a term of order 1/S.
    The jackknife bias correction (Quenouille 1956; Efron & Tibshirani 1993, ch. 10) removes that
    term, leaving O(1/S^2): I_jack = S I - (S-1) I_(.), where I_(i) is the plug-in without sample i
    and I_(.) their mean. Its SE is the jackknife SE (Efron & Stein 1981; Efron & Tibshirani 1993,
    ch. 11), SE = sqrt((S-1)/S sum_i (I_(i) - I_(.))^2): I_jack is the mean of Tukey's S
    pseudo-values S I - (S-1) I_(i), and SE their sample sd / sqrt(S), so the two belong together.

    I_jack is not clipped to [0, log C]: it can be slightly negative where the true MI is near 0,
    and above log C with few samples that disagree; clipping would bias it again.

    The plug-in and each replicate are rounded like `mutual_information`, so identical samples give
    exactly (0, 0). Where S < 3, the plug-in and NaN: a replicate of one sample has MI 0 whatever
    the samples, so at S = 2 the correction would double the plug-in and the SE would be 0 for two
    samples that disagree completely.
    """
    plug_in, replicates = _mi_replicates(sample_probs)
    S = replicates.shape[1] if replicates is not None else 0
    if replicates is None:
        return plug_in, np.full(plug_in.shape[0], np.nan)
    replicate_mean = replicates.mean(1)
    corrected = S * plug_in - (S - 1) * replicate_mean
    se = np.sqrt((S - 1) / S * np.sum((replicates - replicate_mean[:, None]) ** 2, axis=1))
    return corrected, se


def _mi_replicates(sample_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The plug-in MI (N,) and its S leave-one-out replicates (N, S), each rounded like
    `mutual_information`; None for the replicates where S < 3."""
    p = np.asarray(sample_probs, dtype=np.float64)
    if p.ndim != 3:
        raise ValueError(f"expected sample probabilities (N, S, C), got {p.shape}")
    S = p.shape[1]
    plug_in = mutual_information(p)
    if S < 3:
        return plug_in, None
    h = entropy(p)                                                  # (N, S)
    # Each replicate from the full sums less one sample: O(N S C), not S passes over the samples.
    mean_without = (p.sum(1, keepdims=True) - p) / (S - 1)           # (N, S, C)
    expected_without = (h.sum(1, keepdims=True) - h) / (S - 1)       # (N, S)
    replicates = entropy(mean_without) - expected_without            # (N, S)
    return plug_in, np.where(replicates < MI_ROUNDING, 0.0, replicates)


INTERVAL_LEVEL = 0.95


@functools.lru_cache(maxsize=256)        # scipy's t.ppf takes ~0.2 ms; a payload asks per frame
def interval_multiplier(n_samples: int) -> float:
    """How many standard errors a 95% (`INTERVAL_LEVEL`) interval spans on each side of an estimate
    from S Monte Carlo draws whose SE is a sample sd / sqrt(S): Student's t quantile with S - 1
    degrees of freedom (the SE is itself estimated from the S draws; Student 1908). 12.7 at S = 2,
    2.36 at S = 8, 2.04 at S = 32, 1.96 as S grows; NaN where S < 2 (no spread to estimate). Every
    "distinguishable from zero" and every interval the pages show takes its multiplier from here."""
    if n_samples < 2:
        return float("nan")
    return float(stats.t.ppf(0.5 + INTERVAL_LEVEL / 2, n_samples - 1))


def mutual_information_interval(sample_probs: np.ndarray, z: float | None = None) -> np.ndarray:
    """An interval (N, 2) for I[y; z | x] around the bias-corrected `mutual_information_jackknife`
    estimate I, made on the log scale: I exp(-/+ z s), s the jackknife SE of log I (the log
    replicates' spread, Efron & Tibshirani 1993, ch. 11; a log interval for a positive quantity).
    z is `interval_multiplier(S)` unless given: the jackknife SE is the sd of S pseudo-values over
    sqrt(S), so its interval takes t with S - 1 df (Efron & Tibshirani 1993, ch. 11); 2 would cover
    only 85-93% at S = 8.

    Why the log scale: an MI is a variance-like quantity whose jackknife SE rises and falls with the
    estimate itself (samples that happen to agree give both a low MI and a low SE), so I +/- z SE
    sits wholly below the truth too often; on the log scale the SE is nearly independent of the
    level. docs/estimates.md ("The mutual information") has the coverage measured by simulation.

    Where the log scale does not apply (I <= 0, or a replicate of exactly 0 beside nonzero ones) the
    interval is I +/- z SE; identical samples give (0, 0); S < 3 gives NaNs.
    """
    plug_in, replicates = _mi_replicates(sample_probs)
    corrected, se = mutual_information_jackknife(sample_probs)
    if replicates is None:
        return np.full((plug_in.shape[0], 2), np.nan)
    S = replicates.shape[1]
    z = interval_multiplier(S) if z is None else z
    logged = (replicates > 0).all(1) & (corrected > 0)
    log_r = np.log(np.where(logged[:, None], replicates, 1.0))
    se_log = np.sqrt((S - 1) / S * np.sum((log_r - log_r.mean(1, keepdims=True)) ** 2, axis=1))
    lo = np.where(logged, corrected * np.exp(-z * se_log), corrected - z * se)
    hi = np.where(logged, corrected * np.exp(z * se_log), corrected + z * se)
    return np.stack([lo, hi], axis=1)


def mutual_information_jackknife_se(sample_probs: np.ndarray) -> np.ndarray:
    """Jackknife standard error of `mutual_information` per sentence (N,), from (N, S, C) samples:
    the SE half of `mutual_information_jackknife` (see there); NaN where S < 3, 0 for identical samples.

    The plug-in MI is a nonlinear function of the S samples (the entropy of their mean), so its
    error is not a sample sd over sqrt(S); applied to a plain mean the jackknife gives sd/sqrt(S)
    exactly.
    """
    return mutual_information_jackknife(sample_probs)[1]


def mean_se(values: np.ndarray) -> float:
    """The Monte Carlo standard error of the mean of S draws `values` (S,): their sample sd (ddof 1)
    / sqrt(S). Needs S >= 2."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.std(ddof=1) / np.sqrt(values.shape[0]))


def paired_gap_se(p_samples: np.ndarray, reference: float) -> float:
    """SE of E[f(z)] - f(softmax) for one class: `p_samples` (S,) f(z_s), `reference` f(softmax), one
    deterministic pass. The gap is the mean of the S paired differences f(z_s) - f(softmax), so its
    SE is theirs (`mean_se`; `bam_viz.inference.gaps`)."""
    return mean_se(np.asarray(p_samples, dtype=np.float64) - reference)


def _gap_replicates(p_samples: np.ndarray, loo_probs: np.ndarray) -> np.ndarray:
    """(S,) E[f(z)] - f(E[w]) without each sample s, g_(-s) = (S mean(p) - p_s) / (S - 1) - loo_s."""
    p = np.asarray(p_samples, dtype=np.float64)
    loo = np.asarray(loo_probs, dtype=np.float64)
    S = p.shape[0]
    if S < 2 or loo.shape != p.shape:
        raise ValueError(f"need S >= 2 samples and as many leave-one-out values, got {p.shape} and {loo.shape}")
    return (p.sum() - p) / (S - 1) - loo


def jackknife_gap_se(p_samples: np.ndarray, loo_probs: np.ndarray) -> float:
    """SE of E[f(z)] - f(E[w]) for one class by the leave-one-out jackknife (Efron & Tibshirani
    1993, ch. 11): `p_samples` (S,) f(z_s), `loo_probs` (S,) f at the mean of the weights without
    sample s, E[w]_(-s) = (S E[w] - w_s) / (S - 1) (`bam_viz.inference.gaps.leave_one_out_probs`).
    With g_(-s) = (S mean(p) - p_s) / (S - 1) - loo_s the gap without sample s,
    SE = sqrt((S - 1) / S sum_s (g_(-s) - mean g)^2). Needs S >= 2. The live page's script computes
    the same number from the same S + 1 passes.

    f(E[w]) is a nonlinear function of the S samples, so the gap's spread is not a sample sd over
    sqrt(S); where f(E[w]) is linear in w, c + b . w, the gap is the mean of f(z_s) - b . w_s less a
    constant and the jackknife gives their sd / sqrt(S) exactly."""
    g = _gap_replicates(p_samples, loo_probs)
    S = g.shape[0]
    return float(np.sqrt((S - 1) / S * np.sum((g - g.mean()) ** 2)))


def jackknife_corrected_gap(p_samples: np.ndarray, mean_prob: float, loo_probs: np.ndarray) -> float:
    """E[f(z)] - f(E[w]) for one class with its 1/S bias removed by the jackknife (Quenouille 1956):
    S g - (S - 1) mean_s g_(-s), g = mean(p) - `mean_prob` the S-sample gap and g_(-s) the gap without
    sample s (`jackknife_gap_se`). E[w] from S samples scatters around E[z], and f's curvature moves
    f(E[w]) on average by about a 1/S share of the gap itself, so g averages about (1 - 1/S) times
    Deng's gap E[f(z)] - f(E[z]); the corrected gap averages Deng's up to O(1/S^2). Needs S >= 2.
    docs/estimates.md ("What the interval covers") measures both on the shipped models."""
    g = _gap_replicates(p_samples, loo_probs)
    S = g.shape[0]
    gap = float(np.mean(np.asarray(p_samples, dtype=np.float64))) - float(mean_prob)
    return float(S * gap - (S - 1) * g.mean())


def paired_bootstrap(
    metric_fn: Callable[[np.ndarray, np.ndarray], float],
    a_inputs: np.ndarray,
    b_inputs: np.ndarray,
    labels: np.ndarray,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """metric(a) - metric(b) and its 95% percentile bootstrap interval (Efron & Tibshirani 1993, ch. 13).

    Paired (Koehn 2004, "Statistical Significance Tests for Machine Translation Evaluation"): each
    replicate resamples test sentences with replacement and scores both models on the same
    indices, so sentence difficulty cancels out of the difference.
    """
    a_inputs = np.asarray(a_inputs)
    b_inputs = np.asarray(b_inputs)
    labels = np.asarray(labels)
    n = len(labels)
    if len(a_inputs) != n or len(b_inputs) != n:
        raise ValueError(f"a ({len(a_inputs)}), b ({len(b_inputs)}) and labels ({n}) must align")
    diff = float(metric_fn(a_inputs, labels) - metric_fn(b_inputs, labels))
    rng = np.random.default_rng(seed)
    diffs = np.empty(n_boot)
    for i in range(n_boot):
        idx = rng.integers(0, n, size=n)
        diffs[i] = metric_fn(a_inputs[idx], labels[idx]) - metric_fn(b_inputs[idx], labels[idx])
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return diff, float(lo), float(hi)
