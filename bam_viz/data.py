"""The four human-rated sentiment corpora of Hutto & Gilbert (2014), loaded without copying them.

Source: Hutto, C.J. & Gilbert, E.E. (2014). VADER: A Parsimonious Rule-based Model for Sentiment
Analysis of Social Media Text. ICWSM-14. Files from `cjhutto/vaderSentiment`,
`additional_resources/hutto_ICWSM_2014.tar.gz` (MIT licence); see PROVENANCE.md beside the data.

Each corpus is two tab-separated files joined by id:
  `X_GroundTruth.txt`     id, mean rating, text
  `X_anonDataRatings.txt` id, mean rating, standard deviation, [r1, r2, ...] (integers in -4..4)

Every line is either loaded or named in `CorpusLoad.problems`; nothing is dropped silently.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from bam_viz.task import CLASSES

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
    """A corpus file that is missing, not a file, unreadable or empty: the message names the file
    (`filename`) and says what is wrong (`reason`)."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"corpus file {path}: {reason}")
        self.filename, self.reason = str(path), reason


@dataclass(frozen=True)
class CorpusLoad:
    name: str
    path: Path
    snippets: list[Snippet]
    problems: list[str]


def _read_lines(path: Path, problems: list[str]) -> list[tuple[int, str]]:
    """Non-blank lines of `path` as (1-based line number, text), every quirk reported."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CorpusError(path, "a file is missing") from None
    except IsADirectoryError:
        raise CorpusError(path, "a folder stands where a file should") from None
    except OSError as err:
        raise CorpusError(path, f"a file cannot be read ({err.strerror or type(err).__name__})") from None
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
        problems.append(f"{path.name}: UTF-8 byte-order mark at the start (removed)")
    crlf = raw.count(b"\r\n")
    if crlf:
        problems.append(f"{path.name}: CRLF line ends on {crlf} lines (read as LF)")
    lines: list[tuple[int, str]] = []
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        chunk = chunk.removesuffix(b"\r")
        try:
            line = chunk.decode("utf-8")
        except UnicodeDecodeError:
            # Latin-1 maps every byte, so the line survives with its odd characters visible.
            line = chunk.decode("latin-1")
            problems.append(f"{path.name}:{number}: not UTF-8, read as Latin-1")
        if not line.strip():
            # The final newline leaves one empty piece; it is not a blank line of the file.
            if number != raw.count(b"\n") + 1:
                problems.append(f"{path.name}:{number}: blank line skipped")
            continue
        lines.append((number, line))
    return lines


def _parse_rows(path: Path, problems: list[str], parse) -> dict:
    """{id: value} from `parse(line) -> (id, value)`, which raises ValueError on a bad line; bad
    lines and repeated ids are reported and skipped."""
    rows: dict = {}
    for number, line in _read_lines(path, problems):
        try:
            id_, value = parse(line)
        except ValueError as err:
            problems.append(f"{path.name}:{number}: skipped ({err}): {line[:60]!r}")
            continue
        if id_ in rows:
            problems.append(f"{path.name}:{number}: duplicate id {id_!r} skipped")
            continue
        rows[id_] = value
    if not rows:
        raise CorpusError(path, "a file has no readable rows")
    return rows


def _ground_truth_row(line: str) -> tuple[str, tuple[float, str]]:
    # Split twice only: a tab inside the text stays part of the text.
    parts = line.split("\t", 2)
    if len(parts) != 3:
        raise ValueError(f"{len(parts)} fields, expected 3")
    id_, mean_s, text = parts[0].strip(), parts[1], parts[2].strip()
    mean = float(mean_s)
    if not math.isfinite(mean) or not -4 <= mean <= 4:
        raise ValueError(f"mean {mean_s!r} outside -4..4")
    if not text:
        raise ValueError("empty text")
    return id_, (mean, text)


def _ratings_row(line: str) -> tuple[str, tuple[float, tuple[int, ...]]]:
    parts = line.split("\t")
    if len(parts) != 4:
        raise ValueError(f"{len(parts)} fields, expected 4")
    id_, listed = parts[0].strip(), parts[3].strip()
    std_col = float(parts[2])
    if not (listed.startswith("[") and listed.endswith("]")):
        raise ValueError("ratings are not a [..] list")
    ratings = tuple(int(r) for r in listed[1:-1].split(","))
    if not all(-4 <= r <= 4 for r in ratings):
        raise ValueError("a rating outside -4..4")
    return id_, (std_col, ratings)


def _parse_ground_truth(path: Path, problems: list[str]) -> dict[str, tuple[float, str]]:
    return _parse_rows(path, problems, _ground_truth_row)


def _parse_ratings(path: Path, problems: list[str]) -> dict[str, tuple[float, tuple[int, ...]]]:
    return _parse_rows(path, problems, _ratings_row)


def _population_std(ratings: tuple[int, ...]) -> float:
    m = sum(ratings) / len(ratings)
    return math.sqrt(sum((r - m) ** 2 for r in ratings) / len(ratings))


def _p_positive(ratings: tuple[int, ...]) -> float:
    pos = sum(r > 0 for r in ratings)
    neg = sum(r < 0 for r in ratings)
    return pos / (pos + neg) if pos + neg else 0.5


@functools.lru_cache(maxsize=16)
def _load_cached(short: str, folder: Path) -> CorpusLoad:
    long = CORPORA[short]
    problems: list[str] = []
    truth = _parse_ground_truth(folder / f"{long}_GroundTruth.txt", problems)
    rated = _parse_ratings(folder / f"{long}_anonDataRatings.txt", problems)
    for id_ in truth.keys() - rated.keys():
        problems.append(f"{long}: id {id_!r} is in GroundTruth but not in anonDataRatings (skipped)")
    for id_ in rated.keys() - truth.keys():
        problems.append(f"{long}: id {id_!r} is in anonDataRatings but not in GroundTruth (skipped)")
    snippets = []
    # GroundTruth order is the published order; keep it so listings read like the source.
    for id_, (mean, text) in truth.items():
        if id_ not in rated:
            continue
        std_col, ratings = rated[id_]
        listed_mean = sum(ratings) / len(ratings)
        if abs(listed_mean - mean) > _TOLERANCE:
            problems.append(
                f"{long}: id {id_!r} GroundTruth mean {mean:.4f} differs from the mean {listed_mean:.4f} "
                f"of its {len(ratings)} listed ratings (kept the GroundTruth mean)"
            )
        std = _population_std(ratings)
        if abs(std - std_col) > _TOLERANCE:
            problems.append(
                f"{long}: id {id_!r} listed std {std_col} differs from the ratings' population std {std:.5f}"
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
    return CorpusLoad(name=short, path=folder, snippets=snippets, problems=problems)


def load_corpus(name: str, data: str | Path | None = None) -> CorpusLoad:
    """Parse one corpus (short name such as "movies", or the file stem), cached per folder.

    The returned object is shared between callers; treat it as read-only.
    """
    return _load_cached(_short_name(name), _require_dir(data))


def load_split(
    corpus: str, split: str, data: str | Path | None = None, include_ambiguous: bool = False
) -> list[Snippet]:
    """The snippets of one split ("train", "dev", "test" or "all"), clear ones only unless asked."""
    if split not in (*SPLITS, "all"):
        raise ValueError(f"unknown split {split!r}; expected one of {[*SPLITS, 'all']}")
    return [
        s
        for s in load_corpus(corpus, data).snippets
        if (split == "all" or s.split == split) and (include_ambiguous or s.label != AMBIGUOUS)
    ]


def split_fingerprint(data: str | Path | None = None) -> str:
    """sha256 of the sorted (corpus, id, split) assignments of the movie corpus, for model cards."""
    rows = sorted((s.corpus, s.id, s.split) for s in load_corpus("movies", data).snippets)
    digest = hashlib.sha256()
    for row in rows:
        digest.update(("\t".join(row) + "\n").encode())
    return digest.hexdigest()
