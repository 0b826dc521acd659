"""Score whole corpora: one row per (sentence, model) with the model's prediction and its uncertainty.

    python -m bam_viz score --model bam-wc --input reviews.csv --samples 32 --seed 0 --out scores.parquet

Each sentence is scored in a call of its own: S attention samples from a generator seeded with
`sentence_seed(seed, id)`, then one deterministic (softmax) pass. A sentence's figures therefore depend on its id,
its text, the model, S and the seed, and on nothing else: not on its batch or its position in the
file, the engine, or how many workers share the work, so a file scored whole, shuffled or in parts
gives the same rows. One sentence at a time is also the fast way on a CPU: a padded batch pays the
T^2 attention of its longest sentence for every one of them (docs/scoring.md has the measurements).

Two engines run the same per-sentence function (`Scorer`): "local", in this process, and "ray",
through Ray Data with one `ScorerActor` per worker, which loads the models once. Ray is an optional
dependency, imported only by that engine.

User files come in through `bam_viz.evaluation.score.tables` (`read_table`, `find_columns`); every problem with them
is a `ScoreInputError` whose message says what is wrong and what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import numbers
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bam_viz.core import metrics
from bam_viz.core.inputs import check_n_samples, check_seed, check_text
from bam_viz.core.task import CLASSES, POSITIVE
from bam_viz.data import AMBIGUOUS, CORPORA, CorpusError, load_corpus
from bam_viz.evaluation.score.tables import (  # noqa: F401  (also read as score.*)
    FORMATS,
    ID_NAMES,
    LABEL_HELP,
    LABEL_NAMES,
    LARGE_FILES,
    TEXT_MIN_WORDS,
    TEXT_NAMES,
    ScoreInputError,
    _listed,
    find_columns,
    parse_labels,
    read_table,
)

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

SHIPPED = Path(__file__).resolve().parents[3] / "scores" / "test.parquet"
VADER = "vader"
ENGINES = ("local", "ray")
SCORING_THREADS = 1       # torch threads a scoring process uses (`one_thread`); more processes scale it
COMPRESSION = "zstd"


# ---- seeding and scoring -----------------------------------------------------------------------

def sentence_seed(seed: int, key: str) -> int:
    """The seed of one sentence's generator: the first 63 bits of sha256(f"{seed}:{key}"), so the same
    on every machine and in every process (Python's own hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big") >> 1


def text_id(text: str) -> str:
    """The id of a sentence that has none: the first 16 hex digits of the sha256 of its text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _model_name(model: Any) -> str:
    return model if isinstance(model, str) else str(model.name)


def check_models(models: Iterable[Any]) -> list[Any]:
    """`models` as a list, each a shipped model's name, "vader" or a loaded model, none twice."""
    from bam_viz.zoo import available_models

    models = [models] if isinstance(models, str) or not isinstance(models, Iterable) else list(models)
    if not models:
        raise ScoreInputError(f"no model given: choose from {[*available_models(), VADER]}")
    names = [_model_name(m) for m in models]
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
        S = len(p)
        # The paired difference p_s - f(softmax) has the spread of p_s itself: f(softmax) is one number.
        gap_se = 0.0 if not self.stochastic else float(np.std(p, ddof=1) / math.sqrt(S)) if S > 1 else math.nan
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


def frame_inputs(frame: pd.DataFrame, text_column: str, label_column: str | None = None,
                 id_column: str | None = None) -> pd.DataFrame:
    """INPUT_COLUMNS of a user's table: its texts (every row must have one), ids (a missing one is
    `text_id` of the text) and labels (`parse_labels`); no corpus, split or human columns."""
    for column, role in ((text_column, "text"), (label_column, "label"), (id_column, "id")):
        if column is not None and column not in frame.columns:
            raise ScoreInputError(f"no column {column!r} for the {role}; the columns are {_listed(frame.columns)}")
    texts, empty = [], []
    for i, value in enumerate(frame[text_column]):
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            value = ""
        value = value if isinstance(value, str) else str(value)
        try:
            texts.append(check_text(value))
        except ValueError as err:
            if "empty" not in str(err):
                raise ScoreInputError(f"row {i + 1}: {err}") from None
            empty.append(i + 1)
    if empty:
        shown = ", ".join(map(str, empty[:5])) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        raise ScoreInputError(f"{len(empty)} row{'s' * (len(empty) > 1)} without text in column {text_column!r} "
                              f"(row {shown}): remove them or fill them in")
    ids = [text_id(t) for t in texts]
    if id_column is not None:
        for i, value in enumerate(frame[id_column]):
            if not (value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
                    or not str(value).strip()):
                ids[i] = str(value).strip()
    labels = parse_labels(frame[label_column]) if label_column is not None else [None] * len(texts)
    return pd.DataFrame({"id": ids, "text": texts, "label": labels, "corpus": None, "split": None,
                         "human_mean": math.nan, "raters_std": math.nan, "share_positive": math.nan},
                        columns=list(INPUT_COLUMNS))


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


def score_inputs(inputs: pd.DataFrame, models: Any, *, n_samples: int = 32, seed: int = 0,
                 progress: Callable | None = None, engine: str = "local", num_workers: int = 1,
                 address: str | None = None) -> pd.DataFrame:
    """The rows of `inputs` (INPUT_COLUMNS, as `frame_inputs` and `corpus_inputs` make them) scored by
    every model: what score_frame and score_corpora share; the arguments are theirs."""
    models = check_models(models)
    n_samples, seed = check_options(n_samples, seed, engine, num_workers)
    if engine == "ray":
        return _score_ray(inputs, [_model_name(m) for m in models], n_samples, seed, progress, int(num_workers),
                          address)
    records = inputs.to_dict("records")
    total, done, rows = len(records) * len(models), 0, []
    tokenizer = None
    with one_thread():
        for model in models:
            scorer = Scorer(model, n_samples, seed, tokenizer)
            tokenizer = scorer.tokenizer
            for record in records:
                rows.append(scorer.row(record))
                done += 1
                if progress is not None:
                    progress(done, total)
    return finish(rows)


def score_frame(frame: pd.DataFrame, models: Any, *, text_column: str, label_column: str | None = None,
                id_column: str | None = None, n_samples: int = 32, seed: int = 0, progress: Callable | None = None,
                engine: str = "local", num_workers: int = 1, address: str | None = None) -> pd.DataFrame:
    """One row of COLUMNS per (row of `frame`, model), model-major, then in the frame's order.

    models: names (zoo models or "vader") or loaded BamClassifier objects; the Ray engine loads each
        by its name on every worker (`zoo.load`), so it takes only the shipped models.
    id_column: a row with no id there, or without an id column, gets `text_id(text)`; the id seeds the
        sentence's samples (`sentence_seed(seed, id)`), so rows that share an id share their noise.
    label_column: read by `parse_labels`; `correct` compares it with `predicted` for clear labels.
    progress(done, total) is called as rows are scored. engine "local" or "ray"; num_workers and
    address (a Ray cluster's address; default $RAY_ADDRESS, else a local cluster) are Ray's.
    """
    inputs = frame_inputs(frame, text_column, label_column, id_column)
    return score_inputs(inputs, models, n_samples=n_samples, seed=seed, progress=progress, engine=engine,
                        num_workers=num_workers, address=address)


def corpus_inputs(corpora: Iterable[str] | str = tuple(CORPORA), split: str = "test",
                  data: str | os.PathLike | None = None) -> pd.DataFrame:
    """INPUT_COLUMNS of every sentence (ambiguous ones included) of `split` of each corpus, with the
    raters' mean, std and share of positive ratings."""
    corpora = list(CORPORA) if corpora == "all" else [corpora] if isinstance(corpora, str) else list(corpora)
    unknown = [c for c in corpora if c not in CORPORA]
    if unknown:
        raise ScoreInputError(f"unknown corpus {unknown[0]!r}: choose from {[*CORPORA, 'all']}")
    rows = [{"id": s.id, "text": s.text, "label": s.label, "corpus": corpus, "split": s.split,
             "human_mean": s.mean, "raters_std": s.std, "share_positive": s.human_p_positive}
            for corpus in corpora for s in load_corpus(corpus, data).split(split, include_ambiguous=True)]
    return pd.DataFrame(rows, columns=list(INPUT_COLUMNS))


def score_corpora(models: Any, corpora: Iterable[str] | str = tuple(CORPORA), split: str = "test",
                  n_samples: int = 32, seed: int = 0, data: str | os.PathLike | None = None,
                  **engine_options: Any) -> pd.DataFrame:
    """`score_frame` of every sentence of `split` of `corpora` ("all" for the four), ambiguous ones
    included, with the human columns filled; engine_options are score_frame's progress, engine,
    num_workers and address."""
    unexpected = sorted(set(engine_options) - {"progress", "engine", "num_workers", "address"})
    if unexpected:
        raise TypeError(f"unexpected options {unexpected}: expected progress, engine, num_workers, address")
    return score_inputs(corpus_inputs(corpora, split, data), models, n_samples=n_samples, seed=seed,
                        **engine_options)


def with_corpus_text(frame: pd.DataFrame, data: str | os.PathLike | None = None) -> pd.DataFrame:
    """`frame` with the text of its corpus rows filled in from the corpora (by corpus and id), where
    the data folder can be read; rows it cannot fill keep what they hold (None in a shipped file)."""
    missing = frame["text"].isna() & frame["corpus"].notna()
    if not missing.any():
        return frame
    texts = {}
    for corpus in frame.loc[missing, "corpus"].unique():
        try:
            texts |= {(corpus, s.id): s.text for s in load_corpus(corpus, data).snippets}
        except (CorpusError, ValueError):
            continue                    # no data here: the page says the text needs the corpora
    rows = zip(frame["corpus"], frame["id"], frame["text"], missing, strict=True)
    filled = [texts.get((corpus, id_), text) if gap else text for corpus, id_, text, gap in rows]
    return frame.assign(text=pd.array(filled, dtype="string"))


def without_text(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with an empty text column (`score --no-text`): a scores file of the rated corpora that
    may be shipped, the corpora themselves never being copied (`with_corpus_text` fills it again)."""
    return frame.assign(text=pd.array([pd.NA] * len(frame), dtype="string"))


def shipped_scores(data: str | os.PathLike | None = None) -> pd.DataFrame:
    """The shipped scores of every zoo model and VADER on the four corpora's test splits (SHIPPED),
    with each sentence's text read from the corpora when they are here: the file itself holds none
    (written with `--no-text`), as the corpora are never copied into the repository."""
    if not SHIPPED.is_file():
        raise FileNotFoundError(f"the shipped scores {SHIPPED} are missing: `make scores` writes them "
                                "(python -m bam_viz score --model all --corpus all --split test ...)")
    return with_corpus_text(finish(pd.read_parquet(SHIPPED)), data)


# ---- the Ray engine ----------------------------------------------------------------------------

RAY_BATCH = 16            # sentences an actor takes at a time: small, so that the workers finish together
ORDER = "_order"          # carried through Ray to restore model-major, input order on the driver


class ScorerActor:
    """A Ray Data actor: loads the models once, then scores each batch one sentence at a time."""

    def __init__(self, models: list[str], n_samples: int, seed: int):
        import torch

        # One actor per CPU, each on one torch thread like the local engine (`one_thread`).
        torch.set_num_threads(SCORING_THREADS)
        tokenizer, self.scorers = None, {}
        for name in models:
            self.scorers[name] = Scorer(name, n_samples, seed, tokenizer)
            tokenizer = self.scorers[name].tokenizer

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        records = batch.to_dict("records")
        frame = finish([self.scorers[r["model"]].row(r) for r in records])
        frame[ORDER] = [r[ORDER] for r in records]
        return frame


def _shipped_only(models: list[str]) -> None:
    from bam_viz.zoo import available_models

    other = [m for m in models if m != VADER and m not in available_models()]
    if other:
        raise ScoreInputError(f"the Ray engine loads models by name on each worker: {other[0]!r} is not a shipped "
                              "model; score it with the local engine")


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ScoreInputError("the Ray engine needs Ray Data: pip install 'ray[data]'") from None
    return ray


def start_ray(address: str | None = None, num_workers: int = 1) -> bool:
    """Connect to the Ray cluster at `address` (else $RAY_ADDRESS), or start a local one with a CPU for
    each of `num_workers`; True when this call started or joined it (the caller shuts it down), False
    when Ray was already initialised."""
    import logging

    ray = _ray()
    if ray.is_initialized():
        return False
    # Ray logs its execution plans and notices (a disabled progress bar, token authentication) on the
    # command's stderr, where its own progress bar says enough; errors still show.
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    options = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR,
               "configure_logging": True}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        try:
            ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise ScoreInputError(f"cannot join the Ray cluster at {address!r} ({str(err).splitlines()[0]}): "
                                  "start it with `ray start --head`, or leave out --address and $RAY_ADDRESS "
                                  "for a local one") from None
    else:
        # Workers import bam_viz from wherever this process does (an installed wheel or the checkout).
        root = str(Path(__file__).resolve().parents[3])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        ray.init(num_cpus=max(os.cpu_count() or 1, num_workers), runtime_env={"env_vars": {"PYTHONPATH": path}},
                 **options)
    return True


def _ray_dataset(inputs: pd.DataFrame, models: list[str], n_samples: int, seed: int, num_workers: int):
    """The scored rows as a lazy Ray dataset (COLUMNS plus ORDER), one block per RAY_BATCH sentences."""
    ray = _ray()
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False              # our own bar counts sentences
    work = pd.concat([inputs.assign(model=name) for name in models], ignore_index=True)
    work[ORDER] = np.arange(len(work))
    blocks = [work.iloc[i : i + RAY_BATCH] for i in range(0, len(work), RAY_BATCH)]
    return ray.data.from_pandas(blocks).map_batches(
        ScorerActor, fn_constructor_kwargs={"models": models, "n_samples": n_samples, "seed": seed},
        batch_size=RAY_BATCH, batch_format="pandas", num_cpus=1,
        # More actors than blocks would only wait (and Ray warns): each loads every model for nothing.
        compute=ray.data.ActorPoolStrategy(size=max(1, min(num_workers, len(blocks)))))


def _score_ray(inputs: pd.DataFrame, models: list[str], n_samples: int, seed: int, progress: Callable | None,
               num_workers: int, address: str | None) -> pd.DataFrame:
    ray = _ray()
    _shipped_only(models)
    started = start_ray(address, num_workers)
    try:
        total, parts = len(inputs) * len(models), []
        for batch in _ray_dataset(inputs, models, n_samples, seed, num_workers).iter_batches(
                batch_size=None, batch_format="pandas"):
            parts.append(batch)
            if progress is not None:
                progress(sum(len(p) for p in parts), total)
    finally:
        if started:
            ray.shutdown()
    frame = pd.concat(parts, ignore_index=True).sort_values(ORDER) if parts else pd.DataFrame(columns=[*COLUMNS])
    return finish(frame.drop(columns=[ORDER], errors="ignore"))


def write_ray_parquet(inputs: pd.DataFrame, models: Any, folder: str | os.PathLike, *, n_samples: int = 32,
                      seed: int = 0, num_workers: int = 1, address: str | None = None) -> Path:
    """Score on Ray and let the workers write the rows as partitioned Parquet under `folder` (one file
    per block, zstd), for a cluster whose nodes share that path; read it back with
    `pandas.read_parquet(folder)`. Row order across files is not kept: sort by model, corpus and id."""
    models = [_model_name(m) for m in check_models(models)]
    n_samples, seed = check_options(n_samples, seed, "ray", num_workers)
    ray = _ray()
    _shipped_only(models)
    folder = Path(folder).resolve()          # the workers' own working folders differ from ours
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        # Ray would add its files beside the old ones, and reading the folder would mix two runs.
        raise ScoreInputError(f"--out {folder} already exists and is not an empty folder: remove it or name another")
    started = start_ray(address, num_workers)
    try:
        dataset = _ray_dataset(inputs, models, n_samples, seed, num_workers).drop_columns([ORDER])
        dataset.write_parquet(str(folder), compression=COMPRESSION)
    finally:
        if started:
            ray.shutdown()
    return Path(folder)


# ---- writing -----------------------------------------------------------------------------------

OUTPUT_SUFFIXES = (".parquet", ".csv")


def write_scores(frame: pd.DataFrame, out: str | os.PathLike) -> Path:
    """Write `frame` to `out`: Parquet (zstd) or CSV by the extension, through a temporary file so
    that a run stopped midway never leaves half a file under the final name."""
    out = Path(out)
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ScoreInputError(f"--out {out}: write a {' or '.join(OUTPUT_SUFFIXES)} file")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    if out.suffix.lower() == ".parquet":
        frame.to_parquet(partial, compression=COMPRESSION, index=False)
    else:
        frame.to_csv(partial, index=False)
    partial.replace(out)
    return out


def sha256_of(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def card(frame: pd.DataFrame, out: str | os.PathLike, command: str, *, split: str | None, n_samples: int,
         seed: int, data: str | os.PathLike | None = None, engine: str = "local", num_workers: int = 1) -> dict:
    """What a scores file is and how it was made: the command, models, S, seed, the split rule and
    fingerprint, the corpus files' sha256, row counts, the file's size and sha256, date and torch."""
    import datetime

    import torch

    from bam_viz.data import SPLIT_RULE, split_fingerprint

    out = Path(out)
    corpora = [c for c in frame["corpus"].dropna().unique()]
    doc = {
        "file": out.name, "command": command, "models": list(frame["model"].unique()),
        "n_samples": n_samples, "seed": seed, "seeding": "each sentence's samples from a generator seeded "
        "with sentence_seed(seed, id) = first 63 bits of sha256(f'{seed}:{id}')", "engine": engine,
        "num_workers": num_workers, "columns": list(COLUMNS), "rows": len(frame),
        "rows_per_model": {str(k): int(v) for k, v in frame.groupby("model", sort=False).size().items()},
    }
    if corpora:
        doc |= {
            "split": split, "split_rule": SPLIT_RULE, "split_fingerprint": split_fingerprint(data),
            "sentences_per_corpus": {str(c): int(frame[(frame["corpus"] == c)]["id"].nunique()) for c in corpora},
            "ambiguous_per_corpus": {str(c): int(frame[(frame["corpus"] == c) & (frame["label"] == AMBIGUOUS)]
                                                 ["id"].nunique()) for c in corpora},
            "corpus_files": [{"corpus": c, "file": f.name, "sha256": f.sha256, "bytes": f.size}
                             for c in corpora for f in load_corpus(c, data).files],
        }
    if len(frame) and frame["text"].isna().all():
        doc["text"] = ("left out (--no-text): the corpora are never copied into the repository; "
                       "score.shipped_scores reads each sentence's text from them by corpus and id")
    doc |= {"bytes": out.stat().st_size, "sha256": sha256_of(out), "compression": COMPRESSION,
            "date": datetime.date.today().isoformat(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads()}
    return doc
