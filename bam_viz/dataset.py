"""A user's labelled texts for training: one file read into texts, class indices and class names,
refused with a `DataError` a person can act on, and the seeded stratified dev split made of it.

The file is a table that `bam_viz.evaluation.score.tables.read_table` reads (CSV, TSV, JSON Lines,
Parquet), with a column of texts and a column of labels. Rows are numbered as a person counts them
in the file: row 1 is the first data row (the header and blank lines not counted). Every error
names the file, the column and the first offending rows.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import operator
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bam_viz.core.task import MAX_CLASSES
from bam_viz.evaluation.score.tables import ScoreInputError, read_table

# How a label cell is written. An integer is digits with an optional sign ("0", "-1", "+2"); a
# decimal ("0.5", "1.0", "2e3") is refused as a float, whole or not.
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)")
# What spreadsheets, pandas and R write for a missing cell. "none" is not here: it is a common class.
_MISSING = {"", "nan", "na", "n/a", "null", "<na>"}
_SHOWN = 5
LABEL_KINDS = "labels must be class names or integers"

SPLIT_RULE = ("stratified, seeded: within each class, rows in the order of sha256('{seed}:<text>:<n>') "
              "(n: how many earlier rows of that class hold the same text), the first "
              "max(1, round({fraction} * rows of the class)) to dev, the rest to train")


class DataError(ValueError):
    """A labelled file that cannot be trained on as given: the message names the file, the column,
    the first offending rows where that helps, and what to do."""


@dataclass(frozen=True)
class Labelled:
    """Labelled texts: `labels[i]` is the index in `classes` of `texts[i]`, found on row `rows[i]` of
    `source` (1-based data rows) whose bytes hash to `sha256`."""

    texts: tuple[str, ...]
    labels: tuple[int, ...]
    classes: tuple[str, ...]
    source: str
    sha256: str
    rows: tuple[int, ...]

    def __post_init__(self):
        if not len(self.texts) == len(self.labels) == len(self.rows):
            raise ValueError(f"{len(self.texts)} texts, {len(self.labels)} labels and {len(self.rows)} rows: "
                             "each text needs one label and one row number")
        if len(set(self.classes)) != len(self.classes):
            raise ValueError(f"the classes {self.classes} repeat a name")
        if any(not 0 <= y < len(self.classes) for y in self.labels):
            raise ValueError(f"labels must be indices into the {len(self.classes)} classes")

    def __len__(self) -> int:
        return len(self.texts)

    def counts(self) -> dict[str, int]:
        """Rows per class, in the order of `classes` (a class without rows counts 0)."""
        tally = Counter(self.labels)
        return {name: tally[i] for i, name in enumerate(self.classes)}

    def subset(self, indices: Iterable[int]) -> Labelled:
        """The rows at positions `indices` (into these tuples, not file row numbers), in that order."""
        picked = [operator.index(i) for i in indices]
        if any(not 0 <= i < len(self) for i in picked):
            raise ValueError(f"subset positions must lie in 0..{len(self) - 1}")
        return Labelled(tuple(self.texts[i] for i in picked), tuple(self.labels[i] for i in picked),
                        self.classes, self.source, self.sha256, tuple(self.rows[i] for i in picked))


# ---- reading -----------------------------------------------------------------------------------

def _rows(rows: Sequence[int]) -> str:
    """'row 3' or 'rows 3, 7, 9 and 12 more'."""
    shown = ", ".join(str(r) for r in rows[:_SHOWN])
    more = f" and {len(rows) - _SHOWN:,} more" if len(rows) > _SHOWN else ""
    return f"row{'s' if len(rows) > 1 else ''} {shown}{more}"


def _names(values: Iterable[Any]) -> str:
    values = list(dict.fromkeys(repr(v)[:40] for v in values))
    shown = ", ".join(values[:_SHOWN])
    return shown + (f" and {len(values) - _SHOWN:,} more" if len(values) > _SHOWN else "")


def _column(frame: pd.DataFrame, column: str, role: str, source: str) -> str:
    """The column named `column`, or the one column whose name differs only in case or spaces."""
    if column in frame.columns:
        return column
    folded = [c for c in frame.columns if c.strip().lower() == str(column).strip().lower()]
    if len(folded) == 1:
        return folded[0]
    raise DataError(f"{source} has no column {column!r} for the {role}s (its columns are "
                    f"{_names(frame.columns)}): name the {role} column with --{role}-column")


def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _texts(values: list[Any], source: str, column: str) -> tuple[str, ...]:
    not_text = [(i + 1, v) for i, v in enumerate(values) if not _is_missing(v) and not isinstance(v, str)]
    if not_text:
        raise DataError(f"{source}: column {column!r} holds values that are not text ({_names(v for _, v in not_text)} "
                        f"in {_rows([r for r, _ in not_text])}): texts must be strings (in JSON, quote them); "
                        "is this the text column? (--text-column)")
    empty = [i + 1 for i, v in enumerate(values) if _is_missing(v) or not v.strip()]
    if empty:
        raise DataError(f"{source}: column {column!r} has an empty text in {_rows(empty)}: "
                        "write the text or remove the row")
    return tuple(values)


def _label(value: Any) -> tuple[str, Any]:
    """(kind, value) of one label cell: kind is missing, int, name, float or other."""
    if _is_missing(value):
        return "missing", None
    if isinstance(value, (bool, np.bool_)):
        return "name", str(bool(value))
    if isinstance(value, numbers.Integral):
        return "int", int(value)
    if isinstance(value, numbers.Real):
        return ("missing", None) if math.isnan(value) else ("float", value)
    if isinstance(value, str):
        word = value.strip()
        if word.lower() in _MISSING:
            return "missing", None
        if _INTEGER.fullmatch(word):
            return "int", int(word)
        if _DECIMAL.fullmatch(word):
            return "float", value
        return "name", word
    return "other", value


def _labels(values: list[Any], source: str, column: str, classes: tuple[str, ...] | None,
            max_classes: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    parsed = [_label(v) for v in values]
    by_kind: dict[str, list[int]] = {}
    for row, (kind, _) in enumerate(parsed, start=1):
        by_kind.setdefault(kind, []).append(row)
    where = f"{source}: column {column!r}"
    if "missing" in by_kind:
        raise DataError(f"{where} has no label (empty or NaN) in {_rows(by_kind['missing'])}: "
                        "give every row a label or remove the row")
    for kind, what in (("float", "floats"), ("other", "other values")):
        if kind in by_kind:
            rows = by_kind[kind]
            shown = _names(values[r - 1] for r in rows)
            raise DataError(f"{where}: {LABEL_KINDS}, not {what} ({shown} in {_rows(rows)}): write whole "
                            "numbers without a decimal point (0, 1, 2) or class names; is this the label "
                            "column? (--label-column)")
    names = [str(v) for _, v in parsed]
    if classes is None:
        distinct = set(names)
        if len(distinct) > max_classes:
            raise DataError(f"{where} holds {len(distinct):,} distinct labels, over the limit of {max_classes} "
                            "classes: it looks like an id or free-text column; name the label column with "
                            "--label-column")
        if by_kind.keys() == {"int"}:
            classes = tuple(str(i) for i in sorted({v for _, v in parsed}))
        else:
            classes = tuple(sorted(distinct))
        if len(classes) < 2:
            raise DataError(f"{where} holds one class only ({classes[0]!r}): training needs at least two; "
                            "is this the label column? (--label-column)")
    index = {name: i for i, name in enumerate(classes)}
    unknown = [r for r, name in enumerate(names, start=1) if name not in index]
    if unknown:
        raise DataError(f"{where} holds labels that are not among the classes {_names(classes)}: "
                        f"{_names(names[r - 1] for r in unknown)} (in {_rows(unknown)}); fix the labels or "
                        "name every class (--classes)")
    return tuple(index[name] for name in names), classes


def _given_classes(classes: Sequence[str], max_classes: int) -> tuple[str, ...]:
    if isinstance(classes, str) or not all(isinstance(c, str) for c in classes):
        raise DataError(f"classes must be a list of names, not {classes!r} (--classes a,b,c)")
    names = tuple(c.strip() for c in classes)
    repeated = [n for n, k in Counter(names).items() if k > 1]
    if "" in names or repeated or not 2 <= len(names) <= max_classes:
        why = ("a class name is empty" if "" in names else f"{_names(repeated)} repeated" if repeated
               else f"{len(names)} given")
        raise DataError(f"the classes {_names(names)} are not 2 to {max_classes} distinct names ({why}): "
                        "list each class once (--classes a,b,c)")
    return names


def read_labelled(path: str | os.PathLike, text_column: str = "text", label_column: str = "label",
                  classes: Sequence[str] | None = None, *, max_classes: int = MAX_CLASSES) -> Labelled:
    """The labelled texts of the file at `path`, or a `DataError` saying what is wrong with it.

    Texts are kept as written; each must be a string with something besides white space. A label is
    an integer (an int in Parquet or JSON, or a string of digits with an optional sign, "0", "2",
    "-1") or a class name (a string, stripped of surrounding white space; case counts). Booleans are
    the names "False" and "True". Decimals (0.5, "1.0", a float column even of whole values), lists
    and missing labels (None, NaN, "", "nan", "NA", "N/A", "null") are refused.

    The class order, unless `classes` is given: when every label is an integer, the integers in
    numeric order, named str(i) ("-1" < "0" < "2" < "10"); otherwise the names sorted as text
    (code points: "B" < "a", "10" < "9"), integers among them named str(i). With `classes` (the
    training classes for a dev file, or the user's --classes) that order is used and every label must
    be one of them; a class may then have no rows. More than `max_classes` distinct labels, or one
    class only, is refused. A column named differently only in case or surrounding spaces is found.
    """
    source = str(path)
    if classes is not None:
        classes = _given_classes(classes, max_classes)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{source} is a folder: give the file of labelled texts") from None
    except PermissionError:
        raise DataError(f"{source} cannot be read (permission denied)") from None
    try:
        frame = read_table(data, name=source)
    except ScoreInputError as err:
        raise DataError(str(err)) from None
    text = _column(frame, text_column, "text", source)
    label = _column(frame, label_column, "label", source)
    if text == label:
        raise DataError(f"{source}: the texts and the labels are both column {text!r}: name two columns "
                        "(--text-column, --label-column)")
    texts = _texts(frame[text].tolist(), source, text)
    labels, classes = _labels(frame[label].tolist(), source, label, classes, max_classes)
    return Labelled(texts, labels, classes, source, hashlib.sha256(data).hexdigest(),
                    tuple(range(1, len(texts) + 1)))


# ---- the dev split -----------------------------------------------------------------------------

def stratified_split(data: Labelled, dev_fraction: float = 0.1, seed: int = 0) -> tuple[Labelled, Labelled]:
    """(train, dev) of `data` by SPLIT_RULE: within each class, a seeded hash orders the rows and the
    first max(1, round(dev_fraction * n_c)) go to dev (Python's round, half to even).

    The hash reads only the seed, the text and how many earlier rows of its class hold the same
    text, so the split does not depend on the order of the file: shuffled rows give the same texts
    and labels on each side. Both sides keep the file's order. Every class needs at least 2 rows.
    """
    if isinstance(dev_fraction, bool) or not isinstance(dev_fraction, numbers.Real) or not 0 < dev_fraction <= 0.5:
        raise ValueError(f"the dev fraction must be above 0 and at most 0.5, not {dev_fraction!r} (--dev-fraction)")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"the seed must be an integer, not {seed!r}")
    small = {name: n for name, n in data.counts().items() if n < 2}
    if small:
        shown = ", ".join(f"{name!r} has {n} row{'' if n == 1 else 's'}" for name, n in list(small.items())[:_SHOWN])
        raise DataError(f"{data.source}: a dev split needs at least 2 rows of every class, and {shown}"
                        f"{' and more' if len(small) > _SHOWN else ''}: add rows of "
                        f"{'that class' if len(small) == 1 else 'those classes'} or give a dev file (--dev-data)")
    keys: list[str] = []
    seen: Counter[tuple[int, str]] = Counter()
    for text, y in zip(data.texts, data.labels, strict=True):
        keys.append(hashlib.sha256(f"{seed}:{text}:{seen[y, text]}".encode()).hexdigest())
        seen[y, text] += 1
    members: dict[int, list[int]] = {}
    for i, y in enumerate(data.labels):
        members.setdefault(y, []).append(i)
    dev: set[int] = set()
    for rows in members.values():
        rows.sort(key=lambda i: (keys[i], i))
        dev.update(rows[: max(1, round(dev_fraction * len(rows)))])
    return (data.subset(i for i in range(len(data)) if i not in dev),
            data.subset(i for i in range(len(data)) if i in dev))


def split_fingerprint(train: Labelled, dev: Labelled) -> str:
    """sha256 of each side's sorted (row, class name) pairs: two runs split alike exactly when equal."""
    sides = {name: sorted([row, side.classes[y]] for row, y in zip(side.rows, side.labels, strict=True))
             for name, side in (("train", train), ("dev", dev))}
    return hashlib.sha256(json.dumps(sides, sort_keys=True).encode()).hexdigest()


def check_dev(train: Labelled, dev: Labelled) -> list[str]:
    """Notes worth a warning about scoring on `dev` after training on `train` (a class without dev
    rows, dev texts also in training); a `DataError` for what cannot be trained and scored: other
    classes than the training ones, an empty dev set, a class without training rows."""
    if dev.classes != train.classes:
        raise DataError(f"{dev.source}: its classes {_names(dev.classes)} are not the training classes "
                        f"{_names(train.classes)}: read the dev file with the training classes")
    if not len(dev):
        raise DataError(f"{dev.source}: the dev set is empty: give a dev file with rows (--dev-data) "
                        "or a larger --dev-fraction")
    untrained = [name for name, n in train.counts().items() if not n]
    if untrained:
        raise DataError(f"{train.source}: no training rows of class {_names(untrained)}: add rows of it "
                        "or leave it out of --classes")
    notes = [f"{dev.source}: the dev set has no rows of class {name!r}, so its scores say nothing about it"
             for name, n in dev.counts().items() if not n]
    seen = set(train.texts)
    shared = [row for row, text in zip(dev.rows, dev.texts, strict=True) if text in seen]
    if shared:
        notes.append(f"{dev.source}: {len(shared):,} of {len(dev):,} dev texts are also training texts "
                     f"({_rows(shared)}), which flatters the dev scores")
    return notes


def describe(data: Labelled) -> dict:
    """The model card's account of `data`: its file, the file's sha256, its row count, rows per class."""
    return {"source": data.source, "sha256": data.sha256, "rows": len(data), "counts": data.counts()}
