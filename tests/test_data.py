"""The corpus loader against the real Hutto & Gilbert (2014) files and small synthetic ones."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from pathlib import Path

import pytest

from bam_viz import data
from bam_viz.data import CORPORA, data_dir, load_corpus, load_split, split_fingerprint, split_of

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
def test_every_line_loaded_or_reported(corpus_dir: Path, name: str) -> None:
    loaded = load_corpus(name, corpus_dir)
    long = CORPORA[name]
    # Only the known quirks: CRLF everywhere, a BOM on the amazon ratings file, 199 tweet means.
    crlf = [p for p in loaded.problems if "CRLF" in p]
    bom = [p for p in loaded.problems if "byte-order mark" in p]
    means = [p for p in loaded.problems if "differs from the mean" in p]
    assert len(crlf) == 2
    assert bom == (
        [f"{long}_anonDataRatings.txt: UTF-8 byte-order mark at the start (removed)"]
        if name == "amazon"
        else []
    )
    assert len(means) == (199 if name == "tweets" else 0)
    assert len(crlf) + len(bom) + len(means) == len(loaded.problems)


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
    loaded = load_corpus("movies")
    assert loaded.path == tmp_path.resolve()
    assert len(loaded.snippets) == 10_604
    assert any("'10605' is in anonDataRatings but not in GroundTruth" in p for p in loaded.problems)
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
    loaded = load_corpus("movieReviewSnippets", tmp_path)
    by_id = {s.id: s for s in loaded.snippets}
    assert sorted(by_id) == ["1", "2", "4"]
    assert by_id["2"].text == "Café scenes drag."
    assert by_id["2"].std == pytest.approx(0.5)
    assert by_id["4"].label == "ambiguous" and by_id["4"].human_p_positive == 1.0
    assert by_id["1"].corpus == "movies"
    report = "\n".join(loaded.problems)
    for fragment in (
        "GroundTruth.txt: UTF-8 byte-order mark",
        "anonDataRatings.txt: UTF-8 byte-order mark",
        "GroundTruth.txt: CRLF line ends on 6 lines",
        "GroundTruth.txt:2: not UTF-8, read as Latin-1",
        "GroundTruth.txt:3: blank line skipped",
        "GroundTruth.txt:4: skipped (could not convert string to float: 'abc')",
        "GroundTruth.txt:7: skipped (2 fields, expected 3)",
        "id '5' is in GroundTruth but not in anonDataRatings",
        "id '7' is in anonDataRatings but not in GroundTruth",
        "id '3' is in anonDataRatings but not in GroundTruth",
    ):
        assert fragment in report, fragment
