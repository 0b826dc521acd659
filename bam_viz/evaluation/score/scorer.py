"""Score whole corpora: one row per (sentence, model) with the model's prediction and its uncertainty.

    python -m bam_viz score --model bam-wc --input reviews.csv --samples 32 --seed 0 --out scores.parquet

Each sentence is scored in a call of its own: S attention samples from a generator seeded with
`sentence_seed(seed, id)`, then one deterministic (softmax) pass. A sentence's figures therefore depend on its id,
its text, the model, S and the seed, and on nothing else: not on its batch or its position in the
file, the engine, or how many workers share the work, so a file scored whole, shuffled or in parts
gives the same rows. One sentence at a time is also the fast way on a CPU: a padded batch pays the
T^2 attention of its longest sentence for every one of them (docs/scoring.md has the measurements).

Two engines run the same per-sentence function (`Scorer`, with the columns of a row, in
`bam_viz.evaluation.score.rows`): "local", in this process, and "ray", through Ray Data with one
`ScorerActor` per worker, which loads the models once (`bam_viz.evaluation.score.ray_engine`). Ray is
an optional dependency, imported only when that engine runs.

User files come in through `bam_viz.evaluation.score.tables` (`read_table`, `find_columns`); every problem with them
is a `ScoreInputError` whose message says what is wrong and what to do.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from bam_viz.core.inputs import check_text
from bam_viz.core.spreadsheet import safe_frame
from bam_viz.core.task import CLASSES
from bam_viz.data import AMBIGUOUS, CORPORA, CorpusError, load_corpus
from bam_viz.evaluation.score.ray_engine import score_ray
from bam_viz.evaluation.score.rows import (  # noqa: F401  (also read as score.*)
    COLUMNS,
    COMPRESSION,
    DTYPES,
    ENGINES,
    INPUT_COLUMNS,
    PREDICTED_SOFTMAX,
    SCORING_THREADS,
    VADER,
    Scorer,
    check_models,
    check_options,
    class_column,
    classes_of,
    columns_for,
    common_classes,
    dtypes_for,
    finish,
    load_models,
    model_classes,
    model_name,
    one_thread,
    sentence_seed,
    text_id,
    with_labels,
)
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
    parse_class_labels,
    parse_labels,
    read_labels,
    read_table,
)

SHIPPED = Path(__file__).resolve().parents[3] / "scores" / "test.parquet"


# ---- inputs and scoring ------------------------------------------------------------------------

def frame_inputs(frame: pd.DataFrame, text_column: str, label_column: str | None = None,
                 id_column: str | None = None) -> pd.DataFrame:
    """INPUT_COLUMNS of a user's table: its texts (every row must have one), ids (a missing one is
    `text_id` of the text) and labels as written (`score_inputs` reads them as the models' classes,
    `with_labels`); no corpus, split or human columns."""
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
    labels = list(frame[label_column]) if label_column is not None else [None] * len(texts)
    return pd.DataFrame({"id": ids, "text": texts, "label": pd.Series(labels, dtype=object), "corpus": None,
                         "split": None, "human_mean": math.nan, "raters_std": math.nan, "share_positive": math.nan},
                        columns=list(INPUT_COLUMNS))


def score_inputs(inputs: pd.DataFrame, models: Any, *, n_samples: int = 32, seed: int = 0,
                 progress: Callable | None = None, engine: str = "local", num_workers: int = 1,
                 address: str | None = None) -> pd.DataFrame:
    """The rows of `inputs` (INPUT_COLUMNS, as `frame_inputs` and `corpus_inputs` make them) scored by
    every model: what score_frame and score_corpora share; the arguments are theirs. The models are
    loaded first: they must predict one set of classes (`common_classes`), as which the labels are
    read (`with_labels`) before any sentence is scored."""
    models = check_models(models)
    n_samples, seed = check_options(n_samples, seed, engine, num_workers)
    models = load_models(models)
    classes = common_classes(models)
    inputs = with_labels(inputs, classes, ", ".join(model_name(m) for m in models))
    if engine == "ray":
        return score_ray(inputs, models, n_samples, seed, progress, int(num_workers), address)
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
    return finish(rows, classes)


def score_frame(frame: pd.DataFrame, models: Any, *, text_column: str, label_column: str | None = None,
                id_column: str | None = None, n_samples: int = 32, seed: int = 0, progress: Callable | None = None,
                engine: str = "local", num_workers: int = 1, address: str | None = None) -> pd.DataFrame:
    """One row of `columns_for(classes)` per (row of `frame`, model), model-major, then in the frame's
    order: COLUMNS for the sentiment zoo and VADER, a `p_<class>` column per class for other models.

    models: names or model folders (`zoo.resolve_model`), "vader", or loaded BamClassifier objects, all of one
        set of classes; the Ray engine reloads each on every worker from its folder (`model.origin`),
        so it takes models loaded by `zoo.load`, not ones built in code.
    id_column: a row with no id there, or without an id column, gets `text_id(text)`; the id seeds the
        sentence's samples (`sentence_seed(seed, id)`), so rows that share an id share their noise.
    label_column: read as the models' classes (`tables.read_labels`: the sentiment zoo's by
        `parse_labels`, others' by their class names); `correct` compares it with `predicted` where
        the label is a class (not for "ambiguous").
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
    return with_corpus_text(finish(pd.read_parquet(SHIPPED), CLASSES), data)


# ---- writing -----------------------------------------------------------------------------------

OUTPUT_SUFFIXES = (".parquet", ".csv")


def write_scores(frame: pd.DataFrame, out: str | os.PathLike) -> Path:
    """Write `frame` to `out`: Parquet (zstd) or CSV by the extension (its text cells that a
    spreadsheet would run neutralised: `bam_viz.core.spreadsheet`), through a temporary file so that
    a run stopped midway never leaves half a file under the final name."""
    out = Path(out)
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ScoreInputError(f"--out {out}: write a {' or '.join(OUTPUT_SUFFIXES)} file")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    if out.suffix.lower() == ".parquet":
        frame.to_parquet(partial, compression=COMPRESSION, index=False)
    else:
        safe_frame(frame).to_csv(partial, index=False)
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
        "num_workers": num_workers, "classes": list(classes_of(frame)), "columns": list(frame.columns),
        "rows": len(frame),
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
