"""evaluate() on the real corpora with a fake predictor: metrics, references, compare() and summary()."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from bam_viz.data import AMBIGUOUS, CorpusError, CorpusProblems, load_split
from bam_viz.evaluation import evaluate as ev


class FakePredictor:
    """Deterministic per text: a logit from the text's hash, samples scattered around it."""

    def __init__(self, name: str = "fake", spread: float = 2.0, salt: str = "") -> None:
        self.name = name
        self.spread = spread
        self.salt = salt

    def _logit(self, text: str) -> float:
        h = int(hashlib.sha256((self.salt + text).encode()).hexdigest()[:8], 16)
        return (h / 0xFFFFFFFF - 0.5) * 6.0

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        out = np.empty((len(texts), n_samples, 2))
        for i, text in enumerate(texts):
            rng = np.random.default_rng([seed, int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)])
            p = 1 / (1 + np.exp(-(self._logit(text) + self.spread * rng.normal(size=n_samples))))
            out[i] = np.stack([1 - p, p], axis=-1)
        return out

    def softmax_probs(self, texts: list[str]) -> np.ndarray:
        p = 1 / (1 + np.exp(-np.array([self._logit(t) for t in texts])))
        return np.stack([1 - p, p], axis=-1)


VARIANT_KEYS = {
    "accuracy",
    "nll",
    "brier",
    "ece",
    "auroc_error_entropy",
    "spearman_human_mean",
    "spearman_entropy_rater_std",
}


@pytest.fixture(scope="module")
def fake_movies(corpus_dir: Path) -> dict:
    return ev.evaluate(
        FakePredictor(), "movies", "test", n_samples=8, seed=0, data=corpus_dir, batch_size=128
    )


def test_evaluate_keys_and_ranges(fake_movies: dict) -> None:
    r = fake_movies
    assert (r["predictor"], r["corpus"], r["split"], r["n_samples"], r["seed"]) == (
        "fake",
        "movies",
        "test",
        8,
        0,
    )
    assert r["n_clear"] + r["n_ambiguous"] == r["n"] == 1036
    assert r["counts"] == {"negative": 460, "positive": 519, "ambiguous": 57}
    assert set(r["softmax"]) == VARIANT_KEYS
    assert set(r["mc"]) == VARIANT_KEYS | {"auroc_ambiguous_entropy", "auroc_ambiguous_mi",
                                           "auroc_ambiguous_in_split_entropy", "auroc_ambiguous_in_split_mi"}
    for variant in ("mc", "softmax"):
        m = r[variant]
        for key in ("accuracy", "brier", "ece") + tuple(k for k in m if k.startswith("auroc")):
            assert 0.0 <= m[key] <= (2.0 if key == "brier" else 1.0), key
        assert m["nll"] > 0
        assert -1.0 <= m["spearman_human_mean"] <= 1.0 and -1.0 <= m["spearman_entropy_rater_std"] <= 1.0
        # The fake knows nothing about sentiment.
        assert abs(m["accuracy"] - 0.5) < 0.08
    # Its samples scatter, so averaging them differs from one pass at the mean.
    assert r["mc"]["nll"] != pytest.approx(r["softmax"]["nll"])
    assert r["mc"]["ece"] != pytest.approx(r["softmax"]["ece"])


def test_ambiguity_reference_is_all_562_ambiguous_movie_sentences(fake_movies: dict) -> None:
    assert fake_movies["n_ambiguous_reference"] == 562
    assert fake_movies["n_movies_test_clear_reference"] == fake_movies["n_clear"] == 979


def test_per_sentence_is_json_and_aligned(fake_movies: dict) -> None:
    per = fake_movies["per_sentence"]
    n = fake_movies["n"]
    assert {len(v) for v in per.values()} == {n}
    assert json.loads(json.dumps(per)) == per
    mc = np.array(per["mc_p_positive"])
    assert np.all((mc >= 0) & (mc <= 1))
    assert per["labels"].count("ambiguous") == fake_movies["n_ambiguous"]


def test_evaluate_is_deterministic(corpus_dir: Path, fake_movies: dict) -> None:
    again = ev.evaluate(
        FakePredictor(), "movies", "test", n_samples=8, seed=0, data=corpus_dir, batch_size=128
    )
    assert again["mc"] == fake_movies["mc"]


def test_out_of_domain_corpus_adds_ood_aurocs(corpus_dir: Path) -> None:
    r = ev.evaluate(FakePredictor(), "tweets", "test", n_samples=4, data=corpus_dir, batch_size=256)
    assert {"auroc_ood_entropy", "auroc_ood_mi"} <= set(r["mc"])
    assert "auroc_ood_mi" not in r["softmax"]
    assert 0.0 <= r["mc"]["auroc_ood_mi"] <= 1.0
    assert r["n"] == 412


def test_compare_identical_results_is_zero_width(fake_movies: dict) -> None:
    for metric in ("accuracy", "nll", "brier", "ece"):
        assert ev.compare(fake_movies, fake_movies, metric, n_boot=100) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="metric must be"):
        ev.compare(fake_movies, fake_movies, "auroc")


def test_compare_aligns_by_id(fake_movies: dict) -> None:
    other = json.loads(json.dumps(fake_movies))
    per = other["per_sentence"]
    # Reverse the order and make b always right with p = 1: b beats a on accuracy by 1 - acc(a).
    for key in per:
        per[key].reverse()
    per["mc_p_positive"] = [1.0 if label == "positive" else 0.0 for label in per["labels"]]
    diff, lo, hi = ev.compare(fake_movies, other, "accuracy", n_boot=200)
    assert diff == pytest.approx(fake_movies["mc"]["accuracy"] - 1.0)
    assert lo <= diff <= hi < 0
    first_clear = per["labels"].index("positive")
    per["ids"][first_clear] = "not-an-id"
    with pytest.raises(ValueError, match="different sentences"):
        ev.compare(fake_movies, other, "accuracy")


def test_summary_lists_every_metric_and_dashes_the_undefined(fake_movies: dict) -> None:
    text = ev.summary(dict(fake_movies, mc=dict(fake_movies["mc"], accuracy=float("nan"))))
    lines = text.splitlines()
    assert lines[0] == "fake on movies/test: 979 clear + 57 ambiguous sentences, S=8, seed=0"
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert set(rows) == VARIANT_KEYS | {"auroc_ambiguous_entropy", "auroc_ambiguous_mi",
                                        "auroc_ambiguous_in_split_entropy", "auroc_ambiguous_in_split_mi"}
    assert rows["accuracy"] == ["–", f"{fake_movies['softmax']['accuracy']:.3f}"]
    assert rows["auroc_ambiguous_mi"] == [f"{fake_movies['mc']['auroc_ambiguous_mi']:.3f}", "–"]   # mc only


def test_no_references_scores_only_the_split(corpus_dir: Path) -> None:
    seen: list[str] = []

    class Recording(FakePredictor):
        def sample_probs(self, texts, n_samples, seed):
            seen.extend(texts)
            return super().sample_probs(texts, n_samples, seed)

    r = ev.evaluate(Recording(), "movies", "dev", n_samples=4, data=corpus_dir, batch_size=512, references=False)
    dev = load_split("movies", "dev", corpus_dir, include_ambiguous=True)
    # A sweep on dev never predicts a test sentence.
    assert sorted(seen) == sorted(s.text for s in dev)
    assert "auroc_ambiguous_entropy" not in r["mc"] and "auroc_ood_entropy" not in r["mc"]
    assert r["n_ambiguous"] > 20 and 0.0 <= r["mc"]["auroc_ambiguous_in_split_entropy"] <= 1.0


def test_in_split_ambiguity_auroc_rewards_entropy_on_ambiguous_sentences(corpus_dir: Path) -> None:
    ambiguous = {s.text for s in load_split("movies", "dev", corpus_dir, include_ambiguous=True)
                 if s.label == AMBIGUOUS}

    class Knows(FakePredictor):  # unsure exactly where the raters were
        def sample_probs(self, texts, n_samples, seed):
            p = np.array([0.5 if t in ambiguous else 0.9 for t in texts])[:, None].repeat(n_samples, 1)
            return np.stack([1 - p, p], axis=-1)

    r = ev.evaluate(Knows(), "movies", "dev", n_samples=2, data=corpus_dir, references=False)
    assert r["mc"]["auroc_ambiguous_in_split_entropy"] == 1.0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_results_record_every_corpus_file_read(corpus_dir: Path, fake_movies: dict) -> None:
    assert fake_movies["corpus_files"] == [
        {"corpus": "movies", "file": name, "sha256": _sha(corpus_dir / name),
         "bytes": (corpus_dir / name).stat().st_size, "lenient": False, "problems": 0}
        for name in ("movieReviewSnippets_GroundTruth.txt", "movieReviewSnippets_anonDataRatings.txt")
    ]
    # Another corpus with the movie references: both corpora's files; without them, its own only.
    tweets = ev.evaluate(FakePredictor(), "tweets", "test", n_samples=2, data=corpus_dir, batch_size=512)
    assert [(f["corpus"], f["file"]) for f in tweets["corpus_files"]] == [
        ("tweets", "tweets_GroundTruth.txt"), ("tweets", "tweets_anonDataRatings.txt"),
        ("movies", "movieReviewSnippets_GroundTruth.txt"), ("movies", "movieReviewSnippets_anonDataRatings.txt")]
    assert tweets["corpus_files"][1]["sha256"] == _sha(corpus_dir / "tweets_anonDataRatings.txt")
    alone = ev.evaluate(FakePredictor(), "nyt", "test", n_samples=2, data=corpus_dir, batch_size=512,
                        references=False)
    assert [f["corpus"] for f in alone["corpus_files"]] == ["nyt", "nyt"]


def _tiny_movies(folder: Path, ratings: dict[str, tuple[int, ...]], extra_truth: list[bytes] = ()) -> Path:
    from test_data import ratings_line, truth_line, write_movies

    return write_movies(folder, [truth_line(i, r, f"Sentence {i}.") for i, r in ratings.items()] + list(extra_truth),
                        [ratings_line(i, r) for i, r in ratings.items()])


# Ids 10, 20, 22 and 25 fall in the movie test split, 1 and 13 in dev (data.split_of).
CLEAR_TEST = {"10": (2, 3, 2), "20": (-2, -2, -3), "22": (3, 1, 2), "25": (-1, -2, -1), "1": (2, 2, 2)}


def test_a_problem_line_stops_evaluate_unless_lenient(tmp_path: Path) -> None:
    from test_data import truth_line

    folder = _tiny_movies(tmp_path, CLEAR_TEST, [truth_line("99", (1, 1, 1))])   # 99: no ratings line
    with pytest.raises(CorpusProblems, match="1 problem line, at line 6: id '99' is in GroundTruth but not"):
        ev.evaluate(FakePredictor(), "movies", "test", n_samples=2, data=folder)
    r = ev.evaluate(FakePredictor(), "movies", "test", n_samples=2, data=folder, lenient=True)
    assert r["n"] == 4 and sorted(r["per_sentence"]["ids"]) == ["10", "20", "22", "25"]
    assert [(f["file"], f["lenient"], f["problems"]) for f in r["corpus_files"]] == [
        ("movieReviewSnippets_GroundTruth.txt", True, 1), ("movieReviewSnippets_anonDataRatings.txt", True, 0)]
    assert r["corpus_files"][0]["sha256"] == _sha(folder / "movieReviewSnippets_GroundTruth.txt")
    with pytest.raises(CorpusProblems):
        ev.temperature_from_dev(FakePredictor(), 2, 0, folder)


@pytest.mark.parametrize("ratings, says", [
    ({"10": (0, 0, 1), "20": (0, 1, -1), "1": (2, 2, 2)},
     "the test split has no clear sentence to score (2 ambiguous)"),
    ({"1": (2, 2, 2), "13": (-2, -2, -2)}, "the test split has no sentence to score"),
])
def test_nothing_clear_to_score_is_a_corpus_error_before_any_metric(tmp_path: Path, ratings, says) -> None:
    """metrics.ece divided by zero on an empty selection; evaluate now stops first, naming the file."""
    folder = _tiny_movies(tmp_path, ratings)
    for references in (True, False):
        with pytest.raises(CorpusError) as caught:
            ev.evaluate(FakePredictor(), "movies", "test", n_samples=2, data=folder, references=references)
        assert caught.value.reason == says
        assert caught.value.filename == str(folder.resolve() / "movieReviewSnippets_GroundTruth.txt")


def test_temperature_needs_a_clear_dev_sentence(tmp_path: Path) -> None:
    folder = _tiny_movies(tmp_path, {"10": (2, 2, 2), "1": (0, 0, 1)})   # dev holds one ambiguous sentence
    with pytest.raises(CorpusError, match="the dev split has no clear sentence to fit T on"):
        ev.temperature_from_dev(FakePredictor(), 2, 0, folder)
    T, n = ev.temperature_from_dev(FakePredictor(), 2, 0, _tiny_movies(tmp_path / "b", {"1": (2, 2, 2)}))
    assert n == 1 and T > 0
