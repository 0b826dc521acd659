"""One scored row per (sentence, model): its columns and dtypes, and `Scorer`, the per-sentence
function every engine of `bam_viz.evaluation.score.scorer` runs (the local one in this process,
`bam_viz.evaluation.score.ray_engine` on Ray's workers).

A table's columns follow its models' classes (`columns_for`). The binary sentiment zoo's (and
VADER's) are COLUMNS: P(positive) E[f(z)] in `p_positive`, f(softmax) in `p_positive_softmax`, and
the gap in P(positive). Any other set of K classes has `p_<class>` (E[f(z)]) for each class in the
model's order, then `p_predicted_softmax`, f(softmax) of the predicted class (the argmax of E[f(z)]),
and `gap_softmax` (with its SE) of the predicted class: E[f(z)] - f(softmax) in the probability the
row's prediction rests on. One table holds one set of classes: models that predict different ones
are refused together (`common_classes`), since their columns would not line up.

A sentence's row depends on its id, its text, the model, S and the seed, and on nothing else: its
S attention samples come from a generator seeded with `sentence_seed(seed, id)`, its uncertainty
from those samples alone (`bam_viz.core.metrics`, whose standard error of the gap is the one the
explorer shows), and torch runs on one thread (`one_thread`), so that float32 sums do not depend on
the machine's core count.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from bam_viz.core import metrics
from bam_viz.core.inputs import check_n_samples, check_seed
from bam_viz.core.task import CLASSES, POSITIVE
from bam_viz.evaluation.score.tables import ScoreInputError, read_labels

COLUMNS: tuple[str, ...] = (
    "id", "text", "model", "corpus", "split", "p_positive", "p_positive_softmax", "gap_softmax", "gap_softmax_se",
    "predictive_entropy", "expected_entropy", "mutual_information", "predicted", "n_tokens", "truncated",
    "label", "correct", "human_mean", "raters_std", "share_positive", "n_samples", "seed",
)
# Every column's pandas dtype, so that each engine, a Parquet round trip and an empty result agree.
# Missing values: pd.NA in the string and boolean columns, NaN in the float ones (pandas.isna finds both).
DTYPES: dict[str, str] = {
    "id": "string", "text": "string", "model": "string", "corpus": "string", "split": "string",
    **dict.fromkeys(("p_positive", "p_positive_softmax", "gap_softmax", "gap_softmax_se", "predictive_entropy",
                     "expected_entropy", "mutual_information"), "float64"),
    "predicted": "string", "n_tokens": "int64", "truncated": "bool", "label": "string", "correct": "boolean",
    **dict.fromkeys(("human_mean", "raters_std", "share_positive"), "float64"),
    "n_samples": "int64", "seed": "int64",
}
PREDICTED_SOFTMAX = "p_predicted_softmax"        # f(softmax) of the predicted class, K-class tables
# What a scorer needs of each input row; the human columns stay empty for user data.
INPUT_COLUMNS = ("id", "text", "label", "corpus", "split", "human_mean", "raters_std", "share_positive")

VADER = "vader"
ENGINES = ("local", "ray")
SCORING_THREADS = 1       # torch threads a scoring process uses (`one_thread`); more processes scale it
COMPRESSION = "zstd"      # of every Parquet file written, by either engine


def class_column(name: str) -> str:
    """The column of E[f(z)] for class `name` in a K-class table."""
    return f"p_{name}"


def columns_for(classes: Iterable[str]) -> tuple[str, ...]:
    """The columns of a table of models that predict `classes`: COLUMNS for the sentiment pair, else
    COLUMNS with `p_<class>` for every class and PREDICTED_SOFTMAX in place of the two P(positive)s."""
    classes = tuple(classes)
    if classes == CLASSES:
        return COLUMNS
    per_class = tuple(class_column(c) for c in classes)
    start = COLUMNS.index("p_positive")
    fixed = (*COLUMNS[:start], PREDICTED_SOFTMAX, *COLUMNS[start + 2:])
    clash = [c for c in classes if class_column(c) in fixed]
    if clash:
        raise ScoreInputError(f"a class called {clash[0]!r} would name the column {class_column(clash[0])!r}, "
                              "which the table has already: rename that class")
    return (*COLUMNS[:start], *per_class, *fixed[start:])


def dtypes_for(classes: Iterable[str]) -> dict[str, str]:
    """The pandas dtype of every column of `columns_for(classes)`."""
    columns = columns_for(classes)
    if columns == COLUMNS:
        return DTYPES
    return {c: DTYPES.get(c, "float64") for c in columns}


def classes_of(frame: pd.DataFrame | Iterable[str]) -> tuple[str, ...]:
    """The classes of a scored table, read from its columns (`columns_for`): the `p_<class>` ones, in
    order, where it has PREDICTED_SOFTMAX; CLASSES where it has `p_positive`."""
    columns = list(frame.columns if isinstance(frame, pd.DataFrame) else frame)
    if PREDICTED_SOFTMAX in columns:
        return tuple(c[2:] for c in columns if c.startswith("p_") and c != PREDICTED_SOFTMAX)
    if "p_positive" in columns:
        return CLASSES
    raise ScoreInputError(f"a scored table has a probability column per class (p_positive, or p_<class> and "
                          f"{PREDICTED_SOFTMAX}); these columns are {', '.join(map(repr, columns)) or 'none'}")


def model_classes(model: Any) -> tuple[str, ...]:
    """The classes a model predicts: VADER's and a model's without `classes` are the sentiment pair."""
    return CLASSES if isinstance(model, str) else tuple(getattr(model, "classes", CLASSES))


def common_classes(models: list[Any]) -> tuple[str, ...]:
    """The one set of classes every model of `models` (loaded ones, or "vader") predicts; models that
    predict different classes are refused: a table has one column per class of one set."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for m in models:
        groups.setdefault(model_classes(m), []).append(model_name(m))
    if len(groups) > 1:
        said = "; ".join(f"{', '.join(names)} predict{'s' * (len(names) == 1)} {', '.join(classes)}"
                         for classes, names in groups.items())
        raise ScoreInputError(f"the models predict different classes ({said}): one table holds one set of "
                              "classes, so score them into separate tables")
    return next(iter(groups))


def load_models(models: list[Any]) -> list[Any]:
    """`models` with each model's name or folder replaced by the model (`zoo.load_model`); "vader" and
    loaded models stay as they are."""
    from bam_viz import zoo

    return [zoo.load_model(m) if isinstance(m, str) and m != VADER else m for m in models]


def with_labels(inputs: pd.DataFrame, classes: tuple[str, ...], whose: str) -> pd.DataFrame:
    """`inputs` with the label column read as `classes` (`tables.read_labels`; `whose` names the
    models in a message): a class name, None where there is none, or "ambiguous" for sentiment."""
    labels = read_labels(inputs["label"], classes, whose)
    return inputs.assign(label=pd.Series(labels, index=inputs.index, dtype=object))


def sentence_seed(seed: int, key: str) -> int:
    """The seed of one sentence's generator: the first 63 bits of sha256(f"{seed}:{key}"), so the same
    on every machine and in every process (Python's own hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big") >> 1


def text_id(text: str) -> str:
    """The id of a sentence that has none: the first 16 hex digits of the sha256 of its text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def model_name(model: Any) -> str:
    return model if isinstance(model, str) else str(model.name)


def check_models(models: Iterable[Any]) -> list[Any]:
    """`models` as a list, each a model's name or folder (`zoo.resolve_model`), "vader" or a loaded
    model, no name twice (a model's rows are named by its folder)."""
    from bam_viz.zoo import UnknownModel, available_models, resolve_model

    models = [models] if isinstance(models, str) or not isinstance(models, Iterable) else list(models)
    if not models:
        raise ScoreInputError(f"no model given: choose from {[*available_models(), VADER]}")
    names = []
    for m in models:
        try:
            # A folder that is not a model raises its own CheckpointError, one line in the command.
            names.append(resolve_model(m).name if isinstance(m, str) and m != VADER else model_name(m))
        except UnknownModel:
            raise ScoreInputError(f"unknown model {m!r}: choose from {[*available_models(), VADER]} "
                                  "or give a model folder") from None
    repeated = [n for n in dict.fromkeys(names) if names.count(n) > 1]
    if repeated:
        raise ScoreInputError(f"model {repeated[0]!r} is given twice: name each model once")
    return models


class Scorer:
    """One model (a zoo model, or VADER) scoring one sentence at a time: `row(record)` is its output row.

    A zoo model draws the sentence's S attention samples with `predict_samples([text], S,
    sentence_seed(seed, id))` and makes one `predict_softmax([text])` pass. VADER is deterministic:
    one sample, its P(positive) = (compound + 1) / 2 both ways, and it reads the whole text (never
    truncated); its n_tokens is MiniLM's count too, so every model's row of a sentence agrees.
    A record's label is already one of the model's classes, "ambiguous" or None (`with_labels`).
    """

    def __init__(self, model: Any, n_samples: int, seed: int, tokenizer: Any = None):
        from bam_viz.evaluation.predictors import VaderPredictor

        self.n_samples, self.seed = n_samples, seed
        if isinstance(model, str) and model == VADER:
            try:
                import vaderSentiment  # noqa: F401  (checked here, before any sentence is scored)
            except ImportError:
                raise ScoreInputError("the vader baseline needs vaderSentiment: pip install vaderSentiment==3.3.2") \
                    from None
            self.name, self.model, self.vader = VADER, None, VaderPredictor()
            if tokenizer is None:
                from bam_viz.nn.encoder import Tokenizer

                tokenizer = Tokenizer()
            self.tokenizer, self.max_tokens, self.stochastic = tokenizer, None, False
        else:
            if isinstance(model, str):
                from bam_viz import zoo

                model = zoo.load_model(model)
            self.name, self.model, self.vader = str(model.name), model, None
            self.tokenizer, self.max_tokens, self.stochastic = model.tokenizer, model.max_tokens, model.stochastic
        self.classes = model_classes(self.model if self.model is not None else VADER)
        self.columns = columns_for(self.classes)

    def probabilities(self, text: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(S, K) sample probabilities and (K,) those of the deterministic pass, f(softmax), of one sentence."""
        if self.vader is not None:
            samples = self.vader.sample_probs([text], 1, 0)[0]                 # (1, 2)
            return samples, samples[0]
        samples = self.model.predict_samples([text], n_samples=self.n_samples, seed=sentence_seed(self.seed, key))
        softmax = self.model.predict_softmax([text])
        return samples[0].double().numpy(), softmax[0].double().numpy()       # (S, K), (K,)

    def row(self, record: dict) -> dict:
        text, key = record["text"], record["id"]
        samples, softmax = self.probabilities(text, key)
        k = int(np.argmax(samples.mean(0)))
        predicted = self.classes[k]
        # The class whose gap the row reports: positive in a sentiment table, else the predicted one.
        shown = POSITIVE if self.columns == COLUMNS else k
        p = samples[:, shown]                                                  # (S,)
        p_mc, p_softmax = float(p.mean()), float(softmax[shown])
        if self.columns == COLUMNS:
            probabilities = {"p_positive": p_mc, "p_positive_softmax": p_softmax}
        else:
            probabilities = {class_column(c): float(samples[:, i].mean()) for i, c in enumerate(self.classes)}
            probabilities[PREDICTED_SOFTMAX] = p_softmax
        # The explorer's standard error of E[f(z)] - f(softmax) (`ExplainResult.se.gap_softmax`): 0 for a
        # deterministic model, NaN where one sample of a stochastic one cannot give it.
        gap_se = (metrics.paired_gap_se(p, p_softmax) if len(p) > 1 else math.nan) if self.stochastic else 0.0
        batch = samples[None]                                                  # (1, S, K)
        n_tokens = self.tokenizer.length(text)
        label = record.get("label")
        label = None if label is None or pd.isna(label) else str(label)
        return {
            "id": key, "text": text, "model": self.name, "corpus": record.get("corpus"),
            "split": record.get("split"), **probabilities,
            "gap_softmax": p_mc - p_softmax, "gap_softmax_se": gap_se,
            "predictive_entropy": float(metrics.predictive_entropy(batch)[0]),
            "expected_entropy": float(metrics.expected_entropy(batch)[0]),
            "mutual_information": float(metrics.mutual_information(batch)[0]),
            "predicted": predicted, "n_tokens": n_tokens,
            "truncated": self.max_tokens is not None and n_tokens > self.max_tokens,
            "label": label, "correct": None if label not in self.classes else predicted == label,
            "human_mean": record.get("human_mean"), "raters_std": record.get("raters_std"),
            "share_positive": record.get("share_positive"), "n_samples": self.n_samples, "seed": self.seed,
        }


def finish(rows: list[dict] | pd.DataFrame, classes: Iterable[str] | None = None) -> pd.DataFrame:
    """Rows as a frame of exactly `columns_for(classes)` with the dtypes of `dtypes_for(classes)`;
    `classes` None reads them from the rows' columns (`classes_of`), the sentiment pair for no rows."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    if classes is None:
        classes = classes_of(frame) if len(frame.columns) else CLASSES
    columns, dtypes = columns_for(classes), dtypes_for(classes)
    frame = frame.reindex(columns=list(columns))
    # None in a float column must become NaN first: astype("float64") refuses object None.
    for column, dtype in dtypes.items():
        values = frame[column]
        if dtype == "float64":
            values = pd.to_numeric(values, errors="raise").astype("float64")
        frame[column] = values.astype(dtype)
    return frame.reset_index(drop=True)


@contextlib.contextmanager
def one_thread():
    """Run torch on SCORING_THREADS (one) thread meanwhile, as every Ray worker does: a sentence's
    matrices are small, more threads gain little on them and spin-wait badly on a busy machine, and
    they would sum float32 in another order, so that rows would depend on the machine's core count."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(SCORING_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def check_options(n_samples: Any, seed: Any, engine: str, num_workers: Any) -> tuple[int, int]:
    """n_samples and seed as ints, once every option is known to be valid (else ScoreInputError)."""
    try:
        n_samples, seed = check_n_samples(n_samples), check_seed(seed)
    except (TypeError, ValueError) as err:
        raise ScoreInputError(str(err)) from None
    if engine not in ENGINES:
        raise ScoreInputError(f"unknown engine {engine!r}: choose from {list(ENGINES)}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or num_workers < 1:
        raise ScoreInputError(f"num_workers must be a whole number of at least 1, not {num_workers!r}")
    return n_samples, seed


