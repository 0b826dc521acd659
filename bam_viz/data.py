"""The four human-rated sentiment corpora of Hutto & Gilbert (2014), loaded without copying them.

Source: Hutto, C.J. & Gilbert, E.E. (2014). VADER: A Parsimonious Rule-based Model for Sentiment
Analysis of Social Media Text. ICWSM-14. Files from `cjhutto/vaderSentiment`,
`additional_resources/hutto_ICWSM_2014.tar.gz` (MIT licence); see PROVENANCE.md beside the data.

Each corpus is two tab-separated files joined by id:
  `X_GroundTruth.txt`     id, mean rating, text
  `X_anonDataRatings.txt` id, mean rating, standard deviation, [r1, r2, ...] (integers in -4..4)

Corpora are read strictly or not at all. What a load records is of two kinds:
  problems (`CorpusLoad.problems`, each with file, line and reason): a line not read as written, or
    one that contradicts itself: a blank line between rows, a line that is not UTF-8 (read as
    Latin-1), a malformed row, a duplicate id, an id in one file only (each of these skipped), and a
    ratings line whose own mean or std column disagrees with its listed ratings (the published files
    agree on every line, so such a line was damaged). A strict load (the default) raises
    `CorpusProblems` on any; `strict=False` returns them for the caller to show.
  notes (`CorpusLoad.notes`): changes no line's content: whole-file normalisations (a UTF-8
    byte-order mark removed, CRLF line ends read as LF, blank lines after the last row ignored) and
    known facts of the published data (a GroundTruth mean that differs from the mean of the listed
    ratings: 199 tweets, PROVENANCE.md; the GroundTruth mean is kept). They never fail a load.
Nothing is dropped silently. A missing, unreadable or empty file (or one without a readable row),
and two files with no id in common, are a `CorpusError` naming the file, strict or not.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from bam_viz.core.task import CLASSES

CORPORA = {
    "movies": "movieReviewSnippets",
    "tweets": "tweets",
    "amazon": "amazonReviewSnippets",
    "nyt": "nytEditorialSnippets",
}
SPLITS = ("train", "dev", "test")
LABELS = CLASSES  # class index 0, 1: the order every predictor's probabilities use
AMBIGUOUS = "ambiguous"
# |mean| must exceed this for a clear label. Strict, because PROVENANCE.md's class counts
# (movies 4,982 / 5,061 / 562 and the rest) are those of |mean| > 0.5: a mean of exactly
# +-0.5 (e.g. 9 raters at +1 and 9 at 0) is a lean, not a verdict.
CLEAR_THRESHOLD = 0.5
ENV_VAR = "BAM_VIZ_DATA"
_DEFAULT_RELATIVE = Path("..") / "shared" / "data" / "vader-icwsm2014"
_BOM = b"\xef\xbb\xbf"
# The ratings file's mean and std carry 5-9 decimals; anything further apart is a real disagreement.
_TOLERANCE = 1e-3


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def data_dir(path: str | Path | None = None) -> Path | None:
    """Folder of the corpora: `path`, else $BAM_VIZ_DATA, else `<repo>/../shared/data/vader-icwsm2014`.

    Returns None when nothing is given and the default folder is absent. A folder that is named
    (argument or environment) but missing raises FileNotFoundError, since silently falling back
    would evaluate on data the caller did not ask for.
    """
    if path is not None:
        given, origin = Path(path), "the path given"
    elif os.environ.get(ENV_VAR):
        given, origin = Path(os.environ[ENV_VAR]), f"${ENV_VAR}"
    else:
        default = (_repo_root() / _DEFAULT_RELATIVE).resolve()
        return default if default.is_dir() else None
    given = given.expanduser()
    if not given.is_dir():
        raise FileNotFoundError(
            f"sentiment corpora folder {str(given)!r} ({origin}) does not exist; it should hold "
            f"movieReviewSnippets_GroundTruth.txt and the other files of Hutto & Gilbert (2014)"
        )
    return given.resolve()


def _require_dir(data: str | Path | None) -> Path:
    found = data_dir(data)
    if found is None:
        raise FileNotFoundError(
            f"sentiment corpora not found: set ${ENV_VAR} or pass a folder; the default is "
            f"{_repo_root() / _DEFAULT_RELATIVE} (Hutto & Gilbert 2014, see PROVENANCE.md)"
        )
    return found


def _short_name(name: str) -> str:
    if name in CORPORA:
        return name
    for short, long in CORPORA.items():
        if name == long:
            return short
    raise ValueError(f"unknown corpus {name!r}; expected one of {sorted(CORPORA)}")


def label_of(mean: float) -> str:
    """Label of a mean rating: positive above 0.5, negative below -0.5, else ambiguous (CLEAR_THRESHOLD)."""
    if mean > CLEAR_THRESHOLD:
        return "positive"
    if mean < -CLEAR_THRESHOLD:
        return "negative"
    return AMBIGUOUS


# Three classes from the raters' mean: the band the binary zoo leaves out as not clear (|mean| <= 0.5,
# within half a scale step of the scale's neutral 0) becomes the class "neutral".
THREE_WAY: tuple[str, ...] = ("negative", "neutral", "positive")
# A three-way sentence is ambiguous when its mean lies within this much of a band edge (+-0.5): the
# raters' own mean nearly puts it in the next class.
BOUNDARY_MARGIN = 0.25


def three_way_label(mean: float) -> str:
    """negative below -0.5, positive above 0.5, else neutral (the same band edges as `label_of`)."""
    label = label_of(mean)
    return "neutral" if label == AMBIGUOUS else label


def near_boundary(mean: float) -> bool:
    """Whether a mean rating lies within BOUNDARY_MARGIN of a three-way band edge."""
    return abs(abs(mean) - CLEAR_THRESHOLD) < BOUNDARY_MARGIN


LABEL_SCHEMES = {"two-way": "clear sentences only: positive above 0.5, negative below -0.5",
                 "three-way": "every sentence: negative below -0.5, neutral in [-0.5, 0.5], positive above 0.5"}


def labelled_table(corpus: str, split: str, scheme: str = "three-way", data: str | Path | None = None):
    """One row per sentence of a corpus split (id, text, label, mean, raters_std, split) under a
    label scheme of LABEL_SCHEMES: a file `python -m bam_viz train --data` reads."""
    import pandas as pd

    if scheme not in LABEL_SCHEMES:
        raise ValueError(f"unknown label scheme {scheme!r}; choose from {list(LABEL_SCHEMES)}")
    snippets = load_split(corpus, split, data, include_ambiguous=scheme == "three-way")
    label = three_way_label if scheme == "three-way" else label_of
    return pd.DataFrame({"id": [s.id for s in snippets], "text": [s.text for s in snippets],
                         "label": [label(s.mean) for s in snippets], "mean": [s.mean for s in snippets],
                         "raters_std": [s.std for s in snippets], "split": [s.split for s in snippets]})


def write_table(frame, out: Path) -> Path:
    """`frame` as a .csv, .tsv, .jsonl or .parquet file (by the suffix of `out`; CSV and TSV text
    cells a spreadsheet would run neutralised, `bam_viz.core.spreadsheet`)."""
    from bam_viz.core.spreadsheet import safe_frame

    out = Path(out)
    writers = {".csv": lambda: safe_frame(frame).to_csv(out, index=False),
               ".tsv": lambda: safe_frame(frame).to_csv(out, sep="\t", index=False),
               ".jsonl": lambda: frame.to_json(out, orient="records", lines=True, force_ascii=False),
               ".parquet": lambda: frame.to_parquet(out, index=False)}
    if out.suffix.lower() not in writers:
        raise FileNotFoundError(f"{out}: write a {', '.join(writers)} file")
    out.parent.mkdir(parents=True, exist_ok=True)
    writers[out.suffix.lower()]()
    return out


# The split rule in words, as model cards record it; `split_of` implements it.
SPLIT_RULE = "sha256(f'{corpus}:{id}') % 10: 0 test, 1 dev, else train"


def split_of(corpus: str, id: str) -> str:
    """Deterministic split from a hash of "corpus:id" (corpus by short name): 10% test, 10% dev, 80% train.

    Hashing rather than shuffling keeps every sentence's split fixed whatever else is in the file.
    """
    h = int(hashlib.sha256(f"{corpus}:{id}".encode()).hexdigest(), 16) % 10
    return "test" if h == 0 else "dev" if h == 1 else "train"


@dataclass(frozen=True)
class Snippet:
    """One rated sentence.

    mean: the GroundTruth mean rating (-4..4), which is kept even where it differs from the mean of
        the listed ratings (199 tweets).
    ratings: every rater's integer rating.
    std: population standard deviation (ddof=0) of `ratings`, the convention of the ratings files'
        own std column, which it reproduces to 1e-3 on every line.
    label: see `label_of`.
    human_p_positive: share of raters rating > 0 among those rating != 0; 0.5 if all rated 0.
    split: see `split_of`.
    """

    corpus: str
    id: str
    text: str
    mean: float
    ratings: tuple[int, ...]
    std: float
    label: str
    human_p_positive: float
    split: str


class CorpusError(ValueError):
    """A corpus file that is missing, not a file, unreadable or empty, or (`CorpusProblems`) read
    strictly with problem lines: the message names the file (`filename`) and says what is wrong
    (`reason`), then any `advice`."""

    def __init__(self, path: Path, reason: str, advice: str = ""):
        super().__init__(f"corpus file {path}: {reason}" + (f" ({advice})" if advice else ""))
        self.filename, self.reason = str(path), reason


@dataclass(frozen=True)
class Problem:
    """One line of a corpus file that was not read as written (see the module docstring)."""

    file: str  # the file's name, e.g. "tweets_GroundTruth.txt"
    line: int  # 1-based
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class CorpusFile:
    """A file a corpus was read from, as its bytes were when read."""

    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class CorpusLoad:
    """One corpus as read: its snippets, and what reading it noted and found wrong (module docstring)."""

    name: str
    path: Path  # the folder
    snippets: list[Snippet]
    notes: list[str]  # whole-file normalisations and known facts of the data, not errors
    problems: list[Problem]  # in file order (GroundTruth first), then line order
    files: tuple[CorpusFile, ...]  # GroundTruth, then anonDataRatings

    def problems_in(self, name: str) -> int:
        """How many lines of file `name` have a problem."""
        return len({p.line for p in self.problems if p.file == name})

    def split(self, split: str, include_ambiguous: bool = False) -> list[Snippet]:
        """The snippets of one split ("train", "dev", "test" or "all"), clear ones only unless asked."""
        if split not in (*SPLITS, "all"):
            raise ValueError(f"unknown split {split!r}; expected one of {[*SPLITS, 'all']}")
        return [
            s
            for s in self.snippets
            if (split == "all" or s.split == split) and (include_ambiguous or s.label != AMBIGUOUS)
        ]


# How many problem lines a message quotes; the rest are counted.
_SHOWN = 3


def _problem_summary(lines: dict[int, str], count: str) -> str:
    numbers = list(lines)
    where = (f"at line {numbers[0]}" if len(numbers) == 1
             else f"first at lines {', '.join(str(n) for n in numbers[:_SHOWN])}")
    return f"{count}, {where}: {lines[numbers[0]]}"


class CorpusProblems(CorpusError):
    """A corpus read strictly that has problem lines; `problems` holds them all. The message names
    the file of the first, counts the problem lines, and gives the first line numbers and the first
    reason, per file when both files have some."""

    def __init__(self, load: CorpusLoad, advice: str = ""):
        by_file: dict[str, dict[int, str]] = {}
        for p in load.problems:
            by_file.setdefault(p.file, {}).setdefault(p.line, p.reason)
        (first, lines), *others = by_file.items()
        if not others:
            reason = _problem_summary(lines, f"{len(lines)} problem line{'s' * (len(lines) != 1)}")
        else:
            total = sum(len(more) for more in by_file.values())
            reason = f"{total} problem lines in this corpus: " + "; ".join(
                [_problem_summary(lines, f"{len(lines)} in this file"),
                 *(_problem_summary(more, f"{len(more)} in {name}") for name, more in others)])
        super().__init__(load.path / first, reason, advice)
        self.problems = load.problems


@dataclass(frozen=True)
class _Raw:
    """A file's bytes, equal to another `_Raw` exactly when path and content hash are: the cache key
    of `_load_cached`, so an edited file is parsed again however quickly it was rewritten."""

    path: Path
    sha256: str
    data: bytes = field(compare=False, repr=False)


def _read_raw(path: Path) -> _Raw:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CorpusError(path, "a file is missing") from None
    except IsADirectoryError:
        raise CorpusError(path, "a folder stands where a file should") from None
    except OSError as err:
        raise CorpusError(path, f"a file cannot be read ({err.strerror or type(err).__name__})") from None
    return _Raw(path, hashlib.sha256(data).hexdigest(), data)


def _read_lines(raw: _Raw, notes: list[str], problems: list[Problem]) -> list[tuple[int, str]]:
    """Non-blank lines of a file as (1-based line number, text), every quirk noted or reported."""
    name, data = raw.path.name, raw.data
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
        notes.append(f"{name}: UTF-8 byte-order mark at the start (removed)")
    if not data.strip():
        raise CorpusError(raw.path, "a file is empty")
    crlf = data.count(b"\r\n")
    if crlf:
        notes.append(f"{name}: CRLF line ends on {crlf} lines (read as LF)")
    pieces = data.split(b"\n")
    last = max(i for i, piece in enumerate(pieces) if piece.strip())
    # Blank lines after the last row are whitespace at the end; one between rows may be a lost row.
    # The final newline leaves one empty piece, which is not a line.
    trailing = len(pieces) - 1 - last - data.endswith(b"\n")
    if trailing:
        notes.append(f"{name}: {trailing} blank line{'s' * (trailing != 1)} at the end (ignored)")
    lines: list[tuple[int, str]] = []
    for number, chunk in enumerate(pieces[: last + 1], start=1):
        chunk = chunk.removesuffix(b"\r")
        if not chunk.strip():
            problems.append(Problem(name, number, "blank line skipped"))
            continue
        try:
            line = chunk.decode("utf-8")
        except UnicodeDecodeError:
            # Latin-1 maps every byte, so the line survives with its odd characters visible.
            line = chunk.decode("latin-1")
            problems.append(Problem(name, number, "not UTF-8, read as Latin-1"))
        lines.append((number, line))
    return lines


def _parse_rows(raw: _Raw, notes: list[str], problems: list[Problem], parse) -> dict:
    """{id: (line number, value)} from `parse(line) -> (id, value)`, which raises ValueError on a bad
    line; bad lines and repeated ids are reported and skipped."""
    name = raw.path.name
    rows: dict = {}
    for number, line in _read_lines(raw, notes, problems):
        try:
            id_, value = parse(line)
        except ValueError as err:
            problems.append(Problem(name, number, f"skipped ({err}): {line[:60]!r}"))
            continue
        if id_ in rows:
            problems.append(Problem(name, number, f"duplicate id {id_!r} skipped (first on line {rows[id_][0]})"))
            continue
        rows[id_] = (number, value)
    if not rows:
        first = next((p for p in problems if p.file == name), None)
        raise CorpusError(raw.path, "a file has no readable rows" + (f" (line {first.line}: {first.reason})"
                                                                      if first else ""))
    return rows


def _ground_truth_row(line: str) -> tuple[str, tuple[float, str]]:
    # Split twice only: a tab inside the text stays part of the text.
    parts = line.split("\t", 2)
    if len(parts) != 3:
        raise ValueError(f"{len(parts)} fields, expected 3")
    id_, mean_s, text = parts[0].strip(), parts[1], parts[2].strip()
    if not id_:
        raise ValueError("empty id")
    mean = float(mean_s)
    if not math.isfinite(mean) or not -4 <= mean <= 4:
        raise ValueError(f"mean {mean_s!r} outside -4..4")
    if not text:
        raise ValueError("empty text")
    return id_, (mean, text)


def _ratings_row(line: str) -> tuple[str, tuple[float, float, tuple[int, ...]]]:
    parts = line.split("\t")
    if len(parts) != 4:
        raise ValueError(f"{len(parts)} fields, expected 4")
    id_, listed = parts[0].strip(), parts[3].strip()
    if not id_:
        raise ValueError("empty id")
    mean_col, std_col = float(parts[1]), float(parts[2])
    if not (listed.startswith("[") and listed.endswith("]")):
        raise ValueError("ratings are not a [..] list")
    ratings = tuple(int(r) for r in listed[1:-1].split(","))
    if not all(-4 <= r <= 4 for r in ratings):
        raise ValueError("a rating outside -4..4")
    return id_, (mean_col, std_col, ratings)


def _population_std(ratings: tuple[int, ...]) -> float:
    m = sum(ratings) / len(ratings)
    return math.sqrt(sum((r - m) ** 2 for r in ratings) / len(ratings))


def _p_positive(ratings: tuple[int, ...]) -> float:
    pos = sum(r > 0 for r in ratings)
    neg = sum(r < 0 for r in ratings)
    return pos / (pos + neg) if pos + neg else 0.5


@functools.lru_cache(maxsize=16)
def _load_cached(short: str, folder: Path, truth_raw: _Raw, ratings_raw: _Raw) -> CorpusLoad:
    truth_name, ratings_name = truth_raw.path.name, ratings_raw.path.name
    notes: list[str] = []
    problems: list[Problem] = []
    truth = _parse_rows(truth_raw, notes, problems, _ground_truth_row)
    rated = _parse_rows(ratings_raw, notes, problems, _ratings_row)
    for id_ in truth.keys() - rated.keys():
        problems.append(Problem(truth_name, truth[id_][0],
                                f"id {id_!r} is in GroundTruth but not in anonDataRatings (skipped)"))
    for id_ in rated.keys() - truth.keys():
        problems.append(Problem(ratings_name, rated[id_][0],
                                f"id {id_!r} is in anonDataRatings but not in GroundTruth (skipped)"))
    snippets = []
    # GroundTruth order is the published order; keep it so listings read like the source.
    for id_, (number, (mean, text)) in truth.items():
        if id_ not in rated:
            continue
        rated_number, (mean_col, std_col, ratings) = rated[id_]
        listed_mean, std = sum(ratings) / len(ratings), _population_std(ratings)
        # Every published ratings line agrees with itself to 1e-3: a line that does not was damaged.
        if abs(listed_mean - mean_col) > _TOLERANCE or abs(std - std_col) > _TOLERANCE:
            problems.append(Problem(
                ratings_name, rated_number,
                f"id {id_!r} mean {mean_col} and std {std_col} columns do not match its listed ratings' "
                f"{listed_mean:.5f} and {std:.5f} (kept the listed ratings)"))
        if abs(listed_mean - mean) > _TOLERANCE:
            notes.append(
                f"{truth_name}:{number}: id {id_!r} GroundTruth mean {mean:.4f} differs from the mean "
                f"{listed_mean:.4f} of its {len(ratings)} listed ratings (kept the GroundTruth mean)"
            )
        snippets.append(
            Snippet(
                corpus=short,
                id=id_,
                text=text,
                mean=mean,
                ratings=ratings,
                std=std,
                label=label_of(mean),
                human_p_positive=_p_positive(ratings),
                split=split_of(short, id_),
            )
        )
    if not snippets:
        raise CorpusError(truth_raw.path, f"a file shares no id with {ratings_name}")
    problems.sort(key=lambda p: (p.file != truth_name, p.line))
    files = tuple(CorpusFile(raw.path.name, raw.sha256, len(raw.data)) for raw in (truth_raw, ratings_raw))
    return CorpusLoad(name=short, path=folder, snippets=snippets, notes=notes, problems=problems, files=files)


def load_corpus(name: str, data: str | Path | None = None, strict: bool = True) -> CorpusLoad:
    """Parse one corpus (short name such as "movies", or the file stem), cached per file content.

    strict (the default): a problem line raises `CorpusProblems`; notes never do. strict=False returns
    the load with its `problems` for the caller to show. A missing, unreadable or empty file, or two
    files without a common id, raise `CorpusError` either way.
    The returned object is shared between callers; treat it as read-only.
    """
    short, folder = _short_name(name), _require_dir(data)
    long = CORPORA[short]
    # Read and hashed on every call, so the cache can never hand back a load of an older file.
    load = _load_cached(short, folder, _read_raw(folder / f"{long}_GroundTruth.txt"),
                        _read_raw(folder / f"{long}_anonDataRatings.txt"))
    if strict and load.problems:
        raise CorpusProblems(load)
    return load


def load_split(
    corpus: str, split: str, data: str | Path | None = None, include_ambiguous: bool = False,
    strict: bool = True,
) -> list[Snippet]:
    """The snippets of one split ("train", "dev", "test" or "all"), clear ones only unless asked;
    `strict` as in `load_corpus`."""
    return load_corpus(corpus, data, strict).split(split, include_ambiguous)


def split_fingerprint(data: str | Path | None = None) -> str:
    """sha256 of the sorted (corpus, id, split) assignments of the movie corpus, for model cards."""
    rows = sorted((s.corpus, s.id, s.split) for s in load_corpus("movies", data).snippets)
    digest = hashlib.sha256()
    for row in rows:
        digest.update(("\t".join(row) + "\n").encode())
    return digest.hexdigest()
