"""Reading the tables people score: CSV, TSV, JSON Lines or Parquet, the text, label and id columns
found by name or contents, and labels read as the models' classes (`read_labels`): the sentiment
zoo's in every usual spelling (`parse_labels`), any other model's by its class names.
`bam_viz.evaluation.score.scorer` scores what these read; `ScoreInputError` is the one error a bad
file gives, with a message for a person.
"""

from __future__ import annotations

import io
import json
import math
import numbers
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bam_viz.core.task import CLASSES
from bam_viz.data import AMBIGUOUS, label_of

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": "delimited", ".jsonl": "jsonl",
           ".ndjson": "jsonl", ".parquet": "parquet"}
TEXT_NAMES = ("text", "sentence", "review", "content", "body", "comment", "tweet", "snippet", "document",
              "message", "review_text", "sentence_text")
LABEL_NAMES = ("label", "sentiment", "y", "target", "class", "polarity", "gold")
ID_NAMES = ("id", "sentence_id", "doc_id", "review_id", "uid", "key")
# A column of free text, when no name says so: at least this many words in its median value.
TEXT_MIN_WORDS = 3
LARGE_FILES = "`python -m bam_viz score --input FILE ...` scores files of any size"
LABEL_HELP = ("use positive/negative/ambiguous (or pos/neg/neutral), 1/0, true/false, or a rating "
              "(above 0.5 positive, below -0.5 negative, between them ambiguous)")


class ScoreInputError(ValueError):
    """Input that cannot be scored as given: the message says what is wrong and what to do."""


# ---- reading user files ------------------------------------------------------------------------

def _format(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in FORMATS:
        raise ScoreInputError(f"{name}: unknown file type {suffix or '(no extension)'!r}; "
                              f"save it as one of {', '.join(FORMATS)}")
    return FORMATS[suffix]


def _decode(data: bytes, name: str) -> str:
    """The text of a file meant to be UTF-8 (a byte-order mark is accepted), or why it is not."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ScoreInputError(f"{name} is UTF-16 text: save it as UTF-8 (in Excel: 'CSV UTF-8')")
    if data.startswith(b"PK\x03\x04"):
        raise ScoreInputError(f"{name} is a zip archive (an Excel workbook?), not text: save it as CSV UTF-8")
    if b"\x00" in data[:65536]:
        raise ScoreInputError(f"{name} is binary, not text: save it as CSV, TSV or JSON lines in UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ScoreInputError(
            f"{name} is not UTF-8 (byte 0x{data[err.start]:02x} on line {line}; Latin-1 or Windows-1252?): "
            "save it as UTF-8 (in Excel: 'CSV UTF-8')") from None


def _read_delimited(text: str, name: str, kind: str) -> pd.DataFrame:
    header = text.split("\n", 1)[0]
    tabs, commas = header.count("\t"), header.count(",")
    # The extension decides unless the header says otherwise: a .csv saved with tabs, or a .txt.
    sep = {"csv": ",", "tsv": "\t"}.get(kind)
    if sep is None or (sep == "," and tabs and not commas) or (sep == "\t" and commas and not tabs):
        sep = "\t" if tabs > commas else ","
    try:
        # Every cell as written: an id "007" stays "007"; labels are read by parse_labels.
        return pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        raise ScoreInputError(f"{name} is empty: it needs a header line and one row per sentence") from None
    except pd.errors.ParserError as err:
        found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(err))
        what = (f"line {found[2]} has {found[3]} fields where the header has {found[1]}" if found
                else str(err).strip().splitlines()[-1])
        quote = "quote texts that contain a comma" if sep == "," else "a text must not contain a tab"
        raise ScoreInputError(f"{name}: a row cannot be read ({what}): {quote}") from None


def _read_jsonl(text: str, name: str) -> pd.DataFrame:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ScoreInputError(f"{name}: line {number} is not JSON ({err.msg}): "
                                  'write one object a line, e.g. {"text": "..."}') from None
        if not isinstance(row, dict):
            raise ScoreInputError(f"{name}: line {number} is a JSON {type(row).__name__}, not an object: "
                                  'write one object a line, e.g. {"text": "..."}')
        rows.append(row)
    return pd.DataFrame.from_records(rows)


def _read_parquet(data: bytes, name: str) -> pd.DataFrame:
    import pyarrow as pa

    if not data.startswith(b"PAR1"):
        raise ScoreInputError(f"{name} is not a Parquet file: give it the extension of its format "
                              f"({', '.join(s for s in FORMATS if s != '.parquet')})")
    try:
        return pd.read_parquet(io.BytesIO(data))
    except (pa.ArrowException, OSError, ValueError) as err:
        raise ScoreInputError(f"{name} cannot be read as Parquet ({err}): write the file again") from None


def read_table(source: str | os.PathLike | bytes, *, name: str | None = None, max_bytes: int | None = None,
               max_rows: int | None = None) -> pd.DataFrame:
    """A table of sentences from a file `source` (a path) or its bytes (an upload, `name` its file name).

    The format follows the extension: .csv, .tsv, .txt (CSV or TSV, whichever the header line says),
    .jsonl/.ndjson (one JSON object a line), .parquet; a .csv whose header holds tabs and no comma is
    read as TSV. Text files must be UTF-8 (a byte-order mark is fine); delimited files are read as
    strings, cell by cell as written. An empty, binary, non-UTF-8 or unparsable file, one without rows,
    one over `max_bytes` or with more than `max_rows` rows raises `ScoreInputError`.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), name or "the upload"
        if max_bytes is not None and len(data) > max_bytes:
            raise _too_big(name, len(data), max_bytes)
    else:
        path = Path(source)
        name = name or path.name
        try:
            size = path.stat().st_size
            if path.is_dir():
                raise ScoreInputError(f"{path} is a folder: give the file to score")
            if max_bytes is not None and size > max_bytes:
                raise _too_big(name, size, max_bytes)
            data = path.read_bytes()
        except FileNotFoundError:
            raise ScoreInputError(f"{path}: no such file") from None
        except PermissionError:
            raise ScoreInputError(f"{path} cannot be read (permission denied)") from None
    kind = _format(name)
    if not data.strip():
        raise ScoreInputError(f"{name} is empty: it needs a header line and one row per sentence")
    if kind == "parquet":
        frame = _read_parquet(data, name)
    else:
        text = _decode(data, name)
        frame = _read_jsonl(text, name) if kind == "jsonl" else _read_delimited(text, name, kind)
    if frame.empty:
        raise ScoreInputError(f"{name} has no rows: add one row per sentence")
    if max_rows is not None and len(frame) > max_rows:
        raise ScoreInputError(f"{name} has {len(frame):,} rows, over the limit of {max_rows:,} here: "
                              f"{LARGE_FILES}")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def _too_big(name: str, size: int, limit: int) -> ScoreInputError:
    return ScoreInputError(f"{name} is {size / 2**20:,.1f} MB, over the limit of {limit / 2**20:,.1f} MB here: "
                           f"{LARGE_FILES}")


def _listed(columns: Iterable[str]) -> str:
    return ", ".join(repr(c) for c in columns)


def _named(frame: pd.DataFrame, column: str, role: str) -> str:
    if column in frame.columns:
        return column
    folded = [c for c in frame.columns if c.strip().lower() == column.strip().lower()]
    if len(folded) == 1:
        return folded[0]
    raise ScoreInputError(f"no column {column!r} for the {role}; the columns are {_listed(frame.columns)}")


def _by_name(frame: pd.DataFrame, names: tuple[str, ...], role: str, taken: set[str]) -> str | None:
    found = [c for c in frame.columns if c.strip().lower() in names and c not in taken]
    if len(found) > 1:
        raise ScoreInputError(f"columns {_listed(found)} could each be the {role}: name the one to use")
    return found[0] if found else None


def _median_words(values: pd.Series) -> float:
    words = [len(v.split()) for v in values if isinstance(v, str) and v.strip()]
    return float(np.median(words)) if words else 0.0


def find_columns(frame: pd.DataFrame, text: str | None = None, label: str | None = None,
                 id: str | None = None) -> tuple[str, str | None, str | None]:
    """(text, label, id) column names of `frame`: each the one named, else found.

    The text column is the only one named like a text (TEXT_NAMES, any case), else the only column of
    strings whose median value has at least TEXT_MIN_WORDS words; no obvious choice raises
    `ScoreInputError` listing the columns. Label and id are found by their usual names (LABEL_NAMES,
    ID_NAMES), or are None.
    """
    if not len(frame.columns):
        raise ScoreInputError("the table has no columns: it needs a column of texts")
    label = _named(frame, label, "label") if label else None
    id = _named(frame, id, "id") if id else None
    taken = {c for c in (label, id) if c}
    if text:
        text = _named(frame, text, "text")
    else:
        text = _by_name(frame, TEXT_NAMES, "text", taken)
        if text is None:
            wordy = [c for c in frame.columns if c not in taken and _median_words(frame[c]) >= TEXT_MIN_WORDS]
            if len(wordy) != 1:
                why = "several columns hold texts" if wordy else "no column is named like a text or holds texts"
                raise ScoreInputError(f"which column is the text? {why}; the columns are {_listed(frame.columns)}: "
                                      "name the text column (--text-column)")
            text = wordy[0]
    taken.add(text)
    label = label or _by_name(frame, LABEL_NAMES, "label", taken)
    id = id or _by_name(frame, ID_NAMES, "id", taken | {label})
    return text, label, id


_LABEL_WORDS = {"positive": "positive", "pos": "positive", "negative": "negative", "neg": "negative",
                AMBIGUOUS: AMBIGUOUS, "neutral": AMBIGUOUS, "neu": AMBIGUOUS, "mixed": AMBIGUOUS,
                "true": "positive", "false": "negative"}
_MISSING = {"", "nan", "none", "null", "na", "n/a"}


def parse_labels(values: Iterable[Any]) -> list[str | None]:
    """Label strings ("positive", "negative", "ambiguous") or None (a missing value) of `values`.

    Words: positive/pos, negative/neg, ambiguous/neutral/neu/mixed, true/false (any case). Numbers are
    read as a column: all in {0, 1} or all in {-1, 1} are binary labels (0 and -1 negative); -1 beside
    0 (and at most 1) is three-way, 0 ambiguous; any number outside {-1, 0, 1} makes the column
    ratings, each read by `bam_viz.data.label_of` (> 0.5 positive, < -0.5 negative, else ambiguous).
    Any other value raises `ScoreInputError` naming the first few.
    """
    values = list(values)
    out: list[str | None] = [None] * len(values)
    numeric: dict[int, float] = {}
    unknown: list[str] = []
    for i, v in enumerate(values):
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            continue
        if isinstance(v, (bool, np.bool_)):
            out[i] = "positive" if v else "negative"
        elif isinstance(v, numbers.Real):
            numeric[i] = float(v)
        else:
            word = str(v).strip().lower()
            if word in _MISSING:
                continue
            if word in _LABEL_WORDS:
                out[i] = _LABEL_WORDS[word]
                continue
            try:
                numeric[i] = float(word)
            except ValueError:
                unknown.append(str(v))
    unknown += [str(values[i]) for i, x in numeric.items() if not math.isfinite(x)]
    if unknown:
        first = list(dict.fromkeys(unknown))
        shown = ", ".join(repr(u[:40]) for u in first[:4]) + (f" and {len(first) - 4} more" if len(first) > 4 else "")
        raise ScoreInputError(f"labels not understood: {shown}; {LABEL_HELP}")
    seen = set(numeric.values())
    graded = not seen <= {-1.0, 0.0, 1.0} or {-1.0, 0.0} <= seen
    for i, x in numeric.items():
        out[i] = label_of(x) if graded else "positive" if x == 1.0 else "negative"
    return out


def read_labels(values: Iterable[Any], classes: tuple[str, ...], whose: str = "the model") -> list[str | None]:
    """`values` as labels of a model that predicts `classes` (`whose` names it in a message): the
    sentiment pair's by `parse_labels`; any other set's by `parse_class_labels`."""
    if tuple(classes) == CLASSES:
        return parse_labels(values)
    return parse_class_labels(values, classes, whose)


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _whole(x: float) -> str | None:
    """A whole number written as a class name would be (3.0 -> "3"), else None."""
    return str(int(x)) if math.isfinite(x) and float(x).is_integer() else None


def parse_class_labels(values: Iterable[Any], classes: tuple[str, ...], whose: str = "the model") -> list[str | None]:
    """Each of `values` as one of `classes`, or None (a missing value).

    A value is a class name as written (spaces around it aside), else in another case where only one
    class folds to it; a whole number, or one written as text ("3.0"), is the class of its digits
    ("3"), so that classes "0".."K-1" take indices. A class named like a missing value ("none", "na")
    is that class; any other value, a bool included, raises `ScoreInputError` naming the first few
    and the classes.
    """
    classes = tuple(classes)
    names = set(classes)
    folded: dict[str, list[str]] = {}
    for c in classes:
        folded.setdefault(c.strip().casefold(), []).append(c)
    out: list[str | None] = []
    unknown: list[str] = []
    for v in values:
        if _is_missing(v):
            out.append(None)
            continue
        found = None
        if isinstance(v, (bool, np.bool_)):
            pass
        elif isinstance(v, numbers.Real):
            found = _whole(float(v))
        else:
            word = str(v).strip()
            if word in names:
                found = word
            elif len(folded.get(word.casefold(), ())) == 1:
                found = folded[word.casefold()][0]
            elif word.lower() in _MISSING:
                out.append(None)
                continue
            else:
                try:
                    found = _whole(float(word))
                except ValueError:
                    pass
        if found not in names:
            unknown.append(str(v))
            found = None
        out.append(found)
    if unknown:
        first = list(dict.fromkeys(unknown))
        shown = ", ".join(repr(u[:40]) for u in first[:4]) + (f" and {len(first) - 4} more" if len(first) > 4 else "")
        listed = ", ".join(repr(c) for c in classes[:12]) + (f" and {len(classes) - 12} more" if len(classes) > 12
                                                              else "")
        raise ScoreInputError(f"labels not understood: {shown}; the labels of {whose} are its classes: {listed}")
    return out
