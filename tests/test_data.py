"""The corpus loader against the real Hutto & Gilbert (2014) files and small synthetic ones."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from pathlib import Path

import pytest

from bam_viz import data
from bam_viz.data import (
    CORPORA,
    CorpusError,
    CorpusProblems,
    data_dir,
    load_corpus,
    load_split,
    split_fingerprint,
    split_of,
)

# Published sizes and the class balance at |mean| > 0.5 measured in PROVENANCE.md.
EXPECTED = {
    "movies": (10_605, 4_982, 5_061, 562),
    "tweets": (4_200, 2_300, 1_062, 838),
    "amazon": (3_708, 1_725, 1_218, 765),
    "nyt": (5_190, 1_100, 1_688, 2_402),
}
# sha256 of the movie split assignments: changes only if split_of or the movie ids change.
MOVIES_FINGERPRINT = "1eab1b0738a6f29b16c339b94a6ee280ae7c9f164903c25e3d0b91d28d22b624"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sizes_and_class_balance(corpus_dir: Path, name: str) -> None:
    n, pos, neg, amb = EXPECTED[name]
    loaded = load_corpus(name, corpus_dir)
    labels = Counter(s.label for s in loaded.snippets)
    assert len(loaded.snippets) == n
    assert (labels["positive"], labels["negative"], labels["ambiguous"]) == (pos, neg, amb)
    assert len({s.id for s in loaded.snippets}) == n


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_corpora_have_notes_and_no_problem_lines(corpus_dir: Path, name: str) -> None:
    loaded = load_corpus(name, corpus_dir)  # strict: a problem line would raise
    long = CORPORA[name]
    assert loaded.problems == []
    # Only the known quirks, as notes: CRLF everywhere, a BOM on the amazon ratings file, 199 tweet means.
    crlf = [n for n in loaded.notes if "CRLF" in n]
    bom = [n for n in loaded.notes if "byte-order mark" in n]
    means = [n for n in loaded.notes if "differs from the mean" in n]
    assert len(crlf) == 2
    assert bom == (
        [f"{long}_anonDataRatings.txt: UTF-8 byte-order mark at the start (removed)"]
        if name == "amazon"
        else []
    )
    assert len(means) == (199 if name == "tweets" else 0)
    assert len(crlf) + len(bom) + len(means) == len(loaded.notes)
    # The hashes are those of the files as they are on disk.
    assert [f.name for f in loaded.files] == [f"{long}_GroundTruth.txt", f"{long}_anonDataRatings.txt"]
    for f in loaded.files:
        raw = (corpus_dir / f.name).read_bytes()
        assert (f.sha256, f.size) == (hashlib.sha256(raw).hexdigest(), len(raw))


def test_amazon_ids_carry_no_bom(corpus_dir: Path) -> None:
    first = load_corpus("amazon", corpus_dir).snippets[0]
    assert first.id == "1_1"
    assert first.ratings[:3] == (0, -1, 0)


def test_disagreeing_tweets_keep_the_ground_truth_mean(corpus_dir: Path) -> None:
    by_id = {s.id: s for s in load_corpus("tweets", corpus_dir).snippets}
    tweet = by_id["2"]  # "Yay. Another good phone interview.": 99 ratings averaging 2.26
    assert tweet.mean == pytest.approx(1.443298969)
    assert len(tweet.ratings) == 99
    assert sum(tweet.ratings) / 99 == pytest.approx(2.262626263)
    assert tweet.std == pytest.approx(0.98047, abs=1e-5)


def test_fields_of_one_movie_snippet(corpus_dir: Path) -> None:
    first = load_corpus("movies", corpus_dir).snippets[0]
    assert first.id == "1" and first.corpus == "movies"
    assert first.text.startswith("The Rock is destined to be the 21st Century's new ''Conan''")
    assert first.mean == pytest.approx(2.266666667)
    assert first.ratings == (3, 2, 2, 2, 0, 4, 3, 1, 2, 2, 4, 3, 3, 1, 2)
    # Population std (ddof=0) is the convention of the file's own std column, 1.06249.
    assert first.std == pytest.approx(1.06249, abs=1e-5)
    assert first.human_p_positive == 1.0  # 14 positive, one 0 that does not count
    assert first.label == "positive"
    assert first.split == split_of("movies", "1")


def test_non_ascii_text_survives(corpus_dir: Path) -> None:
    by_id = {s.id: s for s in load_corpus("tweets", corpus_dir).snippets}
    assert "español" in by_id["3517"].text
    assert "£1000" in by_id["1241"].text


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_human_p_positive_and_labels_are_consistent(corpus_dir: Path, name: str) -> None:
    for s in load_corpus(name, corpus_dir).snippets:
        assert 0.0 <= s.human_p_positive <= 1.0
        assert 0.0 <= s.std <= 4.0
        assert s.label == ("positive" if s.mean > 0.5 else "negative" if s.mean < -0.5 else "ambiguous")


def test_human_p_positive_by_hand() -> None:
    assert data._p_positive((1, 2, -1, 0, 0)) == pytest.approx(2 / 3)
    assert data._p_positive((0, 0, 0)) == 0.5
    assert data._p_positive((-2, -1)) == 0.0


def test_split_of_matches_the_formula_by_hand() -> None:
    # 16 = 6 (mod 10) and 6 * 6 = 6 (mod 10), so a hex number is last digit + 6 * (other digits) mod 10:
    # an independent route to sha256("corpus:id") mod 10.
    for corpus, id_ in [("movies", "1"), ("movies", "2"), ("movies", "10"), ("tweets", "7"), ("nyt", "1_1")]:
        digits = [int(c, 16) for c in hashlib.sha256(f"{corpus}:{id_}".encode()).hexdigest()]
        h = (digits[-1] + 6 * sum(digits[:-1])) % 10
        assert split_of(corpus, id_) == ("test" if h == 0 else "dev" if h == 1 else "train")
    assert (split_of("movies", "10"), split_of("movies", "1"), split_of("movies", "2")) == (
        "test",
        "dev",
        "train",
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_splits_are_deterministic_and_about_10_10_80(corpus_dir: Path, name: str) -> None:
    snippets = load_corpus(name, corpus_dir).snippets
    shares = Counter(s.split for s in snippets)
    for split, share in (("test", 0.1), ("dev", 0.1), ("train", 0.8)):
        assert shares[split] / len(snippets) == pytest.approx(share, abs=0.025)
    assert all(s.split == split_of(name, s.id) for s in snippets)


def test_load_split_partitions_the_corpus(corpus_dir: Path) -> None:
    everything = load_split("movies", "all", corpus_dir, include_ambiguous=True)
    parts = [load_split("movies", split, corpus_dir, include_ambiguous=True) for split in data.SPLITS]
    assert sum(len(p) for p in parts) == len(everything) == 10_605
    assert set().union(*({s.id for s in p} for p in parts)) == {s.id for s in everything}
    clear_test = load_split("movies", "test", corpus_dir)
    assert all(s.label != "ambiguous" and s.split == "test" for s in clear_test)
    assert len(clear_test) + sum(s.label == "ambiguous" for s in parts[2]) == len(parts[2])
    with pytest.raises(ValueError, match="unknown split"):
        load_split("movies", "validation", corpus_dir)


def test_split_fingerprint_is_pinned(corpus_dir: Path) -> None:
    assert split_fingerprint(corpus_dir) == MOVIES_FINGERPRINT


def test_env_override_uses_the_named_copy(tmp_path: Path, corpus_dir: Path, monkeypatch) -> None:
    for name in ("movieReviewSnippets_GroundTruth.txt", "movieReviewSnippets_anonDataRatings.txt"):
        shutil.copy(corpus_dir / name, tmp_path / name)
    # Drop the last GroundTruth line in the copy, so only the copy can give 10,604 snippets.
    truth = tmp_path / "movieReviewSnippets_GroundTruth.txt"
    truth.write_bytes(truth.read_bytes().rsplit(b"\r\n", 1)[0])
    monkeypatch.setenv("BAM_VIZ_DATA", str(tmp_path))
    assert data_dir() == tmp_path.resolve()
    with pytest.raises(CorpusProblems, match="1 problem line, at line 10605: id '10605' is in anonDataRatings"):
        load_corpus("movies")
    loaded = load_corpus("movies", strict=False)
    assert loaded.path == tmp_path.resolve()
    assert len(loaded.snippets) == 10_604
    assert [str(p) for p in loaded.problems] == [
        "movieReviewSnippets_anonDataRatings.txt:10605: id '10605' is in anonDataRatings but not in GroundTruth "
        "(skipped)"
    ]
    # An explicit path still wins over the environment.
    assert data_dir(corpus_dir) == corpus_dir


def test_missing_folder_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        data_dir(tmp_path / "nowhere")
    monkeypatch.setenv("BAM_VIZ_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"\$BAM_VIZ_DATA"):
        load_corpus("movies")
    monkeypatch.delenv("BAM_VIZ_DATA")
    monkeypatch.setattr(data, "_repo_root", lambda: tmp_path / "repo")
    assert data_dir() is None
    with pytest.raises(FileNotFoundError, match="set \\$BAM_VIZ_DATA"):
        load_corpus("movies")
    with pytest.raises(ValueError, match="unknown corpus"):
        load_corpus("imdb", tmp_path)


def test_synthetic_quirks_are_parsed_and_reported(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    truth = (
        bom
        + b"1\t2.0\tA fine film.\r\n"
        + b"2\t-1.5\tCaf\xe9 scenes drag.\r\n"  # Latin-1 e-acute: not UTF-8
        + b"\r\n"  # blank line
        + b"3\tabc\tA bad mean.\r\n"
        + b"4\t0.25\tMeh.\r\n"
        + b"5\t1.0\tOnly here.\r\n"
        + b"6\t3.0\n"  # too few fields
    )
    ratings = (
        bom
        + b"1\t2.0\t0.0\t[2, 2, 2]\r\n"
        + b"2\t-1.5\t0.5\t[-1, -2]\r\n"
        + b"3\t0.0\t0.0\t[0, 0]\r\n"
        + b"4\t0.25\t0.43301\t[0, 0, 0, 1]\r\n"
        + b"7\t1.0\t0.0\t[1]\r\n"  # only here
    )
    (tmp_path / "movieReviewSnippets_GroundTruth.txt").write_bytes(truth)
    (tmp_path / "movieReviewSnippets_anonDataRatings.txt").write_bytes(ratings)
    with pytest.raises(CorpusProblems) as caught:
        load_corpus("movieReviewSnippets", tmp_path)
    assert str(caught.value) == (
        f"corpus file {tmp_path.resolve() / 'movieReviewSnippets_GroundTruth.txt'}: 7 problem lines in this "
        "corpus: 5 in this file, first at lines 2, 3, 4: not UTF-8, read as Latin-1; 2 in "
        "movieReviewSnippets_anonDataRatings.txt, first at lines 3, 5: id '3' is in anonDataRatings but not in "
        "GroundTruth (skipped)"
    )
    loaded = load_corpus("movieReviewSnippets", tmp_path, strict=False)
    assert caught.value.problems == loaded.problems
    by_id = {s.id: s for s in loaded.snippets}
    assert sorted(by_id) == ["1", "2", "4"]
    assert by_id["2"].text == "Café scenes drag."
    assert by_id["2"].std == pytest.approx(0.5)
    assert by_id["4"].label == "ambiguous" and by_id["4"].human_p_positive == 1.0
    assert by_id["1"].corpus == "movies"
    assert loaded.notes == [
        "movieReviewSnippets_GroundTruth.txt: UTF-8 byte-order mark at the start (removed)",
        "movieReviewSnippets_GroundTruth.txt: CRLF line ends on 6 lines (read as LF)",
        "movieReviewSnippets_anonDataRatings.txt: UTF-8 byte-order mark at the start (removed)",
        "movieReviewSnippets_anonDataRatings.txt: CRLF line ends on 5 lines (read as LF)",
    ]
    assert [str(p) for p in loaded.problems] == [
        "movieReviewSnippets_GroundTruth.txt:2: not UTF-8, read as Latin-1",
        "movieReviewSnippets_GroundTruth.txt:3: blank line skipped",
        "movieReviewSnippets_GroundTruth.txt:4: skipped (could not convert string to float: 'abc'): "
        "'3\\tabc\\tA bad mean.'",
        "movieReviewSnippets_GroundTruth.txt:6: id '5' is in GroundTruth but not in anonDataRatings (skipped)",
        "movieReviewSnippets_GroundTruth.txt:7: skipped (2 fields, expected 3): '6\\t3.0'",
        "movieReviewSnippets_anonDataRatings.txt:3: id '3' is in anonDataRatings but not in GroundTruth (skipped)",
        "movieReviewSnippets_anonDataRatings.txt:5: id '7' is in anonDataRatings but not in GroundTruth (skipped)",
    ]
    assert (loaded.problems_in("movieReviewSnippets_GroundTruth.txt"),
            loaded.problems_in("movieReviewSnippets_anonDataRatings.txt")) == (5, 2)


# A tiny movie corpus in the published format: CRLF line ends, no newline after the last line,
# the ratings file's mean and std columns those of its list. test_cli and test_evaluate use the helpers.
RATINGS = {"1": (2, 2, 3), "2": (-2, -3, -1), "3": (1, 2, 2), "4": (-1, -1, -2)}
TEXTS = {"1": "A fine film.", "2": "A dull one.", "3": "Good enough.", "4": "Too long."}


def truth_line(id_: str, ratings=None, text: str | None = None) -> bytes:
    """A GroundTruth line whose mean is that of `ratings` (default RATINGS[id_])."""
    ratings = ratings or RATINGS[id_]
    return f"{id_}\t{sum(ratings) / len(ratings)}\t{text or TEXTS.get(id_, 'Fine.')}".encode()


def ratings_line(id_: str, ratings=None, mean: float | None = None) -> bytes:
    """An anonDataRatings line; `mean` overrides its mean column (a damaged line)."""
    ratings = ratings or RATINGS[id_]
    m = sum(ratings) / len(ratings)
    std = (sum((r - m) ** 2 for r in ratings) / len(ratings)) ** 0.5
    return f"{id_}\t{m if mean is None else mean:.9f}\t{std:.5f}\t[{', '.join(map(str, ratings))}]".encode()


def write_movies(folder: Path, truth: list[bytes], ratings: list[bytes]) -> Path:
    """`folder` holding a movie corpus of these lines; returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "movieReviewSnippets_GroundTruth.txt").write_bytes(b"\r\n".join(truth))
    (folder / "movieReviewSnippets_anonDataRatings.txt").write_bytes(b"\r\n".join(ratings))
    return folder


def _clean() -> tuple[list[bytes], list[bytes]]:
    return [truth_line(i) for i in RATINGS], [ratings_line(i) for i in RATINGS]


def test_a_clean_synthetic_corpus_loads_strictly(tmp_path: Path) -> None:
    truth, ratings = _clean()
    # Blank lines after the last row are whitespace at the end: a note, not a problem.
    ratings[-1] += b"\r\n\r\n\r\n"
    loaded = load_corpus("movies", write_movies(tmp_path, truth, ratings))
    assert [s.id for s in loaded.snippets] == ["1", "2", "3", "4"] and loaded.problems == []
    assert "movieReviewSnippets_anonDataRatings.txt: 2 blank lines at the end (ignored)" in loaded.notes


def _non_utf8(truth, ratings):
    truth[1] = b"2\t-2.0\tCaf\xe9 scenes drag."


def _duplicate(truth, ratings):
    truth.append(truth_line("2", text="The same id again."))


def _only_in_truth(truth, ratings):
    truth.append(truth_line("5", (1, 1, 1)))


def _only_in_ratings(truth, ratings):
    ratings.insert(2, ratings_line("5", (1, 1, 1)))


def _blank_between_rows(truth, ratings):
    truth.insert(2, b"  ")


def _malformed(truth, ratings):
    ratings[2] = ratings[2][:-3]  # the list loses its closing bracket


def _self_contradicting(truth, ratings):
    ratings[1] = ratings_line("2", mean=-1.0)  # a mean column its list does not have


GT, RT = "movieReviewSnippets_GroundTruth.txt", "movieReviewSnippets_anonDataRatings.txt"
# damage, the problems it causes (file:line: reason), the snippets a lenient read keeps
DAMAGE = {
    "non-UTF-8 line": (_non_utf8, [f"{GT}:2: not UTF-8, read as Latin-1"], 4),
    "duplicate id": (_duplicate, [f"{GT}:5: duplicate id '2' skipped (first on line 2)"], 4),
    "id only in GroundTruth": (
        _only_in_truth, [f"{GT}:5: id '5' is in GroundTruth but not in anonDataRatings (skipped)"], 4),
    "id only in ratings": (
        _only_in_ratings, [f"{RT}:3: id '5' is in anonDataRatings but not in GroundTruth (skipped)"], 4),
    "blank line between rows": (_blank_between_rows, [f"{GT}:3: blank line skipped"], 4),
    # A skipped row leaves its id in the other file only: two problem lines, one in each file.
    "malformed row": (_malformed, [
        f"{GT}:3: id '3' is in GroundTruth but not in anonDataRatings (skipped)",
        f"{RT}:3: skipped (ratings are not a [..] list): '3\\t1.666666667\\t0.47140\\t[1, 2,'",
    ], 3),
    "self-contradicting ratings line": (_self_contradicting, [
        f"{RT}:2: id '2' mean -1.0 and std 0.8165 columns do not match its listed ratings' -2.00000 and "
        "0.81650 (kept the listed ratings)"
    ], 4),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_problem_line_fails_a_strict_load_and_is_listed_by_a_lenient_one(tmp_path: Path, damage: str) -> None:
    change, problems, kept = DAMAGE[damage]
    truth, ratings = _clean()
    change(truth, ratings)
    folder = write_movies(tmp_path, truth, ratings)
    name, line, reason = problems[0].split(":", 2)
    with pytest.raises(CorpusProblems) as caught:
        load_corpus("movies", folder)
    err = caught.value
    assert err.filename == str(folder.resolve() / name)
    head = "1 problem line" if len(problems) == 1 else f"{len(problems)} problem lines in this corpus: 1 in this file"
    assert err.reason.startswith(f"{head}, at line {line}:{reason}")
    assert str(err).startswith(f"corpus file {folder.resolve() / name}: {head}, at line {line}: ")
    assert ("problem lines in this corpus: 1 in this file" in str(err)) == (len(problems) > 1)
    with pytest.raises(CorpusProblems):
        load_split("movies", "all", folder)  # the default of every caller is strict
    loaded = load_corpus("movies", folder, strict=False)
    assert [str(p) for p in loaded.problems] == [str(p) for p in err.problems] == problems
    assert len(loaded.snippets) == kept
    if damage == "non-UTF-8 line":
        assert loaded.snippets[1].text == "Café scenes drag."
    if damage == "duplicate id":
        assert loaded.snippets[1].text == TEXTS["2"]  # the first of the two is kept


@pytest.mark.parametrize("cut", ["GroundTruth", "anonDataRatings"])
def test_a_file_truncated_mid_line_fails_strictly_and_counts_every_lost_line(
    tmp_path: Path, corpus_dir: Path, cut: str
) -> None:
    for name in ("movieReviewSnippets_GroundTruth.txt", "movieReviewSnippets_anonDataRatings.txt"):
        shutil.copy(corpus_dir / name, tmp_path / name)
    path = tmp_path / f"movieReviewSnippets_{cut}.txt"
    raw = path.read_bytes()
    cut_at = raw.index(b"\r\n10500\t") + 2
    # Cut inside line 10500: 4 bytes into its text (GroundTruth) or its ratings list (anonDataRatings).
    for _ in range(2 if cut == "GroundTruth" else 3):
        cut_at = raw.index(b"\t", cut_at) + 1
    path.write_bytes(raw[: cut_at + 4])
    with pytest.raises(CorpusProblems) as caught:
        load_corpus("movies", tmp_path)
    loaded = load_corpus("movies", tmp_path, strict=False)
    if cut == "GroundTruth":
        # Line 10500 keeps 4 characters of its text (nothing can tell); lines 10501-10605 are lost.
        assert len(loaded.snippets) == 10_500 and loaded.snippets[-1].text == "Bris"
        assert str(caught.value) == (
            f"corpus file {tmp_path.resolve() / 'movieReviewSnippets_anonDataRatings.txt'}: 105 problem lines, "
            "first at lines 10501, 10502, 10503: id '10501' is in anonDataRatings but not in GroundTruth (skipped)"
        )
    else:
        assert len(loaded.snippets) == 10_499
        assert str(caught.value) == (
            f"corpus file {tmp_path.resolve() / 'movieReviewSnippets_GroundTruth.txt'}: 107 problem lines in "
            "this corpus: 106 in this file, first at lines 10500, 10501, 10502: id '10500' is in GroundTruth but "
            "not in anonDataRatings (skipped); 1 in movieReviewSnippets_anonDataRatings.txt, at line 10500: "
            "skipped (ratings are not a [..] list): '10500\\t-2.368421053\\t0.92966\\t[-3,'"
        )
    assert len(caught.value.problems) == len(loaded.problems) == 10_605 - len(loaded.snippets) + (cut != "GroundTruth")


def _missing(path: Path) -> None:
    path.unlink()


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("damage, says", [
    (_missing, "a file is missing"),
    (_folder, "a folder stands where a file should"),
    (lambda p: p.write_bytes(b""), "a file is empty"),
    (lambda p: p.write_bytes(b"\xef\xbb\xbf\r\n\r\n  \r\n"), "a file is empty"),
    (lambda p: p.write_bytes(b"id\tmean\ttext\r\n"),
     "a file has no readable rows (line 1: skipped (could not convert string to float: 'mean'): "
     "'id\\tmean\\ttext')"),
    (lambda p: p.write_bytes(truth_line("9", (1, 1))), f"a file shares no id with {RT}"),
], ids=["missing", "folder", "empty", "blank lines only", "header only", "no id in common"])
@pytest.mark.parametrize("strict", [True, False])
def test_a_file_with_nothing_to_read_is_an_error_naming_it_strict_or_not(
    tmp_path: Path, damage, says: str, strict: bool
) -> None:
    folder = write_movies(tmp_path, *_clean())
    damage(folder / "movieReviewSnippets_GroundTruth.txt")
    with pytest.raises(CorpusError) as caught:
        load_corpus("movies", folder, strict=strict)
    assert not isinstance(caught.value, CorpusProblems)
    assert caught.value.filename == str(folder.resolve() / "movieReviewSnippets_GroundTruth.txt")
    assert caught.value.reason == says
    assert str(caught.value) == f"corpus file {caught.value.filename}: {says}"


def test_the_cache_follows_the_file_content(tmp_path: Path) -> None:
    truth, ratings = _clean()
    folder = write_movies(tmp_path, truth, ratings)
    first = load_corpus("movies", folder)
    assert load_corpus("movies", folder) is first  # unchanged files: parsed once
    # Same size, rewritten at once: a key on folder, size or a coarse mtime would return the old load.
    truth[0] = truth_line("1", text="A fine book.")
    write_movies(folder, truth, ratings)
    again = load_corpus("movies", folder)
    assert again.snippets[0].text == "A fine book." and first.snippets[0].text == "A fine film."
    assert again.files[0].sha256 != first.files[0].sha256 and again.files[1] == first.files[1]
    # A damaged rewrite is seen too, though the clean version sits in the cache.
    _duplicate(truth, ratings)
    write_movies(folder, truth, ratings)
    with pytest.raises(CorpusProblems, match="duplicate id"):
        load_corpus("movies", folder)
