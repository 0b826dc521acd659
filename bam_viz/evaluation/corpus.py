"""Error analysis over a scored corpus: filters, slices and their metrics, calibration, human
disagreement and domain shift; the Corpus page's charts of them are `bam_viz.plots.corpus`'s.

The input is a frame of `bam_viz.evaluation.score.rows.columns_for(classes)`, one row per (sentence,
model): the sentiment zoo's COLUMNS, or a `p_<class>` column per class of a K-class model; its
classes are `classes_in(frame)`, read from those columns. Every number comes from
`bam_viz.core.metrics`, on these rows:
  accuracy, NLL, ECE (15 equal-width bins of the top-label confidence, the predicted class's
    probability: max(p, 1 - p) for two classes), per-class precision, recall and F1 and the
    confusion matrix: the clear labelled sentences (label one of the classes; for sentiment
    "positive" or "negative", |human mean| > 0.5);
  AUROC ambiguous: the uncertainty as a score telling ambiguous sentences (positives) from clear ones;
  AUROC error: the uncertainty telling wrong predictions (positives) from right ones, clear sentences;
  Spearman: the uncertainty against the raters' standard deviation, every sentence that has raters
    (ambiguous ones included, as in `bam_viz.evaluation.evaluate`, since that is where raters disagree most);
  AUROC out-of-domain: the uncertainty telling the clear sentences of tweets, amazon and nyt
    (positives) from the clear movies sentences (the models' training domain).

A filter selects *sentences*: what depends on a model (right or wrong, uncertainty, confidence) is
judged by one model, the reference, and every model is then scored on the same sentences, so that
two models are compared on equal terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from bam_viz.core import metrics
from bam_viz.core.spreadsheet import safe_frame
from bam_viz.core.task import CLASSES, entropy_bound
from bam_viz.data import AMBIGUOUS, CORPORA
from bam_viz.evaluation.score.rows import class_column, classes_of, columns_for
from bam_viz.evaluation.score.tables import ScoreInputError

IN_DOMAIN = "movies"
OUT_OF_DOMAIN = tuple(c for c in CORPORA if c != IN_DOMAIN)        # tweets, amazon, nyt
# The uncertainty measures a user can choose, with the words the page shows (all in nats).
MEASURES = {
    "mutual_information": "mutual information (nats)",
    "predictive_entropy": "predictive entropy (nats)",
    "expected_entropy": "expected entropy (nats)",
}
MEASURE_NAMES = {k: v.removesuffix(" (nats)") for k, v in MEASURES.items()}
ENTROPIES = ("predictive_entropy", "expected_entropy")      # each at most ln K (`measure_bound`)
OUTCOMES = ("all", "correct", "wrong")
CLARITIES = ("all", "clear", "ambiguous")
ECE_BINS = metrics.ECE_BINS
# Columns a brush may range over: the reference model's confidence, any uncertainty, the raters' std.
BRUSHABLE = ("confidence", *MEASURES, "raters_std")


class CorpusInputError(ValueError):
    """A frame or filter the Corpus views cannot use; the message says what to change."""


# ---- sentences and their columns ----------------------------------------------------------------
def classes_in(frame: pd.DataFrame) -> tuple[str, ...]:
    """The classes of a scored frame, in the order of its probability columns (`rows.classes_of`)."""
    try:
        return classes_of(frame)
    except ScoreInputError as err:
        raise CorpusInputError(f"{err}: score it with bam_viz.evaluation.score") from None


def probability_columns(frame: pd.DataFrame) -> list[str]:
    """The frame's columns of E[f(z)]: `p_positive` for sentiment, else one `p_<class>` per class."""
    classes = classes_in(frame)
    return ["p_positive"] if columns_for(classes) == columns_for(CLASSES) else [class_column(c) for c in classes]


def with_keys(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with `sentence` (one key per sentence: corpus and id, since ids repeat across corpora
    and user data has no corpus), `confidence` (the predicted class's E[f(z)]) and `outcome` columns;
    the input is not modified."""
    missing = {"id", "model", "predicted", "label", "correct"} - set(frame.columns)
    if missing:
        raise CorpusInputError(f"a scored frame needs the columns {sorted(missing)}: "
                               "score it with bam_viz.evaluation.score")
    out = frame.copy()
    for column in (*probability_columns(frame), *MEASURES, "raters_std", "human_mean", "share_positive"):
        if column in out:                      # user data holds None where the corpora hold ratings
            out[column] = pd.to_numeric(out[column], errors="coerce").astype(np.float64)
    for column in ("id", "text", "model", "corpus", "label", "predicted", "correct"):
        if column in out:
            # pandas' "string" and "boolean" columns hold pd.NA, whose comparisons are NA rather than
            # False; plain objects with None compare as the filters need.
            out[column] = out[column].astype(object).where(out[column].notna(), None)
    corpus = out["corpus"] if "corpus" in out else pd.Series(None, index=out.index, dtype=object)
    out["sentence"] = corpus.fillna("").astype(str) + ":" + out["id"].astype(str)
    # The same key as an integer: `select` matches sentences on every rerun, and isin on integers is a
    # fraction of its cost on strings.
    out["sentence_code"] = pd.factorize(out["sentence"])[0]
    out["confidence"] = probabilities(out).max(axis=1)
    out["outcome"] = outcomes(out)
    return out


def outcomes(frame: pd.DataFrame) -> np.ndarray:
    """Per row: "correct" or "wrong" on a clear labelled sentence, "ambiguous", or "unlabelled"."""
    label = frame["label"].astype(object)
    correct = frame["correct"].astype(object)
    return np.where(clear_mask(frame), np.where(correct == True, "correct", "wrong"),  # noqa: E712 (object column)
                    np.where(label == AMBIGUOUS, "ambiguous", "unlabelled"))


def clear_mask(frame: pd.DataFrame) -> np.ndarray:
    """Rows whose sentence has a clear label: one of the classes (for sentiment, positive or negative)."""
    return frame["label"].isin(classes_in(frame)).to_numpy()


def probabilities(frame: pd.DataFrame) -> np.ndarray:
    """(N, K) E[f(z)] in the order of `classes_in(frame)`; for sentiment [1 - P(positive), P(positive)]."""
    columns = probability_columns(frame)
    if columns == ["p_positive"]:
        p = frame["p_positive"].to_numpy(dtype=np.float64)
        return np.stack([1.0 - p, p], axis=1)                               # (N, 2)
    return frame[columns].to_numpy(dtype=np.float64)                        # (N, K)


def label_indices(frame: pd.DataFrame) -> np.ndarray:
    """(N,) class index of each row's label in `classes_in(frame)`, -1 where it is none of them."""
    index = {c: i for i, c in enumerate(classes_in(frame))}
    return np.array([index.get(label, -1) for label in frame["label"].astype(object)], dtype=np.int64)


def measure_bound(measure: str, n_classes: int) -> float | None:
    """The top of `measure`'s axis: ln K for an entropy, its largest value (`entropy_bound`); None
    for the mutual information, which is bounded by ln K too but lies far below it, so that its axis
    follows the data."""
    return entropy_bound(n_classes) if measure in ENTROPIES else None


def models_in(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["model"].dropna().unique().tolist())


def corpora_in(frame: pd.DataFrame) -> list[str]:
    """The corpora present, in `CORPORA` order (empty for user data)."""
    if "corpus" not in frame:
        return []
    present = set(frame["corpus"].dropna())
    return [c for c in CORPORA if c in present]


def has_raters(frame: pd.DataFrame) -> bool:
    return "raters_std" in frame and frame["raters_std"].notna().any()


def has_labels(frame: pd.DataFrame) -> bool:
    return bool(clear_mask(frame).any())


# ---- filters ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Brush:
    """A range brushed on one chart (`source`): `low <= column <= high` for the reference model."""

    source: str
    column: str
    low: float
    high: float


@dataclass(frozen=True)
class Filter:
    """Which sentences are shown. `corpora` None means every corpus (and user data, which has none);
    `outcome` and `uncertainty` (an inclusive range of `measure`) are judged by the reference model;
    `brushes` are ranges brushed on the charts."""

    corpora: tuple[str, ...] | None = None
    outcome: str = "all"
    clarity: str = "all"
    measure: str = "mutual_information"
    uncertainty: tuple[float, float] | None = None
    brushes: tuple[Brush, ...] = field(default=())

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise CorpusInputError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")
        if self.clarity not in CLARITIES:
            raise CorpusInputError(f"clarity must be one of {CLARITIES}, not {self.clarity!r}")
        if self.measure not in MEASURES:
            raise CorpusInputError(f"measure must be one of {list(MEASURES)}, not {self.measure!r}")
        for b in self.brushes:
            if b.column not in BRUSHABLE:
                raise CorpusInputError(f"a brush ranges over one of {BRUSHABLE}, not {b.column!r}")

    def without(self, source: str) -> Filter:
        """This filter less the brushes of chart `source`: what that chart itself shows, so that its
        own brush stays where the user drew it (cross-filtering)."""
        return replace(self, brushes=tuple(b for b in self.brushes if b.source != source))

    def with_brushes(self, source: str, ranges: dict[str, tuple[float, float]]) -> Filter:
        """This filter with chart `source`'s brushes replaced by `ranges` (column -> (low, high))."""
        kept = tuple(b for b in self.brushes if b.source != source)
        return replace(self, brushes=kept + tuple(Brush(source, c, lo, hi) for c, (lo, hi) in ranges.items()))


def brush_ranges(selection: dict | None) -> dict[str, tuple[float, float]]:
    """The ranges of a Vega-Lite interval selection's value ({field: [low, high]}, what
    `st.altair_chart(on_select=...)` returns for an interval parameter), brushable fields only.
    An empty or malformed selection is no range: a brush cleared by a double click is {}."""
    out = {}
    for column, values in (selection or {}).items():
        if column not in BRUSHABLE or not isinstance(values, (list, tuple)) or len(values) != 2:
            continue
        try:
            lo, hi = sorted(float(v) for v in values)
        except (TypeError, ValueError):
            continue
        if math.isfinite(lo) and math.isfinite(hi):
            out[column] = (lo, hi)
    return out


def sentence_mask(rows: pd.DataFrame, filt: Filter) -> np.ndarray:
    """(N,) which of the reference model's `rows` (from `with_keys`) pass `filt`."""
    keep = np.ones(len(rows), dtype=bool)
    if filt.corpora is not None:
        keep &= rows["corpus"].isin(filt.corpora).to_numpy()
    outcome = rows["outcome"].to_numpy()
    if filt.outcome != "all":
        keep &= outcome == filt.outcome
    if filt.clarity == "clear":
        keep &= np.isin(outcome, ("correct", "wrong"))
    elif filt.clarity == "ambiguous":
        keep &= outcome == "ambiguous"
    if filt.uncertainty is not None:
        lo, hi = filt.uncertainty
        u = rows[filt.measure].to_numpy(dtype=np.float64)
        keep &= (u >= lo) & (u <= hi)
    for b in filt.brushes:
        v = rows[b.column].to_numpy(dtype=np.float64)
        keep &= (v >= b.low) & (v <= b.high)             # NaN (no raters) is outside every range
    return keep


def select(frame: pd.DataFrame, filt: Filter, reference: str) -> pd.DataFrame:
    """Every model's rows of the sentences that pass `filt` as `reference` judges them.

    `frame` comes from `with_keys`. Sentences the reference model did not score are dropped."""
    if reference not in set(frame["model"]):
        raise CorpusInputError(f"model {reference!r} is not in the scored data; choose one of {models_in(frame)}")
    rows = frame[frame["model"] == reference]
    chosen = rows["sentence_code"].to_numpy()[sentence_mask(rows, filt)]
    return frame[np.isin(frame["sentence_code"].to_numpy(), chosen)]


# ---- metrics ------------------------------------------------------------------------------------
SLICE_METRICS = ("n", "n_clear", "n_ambiguous", "accuracy", "nll", "ece", "auroc_error", "auroc_ambiguous",
                 "spearman_raters_std")


def model_metrics(rows: pd.DataFrame, measure: str) -> dict[str, float]:
    """The slice metrics of one model's rows (see the module's docstring); NaN where undefined."""
    clear = clear_mask(rows)
    outcome = rows["outcome"].to_numpy()
    u = rows[measure].to_numpy(dtype=np.float64)
    out = {"n": len(rows), "n_clear": int(clear.sum()), "n_ambiguous": int((outcome == "ambiguous").sum())}
    if clear.any():
        p, y = probabilities(rows)[clear], label_indices(rows)[clear]
        out |= {"accuracy": metrics.accuracy(p, y), "nll": metrics.nll(p, y), "ece": metrics.ece(p, y),
                "auroc_error": metrics.auroc(u[clear], p.argmax(axis=1) != y)}
    else:
        out |= {"accuracy": math.nan, "nll": math.nan, "ece": math.nan, "auroc_error": math.nan}
    rated = np.isin(outcome, ("correct", "wrong", "ambiguous"))
    out["auroc_ambiguous"] = metrics.auroc(u[rated], outcome[rated] == "ambiguous") if rated.any() else math.nan
    std = rows["raters_std"].to_numpy(dtype=np.float64) if "raters_std" in rows else np.full(len(rows), np.nan)
    has = np.isfinite(std)
    out["spearman_raters_std"] = metrics.spearman(u[has], std[has])
    return out


def slice_metrics(frame: pd.DataFrame, measure: str, models: list[str] | None = None) -> pd.DataFrame:
    """One row of `SLICE_METRICS` per model (index), on the rows of `frame` (from `with_keys`)."""
    models = models or models_in(frame)
    table = {m: model_metrics(frame[frame["model"] == m], measure) for m in models}
    return pd.DataFrame.from_dict(table, orient="index", columns=list(SLICE_METRICS)).rename_axis("model")


def reliability(frame: pd.DataFrame, n_bins: int = ECE_BINS, models: list[str] | None = None) -> pd.DataFrame:
    """The reliability diagram's bins: per model and non-empty bin of the top-label confidence, on
    clear sentences: `low`, `high` (the bin's edges), `count`, `confidence` (mean confidence),
    `accuracy` (share right) and `ece` (the model's, from `metrics.ece`, repeated on its rows), all
    from `metrics.reliability_bins`. The count-weighted mean of |accuracy - confidence| is that ECE."""
    models = models or models_in(frame)
    parts = []
    for m in models:
        rows = frame[(frame["model"] == m) & clear_mask(frame)]
        if rows.empty:
            continue
        p, y = probabilities(rows), label_indices(rows)
        part = pd.DataFrame(metrics.reliability_bins(p, y, n_bins)).rename_axis("bin").reset_index()
        part = part[part["count"] > 0].reset_index(drop=True)
        part["model"] = m
        part["ece"] = metrics.ece(p, y, n_bins)
        parts.append(part)
    columns = ["model", "bin", "low", "high", "count", "confidence", "accuracy", "ece"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


CLASS_METRICS = ("support", "precision", "recall", "f1")


def class_metrics(frame: pd.DataFrame, models: list[str] | None = None) -> pd.DataFrame:
    """Per (model, class), on the clear sentences: `support`, `precision`, `recall` and `f1`
    (`metrics.per_class`; NaN where undefined), the classes in the frame's order."""
    classes = classes_in(frame)
    parts = []
    for m in models or models_in(frame):
        rows = frame[(frame["model"] == m) & clear_mask(frame)]
        scores = metrics.per_class(probabilities(rows), label_indices(rows), len(classes))
        parts.append(pd.DataFrame({"model": m, "class": list(classes), **{k: scores[k] for k in CLASS_METRICS}}))
    columns = ["model", "class", *CLASS_METRICS]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def confusion(frame: pd.DataFrame, model: str) -> np.ndarray:
    """(K, K) counts of `model`'s clear sentences by label (rows) and prediction (columns), in the
    order of `classes_in(frame)` (`metrics.confusion_matrix`)."""
    rows = frame[(frame["model"] == model) & clear_mask(frame)]
    return metrics.confusion_matrix(probabilities(rows), label_indices(rows), len(classes_in(frame)))


def domain_shift(frame: pd.DataFrame, measure: str, models: list[str] | None = None) -> pd.DataFrame:
    """Per model (index): the AUROC of `measure` telling each out-of-domain corpus's clear sentences
    (positives) from the clear movies sentences, and all three together ("out-of-domain"); with the
    counts. NaN where either side is empty. A model whose uncertainty rises off its training domain
    scores above 0.5."""
    models = models or models_in(frame)
    table = {}
    for m in models:
        rows = frame[(frame["model"] == m) & clear_mask(frame)]
        corpus = rows["corpus"].to_numpy()
        u = rows[measure].to_numpy(dtype=np.float64)
        movies = corpus == IN_DOMAIN
        entry = {"n_movies": int(movies.sum())}
        groups = [*((c, corpus == c) for c in OUT_OF_DOMAIN), ("out-of-domain", np.isin(corpus, OUT_OF_DOMAIN))]
        for name, ood in groups:
            both = movies | ood
            entry[name] = metrics.auroc(u[both], ood[both]) if ood.any() and movies.any() else math.nan
            entry[f"n_{name}"] = int(ood.sum())
        table[m] = entry
    return pd.DataFrame.from_dict(table, orient="index").rename_axis("model")


def spearman_raters(frame: pd.DataFrame, measure: str, model: str) -> float:
    """Spearman of `measure` with the raters' std over `model`'s sentences that have raters."""
    return model_metrics(frame[frame["model"] == model], measure)["spearman_raters_std"]


# ---- two models ---------------------------------------------------------------------------------
def paired(frame: pd.DataFrame, a: str, b: str, measure: str) -> pd.DataFrame:
    """One row per sentence scored by both `a` and `b`: the sentence's text and ratings, each model's
    prediction, confidence (and P(positive) for sentiment), outcome and `measure` (suffixes `_a`,
    `_b`), `disagree` (their labels differ) and `more_uncertain` ("a", "b" or "tie", by `measure`)."""
    if a == b:
        raise CorpusInputError("choose two different models to compare")
    keep = ["sentence", "text", "corpus", "label", "raters_std", "human_mean"]
    keep = [c for c in keep if c in frame]
    own = ["predicted", *(c for c in ("p_positive", "confidence") if c in frame), "outcome", measure]
    left = frame.loc[frame["model"] == a, keep + own]
    right = frame.loc[frame["model"] == b, ["sentence", *own]]
    out = left.merge(right, on="sentence", suffixes=("_a", "_b"), validate="one_to_one")
    out["disagree"] = out["predicted_a"] != out["predicted_b"]
    ua, ub = out[f"{measure}_a"].to_numpy(), out[f"{measure}_b"].to_numpy()
    out["more_uncertain"] = np.where(ua > ub, "a", np.where(ub > ua, "b", "tie"))
    return out


def paired_summary(pairs: pd.DataFrame) -> dict[str, dict[str, float]]:
    """For "all" sentences and the "disagreements": n, how often each model is the more uncertain
    (a, b, tie), and each one's accuracy on the clear ones (NaN where none are clear)."""
    out = {}
    for name, rows in (("all", pairs), ("disagreements", pairs[pairs["disagree"]])):
        counts = rows["more_uncertain"].value_counts()
        clear = rows["outcome_a"].isin(("correct", "wrong"))
        entry = {"n": len(rows), **{k: int(counts.get(k, 0)) for k in ("a", "b", "tie")},
                 "n_clear": int(clear.sum())}
        for side in ("a", "b"):
            entry[f"accuracy_{side}"] = (float((rows.loc[clear, f"outcome_{side}"] == "correct").mean())
                                         if clear.any() else math.nan)
        out[name] = entry
    return out


# ---- downloads ----------------------------------------------------------------------------------
def scored_csv(frame: pd.DataFrame) -> bytes:
    """The scored rows as UTF-8 CSV, the columns of `bam_viz.evaluation.score.rows.columns_for` its
    classes only (no page columns)."""
    columns = columns_for(classes_in(frame))
    return safe_frame(frame[[c for c in columns if c in frame]]).to_csv(index=False).encode("utf-8")
