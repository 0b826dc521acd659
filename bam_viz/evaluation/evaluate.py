"""Score a predictor on labelled sentences: accuracy, calibration and uncertainty.

`evaluate` scores a sentiment predictor on the human-rated corpora; `evaluate_labelled` scores a
predictor of any K classes on sentences labelled with its class names (a user's own file). Both
give, for each predictive, the scores of `labelled_metrics`: accuracy, NLL, Brier, top-label ECE
and its reliability bins, per-class precision, recall and F1, their macro means, and the K x K
confusion matrix.

Two predictive distributions are scored side by side for a Bayesian-attention model:
  mc          E_z[f(z)]: the mean of the class probabilities over S attention samples;
  softmax     f(softmax): the deterministic pass, every stochastic attention layer at softmax(psi)
              (not f(E[w]), which needs the attention samples: bam_viz.inference.gaps).
Uncertainty is judged against the human raters: does predictive entropy rise where raters
disagree (Spearman with the raters' std), where the model errs (AUROC), on sentences humans
call ambiguous, and on corpora other than the movie reviews it is trained on (Fan et al. 2020,
"Bayesian Attention Modules", NeurIPS, evaluate the same way).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bam_viz.core import metrics
from bam_viz.core.task import CLASSES, POSITIVE
from bam_viz.data import AMBIGUOUS, CORPORA, CorpusError, CorpusLoad, Snippet, load_corpus
from bam_viz.evaluation.predictors import Predictor, _to_numpy, classes_of, fit_temperature

IN_DOMAIN = "movies"  # the corpus the models are trained on


def _batch_seed(seed: int, start: int) -> int:
    # Each batch gets its own stream, so sentences in different batches do not share noise.
    return int(hashlib.sha256(f"{seed}:{start}".encode()).hexdigest(), 16) % (2**31)


def _predict(
    predictor: Predictor, texts: list[str], n_samples: int, seed: int, batch_size: int, desc: str
) -> tuple[np.ndarray, np.ndarray]:
    """(N, S, K) sample probabilities and (N, K) mean-field probabilities, run in batches; K is the
    number of the predictor's classes."""
    K = len(classes_of(predictor))
    samples, means = [], []
    with tqdm(total=len(texts), desc=desc, unit="sent", file=sys.stderr, disable=None) as bar:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            s = _to_numpy(predictor.sample_probs(batch, n_samples, _batch_seed(seed, start)))
            m = _to_numpy(predictor.softmax_probs(batch))
            if s.ndim != 3 or s.shape[0] != len(batch) or s.shape[2] != K:
                raise ValueError(
                    f"{predictor.name}.sample_probs gave {s.shape}, expected ({len(batch)}, S, {K})"
                )
            if m.shape != (len(batch), K):
                raise ValueError(
                    f"{predictor.name}.softmax_probs gave {m.shape}, expected ({len(batch)}, {K})"
                )
            samples.append(s)
            means.append(m)
            bar.update(len(batch))
    if not texts:
        return np.zeros((0, max(n_samples, 1), K)), np.zeros((0, K))
    return np.concatenate(samples), np.concatenate(means)


def corpus_files(loads: list[CorpusLoad], lenient: bool) -> list[dict]:
    """Every file behind `loads` as an evaluation records it: name, sha256, size, whether read
    leniently and how many of its lines have a problem (0 unless lenient)."""
    return [
        {"corpus": load.name, "file": f.name, "sha256": f.sha256, "bytes": f.size, "lenient": lenient,
         "problems": load.problems_in(f.name)}
        for load in loads
        for f in load.files
    ]


def labelled_metrics(probs: np.ndarray, labels: np.ndarray, classes: Sequence[str]) -> dict[str, Any]:
    """The scores of (N, K) (or (N, S, K)) probabilities on (N,) labels (indices into `classes`):
    accuracy, nll, brier, ece (`metrics`), balanced_accuracy and macro_f1 (the means of the per-class
    recall and F1 over the classes where they are defined), per_class ({class: precision, recall,
    f1, support}, NaN where undefined), confusion (K x K counts, rows the label, columns the
    prediction) and reliability (the non-empty bins of the top-label confidence), as plain numbers
    and lists, ready for JSON."""
    K = len(classes)
    scores = metrics.per_class(probs, labels, K)
    bins = metrics.reliability_bins(probs, labels)

    def mean_of_defined(values: np.ndarray) -> float:
        defined = values[np.isfinite(values)]
        return float(defined.mean()) if defined.size else float("nan")

    return {
        "accuracy": metrics.accuracy(probs, labels),
        "nll": metrics.nll(probs, labels),
        "brier": metrics.brier(probs, labels),
        "ece": metrics.ece(probs, labels),
        "balanced_accuracy": mean_of_defined(scores["recall"]),
        "macro_f1": mean_of_defined(scores["f1"]),
        "per_class": {c: {"precision": float(scores["precision"][i]), "recall": float(scores["recall"][i]),
                          "f1": float(scores["f1"][i]), "support": int(scores["support"][i])}
                      for i, c in enumerate(classes)},
        "confusion": metrics.confusion_matrix(probs, labels, K).tolist(),
        "reliability": [{"low": float(bins["low"][b]), "high": float(bins["high"][b]), "count": int(bins["count"][b]),
                         "confidence": float(bins["confidence"][b]), "accuracy": float(bins["accuracy"][b])}
                        for b in range(len(bins["count"])) if bins["count"][b]],
    }


def _variant_metrics(
    probs: np.ndarray, clear: np.ndarray, labels: np.ndarray, human_mean: np.ndarray, rater_std: np.ndarray
) -> dict[str, Any]:
    p, y = probs[clear], labels[clear]
    entropy = metrics.predictive_entropy(probs)
    return {
        **labelled_metrics(p, y, CLASSES),
        "auroc_error_entropy": metrics.auroc(entropy[clear], p.argmax(axis=1) != y),
        "spearman_human_mean": metrics.spearman(probs[:, POSITIVE], human_mean),
        "spearman_entropy_rater_std": metrics.spearman(entropy, rater_std),
    }


def evaluate(
    predictor: Predictor,
    corpus: str = IN_DOMAIN,
    split: str = "test",
    n_samples: int = 32,
    seed: int = 0,
    data: str | Path | None = None,
    batch_size: int = 64,
    references: bool = True,
    lenient: bool = False,
) -> dict:
    """Metrics of `predictor` on one split of one corpus, for the mc and mean-field predictives.

    Classification and calibration metrics use the clear sentences (|mean| > 0.5); the Spearman
    correlations use every sentence of the split, ambiguous ones included, since that is where
    raters disagree most. For mc only:
      auroc_ambiguous_{entropy,mi}: ambiguous vs clear, positives every ambiguous movie sentence
        (all splits: they are never trained on), negatives the clear movie test sentences;
      auroc_ood_{entropy,mi} (corpus != movies): the clear sentences of this split (clear, so that
        domain and not ambiguity is measured) against the same clear movie test sentences;
      auroc_ambiguous_in_split_{entropy,mi}: ambiguous vs clear sentences of this split only.
    `references=False` skips the two reference sets (and the metrics that need them), so that a
    sweep on the dev split never predicts a test sentence.
    "per_sentence" holds what `compare` needs for a paired bootstrap; "corpus_files" the name and
    sha256 of every file read. A problem line in a corpus raises `CorpusProblems` unless `lenient`.
    """
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; expected one of {sorted(CORPORA)}")
    if classes_of(predictor) != CLASSES:
        raise ValueError(f"the rated corpora are labelled {', '.join(CLASSES)}; {predictor.name} predicts "
                         f"{', '.join(classes_of(predictor))}: evaluate it on sentences labelled with its classes "
                         "(python -m bam_viz evaluate --model NAME --input FILE)")
    # Each corpus read once, so the hashes recorded are those of the very bytes scored.
    loads = {corpus: load_corpus(corpus, data, strict=not lenient)}
    if references:
        loads.setdefault(IN_DOMAIN, load_corpus(IN_DOMAIN, data, strict=not lenient))
    snippets = loads[corpus].split(split, include_ambiguous=True)
    if all(s.label == AMBIGUOUS for s in snippets):
        # The metrics divide by the number of clear sentences (metrics.ece would raise ZeroDivisionError).
        raise CorpusError(loads[corpus].path / loads[corpus].files[0].name,
                          f"the {split} split has no clear sentence to score ({len(snippets)} ambiguous)"
                          if snippets else f"the {split} split has no sentence to score")
    ambiguous_pool, movies_clear_test = [], []
    if references:
        movies = loads[IN_DOMAIN]
        ambiguous_pool = [s for s in movies.split("all", include_ambiguous=True) if s.label == AMBIGUOUS]
        movies_clear_test = movies.split("test")

    # One pass over the union, so sentences the reference sets share with the split run once.
    order: dict[tuple[str, str], Snippet] = {}
    for s in [*snippets, *ambiguous_pool, *movies_clear_test]:
        order.setdefault((s.corpus, s.id), s)
    keys = list(order)
    sample_p, mf_p = _predict(
        predictor, [order[k].text for k in keys], n_samples, seed, batch_size, f"{predictor.name} {corpus}"
    )
    index = {k: i for i, k in enumerate(keys)}

    def rows(group: list[Snippet]) -> np.ndarray:
        return np.array([index[(s.corpus, s.id)] for s in group], dtype=np.int64)

    here = rows(snippets)
    samples, softmax = sample_p[here], mf_p[here]
    mc = samples.mean(axis=1)
    clear = np.array([s.label != AMBIGUOUS for s in snippets], dtype=bool)
    labels = np.array([1 if s.label == "positive" else 0 for s in snippets], dtype=np.int64)
    human_mean = np.array([s.mean for s in snippets])
    rater_std = np.array([s.std for s in snippets])

    mc_metrics = _variant_metrics(mc, clear, labels, human_mean, rater_std)
    entropy_all = metrics.predictive_entropy(sample_p)
    mi_all = metrics.mutual_information(sample_p)
    checks = [("ambiguous_in_split", here[~clear], here[clear])]
    if references:
        checks.append(("ambiguous", rows(ambiguous_pool), rows(movies_clear_test)))
        if corpus != IN_DOMAIN:
            checks.append(("ood", here[clear], rows(movies_clear_test)))
    for kind, positives, negatives in checks:
        both = np.concatenate([positives, negatives])
        is_pos = np.concatenate([np.ones(len(positives), bool), np.zeros(len(negatives), bool)])
        mc_metrics[f"auroc_{kind}_entropy"] = metrics.auroc(entropy_all[both], is_pos)
        mc_metrics[f"auroc_{kind}_mi"] = metrics.auroc(mi_all[both], is_pos)

    counts = {name: sum(s.label == name for s in snippets) for name in (*CLASSES, AMBIGUOUS)}
    return {
        "predictor": predictor.name,
        "corpus": corpus,
        "split": split,
        "n_samples": int(samples.shape[1]),
        "n_samples_requested": n_samples,
        "seed": seed,
        "n": len(snippets),
        "n_clear": int(clear.sum()),
        "n_ambiguous": int((~clear).sum()),
        "counts": counts,
        "n_ambiguous_reference": len(ambiguous_pool),
        "n_movies_test_clear_reference": len(movies_clear_test),
        "mc": mc_metrics,
        "softmax": _variant_metrics(softmax, clear, labels, human_mean, rater_std),
        "corpus_files": corpus_files(list(loads.values()), lenient),
        "per_sentence": {
            "ids": [s.id for s in snippets],
            "labels": [s.label for s in snippets],
            "human_mean": human_mean.tolist(),
            "rater_std": rater_std.tolist(),
            "mc_p_positive": mc[:, POSITIVE].tolist(),
            "softmax_p_positive": softmax[:, POSITIVE].tolist(),
            "mc_entropy": metrics.predictive_entropy(samples).tolist(),
            "mc_mi": metrics.mutual_information(samples).tolist(),
        },
    }


_COMPARABLE = {"accuracy": metrics.accuracy, "nll": metrics.nll, "brier": metrics.brier, "ece": metrics.ece}


def compare(
    results_a: dict, results_b: dict, metric: str, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """Paired bootstrap of metric(a) - metric(b) on the mc predictions of two `evaluate` outputs.

    The clear sentences are aligned by id; both results must cover the same sentences.
    Returns (difference, 2.5th, 97.5th percentile) as in `metrics.paired_bootstrap`.
    """
    if metric not in _COMPARABLE:
        raise ValueError(f"metric must be one of {sorted(_COMPARABLE)}, got {metric!r}")
    if (results_a["corpus"], results_a["split"]) != (results_b["corpus"], results_b["split"]):
        raise ValueError("results are on different corpora or splits")

    def clear_rows(results: dict) -> dict[str, tuple[int, float]]:
        per = results["per_sentence"]
        return {
            i: (CLASSES.index(label), p)
            for i, label, p in zip(per["ids"], per["labels"], per["mc_p_positive"], strict=True)
            if label != AMBIGUOUS
        }

    a, b = clear_rows(results_a), clear_rows(results_b)
    if a.keys() != b.keys():
        raise ValueError(f"results cover different sentences ({len(a.keys() ^ b.keys())} ids differ)")
    ids = sorted(a)
    labels = np.array([a[i][0] for i in ids])
    if any(a[i][0] != b[i][0] for i in ids):
        raise ValueError("results disagree on the labels of the same ids")
    pa = np.array([a[i][1] for i in ids])
    pb = np.array([b[i][1] for i in ids])
    return metrics.paired_bootstrap(
        _COMPARABLE[metric],
        np.stack([1 - pa, pa], axis=1),
        np.stack([1 - pb, pb], axis=1),
        labels,
        n_boot=n_boot,
        seed=seed,
    )


def evaluate_labelled(
    predictor: Predictor,
    texts: Sequence[str],
    labels: Sequence[str | None],
    *,
    source: str = "the file",
    n_samples: int = 32,
    seed: int = 0,
    batch_size: int = 64,
) -> dict:
    """Metrics of `predictor` on `texts` labelled with its class names, for the mc and softmax
    predictives: `labelled_metrics` of each, and the AUROC of the predictive entropy (and, for mc,
    of the mutual information) telling wrong predictions from right ones.

    A label None or "ambiguous" (what `score.read_labels` gives for a sentiment rating between the
    classes) leaves its sentence out, unpredicted; any other label that is not a class raises
    ValueError. `source` names the sentences in the results. The samples are drawn in batches with
    per-batch seeds, as `evaluate` draws them.
    """
    classes = classes_of(predictor)
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    unknown = list(dict.fromkeys(str(y) for y in labels if y is not None and y != AMBIGUOUS and y not in classes))
    if unknown:
        raise ValueError(f"labels not among the classes of {predictor.name} ({', '.join(classes)}): "
                         f"{', '.join(map(repr, unknown[:4]))}")
    keep = [i for i, y in enumerate(labels) if y in classes]
    if not keep:
        raise ValueError(f"no sentence of {source} has a label among the classes of {predictor.name}")
    samples, softmax = _predict(predictor, [texts[i] for i in keep], n_samples, seed, batch_size,
                                f"{predictor.name} {source}")
    y = np.array([classes.index(labels[i]) for i in keep], dtype=np.int64)
    mc = samples.mean(axis=1)
    entropy, mi = metrics.predictive_entropy(samples), metrics.mutual_information(samples)
    wrong = mc.argmax(axis=1) != y
    return {
        "predictor": predictor.name,
        "source": source,
        "classes": list(classes),
        "n": len(texts),
        "n_labelled": len(keep),
        "n_samples": int(samples.shape[1]),
        "n_samples_requested": n_samples,
        "seed": seed,
        "counts": {c: int((y == i).sum()) for i, c in enumerate(classes)},
        "mc": {**labelled_metrics(mc, y, classes), "auroc_error_entropy": metrics.auroc(entropy, wrong),
               "auroc_error_mi": metrics.auroc(mi, wrong)},
        "softmax": {**labelled_metrics(softmax, y, classes), "auroc_error_entropy": metrics.auroc(
            metrics.predictive_entropy(softmax), softmax.argmax(axis=1) != y)},
        "per_sentence": {
            "rows": [i + 1 for i in keep],
            "labels": [labels[i] for i in keep],
            "mc_probs": mc.tolist(),
            "softmax_probs": softmax.tolist(),
            "mc_entropy": entropy.tolist(),
            "mc_mi": mi.tolist(),
        },
    }


def evaluate_file(predictor: Predictor, path: str | Path, *, text_column: str | None = None,
                  label_column: str | None = None, n_samples: int = 32, seed: int = 0,
                  batch_size: int = 64) -> dict:
    """`evaluate_labelled` on a file of sentences (`bam_viz.evaluation.score.tables.read_table`: CSV,
    TSV, JSON Lines, Parquet): its text and label columns named, else found by their names; the
    labels read as the predictor's classes (`read_labels`). Every problem with the file, no label
    column included, is a `ScoreInputError` with a message for a person."""
    from bam_viz.evaluation.score.scorer import frame_inputs
    from bam_viz.evaluation.score.tables import ScoreInputError, _listed, find_columns, read_labels, read_table

    frame = read_table(path)
    text, label, _ = find_columns(frame, text_column, label_column)
    if label is None:
        raise ScoreInputError(f"{Path(path).name}: which column holds the labels? the columns are "
                              f"{_listed(frame.columns)}: name it (--label-column)")
    inputs = frame_inputs(frame, text, label)
    labels = read_labels(inputs["label"], classes_of(predictor), predictor.name)
    try:
        return evaluate_labelled(predictor, list(inputs["text"]), labels, source=Path(path).name,
                                 n_samples=n_samples, seed=seed, batch_size=batch_size)
    except ValueError as err:
        raise ScoreInputError(str(err)) from None


# The metrics both predictives have, in the order `summary` prints them (those a result has).
_SUMMARY_KEYS = (
    "accuracy",
    "nll",
    "brier",
    "ece",
    "balanced_accuracy",
    "macro_f1",
    "auroc_error_entropy",
    "auroc_error_mi",
    "spearman_human_mean",
    "spearman_entropy_rater_std",
)
CONFUSION_CLASSES = 10      # `summary` prints the confusion matrix up to this many classes


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    return f"{value:.3f}"


def summary(results: dict) -> str:
    """A compact plain-text table of one `evaluate` or `evaluate_labelled` output, for the terminal:
    the metrics of both predictives, then E[f(z)]'s per-class scores and (up to CONFUSION_CLASSES
    classes) its confusion matrix."""
    if "corpus" in results:
        head = (f"{results['predictor']} on {results['corpus']}/{results['split']}: {results['n_clear']} clear + "
                f"{results['n_ambiguous']} ambiguous sentences")
    else:
        head = (f"{results['predictor']} on {results['source']}: {results['n_labelled']} labelled of "
                f"{results['n']} sentences, {len(results['classes'])} classes")
    head += f", S={results['n_samples']}, seed={results['seed']}"
    mc, softmax = results["mc"], results["softmax"]
    keys = [*(k for k in _SUMMARY_KEYS if k in mc or k in softmax),
            *(k for k in mc if k.startswith(("auroc_ambig", "auroc_ood")))]
    width = max(len(k) for k in keys)
    lines = [head, f"{'metric':<{width}}  {'mc':>7}  {'softmax':>10}"]
    for k in keys:
        lines.append(f"{k:<{width}}  {_fmt(mc.get(k)):>7}  {_fmt(softmax.get(k)):>10}")
    per_class = mc.get("per_class")
    if per_class:
        width = max(5, *(len(c) for c in per_class))
        lines += ["", f"{'class':<{width}}  {'precision':>9}  {'recall':>7}  {'f1':>7}  {'sentences':>9}  (E[f(z)])"]
        lines += [f"{c:<{width}}  {_fmt(s['precision']):>9}  {_fmt(s['recall']):>7}  {_fmt(s['f1']):>7}  "
                  f"{s['support']:>9}" for c, s in per_class.items()]
        if len(per_class) <= CONFUSION_CLASSES:
            corner, names = "label | predicted", [c[:10] for c in per_class]
            first, cell = max(width, len(corner)), max(6, *(len(n) for n in names))
            lines += ["", f"{corner:<{first}}  " + "  ".join(f"{n:>{cell}}" for n in names)]
            lines += [f"{c:<{first}}  " + "  ".join(f"{v:>{cell}}" for v in row)
                      for c, row in zip(per_class, mc["confusion"], strict=True)]
    return "\n".join(lines)


def temperature_from_dev(predictor: Predictor, n_samples: int, seed: int, data: str | Path | None = None,
                         batch_size: int = 64, lenient: bool = False) -> tuple[float, int]:
    """Fit T on the clear sentences of the movies dev split; returns (T, sentences used).

    The samples are drawn in the same batches, with the same per-batch seeds, as `evaluate` draws them.
    """
    movies = load_corpus(IN_DOMAIN, data, strict=not lenient)
    dev = movies.split("dev")
    if not dev:
        raise CorpusError(movies.path / movies.files[0].name, "the dev split has no clear sentence to fit T on")
    samples, _ = _predict(predictor, [s.text for s in dev], n_samples, seed, batch_size,
                          f"{predictor.name} dev (temperature)")
    labels = np.array([CLASSES.index(s.label) for s in dev], dtype=np.int64)
    return fit_temperature(samples, labels), len(dev)
