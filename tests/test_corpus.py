"""bam_viz.evaluation.corpus: filters, slices, calibration bins, Spearman and AUROC against independent references
(bam_viz.core.metrics.ece, scipy.stats.spearmanr, brute-force pair counts, sums by hand), the chart
builders' selections and encodings (bam_viz.plots.corpus), and the same numbers on the shipped scores
(scores/test.parquet).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bam_viz.core import metrics
from bam_viz.data import CORPORA, label_of
from bam_viz.evaluation import corpus
from bam_viz.evaluation.corpus import Brush, CorpusInputError, Filter
from bam_viz.evaluation.score import scorer as score
from bam_viz.plots import corpus as charts

MEASURE = "mutual_information"


def synthetic(n_per_corpus: int = 40, models=("alpha", "beta"), seed: int = 0) -> pd.DataFrame:
    """A scored frame with `bam_viz.evaluation.score.scorer.COLUMNS`: four corpora, two models, human ratings, ties in
    the uncertainty (rounded to 2 decimals) so that the rank statistics meet them."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in CORPORA:
        for i in range(n_per_corpus):
            human_mean = float(rng.uniform(-4, 4))
            label = label_of(human_mean)
            raters_std = float(rng.uniform(0.3, 2.5))
            for m in models:
                p = float(rng.uniform(0.01, 0.99))
                mi = round(float(rng.uniform(0, 0.05)) + (0.02 if c != "movies" else 0.0), 2)
                predicted = "positive" if p >= 0.5 else "negative"
                rows.append({
                    "id": str(i), "text": f"{c} sentence {i}", "model": m, "corpus": c, "split": "test",
                    "p_positive": p, "p_positive_softmax": p, "gap_softmax": 0.0, "gap_softmax_se": 0.0,
                    "predictive_entropy": float(metrics.entropy([1 - p, p])), "expected_entropy": 0.1,
                    "mutual_information": mi, "predicted": predicted, "n_tokens": 5, "truncated": False,
                    "label": label, "correct": None if label == "ambiguous" else predicted == label,
                    "human_mean": human_mean, "raters_std": raters_std, "share_positive": 0.5,
                    "n_samples": 32, "seed": 0,
                })
    frame = pd.DataFrame(rows, columns=list(score.COLUMNS))
    assert (frame["label"] == "ambiguous").any() and frame["correct"].isin([False]).any()
    return frame


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return corpus.with_keys(synthetic())


@pytest.fixture(scope="module")
def shipped() -> pd.DataFrame:
    return corpus.with_keys(score.shipped_scores())


def brute_auroc(scores: np.ndarray, positives: np.ndarray) -> float:
    """P(a positive's score > a negative's), ties 1/2, by comparing every pair."""
    pos, neg = scores[positives][:, None], scores[~positives][None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


# ---- keys, outcomes, filters --------------------------------------------------------------------
def test_keys_tell_corpora_apart_and_outcomes_follow_the_label(frame):
    assert frame["sentence"].nunique() == 4 * 40            # the same ids in four corpora
    clear = frame["label"].isin(["positive", "negative"])
    right = frame["predicted"] == frame["label"]
    assert (frame.loc[clear & right, "outcome"] == "correct").all()
    assert (frame.loc[clear & ~right, "outcome"] == "wrong").all()
    assert (frame.loc[~clear, "outcome"] == "ambiguous").all()
    assert np.allclose(frame["confidence"], np.maximum(frame["p_positive"], 1 - frame["p_positive"]))


def test_a_frame_without_scores_is_refused():
    with pytest.raises(CorpusInputError, match="columns"):
        corpus.with_keys(pd.DataFrame({"text": ["a"]}))


def test_filters_select_sentences_as_the_reference_judges_them(frame):
    wrong = corpus.select(frame, Filter(outcome="wrong"), "alpha")
    ref = wrong[wrong["model"] == "alpha"]
    assert len(ref) and (ref["outcome"] == "wrong").all()
    expected = frame[(frame["model"] == "alpha") & (frame["outcome"] == "wrong")]["sentence"]
    assert set(ref["sentence"]) == set(expected)
    # every model on the same sentences: beta is right on some of alpha's errors
    other = wrong[wrong["model"] == "beta"]
    assert set(other["sentence"]) == set(ref["sentence"]) and (other["outcome"] == "correct").any()

    sub = corpus.select(frame, Filter(corpora=("tweets", "nyt"), clarity="ambiguous",
                                      uncertainty=(0.02, 0.04)), "beta")
    beta = frame[frame["model"] == "beta"]
    by_hand = beta[beta["corpus"].isin(["tweets", "nyt"]) & (beta["label"] == "ambiguous")
                   & beta[MEASURE].between(0.02, 0.04)]
    assert set(sub["sentence"]) == set(by_hand["sentence"]) and len(by_hand) > 0
    assert set(corpus.select(frame, Filter(clarity="clear"), "beta")["label"]) == {"positive", "negative"}
    with pytest.raises(CorpusInputError, match="gamma"):
        corpus.select(frame, Filter(), "gamma")


def test_brushes_cross_filter(frame):
    filt = Filter().with_brushes("scatter", {MEASURE: (0.01, 0.03), "raters_std": (1.0, 2.0)})
    filt = filt.with_brushes("reliability", {"confidence": (0.6, 0.9)})
    alpha = frame[frame["model"] == "alpha"]
    by_hand = alpha[alpha[MEASURE].between(0.01, 0.03) & alpha["raters_std"].between(1.0, 2.0)
                    & alpha["confidence"].between(0.6, 0.9)]
    assert set(corpus.select(frame, filt, "alpha")["sentence"]) == set(by_hand["sentence"])
    # a chart shows what the other charts' brushes leave, never its own
    assert filt.without("scatter").brushes == (Brush("reliability", "confidence", 0.6, 0.9),)
    replaced = filt.with_brushes("scatter", {})
    assert [b.source for b in replaced.brushes] == ["reliability"]


def test_brush_ranges_read_vega_selections_and_ignore_the_rest():
    got = corpus.brush_ranges({MEASURE: [0.3, 0.1], "raters_std": [1, 2], "text": [0, 1],
                               "confidence": ["x", 1], "predictive_entropy": [0.1], "expected_entropy": [0, math.inf]})
    assert got == {MEASURE: (0.1, 0.3), "raters_std": (1.0, 2.0)}
    assert corpus.brush_ranges({}) == {} and corpus.brush_ranges(None) == {}


def test_a_bad_filter_says_what_to_choose():
    with pytest.raises(CorpusInputError, match="outcome"):
        Filter(outcome="maybe")
    with pytest.raises(CorpusInputError, match="measure"):
        Filter(measure="variance")
    with pytest.raises(CorpusInputError, match="brush"):
        Filter(brushes=(Brush("x", "text", 0, 1),))


# ---- calibration --------------------------------------------------------------------------------
def test_reliability_bins_by_hand():
    """Four sentences, four bins: (0.5, 0.75] holds confidences 0.7 and 0.6, both right; (0.75, 1]
    holds 0.9 (right) and 0.8 (wrong). ECE = 2/4 * |1 - 0.65| + 2/4 * |0.5 - 0.85| = 0.35."""
    tiny = corpus.with_keys(pd.DataFrame({
        "id": list("abcd"), "text": list("abcd"), "model": "m", "corpus": "movies",
        "p_positive": [0.9, 0.8, 0.3, 0.6], "predicted": ["positive", "positive", "negative", "positive"],
        "label": ["positive", "negative", "negative", "positive"], "correct": [True, False, True, True],
        MEASURE: 0.0, "raters_std": 1.0}))
    bins = corpus.reliability(tiny, n_bins=4)
    assert bins["bin"].tolist() == [2, 3] and bins["count"].tolist() == [2, 2]
    assert bins["low"].tolist() == [0.5, 0.75] and bins["high"].tolist() == [0.75, 1.0]
    assert bins["confidence"].tolist() == pytest.approx([0.65, 0.85])
    assert bins["accuracy"].tolist() == pytest.approx([1.0, 0.5])
    assert bins["ece"].tolist() == pytest.approx([0.35, 0.35])


def test_a_confidence_on_a_bin_edge_goes_below_it_as_in_metrics_ece():
    conf = np.array([0.5, 0.6, 0.6000001, 1.0, 0.0])
    assert metrics.confidence_bins(conf, 10).tolist() == [4, 5, 6, 9, 0]


@pytest.mark.parametrize("n_bins", [5, 15])
def test_reliability_bins_sum_to_metrics_ece(frame, n_bins):
    bins = corpus.reliability(frame, n_bins=n_bins)
    for m, part in bins.groupby("model"):
        rows = frame[(frame["model"] == m) & frame["label"].isin(["positive", "negative"])]
        p = np.stack([1 - rows["p_positive"], rows["p_positive"]], axis=1)
        y = (rows["label"] == "positive").to_numpy().astype(int)
        assert part["count"].sum() == len(rows)
        weighted = (part["count"] * (part["accuracy"] - part["confidence"]).abs()).sum() / len(rows)
        assert weighted == pytest.approx(metrics.ece(p, y, n_bins), abs=1e-12)
        assert part["ece"].iloc[0] == pytest.approx(metrics.ece(p, y, n_bins), abs=1e-12)


# ---- slice metrics ------------------------------------------------------------------------------
def test_slice_metrics_against_independent_references(frame):
    table = corpus.slice_metrics(frame, MEASURE)
    assert list(table.index) == ["alpha", "beta"]
    for m in ("alpha", "beta"):
        rows = frame[frame["model"] == m]
        clear = rows[rows["label"] != "ambiguous"]
        p = clear["p_positive"].to_numpy()
        y = (clear["label"] == "positive").to_numpy()
        row = table.loc[m]
        assert row["n"] == len(rows) and row["n_clear"] == len(clear)
        assert row["n_ambiguous"] == (rows["label"] == "ambiguous").sum()
        assert row["accuracy"] == pytest.approx(np.mean((p >= 0.5) == y))
        assert row["nll"] == pytest.approx(-np.mean(np.log(np.where(y, p, 1 - p))))
        assert row["spearman_raters_std"] == pytest.approx(stats.spearmanr(rows[MEASURE], rows["raters_std"]).statistic)
        amb = (rows["label"] == "ambiguous").to_numpy()
        assert row["auroc_ambiguous"] == pytest.approx(brute_auroc(rows[MEASURE].to_numpy(), amb))
        wrong = ((p >= 0.5) != y)
        assert row["auroc_error"] == pytest.approx(brute_auroc(clear[MEASURE].to_numpy(), wrong))


def test_spearman_leaves_out_sentences_without_raters(frame):
    rows = frame[frame["model"] == "alpha"].copy()
    rows.loc[rows.index[:25], "raters_std"] = np.nan
    rated = rows[rows["raters_std"].notna()]
    assert corpus.spearman_raters(rows, MEASURE, "alpha") == pytest.approx(
        stats.spearmanr(rated[MEASURE], rated["raters_std"]).statistic)


def test_a_slice_without_clear_sentences_has_nan_not_an_error(frame):
    amb = corpus.select(frame, Filter(clarity="ambiguous"), "alpha")
    row = corpus.slice_metrics(amb, MEASURE).loc["alpha"]
    assert row["n_clear"] == 0 and math.isnan(row["accuracy"]) and math.isnan(row["ece"])
    assert math.isnan(row["auroc_ambiguous"])                   # every sentence ambiguous: one class
    assert math.isfinite(row["spearman_raters_std"])


# ---- domain shift -------------------------------------------------------------------------------
def test_domain_auroc_against_a_pair_count(frame):
    table = corpus.domain_shift(frame, MEASURE)
    for m in ("alpha", "beta"):
        rows = frame[(frame["model"] == m) & (frame["label"] != "ambiguous")]
        movies = rows[rows["corpus"] == "movies"][MEASURE].to_numpy()
        for name, ood in [("tweets", ["tweets"]), ("out-of-domain", ["tweets", "amazon", "nyt"])]:
            off = rows[rows["corpus"].isin(ood)][MEASURE].to_numpy()
            both = np.concatenate([off, movies])
            is_ood = np.arange(len(both)) < len(off)
            assert table.loc[m, name] == pytest.approx(brute_auroc(both, is_ood))
            assert table.loc[m, f"n_{name}"] == len(off)
    assert (table["out-of-domain"] > 0.6).all()                 # the fixture's OOD sentences are shifted up


def test_domain_auroc_is_nan_without_movies(frame):
    table = corpus.domain_shift(frame[frame["corpus"] != "movies"], MEASURE)
    assert table["out-of-domain"].isna().all()


# ---- two models ---------------------------------------------------------------------------------
def test_paired_comparison_counts(frame):
    pairs = corpus.paired(frame, "alpha", "beta", MEASURE)
    a = frame[frame["model"] == "alpha"].set_index("sentence")
    b = frame[frame["model"] == "beta"].set_index("sentence")
    assert len(pairs) == len(a)
    disagree = [s for s in a.index if a.loc[s, "predicted"] != b.loc[s, "predicted"]]
    assert sorted(pairs.loc[pairs["disagree"], "sentence"]) == sorted(disagree)
    summary = corpus.paired_summary(pairs)
    for name, keys in (("all", list(a.index)), ("disagreements", disagree)):
        ua, ub = a.loc[keys, MEASURE].to_numpy(), b.loc[keys, MEASURE].to_numpy()
        assert summary[name]["n"] == len(keys)
        assert (summary[name]["a"], summary[name]["b"], summary[name]["tie"]) == (
            int((ua > ub).sum()), int((ub > ua).sum()), int((ua == ub).sum()))
    assert summary["all"]["tie"] > 0                             # rounded MI: ties exist and are counted apart
    clear = [s for s in disagree if a.loc[s, "label"] != "ambiguous"]
    assert summary["disagreements"]["accuracy_a"] == pytest.approx(
        np.mean([a.loc[s, "predicted"] == a.loc[s, "label"] for s in clear]))
    # on a disagreement over a clear sentence exactly one of two is right
    assert summary["disagreements"]["accuracy_a"] + summary["disagreements"]["accuracy_b"] == pytest.approx(1.0)
    with pytest.raises(CorpusInputError, match="two different"):
        corpus.paired(frame, "alpha", "alpha", MEASURE)


# ---- downloads ----------------------------------------------------------------------------------
def test_the_download_holds_the_scored_columns_only(frame):
    back = pd.read_csv(__import__("io").BytesIO(corpus.scored_csv(frame)))
    assert list(back.columns) == list(score.COLUMNS) and len(back) == len(frame)


# ---- charts -------------------------------------------------------------------------------------
def _params(spec: dict) -> dict:
    """Every selection parameter of a Vega-Lite spec by name: its `select` and the marks it is on
    (Altair lifts the parameters of layered and concatenated charts to the top, naming the views)."""
    found = {}
    for p in spec.get("params", []):
        if "select" in p:
            views = p.get("views")
            found[p["name"]] = (p["select"], [m for m in _marks(spec) if m.get("name") in views] if views else [spec])
    return found


def _marks(spec: dict) -> list[dict]:
    own = [spec] if "mark" in spec else []
    return own + [m for key in ("layer", "vconcat", "hconcat") for c in spec.get(key, []) for m in _marks(c)]


def test_reliability_chart_has_an_x_brush_over_confidence(frame):
    spec = charts.reliability_chart(corpus.reliability(frame)).to_dict()
    select, brushed = _params(spec)[charts.RELIABILITY_BRUSH]
    assert select == {"type": "interval", "encodings": ["x"]}
    assert len(brushed) == 1 and brushed[0]["encoding"]["x"]["field"] == "confidence"
    assert brushed[0]["encoding"]["size"]["field"] == "count"
    legends = {r["legend"] for d in spec["datasets"].values() for r in d if "legend" in r}
    eces = corpus.reliability(frame).groupby("model")["ece"].first()
    assert legends == {f"{m} (ECE {e:.3f})" for m, e in eces.items()}


@pytest.mark.parametrize("measure", list(corpus.MEASURES))
def test_scatter_brushes_the_measure_and_the_raters_std(frame, measure):
    rows = frame[frame["model"] == "alpha"]
    spec = charts.uncertainty_scatter(rows, measure, measure_title=corpus.MEASURES[measure]).to_dict()
    select, (brushed,) = _params(spec)[charts.SCATTER_BRUSH]
    assert select == {"type": "interval"} and brushed is spec
    enc = spec["encoding"]
    assert "scale" not in enc["x"]                                  # no top given: Altair's own
    assert (enc["x"]["field"], enc["y"]["field"], enc["color"]["field"]) == (measure, "raters_std", "outcome")
    assert enc["x"]["title"] == corpus.MEASURES[measure]
    assert len(next(iter(spec["datasets"].values()))) == len(rows)


def test_scatter_leaves_out_sentences_without_raters(frame):
    rows = frame[frame["model"] == "alpha"].copy()
    rows.loc[rows.index[:10], "raters_std"] = np.nan
    spec = charts.uncertainty_scatter(rows, MEASURE, measure_title=corpus.MEASURES[MEASURE]).to_dict()
    assert len(next(iter(spec["datasets"].values()))) == len(rows) - 10


def test_domain_chart_orders_corpora_and_brushes_x(frame):
    spec = charts.domain_chart(frame[frame["model"] == "alpha"], MEASURE, measure_title=corpus.MEASURES[MEASURE],
                                corpora=list(CORPORA), in_domain=corpus.IN_DOMAIN).to_dict()
    select, (tick,) = _params(spec)[charts.DOMAIN_BRUSH]
    assert select == {"type": "interval", "encodings": ["x"]} and tick["mark"]["type"] == "tick"
    assert tick["encoding"]["x"]["field"] == MEASURE and tick["encoding"]["y"]["sort"] == list(CORPORA)
    # the training domain in blue, the others orange
    assert tick["encoding"]["color"]["scale"]["range"] == ["#4c78a8" if c == corpus.IN_DOMAIN else "#f58518"
                                                            for c in CORPORA]


def test_paired_chart_marks_disagreements(frame):
    pairs = corpus.paired(frame, "alpha", "beta", MEASURE)
    spec = charts.paired_chart(pairs, "alpha", "beta", MEASURE, measure_title=corpus.MEASURES[MEASURE]).to_dict()
    points = next(m for m in _marks(spec) if m["encoding"].get("color"))
    assert points["encoding"]["x"]["field"] == f"{MEASURE}_a" and points["encoding"]["y"]["field"] == f"{MEASURE}_b"
    data = next(d for d in spec["datasets"].values() if len(d) == len(pairs))
    assert sum(r["agreement"] == "labels differ" for r in data) == pairs["disagree"].sum()


def test_tooltips_shorten_long_sentences(frame):
    rows = frame[frame["model"] == "alpha"].copy()
    rows["text"] = "x" * 500
    spec = charts.uncertainty_scatter(rows, MEASURE, measure_title=corpus.MEASURES[MEASURE]).to_dict()
    data = next(iter(spec["datasets"].values()))
    assert {len(r["text"]) for r in data} == {charts.TOOLTIP_CHARS}


# ---- the shipped scores -------------------------------------------------------------------------
def test_shipped_scores_cover_every_corpus_and_model(shipped):
    assert corpus.corpora_in(shipped) == list(CORPORA)
    assert {"bam-wc", "softmax", "vader"} <= set(corpus.models_in(shipped))
    counts = shipped.groupby("model")["sentence"].nunique()
    assert counts.nunique() == 1                                 # every model scored every sentence
    assert shipped.groupby(["model", "sentence"]).size().max() == 1


def test_shipped_movies_metrics_match_the_references(shipped):
    """On movies test, for every model: ECE from the bins, Spearman and AUROC OOD from the raw
    columns by SciPy and by pair counts."""
    movies = shipped[shipped["corpus"] == "movies"]
    table = corpus.slice_metrics(movies, MEASURE)
    bins = corpus.reliability(movies)
    domain = corpus.domain_shift(shipped, MEASURE)
    for m in corpus.models_in(shipped):
        rows = movies[movies["model"] == m]
        part = bins[bins["model"] == m]
        n_clear = part["count"].sum()
        assert n_clear == table.loc[m, "n_clear"] > 900
        assert (part["count"] * (part["accuracy"] - part["confidence"]).abs()).sum() / n_clear == pytest.approx(
            table.loc[m, "ece"], abs=1e-12)
        if rows[MEASURE].nunique() > 1:
            expected = stats.spearmanr(rows[MEASURE], rows["raters_std"]).statistic
            assert table.loc[m, "spearman_raters_std"] == pytest.approx(expected)
        else:                                                     # a deterministic model: MI is 0 throughout
            assert math.isnan(table.loc[m, "spearman_raters_std"])
        clear = shipped[(shipped["model"] == m) & shipped["label"].isin(["positive", "negative"])]
        is_ood = (clear["corpus"] != "movies").to_numpy()
        assert domain.loc[m, "out-of-domain"] == pytest.approx(brute_auroc(clear[MEASURE].to_numpy(), is_ood))


# ---- K classes ----------------------------------------------------------------------------------
TOPICS = ("sports", "politics", "science", "arts")


def synthetic_k(n: int = 120, models=("alpha", "beta"), classes=TOPICS, seed: int = 3) -> pd.DataFrame:
    """A scored frame of a K-class table (`score.columns_for(classes)`): user data, no corpus and no
    raters, a few sentences unlabelled, the predictions right more often than chance."""
    rng = np.random.default_rng(seed)
    K, rows = len(classes), []
    for i in range(n):
        label = classes[rng.integers(K)] if i % 10 else None
        for m in models:
            logits = rng.normal(size=K)
            if label is not None:
                logits[classes.index(label)] += 1.5
            p = np.exp(logits) / np.exp(logits).sum()
            predicted = classes[int(p.argmax())]
            rows.append({"id": str(i), "text": f"sentence {i}", "model": m,
                         **{f"p_{c}": float(q) for c, q in zip(classes, p, strict=True)},
                         "p_predicted_softmax": float(p.max()), "gap_softmax": 0.0, "gap_softmax_se": 0.0,
                         "predictive_entropy": float(metrics.entropy(p)), "expected_entropy": 0.1,
                         "mutual_information": round(float(rng.uniform(0, 0.05)), 2), "predicted": predicted,
                         "n_tokens": 5, "truncated": False, "label": label,
                         "correct": None if label is None else predicted == label, "n_samples": 32, "seed": 0})
    return score.finish(rows, classes)


@pytest.fixture(scope="module")
def k_frame() -> pd.DataFrame:
    return corpus.with_keys(synthetic_k())


def _k_reference(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    labelled = rows[rows["label"].notna()]
    p = labelled[[f"p_{c}" for c in TOPICS]].to_numpy()
    return p, np.array([TOPICS.index(label) for label in labelled["label"]])


def test_a_k_class_frame_has_its_classes_confidence_and_outcomes(k_frame):
    assert corpus.classes_in(k_frame) == TOPICS
    assert corpus.probability_columns(k_frame) == [f"p_{c}" for c in TOPICS]
    np.testing.assert_array_equal(k_frame["confidence"], k_frame[[f"p_{c}" for c in TOPICS]].max(axis=1))
    labelled = k_frame["label"].notna().to_numpy()
    assert (corpus.clear_mask(k_frame) == labelled).all()
    right = (k_frame["predicted"] == k_frame["label"]).to_numpy()
    assert (k_frame["outcome"].to_numpy() == np.where(labelled, np.where(right, "correct", "wrong"),
                                                      "unlabelled")).all()
    assert corpus.label_indices(k_frame[labelled]).tolist() == [TOPICS.index(x) for x in k_frame["label"][labelled]]
    assert (corpus.label_indices(k_frame[~labelled]) == -1).all()
    with pytest.raises(CorpusInputError, match="a probability column per class"):
        corpus.with_keys(k_frame.drop(columns=["p_predicted_softmax", "p_sports", "p_politics", "p_science",
                                               "p_arts"]))


def test_k_class_slice_metrics_reliability_and_per_class_scores(k_frame):
    table = corpus.slice_metrics(k_frame, MEASURE)
    bins = corpus.reliability(k_frame)
    per_class = corpus.class_metrics(k_frame).set_index(["model", "class"])
    for m in ("alpha", "beta"):
        p, y = _k_reference(k_frame[k_frame["model"] == m])
        assert table.loc[m, "n_clear"] == len(y) and table.loc[m, "n_ambiguous"] == 0
        assert table.loc[m, "accuracy"] == pytest.approx(np.mean(p.argmax(1) == y))
        assert table.loc[m, "nll"] == pytest.approx(-np.mean(np.log(p[np.arange(len(y)), y])))
        part = bins[bins["model"] == m]
        assert part["count"].sum() == len(y) and (part["confidence"] >= 1 / len(TOPICS)).all()
        weighted = (part["count"] * (part["accuracy"] - part["confidence"]).abs()).sum() / len(y)
        assert weighted == pytest.approx(table.loc[m, "ece"], abs=1e-12)
        matrix = corpus.confusion(k_frame, m)
        assert matrix.shape == (4, 4) and matrix.sum() == len(y)
        for i, true in enumerate(TOPICS):
            for j, guess in enumerate(TOPICS):
                assert matrix[i, j] == np.sum((y == i) & (p.argmax(1) == j)), (true, guess)
            support, tp = np.sum(y == i), np.sum((y == i) & (p.argmax(1) == i))
            assert per_class.loc[(m, true), "support"] == support
            assert per_class.loc[(m, true), "recall"] == pytest.approx(tp / support)
            assert per_class.loc[(m, true), "precision"] == pytest.approx(tp / np.sum(p.argmax(1) == i))
    assert list(per_class.loc["alpha"].index) == list(TOPICS)


def test_a_k_class_frame_pairs_and_downloads(k_frame):
    pairs = corpus.paired(k_frame, "alpha", "beta", MEASURE)
    assert "confidence_a" in pairs and "p_positive_a" not in pairs and len(pairs) == 120
    summary = corpus.paired_summary(pairs)
    assert summary["all"]["n_clear"] == k_frame[k_frame["model"] == "alpha"]["label"].notna().sum()
    back = pd.read_csv(__import__("io").BytesIO(corpus.scored_csv(k_frame)))
    assert list(back.columns) == list(score.columns_for(TOPICS))
    assert corpus.has_labels(k_frame) and not corpus.has_raters(k_frame) and corpus.corpora_in(k_frame) == []


def test_the_confusion_chart_names_the_classes_on_both_axes_and_writes_the_counts(k_frame):
    matrix = corpus.confusion(k_frame, "alpha")
    spec = charts.confusion_chart(matrix, TOPICS).to_dict()
    rect, text = _marks(spec)
    assert rect["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    for mark in (rect, text):
        assert mark["encoding"]["x"]["field"] == "predicted" and mark["encoding"]["x"]["sort"] == list(TOPICS)
        assert mark["encoding"]["y"]["field"] == "label" and mark["encoding"]["y"]["sort"] == list(TOPICS)
    assert text["encoding"]["text"]["field"] == "count"
    data = next(iter(spec["datasets"].values()))
    assert {(r["label"], r["predicted"]): r["count"] for r in data} == {
        (a, b): int(matrix[i, j]) for i, a in enumerate(TOPICS) for j, b in enumerate(TOPICS)}
    with pytest.raises(ValueError, match=r"is \(4, 4\), not \(3, 3\)"):
        charts.confusion_chart(matrix[:3, :3], TOPICS)
    # 50 classes: the cells keep their counts in the tooltip, the text would not fit
    many = [str(i) for i in range(50)]
    assert [m["mark"]["type"] for m in _marks(charts.confusion_chart(np.eye(50, dtype=int), many).to_dict())] == [
        "rect"]


def test_the_k_class_reliability_chart_starts_at_one_over_k_and_entropy_axes_stop_at_ln_k(k_frame):
    spec = charts.reliability_chart(corpus.reliability(k_frame), n_classes=4).to_dict()
    _, brushed = _params(spec)[charts.RELIABILITY_BRUSH]
    assert brushed[0]["encoding"]["x"]["scale"]["domain"] == [0.25, 1.0]
    assert "predicted class" in brushed[0]["encoding"]["x"]["title"]
    binary = charts.reliability_chart(corpus.reliability(corpus.with_keys(synthetic()))).to_dict()
    assert _params(binary)[charts.RELIABILITY_BRUSH][1][0]["encoding"]["x"]["scale"]["domain"] == [0.5, 1.0]
    pairs = corpus.paired(k_frame, "alpha", "beta", "predictive_entropy")
    spec = charts.paired_chart(pairs, "alpha", "beta", "predictive_entropy", measure_title="entropy",
                               measure_top=math.log(4)).to_dict()
    points = next(m for m in _marks(spec) if m["encoding"].get("color"))
    assert points["encoding"]["x"]["scale"]["domain"] == [0.0, pytest.approx(math.log(4))]
