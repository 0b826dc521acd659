"""Score a sentiment predictor on the human-rated corpora: accuracy, calibration and uncertainty.

Two predictive distributions are scored side by side for a Bayesian-attention model:
  mc          E_z[f(z)]: the mean of the class probabilities over S attention samples;
  mean_field  f(E[z]):   one pass with every stochastic attention layer at its mean.
Uncertainty is judged against the human raters: does predictive entropy rise where raters
disagree (Spearman with the raters' std), where the model errs (AUROC), on sentences humans
call ambiguous, and on corpora other than the movie reviews it is trained on (Fan et al. 2020,
"Bayesian Attention Modules", NeurIPS, evaluate the same way).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from bam_viz import metrics
from bam_viz.data import AMBIGUOUS, CORPORA, SPLITS, Snippet, load_split

POSITIVE = 1  # column of P(positive) in every (.., 2) array: [negative, positive]
IN_DOMAIN = "movies"


class Predictor(Protocol):
    name: str

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        """(N, S, 2) probabilities [negative, positive], one row per attention sample."""
        ...

    def mean_field_probs(self, texts: list[str]) -> np.ndarray:
        """(N, 2) f(E[z])."""
        ...


class VaderPredictor:
    """The rule-based VADER analyser (Hutto & Gilbert 2014) as a baseline: P(positive) = (compound + 1) / 2.

    VADER is deterministic, so S = 1 and the mean field equals the sample; its entropy is not a
    calibrated uncertainty, only a reference point.
    """

    name = "vader"

    def __init__(self) -> None:
        self._analyser = None

    def _scores(self, texts: list[str]) -> np.ndarray:
        if self._analyser is None:
            # Imported here so the library does not need vaderSentiment unless the baseline is run.
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

            self._analyser = SentimentIntensityAnalyzer()
        p = np.array([(self._analyser.polarity_scores(t)["compound"] + 1.0) / 2.0 for t in texts])
        return np.stack([1.0 - p, p], axis=-1)

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        return self._scores(texts)[:, None, :]

    def mean_field_probs(self, texts: list[str]) -> np.ndarray:
        return self._scores(texts)


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor, without importing torch here
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


class ModelPredictor:
    """Adapter over a bam_viz model: `predict_samples` (N, S, 2) and `predict_mean_field` (N, 2).

    `hyper` (attention hyperparameters at inference, e.g. shape_k) is passed through to both
    calls and named in the predictor's name ("bam-wc@shape_k=1"), so its results never pass for
    the model's trained configuration.
    """

    def __init__(self, model: Any, **hyper: Any) -> None:
        self.model = model
        self.hyper = hyper
        self.name = str(model.name) + "".join(f"@{k}={v:g}" for k, v in sorted(hyper.items()))

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        return _to_numpy(self.model.predict_samples(texts, n_samples=n_samples, seed=seed, **self.hyper))

    def mean_field_probs(self, texts: list[str]) -> np.ndarray:
        return _to_numpy(self.model.predict_mean_field(texts, **self.hyper))


class MemoPredictor:
    """Remembers each sentence's predictions, so that evaluating several corpora in one run does not
    recompute the movie reference sentences every corpus shares. A sentence keeps the draws of the
    first batch it was predicted in (one wrapper serves one run, hence one seed)."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor
        self.name = predictor.name
        self._samples: dict[tuple[str, int], np.ndarray] = {}
        self._means: dict[str, np.ndarray] = {}

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if (t, n_samples) not in self._samples]
        if todo:
            for t, row in zip(todo, _to_numpy(self.predictor.sample_probs(todo, n_samples, seed)), strict=True):
                self._samples[(t, n_samples)] = row
        return np.stack([self._samples[(t, n_samples)] for t in texts])

    def mean_field_probs(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._means]
        if todo:
            for t, row in zip(todo, _to_numpy(self.predictor.mean_field_probs(todo)), strict=True):
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
        self.name = f"{predictor.name}@T={self.temperature:.3g}"

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        return temper(_to_numpy(self.predictor.sample_probs(texts, n_samples, seed)), self.temperature)

    def mean_field_probs(self, texts: list[str]) -> np.ndarray:
        return temper(_to_numpy(self.predictor.mean_field_probs(texts)), self.temperature)


def fit_temperature(sample_probs: np.ndarray, labels: np.ndarray, lo: float = 0.05, hi: float = 20.0) -> float:
    """The T minimising the NLL of the tempered Monte Carlo predictive mean_s temper(p_s, T) on
    labelled (N, S, 2) samples: golden-section search on log T in [lo, hi]. For one sample per
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


def temperature_from_dev(predictor: Predictor, n_samples: int, seed: int, data=None,
                         batch_size: int = 64) -> tuple[float, int]:
    """Fit T on the clear sentences of the movies dev split; returns (T, sentences used)."""
    dev = load_split(IN_DOMAIN, "dev", data)
    samples, _ = _predict(predictor, [s.text for s in dev], n_samples, seed, batch_size,
                          f"{predictor.name} dev (temperature)")
    labels = np.array([1 if s.label == "positive" else 0 for s in dev], dtype=np.int64)
    return fit_temperature(samples, labels), len(dev)


def _batch_seed(seed: int, start: int) -> int:
    # Each batch gets its own stream, so sentences in different batches do not share noise.
    return int(hashlib.sha256(f"{seed}:{start}".encode()).hexdigest(), 16) % (2**31)


def _predict(
    predictor: Predictor, texts: list[str], n_samples: int, seed: int, batch_size: int, desc: str
) -> tuple[np.ndarray, np.ndarray]:
    """(N, S, 2) sample probabilities and (N, 2) mean-field probabilities, run in batches."""
    samples, means = [], []
    with tqdm(total=len(texts), desc=desc, unit="sent", file=sys.stderr, disable=None) as bar:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            s = _to_numpy(predictor.sample_probs(batch, n_samples, _batch_seed(seed, start)))
            m = _to_numpy(predictor.mean_field_probs(batch))
            if s.ndim != 3 or s.shape[0] != len(batch) or s.shape[2] != 2:
                raise ValueError(
                    f"{predictor.name}.sample_probs gave {s.shape}, expected ({len(batch)}, S, 2)"
                )
            if m.shape != (len(batch), 2):
                raise ValueError(
                    f"{predictor.name}.mean_field_probs gave {m.shape}, expected ({len(batch)}, 2)"
                )
            samples.append(s)
            means.append(m)
            bar.update(len(batch))
    if not texts:
        return np.zeros((0, max(n_samples, 1), 2)), np.zeros((0, 2))
    return np.concatenate(samples), np.concatenate(means)


def _variant_metrics(
    probs: np.ndarray, clear: np.ndarray, labels: np.ndarray, human_mean: np.ndarray, rater_std: np.ndarray
) -> dict[str, float]:
    p, y = probs[clear], labels[clear]
    entropy = metrics.predictive_entropy(probs)
    return {
        "accuracy": metrics.accuracy(p, y),
        "nll": metrics.nll(p, y),
        "brier": metrics.brier(p, y),
        "ece": metrics.ece(p, y),
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
    "per_sentence" holds what `compare` needs for a paired bootstrap.
    """
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; expected one of {sorted(CORPORA)}")
    snippets = load_split(corpus, split, data, include_ambiguous=True)
    ambiguous_pool, movies_clear_test = [], []
    if references:
        ambiguous_pool = [
            s for s in load_split(IN_DOMAIN, "all", data, include_ambiguous=True) if s.label == AMBIGUOUS
        ]
        movies_clear_test = load_split(IN_DOMAIN, "test", data)

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
    samples, mean_field = sample_p[here], mf_p[here]
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

    counts = {name: sum(s.label == name for s in snippets) for name in ("negative", "positive", AMBIGUOUS)}
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
        "mean_field": _variant_metrics(mean_field, clear, labels, human_mean, rater_std),
        "per_sentence": {
            "ids": [s.id for s in snippets],
            "labels": [s.label for s in snippets],
            "human_mean": human_mean.tolist(),
            "rater_std": rater_std.tolist(),
            "mc_p_positive": mc[:, POSITIVE].tolist(),
            "mean_field_p_positive": mean_field[:, POSITIVE].tolist(),
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
            i: (1 if label == "positive" else 0, p)
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


# (key in the results, column header); None marks metrics that only mc has.
_TABLE_COLUMNS = [
    ("accuracy", "acc"),
    ("nll", "NLL"),
    ("brier", "Brier"),
    ("ece", "ECE"),
    ("auroc_error_entropy", "AUROC err (H)"),
    ("spearman_human_mean", "ρ human mean"),
    ("spearman_entropy_rater_std", "ρ H vs rater std"),
]
_MC_ONLY = [
    ("auroc_ambiguous_mi", "AUROC ambiguous (MI)"),
    ("auroc_ood_mi", "AUROC OOD (MI)"),
]


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    return f"{value:.3f}"


def markdown_table(results: list[dict]) -> str:
    """README table: one row per predictor × corpus (× split), each key metric for mc and mean field."""
    header = ["predictor", "corpus", "split", "S", "n clear"]
    for _, title in _TABLE_COLUMNS:
        header += [f"{title} mc", f"{title} MF"]
    header += [title for _, title in _MC_ONLY]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        cells = [
            str(r["predictor"]),
            str(r["corpus"]),
            str(r["split"]),
            str(r["n_samples"]),
            str(r["n_clear"]),
        ]
        for key, _ in _TABLE_COLUMNS:
            cells += [_fmt(r["mc"].get(key)), _fmt(r["mean_field"].get(key))]
        cells += [_fmt(r["mc"].get(key)) for key, _ in _MC_ONLY]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary(results: dict) -> str:
    """A compact plain-text table of one `evaluate` output, for the terminal."""
    head = (
        f"{results['predictor']} on {results['corpus']}/{results['split']}: {results['n_clear']} clear + "
        f"{results['n_ambiguous']} ambiguous sentences, S={results['n_samples']}, seed={results['seed']}"
    )
    keys = [k for k, _ in _TABLE_COLUMNS] + [
        k for k in results["mc"] if k.startswith(("auroc_ambig", "auroc_ood"))
    ]
    width = max(len(k) for k in keys)
    lines = [head, f"{'metric':<{width}}  {'mc':>7}  {'mean_field':>10}"]
    for k in keys:
        lines.append(
            f"{k:<{width}}  {_fmt(results['mc'].get(k)):>7}  {_fmt(results['mean_field'].get(k)):>10}"
        )
    return "\n".join(lines)


def add_evaluate_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz evaluate`."""
    parser.add_argument(
        "--model", required=True, help='"vader" for the rule-based baseline, else a bam_viz model'
    )
    parser.add_argument("--corpus", choices=[*sorted(CORPORA), "all"], default=IN_DOMAIN,
                        help='"all" runs the four corpora in one process, sharing the reference sentences')
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="test")
    parser.add_argument("--samples", type=int, default=32, help="attention samples per sentence (S)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--data", default=None, help="folder of the corpora (default: $BAM_VIZ_DATA or ../shared)"
    )
    parser.add_argument("--no-references", dest="references", action="store_false",
                        help="score only the chosen split (no ambiguous pool, no movie test reference): "
                             "for sweeps on dev that must never predict a test sentence")
    parser.add_argument("--root", default=None,
                        help="folder holding <model>/card.json (default: the shipped pretrained/)")
    parser.add_argument("--hyper", action="append", default=[], metavar="NAME=VALUE",
                        help="inference-time attention override, e.g. shape_k=3 (repeatable)")
    parser.add_argument("--temperature", default=None, metavar="T|dev",
                        help="temperature scaling of every sample's probabilities: a number, or 'dev' to "
                             "fit T by NLL on the movies dev split first (Guo et al. 2017)")
    parser.add_argument("--json", default=None, metavar="OUT",
                        help="write the full results here ({corpus} in the name is replaced per corpus)")
    return parser


def _jsonable(value: Any) -> Any:
    # NaN (an undefined AUROC or correlation) is not JSON; null is.
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def parse_assignments(items: list[str]) -> dict[str, float]:
    """["shape_k=3", "beta=0.5"] -> {"shape_k": 3.0, "beta": 0.5}, for the CLI's hyperparameter options."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            if not sep or not key.strip():
                raise ValueError
            out[key.strip()] = float(value)
        except ValueError:
            raise SystemExit(f"expected NAME=VALUE with a number, got {item!r}") from None
    return out


def run_evaluate(args: argparse.Namespace) -> list[dict]:
    """Run `evaluate` from parsed CLI options, print the summaries, and optionally write JSON."""
    if args.model == "vader":
        predictor: Predictor = VaderPredictor()
    else:
        import bam_viz  # lazily: loading a model pulls in torch and the weights
        from bam_viz import zoo

        hyper = parse_assignments(getattr(args, "hyper", []))
        root = getattr(args, "root", None)
        model = zoo.load(args.model, root=Path(root)) if root else bam_viz.load(args.model)
        predictor = ModelPredictor(model, **hyper)
    temperature, fitted_on = getattr(args, "temperature", None), None
    if temperature is not None:
        if temperature == "dev":
            temperature, n_dev = temperature_from_dev(predictor, args.samples, args.seed, args.data,
                                                      getattr(args, "batch_size", 64))
            fitted_on = f"movies dev, {n_dev} clear sentences, NLL of the mc predictive"
            print(f"temperature fitted on movies dev: T = {temperature:.4f}")
        else:
            try:
                temperature = float(temperature)
            except ValueError:
                raise SystemExit(f"--temperature takes a number or 'dev', got {temperature!r}") from None
        predictor = TemperedPredictor(predictor, temperature)
    predictor = MemoPredictor(predictor)
    corpora = [IN_DOMAIN, *sorted(c for c in CORPORA if c != IN_DOMAIN)] if args.corpus == "all" else [args.corpus]
    if args.json and len(corpora) > 1 and "{corpus}" not in args.json:
        raise SystemExit("--corpus all needs {corpus} in the --json file name")
    all_results = []
    for corpus in corpora:
        results = evaluate(
            predictor,
            corpus=corpus,
            split=args.split,
            n_samples=args.samples,
            seed=args.seed,
            data=args.data,
            batch_size=getattr(args, "batch_size", 64),
            references=getattr(args, "references", True),
        )
        if temperature is not None:
            results["temperature"] = {"T": temperature, "fitted_on": fitted_on}
        print(summary(results))
        if args.json:
            out = Path(args.json.replace("{corpus}", corpus))
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(_jsonable(results), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        all_results.append(results)
    return all_results
