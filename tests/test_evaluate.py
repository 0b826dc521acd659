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
    "balanced_accuracy",
    "macro_f1",
    "per_class",
    "confusion",
    "reliability",
    "auroc_error_entropy",
    "spearman_human_mean",
    "spearman_entropy_rater_std",
}
# The keys that are not one number each.
STRUCTURED = {"per_class", "confusion", "reliability"}


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
        for key in ("accuracy", "brier", "ece", "balanced_accuracy", "macro_f1") + tuple(
                k for k in m if k.startswith("auroc")):
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
    table, per_class, confusion = "\n".join(lines[2:]).split("\n\n")
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()}
    assert set(rows) == VARIANT_KEYS - STRUCTURED | {"auroc_ambiguous_entropy", "auroc_ambiguous_mi",
                                                     "auroc_ambiguous_in_split_entropy", "auroc_ambiguous_in_split_mi"}
    scores = fake_movies["mc"]["per_class"]
    assert [line.split() for line in per_class.splitlines()[1:]] == [
        [c, f"{s['precision']:.3f}", f"{s['recall']:.3f}", f"{s['f1']:.3f}", str(s["support"])]
        for c, s in scores.items()]
    assert [line.split()[1:] for line in confusion.splitlines()[1:]] == [
        [str(v) for v in row] for row in fake_movies["mc"]["confusion"]]
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


# ---- K classes ----------------------------------------------------------------------------------
class FakeKPredictor:
    """K classes, deterministic per text: the class its hash names is favoured, samples scattered."""

    def __init__(self, classes: tuple[str, ...], name: str = "fake-k") -> None:
        self.classes, self.name, self.seen = tuple(classes), name, []

    def _logits(self, text: str) -> np.ndarray:
        h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
        logits = np.random.default_rng(h).normal(size=len(self.classes))
        logits[h % len(self.classes)] += 2.0
        return logits

    def sample_probs(self, texts, n_samples, seed):
        self.seen.extend(texts)
        out = []
        for text in texts:
            rng = np.random.default_rng([seed, int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)])
            logits = self._logits(text) + rng.normal(size=(n_samples, len(self.classes)))
            out.append(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
        return np.stack(out)

    def softmax_probs(self, texts):
        logits = np.stack([self._logits(t) for t in texts])
        return np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)


def _labelled(predictor: FakeKPredictor, n: int) -> tuple[list[str], list[str | None]]:
    """Texts labelled with the class their hash favours (right more often than chance), every 7th
    unlabelled."""
    texts = [f"sentence number {i}" for i in range(n)]
    K = len(predictor.classes)
    labels = [None if i % 7 == 3 else predictor.classes[int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) % K]
              for i, t in enumerate(texts)]
    return texts, labels


@pytest.mark.parametrize("K", [3, 50])
def test_evaluate_labelled_scores_the_labelled_sentences_for_k_classes(K) -> None:
    from bam_viz import cli
    from bam_viz.core import metrics

    predictor = FakeKPredictor(tuple(f"c{i}" for i in range(K)))
    texts, labels = _labelled(predictor, 140)
    r = ev.evaluate_labelled(predictor, texts, labels, source="mine.csv", n_samples=4, seed=1, batch_size=512)
    keep = [i for i, y in enumerate(labels) if y is not None]
    assert sorted(predictor.seen) == sorted(texts[i] for i in keep)        # unlabelled rows never predicted
    assert (r["n"], r["n_labelled"], r["source"]) == (140, len(keep), "mine.csv")
    assert r["classes"] == list(predictor.classes)
    y = np.array([predictor.classes.index(labels[i]) for i in keep])
    samples = predictor.sample_probs([texts[i] for i in keep], 4, ev._batch_seed(1, 0))     # one batch
    mc = samples.mean(1)
    for key, fn in (("accuracy", metrics.accuracy), ("nll", metrics.nll), ("brier", metrics.brier),
                    ("ece", metrics.ece)):
        assert r["mc"][key] == pytest.approx(fn(mc, y)), key
    assert r["mc"]["confusion"] == metrics.confusion_matrix(mc, y, K).tolist()
    recall = metrics.per_class_recall(mc, y, K)
    assert [s["recall"] for s in r["mc"]["per_class"].values()] == pytest.approx(recall.tolist(), nan_ok=True)
    assert r["mc"]["balanced_accuracy"] == pytest.approx(np.nanmean(recall))
    assert sum(s["support"] for s in r["mc"]["per_class"].values()) == len(keep) == sum(r["counts"].values())
    assert sum(b["count"] for b in r["mc"]["reliability"]) == len(keep)
    assert all(b["confidence"] >= 1 / K for b in r["mc"]["reliability"])
    assert r["mc"]["auroc_error_mi"] == pytest.approx(metrics.auroc(metrics.mutual_information(samples),
                                                                    mc.argmax(1) != y))
    assert "auroc_error_mi" not in r["softmax"] and r["softmax"]["accuracy"] > 1 / K
    json.dumps(cli._jsonable(r), allow_nan=False)                          # what --json writes
    text = ev.summary(r).splitlines()
    assert text[0] == f"fake-k on mine.csv: {len(keep)} labelled of 140 sentences, {K} classes, S=4, seed=1"
    assert sum(line.split()[:1] in [[c] for c in predictor.classes] for line in text) == K * (2 if K <= 10 else 1)


def test_k_class_predictors_are_refused_by_the_rated_corpora_and_bad_labels_are_named(corpus_dir: Path) -> None:
    predictor = FakeKPredictor(("a", "b", "c"), "topics")
    with pytest.raises(ValueError, match="the rated corpora are labelled negative, positive; topics predicts a, b, c"):
        ev.evaluate(predictor, "movies", "test", n_samples=2, data=corpus_dir)
    with pytest.raises(ValueError, match=r"labels not among the classes of topics \(a, b, c\): 'd'"):
        ev.evaluate_labelled(predictor, ["x", "y"], ["a", "d"])
    with pytest.raises(ValueError, match="no sentence of the file has a label"):
        ev.evaluate_labelled(predictor, ["x", "y"], [None, None])
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        ev.evaluate_labelled(predictor, ["x", "y"], ["a"])


def test_evaluate_from_the_command_line_on_a_file_of_a_k_class_model(tmp_path: Path, monkeypatch, capsys) -> None:
    from k_class_models import CLASSES3, k_class_folder

    from bam_viz import cli

    k_class_folder(tmp_path / "models")
    monkeypatch.setenv("BAM_VIZ_MODELS", str(tmp_path / "models"))
    src = tmp_path / "topics.csv"
    src.write_text("text,topic\nThe cup final went to penalties.,sports\nThe vote was close.,politics\n"
                   "A new comet was found.,science\nNo label here.,\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("text,topic\nA slow-cooked stew.,cooking\nThe vote was close.,politics\n")
    out = tmp_path / "{corpus}.json"
    assert cli.main(["evaluate", "--model", "t3", "--input", str(src), "--label-column", "topic", "--samples", "2",
                     "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("t3 on topics.csv: 3 labelled of 4 sentences, 3 classes, S=2, seed=0")
    r = json.loads((tmp_path / "topics.json").read_text())
    assert r["classes"] == list(CLASSES3) and r["counts"] == {c: 1 for c in CLASSES3}
    assert sum(map(sum, r["mc"]["confusion"])) == 3
    # no label column, a label that is no class, and options that belong to the rated corpora: one line each
    for argv, says in ((["--input", str(src)], "which column holds the labels?"),
                       (["--input", str(bad), "--label-column", "topic"],
                        "labels not understood: 'cooking'; the labels of t3 are its classes: 'sports'"),
                       (["--input", str(src), "--label-column", "topic", "--temperature", "dev"],
                        "--temperature dev and --update-card are for the rated corpora")):
        try:
            status = cli.main(["evaluate", "--model", "t3", *argv])
        except SystemExit as stop:
            status, err = stop.code, str(stop.code)
        else:
            err = capsys.readouterr().err
        assert status not in (0, None) and says in err, (argv, err)
