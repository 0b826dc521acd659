"""evaluate() on the real corpora with a fake predictor: metrics, references, compare() and summary()."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from bam_viz import evaluate as ev
from bam_viz.data import AMBIGUOUS, load_split


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

    def mean_field_probs(self, texts: list[str]) -> np.ndarray:
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
    assert set(r["mean_field"]) == VARIANT_KEYS
    assert set(r["mc"]) == VARIANT_KEYS | {"auroc_ambiguous_entropy", "auroc_ambiguous_mi",
                                           "auroc_ambiguous_in_split_entropy", "auroc_ambiguous_in_split_mi"}
    for variant in ("mc", "mean_field"):
        m = r[variant]
        for key in ("accuracy", "brier", "ece") + tuple(k for k in m if k.startswith("auroc")):
            assert 0.0 <= m[key] <= (2.0 if key == "brier" else 1.0), key
        assert m["nll"] > 0
        assert -1.0 <= m["spearman_human_mean"] <= 1.0 and -1.0 <= m["spearman_entropy_rater_std"] <= 1.0
        # The fake knows nothing about sentiment.
        assert abs(m["accuracy"] - 0.5) < 0.08
    # Its samples scatter, so averaging them differs from one pass at the mean.
    assert r["mc"]["nll"] != pytest.approx(r["mean_field"]["nll"])
    assert r["mc"]["ece"] != pytest.approx(r["mean_field"]["ece"])


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
    assert "auroc_ood_mi" not in r["mean_field"]
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
    assert rows["accuracy"] == ["–", f"{fake_movies['mean_field']['accuracy']:.3f}"]
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
