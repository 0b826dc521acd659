"""One scored row per (sentence, model): its columns and dtypes, and `Scorer`, the per-sentence
function every engine of `bam_viz.evaluation.score.scorer` runs (the local one in this process,
`bam_viz.evaluation.score.ray_engine` on Ray's workers).

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
from bam_viz.evaluation.score.tables import ScoreInputError

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
# What a scorer needs of each input row; the human columns stay empty for user data.
INPUT_COLUMNS = ("id", "text", "label", "corpus", "split", "human_mean", "raters_std", "share_positive")

VADER = "vader"
ENGINES = ("local", "ray")
SCORING_THREADS = 1       # torch threads a scoring process uses (`one_thread`); more processes scale it
COMPRESSION = "zstd"      # of every Parquet file written, by either engine


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
    """`models` as a list, each a shipped model's name, "vader" or a loaded model, none twice."""
    from bam_viz.zoo import available_models

    models = [models] if isinstance(models, str) or not isinstance(models, Iterable) else list(models)
    if not models:
        raise ScoreInputError(f"no model given: choose from {[*available_models(), VADER]}")
    names = [model_name(m) for m in models]
    unknown = [m for m in models if isinstance(m, str) and m != VADER and m not in available_models()]
    if unknown:
        raise ScoreInputError(f"unknown model {unknown[0]!r}: choose from {[*available_models(), VADER]}")
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

                model = zoo.load(model)
            self.name, self.model, self.vader = str(model.name), model, None
            self.tokenizer, self.max_tokens, self.stochastic = model.tokenizer, model.max_tokens, model.stochastic

    def probabilities(self, text: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(S, 2) sample probabilities and (2,) those of the deterministic pass, f(softmax), of one sentence."""
        if self.vader is not None:
            samples = self.vader.sample_probs([text], 1, 0)[0]                 # (1, 2)
            return samples, samples[0]
        samples = self.model.predict_samples([text], n_samples=self.n_samples, seed=sentence_seed(self.seed, key))
        softmax = self.model.predict_softmax([text])
        return samples[0].double().numpy(), softmax[0].double().numpy()       # (S, 2), (2,)

    def row(self, record: dict) -> dict:
        text, key = record["text"], record["id"]
        samples, softmax = self.probabilities(text, key)
        p = samples[:, POSITIVE]                                               # (S,)
        p_positive, p_softmax = float(p.mean()), float(softmax[POSITIVE])
        # The explorer's standard error of E[f(z)] - f(softmax) (`ExplainResult.se.gap_softmax`): 0 for a
        # deterministic model, NaN where one sample of a stochastic one cannot give it.
        gap_se = (metrics.paired_gap_se(p, p_softmax) if len(p) > 1 else math.nan) if self.stochastic else 0.0
        batch = samples[None]                                                  # (1, S, 2)
        predicted = CLASSES[int(np.argmax(samples.mean(0)))]
        n_tokens = self.tokenizer.length(text)
        label = record.get("label")
        label = None if label is None or pd.isna(label) else str(label)
        return {
            "id": key, "text": text, "model": self.name, "corpus": record.get("corpus"),
            "split": record.get("split"), "p_positive": p_positive, "p_positive_softmax": p_softmax,
            "gap_softmax": p_positive - p_softmax, "gap_softmax_se": gap_se,
            "predictive_entropy": float(metrics.predictive_entropy(batch)[0]),
            "expected_entropy": float(metrics.expected_entropy(batch)[0]),
            "mutual_information": float(metrics.mutual_information(batch)[0]),
            "predicted": predicted, "n_tokens": n_tokens,
            "truncated": self.max_tokens is not None and n_tokens > self.max_tokens,
            "label": label, "correct": None if label not in CLASSES else predicted == label,
            "human_mean": record.get("human_mean"), "raters_std": record.get("raters_std"),
            "share_positive": record.get("share_positive"), "n_samples": self.n_samples, "seed": self.seed,
        }


def finish(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    """Rows as a frame of exactly COLUMNS with the dtypes of DTYPES."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows, columns=list(COLUMNS))
    frame = frame.reindex(columns=list(COLUMNS))
    # None in a float column must become NaN first: astype("float64") refuses object None.
    for column, dtype in DTYPES.items():
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


