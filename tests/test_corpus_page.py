"""The Corpus page (views/corpus.py) through Streamlit's AppTest, on the shipped scores
(scores/test.parquet): filters, brushes and the URL change the table's rows as the library says they
should, a selected row links to the explorer, uploads are scored or refused with one line, and a
missing scores file leaves a working page.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest
from app_pages import app_page, as_shown, ok
from streamlit import dataframe_util
from streamlit.testing.v1 import AppTest

from bam_viz.evaluation import corpus
from bam_viz.evaluation.corpus import Filter
from bam_viz.evaluation.score import scorer as score
from bam_viz.plots import corpus as corpus_charts

APP = Path(__file__).resolve().parents[1] / "app.py"
PAGE = "views/corpus.py"
MEASURE = "mutual_information"
TABLE = "corpus_table_"


def new_page(**query) -> AppTest:
    return app_page(PAGE, 180, **query)


def table(at: AppTest, key: str = TABLE) -> pd.DataFrame:
    """The sentences table, found by the start of its key (the rest names its filter)."""
    found = [d for d in at.dataframe if d.key and d.key.startswith(key)]
    assert len(found) == 1, [d.key for d in at.dataframe]
    return found[0].value


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The one table without selections (no key to find it by) that has `column`."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def chart_rows(at: AppTest, key_part: str) -> int:
    """Rows of the largest dataset a chart (found by a part of its key) was sent."""
    charts = [c for c in at.get("vega_lite_chart") if key_part in c.proto.id]
    assert len(charts) == 1, [c.proto.id for c in at.get("vega_lite_chart")]
    return max(len(dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data)) for d in charts[0].proto.datasets)


def chart_key(at: AppTest, name: str) -> str:
    return next(c.proto.id.split("-", 2)[-1] for c in at.get("vega_lite_chart") if f"corpus_{name}_" in c.proto.id)


@pytest.fixture(scope="module")
def shipped() -> pd.DataFrame:
    return corpus.with_keys(score.shipped_scores())


@pytest.fixture(scope="module")
def at() -> AppTest:
    return ok(new_page().run())


def reference_rows(shipped: pd.DataFrame, filt: Filter, model: str = "bam-wc") -> pd.DataFrame:
    rows = corpus.select(shipped, filt, model)
    return rows[rows["model"] == model]


def test_the_page_opens_on_every_test_sentence(at, shipped):
    shown = table(at)
    assert len(shown) == shipped[shipped["model"] == "bam-wc"]["sentence"].nunique()
    assert shown["MI (plug-in)"].is_monotonic_decreasing                      # the most uncertain first
    assert at.selectbox(key="corpus_model").value == "bam-wc"
    assert _query(at)["model"] == "bam-wc" and _query(at)["measure"] == MEASURE
    assert len(at.get("vega_lite_chart")) == 4                     # reliability, scatter, corpus view, pair


def test_filters_change_the_rows(at, shipped):
    at.multiselect(key="corpus_corpora").set_value(["movies"])
    ok(at.run())
    assert len(table(at)) == len(reference_rows(shipped, Filter(corpora=("movies",))))
    at.segmented_control(key="corpus_outcome").set_value("wrong")
    ok(at.run())
    wrong = reference_rows(shipped, Filter(corpora=("movies",), outcome="wrong"))
    assert len(table(at)) == len(wrong) and set(table(at)["outcome"]) == {"wrong"}
    assert _query(at)["corpus"] == "movies" and _query(at)["outcome"] == "wrong"
    at.segmented_control(key="corpus_outcome").set_value("all")
    at.multiselect(key="corpus_corpora").set_value(list(corpus.corpora_in(shipped)))
    ok(at.run())
    assert "corpus" not in _query(at)                                # every corpus: nothing to say


def _query(at: AppTest) -> dict:
    return {k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k]
            for k in at.query_params}


def test_the_url_reproduces_the_page():
    at = ok(new_page(model="softmax", compare="none", corpus="tweets,nyt", measure="predictive_entropy",
                     clarity="ambiguous").run())
    assert at.selectbox(key="corpus_model").value == "softmax"
    assert at.selectbox(key="corpus_compare").value == "none"
    assert at.multiselect(key="corpus_corpora").value == ["tweets", "nyt"]
    assert at.selectbox(key="corpus_measure").value == "predictive_entropy"
    shipped = corpus.with_keys(score.shipped_scores())
    expected = reference_rows(shipped, Filter(corpora=("tweets", "nyt"), clarity="ambiguous",
                                              measure="predictive_entropy"), "softmax")
    assert len(table(at)) == len(expected) > 0
    assert "entropy" in table(at).columns
    assert not [c for c in at.get("vega_lite_chart") if "paired" in c.proto.spec]   # no second model
    bad = ok(new_page(model="no-such-model", measure="variance", corpus="mars").run())
    assert bad.selectbox(key="corpus_model").value == "bam-wc"
    assert bad.selectbox(key="corpus_measure").value == MEASURE


def test_a_brush_filters_the_table_and_the_other_charts_not_itself(shipped):
    at = ok(new_page().run())
    all_rows = len(table(at))
    reliability_before = chart_rows(at, "corpus_reliability_")
    ref = shipped[shipped["model"] == "bam-wc"]
    lo, hi = ref[MEASURE].quantile([0.5, 0.9]).tolist()
    at.session_state[chart_key(at, "scatter")] = {"selection": {corpus_charts.SCATTER_BRUSH: {
        MEASURE: [lo, hi], "raters_std": [0.0, 1.5]}}}
    ok(at.run())
    expected = ref[ref[MEASURE].between(lo, hi) & ref["raters_std"].between(0.0, 1.5)]
    assert len(table(at)) == len(expected) and 0 < len(expected) < all_rows
    assert chart_rows(at, "corpus_scatter_") == ref["raters_std"].notna().sum()     # its own brush: all points
    assert chart_rows(at, "corpus_domain_") == len(expected)
    assert chart_rows(at, "corpus_reliability_") <= reliability_before
    assert any(c.value.startswith("Brushed:") for c in at.caption)
    # a second brush, on the reliability diagram's confidence, narrows the table further
    at.session_state[chart_key(at, "reliability")] = {"selection": {corpus_charts.RELIABILITY_BRUSH: {
        "confidence": [0.9, 1.0]}}}
    ok(at.run())
    both = expected[expected["confidence"].between(0.9, 1.0)]
    assert len(table(at)) == len(both)
    at.button(key="corpus_clear_brushes").click()
    ok(at.run())
    assert len(table(at)) == all_rows


def test_a_selected_row_links_to_the_explorer(shipped):
    at = ok(new_page().run())
    first = table(at).iloc[0]
    key = next(d.key for d in at.dataframe if d.key and d.key.startswith(TABLE))
    at.session_state[key] = {"selection": {"rows": [0], "columns": []}}
    ok(at.run())
    (link,) = at.get("link_button")
    url = urlparse(link.proto.url)
    assert url.path == "./" and parse_qs(url.query) == {"text": [first["sentence"]], "model": ["bam-wc"]}
    assert [t.value for t in at.text] == [first["sentence"]]
    # another filter is another table: the row picked before does not stay picked
    at.segmented_control(key="corpus_outcome").set_value("wrong")
    ok(at.run())
    assert not at.get("link_button") and not at.text


def test_metrics_of_the_whole_set_the_selection_and_a_slice(shipped):
    at = ok(new_page(corpus="movies").run())
    at.text_input(key="corpus_slice_name").set_value("movies only")
    ok(at.run())
    at.button(key="corpus_save_slice").click()
    ok(at.run())
    at.multiselect(key="corpus_corpora").set_value(["tweets"])             # the slice keeps its own filter
    ok(at.run())
    shown = frame_with(at, "set").set_index(["set", "model"])
    movies = corpus.select(shipped, Filter(corpora=("movies",)), "bam-wc")
    tweets = corpus.select(shipped, Filter(corpora=("tweets",)), "bam-wc")
    for name, rows in (("whole set", shipped), ("current selection", tweets), ("slice: movies only", movies)):
        expected = corpus.slice_metrics(rows, MEASURE, ["bam-wc", "mc-dropout"])
        for model in ("bam-wc", "mc-dropout"):
            got = shown.loc[(name, model)]
            assert got["sentences"] == expected.loc[model, "n"]
            for column, label in corpus_page_metric_names().items():
                want = expected.loc[model, column]
                assert (got[label] == "—") if math.isnan(want) else float(got[label]) == pytest.approx(want, abs=5e-4)


def test_an_undefined_metric_reads_as_a_dash():
    """softmax's mutual information is 0 on every sentence: its Spearman and AUROCs by MI are undefined
    (AUROC is 0.5 for a constant score, Spearman NaN)."""
    at = ok(new_page(model="softmax", compare="none").run())
    shown = frame_with(at, "set").set_index(["set", "model"])
    assert shown.loc[("whole set", "softmax"), "Spearman (raters' std)"] == "—"
    assert shown.loc[("whole set", "softmax"), "AUROC ambiguous"] == "0.500"


def corpus_page_metric_names() -> dict[str, str]:
    return {"accuracy": "accuracy", "nll": "NLL", "ece": "ECE",
            "auroc_ambiguous": "AUROC ambiguous", "spearman_raters_std": "Spearman (raters' std)"}


def test_two_models_side_by_side(at, shipped):
    pairs = corpus.paired(shipped, "bam-wc", "mc-dropout", MEASURE)
    summary = corpus.paired_summary(pairs)
    metrics = {as_shown(m.label): m.value for m in at.metric}
    assert metrics["Sentences where their labels differ"] == f"{summary['disagreements']['n']:,} of {len(pairs):,}"
    assert metrics["bam-wc more uncertain"] == f"{summary['all']['a']:,}"
    assert metrics["mc-dropout more uncertain"] == f"{summary['all']['b']:,}"
    assert 0 < summary["all"]["a"] and 0 < summary["all"]["b"]         # both stochastic: neither always wins
    assert len(frame_with(at, "mc-dropout")) == summary["disagreements"]["n"]


# ---- uploads ------------------------------------------------------------------------------------
def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="corpus_upload").set_value((name, data, "text/csv"))
    return at.run()


def test_an_upload_is_scored_and_shown():
    at = ok(new_page().run())
    csv = (b"text,label\n\"A wonderful, moving film.\",positive\nDull and far too long.,negative\n"
           b"\"<script>alert(1)</script> it was fine, I guess\",\n")
    ok(upload(at, "mine.csv", csv))
    assert at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("corpus_text_col"))).value == "text"
    at.multiselect(key="corpus_models_to_score").set_value(["softmax", "vader"])
    at.button(key="corpus_score").click()
    ok(at.run())
    assert at.segmented_control(key="corpus_source").value == "Your upload"
    shown = table(at, "corpus_table_upload")
    assert len(shown) == 3 and "<script>alert(1)</script> it was fine, I guess" in set(shown["sentence"])
    assert set(shown["outcome"]) <= {"correct", "wrong", "unlabelled"}
    assert (shown["outcome"] == "unlabelled").sum() == 1
    assert at.download_button(key="corpus_download")
    assert any("needs human ratings" in i.value for i in at.info)    # the scatter says why it is not there


@pytest.mark.parametrize(("name", "data", "words"), [
    ("latin1.csv", "text\nun film très réussi\n".encode("latin-1"), "not UTF-8"),
    ("binary.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    ("empty.csv", b"", "empty"),
    ("numbers.csv", b"a,b\n1,2\n3,4\n", "which column is the text"),
    ("excel.csv", b"PK\x03\x04" + b"\x00" * 40, "zip"),
])
def test_a_malformed_upload_gets_one_line_and_the_page_goes_on(name, data, words):
    at = ok(new_page().run())
    rows = len(table(at))
    at = upload(at, name, data)
    assert not at.exception
    (error,) = at.error
    shown = re.sub(r"\\(.)", r"\1", error.value)                   # as the browser shows the Markdown
    assert words in shown and "\n" not in shown and "Traceback" not in shown
    assert len(table(at)) == rows                                     # the rest of the page still works


def test_a_large_upload_gets_the_command_to_score_it():
    at = ok(new_page().run())
    csv = "text\n" + "".join(f"sentence number {i} is fine\n" for i in range(600))
    ok(upload(at, "big reviews.csv", csv.encode()))
    (code,) = at.code
    assert code.value == "python -m bam_viz score --model bam-wc --input 'big reviews.csv' --out scored.parquet"
    assert not [b for b in at.button if b.key == "corpus_score"]       # nothing to score here


def test_a_missing_scores_file_leaves_a_working_page(monkeypatch, tmp_path):
    monkeypatch.setattr(score, "SHIPPED", tmp_path / "test.parquet")
    at = ok(new_page().run())
    assert any("scores/test.parquet" in w.value and "make scores" in w.value for w in at.warning)
    assert not at.dataframe
    assert at.file_uploader(key="corpus_upload")


def test_without_the_corpora_the_sentences_are_shown_by_id(monkeypatch, tmp_path):
    """The shipped file holds no text (the corpora are never copied): on a machine without them the
    table names each sentence by corpus and id, and a selected row says why it cannot open."""
    monkeypatch.setenv("BAM_VIZ_DATA", str(tmp_path))          # a folder without the corpora
    at = ok(new_page(corpus="movies").run())
    sentences = table(at)["sentence"]
    assert sentences.str.fullmatch(r"\[movies \S+\]").all()
    key = next(d.key for d in at.dataframe if d.key and d.key.startswith(TABLE))
    at.session_state[key] = {"selection": {"rows": [0], "columns": []}}
    ok(at.run())
    assert not at.get("link_button")
    assert any("BAM_VIZ_DATA" in c.value for c in at.caption)


# ---- a model of K classes -----------------------------------------------------------------------
TOPIC_CSV = ("text,label\n\"A late goal won the cup final.\",sports\n\"The senate passed the budget.\",politics\n"
             "\"The probe sent back images of the comet.\",science\n\"*Markdown* <b>and</b> $x$ stay text.\",\n"
             "\"The striker signed for two more years.\",Sports\n")


@pytest.fixture
def topic_model(monkeypatch, tmp_path):
    """A three-class model folder, joined to the app's models through $BAM_VIZ_MODELS."""
    from k_class_models import k_class_folder

    k_class_folder(tmp_path)
    monkeypatch.setenv("BAM_VIZ_MODELS", str(tmp_path))
    return "t3"


def _x_domains(spec: dict) -> list:
    """The domain of every x scale in a Vega-Lite spec, its layers included."""
    own = [spec.get("encoding", {}).get("x", {}).get("scale", {}).get("domain")]
    return [d for d in own if d] + [d for layer in spec.get("layer", []) for d in _x_domains(layer)]


def _score_upload(at: AppTest, name: str, data: bytes, models: list[str]) -> AppTest:
    ok(upload(at, name, data))
    at.multiselect(key="corpus_models_to_score").set_value(models)
    at.button(key="corpus_score").click()
    return at.run()


def test_a_k_class_upload_shows_its_classes_per_class_scores_and_confusion(topic_model):
    from k_class_models import CLASSES3

    at = ok(_score_upload(ok(new_page().run()), "topics.csv", TOPIC_CSV.encode(), [topic_model]))
    scored = at.session_state["corpus_scored"]
    assert corpus.classes_in(scored) == CLASSES3
    shown = table(at, "corpus_table_upload")
    assert len(shown) == 5 and "P(positive)" not in shown.columns and "confidence" in shown.columns
    assert set(shown["predicted"]) <= set(CLASSES3) and set(shown["label"].dropna()) <= set(CLASSES3)
    assert "*Markdown* <b>and</b> $x$ stay text." in set(shown["sentence"])
    assert (shown["outcome"] == "unlabelled").sum() == 1
    # per class: the library's numbers, every class in the model's order
    per_class = frame_with(at, "F1")
    expected = corpus.class_metrics(scored, [topic_model])
    assert per_class["class"].tolist() == list(CLASSES3)
    assert per_class["sentences"].tolist() == expected["support"].tolist()
    for column, label in (("recall", "recall"), ("precision", "precision")):
        for got, want in zip(per_class[label], expected[column], strict=True):
            assert got == "—" if math.isnan(want) else float(got) == pytest.approx(want, abs=5e-4)
    (confusion,) = [c for c in at.get("vega_lite_chart") if '"rect"' in c.proto.spec]       # the heatmap
    cells = max((dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data) for d in confusion.proto.datasets),
                key=len)
    matrix = corpus.confusion(scored, topic_model)
    assert {(r.label, r.predicted): r.count for r in cells.itertuples()} == {
        (a, b): matrix[i, j] for i, a in enumerate(CLASSES3) for j, b in enumerate(CLASSES3)}
    (reliability,) = [c for c in at.get("vega_lite_chart") if "corpus_reliability_" in c.proto.id]
    assert [pytest.approx(1 / 3), 1.0] in _x_domains(json.loads(reliability.proto.spec))    # confidence >= 1/K
    assert any("sports, politics, science" in c.value for c in at.caption)


def test_a_k_class_upload_refuses_other_labels_and_mixed_classes(topic_model):
    at = ok(new_page().run())
    sentiment = b"text,label\nA fine film.,positive\nA dull film.,negative\n"
    at = _score_upload(at, "films.csv", sentiment, [topic_model])
    (error,) = at.error
    shown = re.sub(r"\\(.)", r"\1", error.value)
    assert "labels not understood: 'positive', 'negative'" in shown and "'sports', 'politics', 'science'" in shown
    at = _score_upload(new_page().run(), "topics.csv", TOPIC_CSV.encode(), [topic_model, "vader"])
    (error,) = at.error
    assert "the models predict different classes" in re.sub(r"\\(.)", r"\1", error.value)
    assert not [d for d in at.dataframe if d.key and d.key.startswith("corpus_table_upload")]   # nothing scored
    assert len(table(at)) > 0                                        # the shipped view goes on
