"""The Corpus page: error analysis over many sentences at once, for the shipped test splits or an upload.

Any model's classes: the shipped scores are binary sentiment; an upload scored by a model of K
classes shows its class names, the reliability of the predicted class, and (for every upload with
labels) per-class scores and the confusion matrix. Every user text (sentences, class and model
names) reaches the page as text: tables and charts show it as data, Markdown gets it escaped.

No math here: `bam_viz.evaluation.corpus` filters and scores, `bam_viz.plots.corpus` draws (Altair),
`bam_viz.evaluation.score` reads and scores
uploads; this page lays out the controls, keeps the brushes and saved slices in Session State, and
mirrors its main state (models, corpora, measure, outcome, clarity) into the URL.

Brushes: each chart's interval brush becomes ranges over the reference model's values (confidence on
the reliability diagram, the uncertainty and the raters' std on the scatter, the uncertainty on the
corpus view). The table shows the sentences inside every brush; each chart shows those inside the
*other* charts' brushes, so that its own brush stays where it was drawn (docs/corpus.md).
"""

from __future__ import annotations

import math
import zlib

import pandas as pd
import streamlit as st

from bam_viz.data import CORPORA, data_dir
from bam_viz.evaluation import corpus
from bam_viz.evaluation.corpus import Filter
from bam_viz.evaluation.score import scorer as score
from bam_viz.plots import corpus as charts
from views.corpus_upload import N_SAMPLES, SEED, upload_section
from views.text import explorer_link, md_escape

ss = st.session_state
SHIPPED, UPLOAD = "Test splits (shipped)", "Your upload"
SOURCE_IDS = {SHIPPED: "shipped", UPLOAD: "upload"}          # in widget keys
# BAM against the other stochastic baseline: softmax's mutual information is 0 on every sentence.
DEFAULT_MODEL, DEFAULT_COMPARE = "bam-wc", "mc-dropout"
NONE = "none"
# Widget key -> URL parameter. The page's keys carry a prefix: Session State is shared with the
# explorer, whose `model` is another widget.
URL_KEYS = {"corpus_model": "model", "corpus_compare": "compare", "corpus_corpora": "corpus",
            "corpus_measure": "measure", "corpus_outcome": "outcome", "corpus_clarity": "clarity"}
CHARTS = {"reliability": charts.RELIABILITY_BRUSH, "scatter": charts.SCATTER_BRUSH, "domain": charts.DOMAIN_BRUSH}
CLASS_COLUMNS = {"model": "model", "class": "class", "support": "sentences", "precision": "precision",
                 "recall": "recall", "f1": "F1"}
TABLE_COLUMNS = {"text": "sentence", "corpus": "corpus", "label": "label", "predicted": "predicted",
                 "outcome": "outcome", "p_positive": "P(positive)", "confidence": "confidence",
                 "mutual_information": "MI (plug-in)", "predictive_entropy": "entropy",
                 "expected_entropy": "expected entropy",
                 "raters_std": "raters' std", "human_mean": "raters' mean", "share_positive": "share positive",
                 "truncated": "truncated"}
SLICE_SCORES = ("accuracy", "nll", "ece", "auroc_error", "auroc_ambiguous", "spearman_raters_std")
METRIC_NAMES = {"n": "sentences", "n_clear": "clear", "n_ambiguous": "ambiguous", "accuracy": "accuracy",
                "nll": "NLL", "ece": "ECE", "auroc_error": "AUROC error", "auroc_ambiguous": "AUROC ambiguous",
                "spearman_raters_std": "Spearman (raters' std)"}


def fmt(x, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


# ---- data ---------------------------------------------------------------------------------------
@st.cache_data(show_spinner="Reading the scored test splits…", max_entries=2)
def shipped_frame(path: str, modified_ns: int, data: str | None) -> pd.DataFrame:
    """The shipped scores with the page's columns, read once per version of the file (`modified_ns`)
    and folder of the corpora (`data`, where each sentence's text is read: the file holds none)."""
    return corpus.with_keys(score.shipped_scores(data))


def corpora_folder() -> str | None:
    try:
        found = data_dir()
    except FileNotFoundError:               # $BAM_VIZ_DATA names a folder that is not there
        return None
    return None if found is None else str(found)


def load_shipped() -> tuple[pd.DataFrame | None, str | None]:
    """The shipped scores, or None and one line saying why not."""
    try:
        return shipped_frame(str(score.SHIPPED), score.SHIPPED.stat().st_mtime_ns, corpora_folder()), None
    except FileNotFoundError:
        return None, ("The shipped scores (scores/test.parquet) are not there: `make scores` writes them "
                      "(`python -m bam_viz score --model all --corpus all --split test ...`). "
                      "You can still score your own sentences below.")
    except Exception as err:     # an unreadable or foreign file: the page says so, and uploads still work
        return None, (f"The shipped scores (scores/test.parquet) cannot be read ({type(err).__name__}): "
                      "write them again with `make scores`.")


# ---- the URL round trip -------------------------------------------------------------------------
def load_query_params(models: list[str], corpora: list[str]) -> None:
    """On the page's first run in a session, copy valid query parameters into Session State."""
    if ss.get("_corpus_query_loaded"):
        return
    ss["_corpus_query_loaded"] = True
    qp = st.query_params
    if qp.get("model") in models:
        ss["corpus_model"] = qp["model"]
    if qp.get("compare") in [*models, NONE]:
        ss["corpus_compare"] = qp["compare"]
    if "corpus" in qp:
        chosen = [c for c in qp["corpus"].split(",") if c in corpora]
        if chosen:
            ss["corpus_corpora"] = chosen
    if qp.get("measure") in corpus.MEASURES:
        ss["corpus_measure"] = qp["measure"]
    if qp.get("outcome") in corpus.OUTCOMES:
        ss["corpus_outcome"] = qp["outcome"]
    if qp.get("clarity") in corpus.CLARITIES:
        ss["corpus_clarity"] = qp["clarity"]


def write_query_params(corpora: list[str]) -> None:
    for key, name in URL_KEYS.items():
        value = ss.get(key)
        if key == "corpus_corpora":
            value = ",".join(value) if corpora and value and list(value) != corpora else None
        if value is None:
            st.query_params.pop(name, None)
        else:
            st.query_params[name] = str(value)


# ---- controls -----------------------------------------------------------------------------------
def source_control(frames: dict[str, pd.DataFrame]) -> str:
    if ss.pop("_corpus_show_upload", False) and UPLOAD in frames:
        ss["corpus_source"] = UPLOAD
    if ss.get("corpus_source") not in frames:
        ss["corpus_source"] = next(iter(frames))
    if len(frames) > 1:
        st.segmented_control("Sentences", list(frames), key="corpus_source", required=True)
    return ss["corpus_source"]


def model_controls(models: list[str]) -> tuple[str, str | None]:
    if ss.get("corpus_model") not in models:
        ss["corpus_model"] = DEFAULT_MODEL if DEFAULT_MODEL in models else models[0]
    if ss.get("corpus_compare") not in [*models, NONE]:
        ss["corpus_compare"] = DEFAULT_COMPARE if DEFAULT_COMPARE in models else NONE
    left, right, measure = st.columns(3)
    left.selectbox("Model (model)", models, key="corpus_model",
                   help="The reference model: the table, the scatter and the corpus view show its predictions, "
                        "and it judges the filters (right or wrong, uncertainty, brushes)")
    right.selectbox("Compared with (compare)", [NONE, *models], key="corpus_compare",
                    help="A second model, scored on the same sentences: beside the first in the reliability "
                         "diagram, the metrics and the comparison below")
    ss.setdefault("corpus_measure", "mutual_information")
    measure.selectbox("Uncertainty (measure)", list(corpus.MEASURES), key="corpus_measure",
                      format_func=corpus.MEASURES.get,
                      help="Mutual information: how much the attention samples disagree (epistemic). "
                           "Predictive entropy: total uncertainty. Expected entropy: the aleatoric part.")
    a, b = ss["corpus_model"], ss["corpus_compare"]
    return a, None if b in (NONE, a) else b


def filter_controls(frame: pd.DataFrame, reference: str, measure: str, source: str) -> Filter:
    corpora = corpus.corpora_in(frame)
    with st.sidebar:
        st.markdown("**Filters**")
        if corpora:
            if "corpus_corpora" not in ss or not set(ss["corpus_corpora"]) <= set(corpora):
                ss["corpus_corpora"] = corpora
            st.multiselect("Corpora (corpus)", corpora, key="corpus_corpora",
                           help="movies is the models' training domain; tweets, amazon and nyt are out of domain")
        ss.setdefault("corpus_outcome", "all")
        ss.setdefault("corpus_clarity", "all")
        st.segmented_control("Prediction (outcome)", corpus.OUTCOMES, key="corpus_outcome", required=True,
                             help="Right or wrong, as the reference model predicts, on clear sentences")
        st.segmented_control("Sentences (clarity)", corpus.CLARITIES, key="corpus_clarity", required=True,
                             help="Clear: the raters' mean is above 0.5 or below −0.5; ambiguous: in between")
        values = frame.loc[frame["model"] == reference, measure].dropna()
        top = float(values.max()) if len(values) else 0.0
        chosen = None
        if top > 0:
            low, high = st.slider(f"Range of {corpus.MEASURES[measure]}", 0.0, top, (0.0, top), step=top / 200,
                                  format="%.4f", key=f"corpus_range_{source}_{reference}_{measure}",
                                  help="For the reference model")
            if low > 0.0 or high < top:
                chosen = (low, high)
    picked = ss.get("corpus_corpora") if corpora else None
    return Filter(corpora=tuple(picked) if picked is not None and set(picked) != set(corpora) else None,
                  outcome=ss["corpus_outcome"], clarity=ss["corpus_clarity"], measure=measure, uncertainty=chosen)


def chart_key(name: str, source: str, reference: str, measure: str) -> str:
    """A chart's widget key: a new key (an empty brush) when what its axes mean changes, or when the
    brushes are cleared (`corpus_brush_generation`)."""
    return f"corpus_{name}_{source}_{reference}_{measure}_{ss.get('corpus_brush_generation', 0)}"


def brushed(filt: Filter, keys: dict[str, str]) -> Filter:
    """`filt` with the ranges every chart's brush holds (from the previous run's selections)."""
    for name, key in keys.items():
        event = ss.get(key)
        try:
            selection = event["selection"].get(CHARTS[name], {}) if event else {}
        except (KeyError, TypeError, AttributeError):
            selection = {}
        filt = filt.with_brushes(name, corpus.brush_ranges(selection))
    return filt


def _clear_brushes() -> None:
    ss["corpus_brush_generation"] = ss.get("corpus_brush_generation", 0) + 1


def brush_caption(filt: Filter) -> None:
    if not filt.brushes:
        st.caption("Drag across a chart to brush a range: the table and the other charts follow. "
                   "Double-click a chart to clear its brush.")
        return
    words = {"confidence": "confidence", "raters_std": "raters' std", **corpus.MEASURES}
    shown = " · ".join(f"{words[b.column]} {b.low:.4g} to {b.high:.4g}" for b in filt.brushes)
    left, right = st.columns([4, 1])
    left.caption(f"Brushed: {shown}", help="Ranges of the reference model's values")
    right.button("Clear the brushes", key="corpus_clear_brushes", on_click=_clear_brushes)


# ---- sections -----------------------------------------------------------------------------------
def metrics_table(frame: pd.DataFrame, filt: Filter, models: list[str], reference: str) -> None:
    """The whole set, the current selection and every saved slice, side by side."""
    measure = filt.measure
    named = {"whole set": frame, "current selection": corpus.select(frame, filt, reference)}
    for name, (saved, ref) in ss.get("corpus_slices", {}).items():
        if ref in set(frame["model"]):
            named[f"slice: {name}"] = corpus.select(frame, saved, ref)
    parts = []
    for name, rows in named.items():
        table = corpus.slice_metrics(rows, measure, models).reset_index()
        table.insert(0, "set", name)
        parts.append(table)
    shown = pd.concat(parts, ignore_index=True)
    # As text, so that an undefined number reads "—" (a number column shows NaN as "None").
    for column in SLICE_SCORES:
        shown[column] = shown[column].map(fmt)
    st.dataframe(shown.rename(columns=METRIC_NAMES), hide_index=True, key="corpus_metrics")
    st.caption("Accuracy, NLL and ECE (15 bins) on the clear sentences; AUROC error: the "
               f"{corpus.MEASURE_NAMES[measure]} telling wrong predictions from right ones; AUROC ambiguous: "
               "telling ambiguous sentences from clear ones; Spearman: with the raters' standard deviation, every "
               "rated sentence. — where undefined.")


def slice_controls(filt: Filter, reference: str) -> None:
    slices = ss.setdefault("corpus_slices", {})
    with st.sidebar:
        st.markdown("**Slices**")
        name = st.text_input("Name", key="corpus_slice_name", placeholder="e.g. wrong and unsure",
                             max_chars=60)
        if st.button("Save the current selection", key="corpus_save_slice", disabled=not name.strip(),
                     help="Keeps these filters and brushes (judged by the reference model) for this session"):
            slices[name.strip()] = (filt, reference)
            st.toast(f"Saved the slice “{md_escape(name.strip())}”")
        if slices:
            gone = st.selectbox("Saved slices", list(slices), key="corpus_slice_pick")
            if st.button("Delete this slice", key="corpus_delete_slice"):
                slices.pop(gone, None)
                st.rerun()


def class_list(frame: pd.DataFrame) -> str:
    """The frame's classes for a sentence of Markdown: escaped, the first dozen."""
    classes = corpus.classes_in(frame)
    shown = ", ".join(md_escape(c) for c in classes[:12])
    return shown + (f" and {len(classes) - 12} more" if len(classes) > 12 else "")


def charts_section(frame: pd.DataFrame, filt: Filter, models: list[str], reference: str, keys: dict) -> None:
    measure = filt.measure
    K = len(corpus.classes_in(frame))
    top = corpus.measure_bound(measure, K)
    left, right = st.columns(2)
    with left:
        rows = corpus.select(frame, filt.without("reliability"), reference)
        rows = rows[rows["model"].isin(models)]
        if corpus.has_labels(rows):
            bins = corpus.reliability(rows, models=models)
            st.altair_chart(charts.reliability_chart(bins, n_classes=K), key=keys["reliability"], on_select="rerun",
                            selection_mode=[charts.RELIABILITY_BRUSH], width="stretch")
            eces = bins.groupby("model")["ece"].first()
            st.caption("Reliability: in each of 15 bins of confidence (the predicted class's probability), the "
                       "share of clear sentences predicted right against the mean confidence; on the diagonal a "
                       "model is as right as it is sure. "
                       + " · ".join(f"ECE {m} {fmt(eces.get(m, math.nan))}" for m in models))
        else:
            st.info(f"The reliability diagram needs clear labels ({class_list(frame)}): none are selected.")
    with right:
        rows = corpus.select(frame, filt.without("scatter"), reference)
        rows = rows[rows["model"] == reference]
        if corpus.has_raters(rows):
            scatter = charts.uncertainty_scatter(rows, measure, measure_title=corpus.MEASURES[measure],
                                                 measure_top=top)
            st.altair_chart(scatter, key=keys["scatter"], on_select="rerun",
                            selection_mode=[charts.SCATTER_BRUSH], width="stretch")
            rho = corpus.spearman_raters(rows, measure, reference)
            st.caption(f"Spearman ρ of {md_escape(reference)}'s {corpus.MEASURE_NAMES[measure]} with the raters' "
                       f"standard deviation: **{fmt(rho)}** over {rows['raters_std'].notna().sum():,} sentences. "
                       "Above 0: the model is unsure where people disagree.")
        else:
            st.info("The scatter needs human ratings (the raters' standard deviation): uploads have none.")
    rows = corpus.select(frame, filt.without("domain"), reference)
    if corpus.corpora_in(rows):
        ref_rows = rows[rows["model"] == reference]
        by_corpus = charts.domain_chart(ref_rows, measure, measure_title=corpus.MEASURES[measure],
                                        corpora=list(CORPORA), in_domain=corpus.IN_DOMAIN, measure_top=top)
        st.altair_chart(by_corpus, key=keys["domain"], on_select="rerun",
                        selection_mode=[charts.DOMAIN_BRUSH], width="stretch")
        shift = corpus.domain_shift(rows, measure, models)
        parts = [f"{m}: **{fmt(shift.loc[m, 'out-of-domain'])}** (" + ", ".join(
            f"{c} {fmt(shift.loc[m, c])}" for c in corpus.OUT_OF_DOMAIN) + ")" for m in models]
        st.caption(f"AUROC of the {corpus.MEASURE_NAMES[measure]} telling the clear sentences of tweets, amazon "
                   "and nyt from the clear movies sentences (0.5: no better than chance; — without both sides): "
                   + " · ".join(parts))


def classes_section(frame: pd.DataFrame, filt: Filter, models: list[str], reference: str) -> None:
    """Per-class precision, recall and F1 of each model, and the reference model's confusion matrix,
    on the selected sentences that have labels."""
    rows = corpus.select(frame, filt, reference)
    rows = rows[rows["model"].isin(models)]
    if not corpus.has_labels(rows):
        st.info(f"The scores per class need labels ({class_list(frame)}): none are selected.")
        return
    table = corpus.class_metrics(rows, models)
    for column in ("precision", "recall", "f1"):
        table[column] = table[column].map(fmt)
    left, right = st.columns([2, 3])
    left.dataframe(table.rename(columns=CLASS_COLUMNS), hide_index=True, key="corpus_classes")
    left.caption("On the labelled sentences selected: precision, the share of a class's predictions that are "
                 "right; recall, the share of its sentences predicted as it; F1, their harmonic mean. — where "
                 "nothing is predicted as the class, or no sentence has it.")
    with right:
        st.altair_chart(charts.confusion_chart(corpus.confusion(rows, reference), corpus.classes_in(frame),
                                               title=f"{reference}: label (rows) against prediction"),
                        key="corpus_confusion", width="stretch")


def table_section(frame: pd.DataFrame, filt: Filter, reference: str, source: str) -> None:
    rows = corpus.select(frame, filt, reference)
    rows = rows[rows["model"] == reference].sort_values(filt.measure, ascending=False, kind="stable")
    columns = [c for c in TABLE_COLUMNS if c in rows and (c != "corpus" or rows["corpus"].notna().any())
               and (c not in ("raters_std", "human_mean", "share_positive") or rows[c].notna().any())]
    shown = rows[columns].rename(columns=TABLE_COLUMNS).reset_index(drop=True)
    if shown["sentence"].isna().any():      # shipped scores without the corpora: the sentence by its id
        ids = ("[" + rows["corpus"].fillna("") + " " + rows["id"].astype(str) + "]").reset_index(drop=True)
        shown["sentence"] = shown["sentence"].fillna(ids)
    with st.container(key="corpus_count"):
        st.caption(f"{len(shown):,} sentences, {md_escape(reference)}'s predictions, the most uncertain first. "
                   "Click a row's left edge to open it in the explorer.")
    # A new selection of rows is a new table: a row picked before must not point at another sentence.
    key = f"corpus_table_{source}_{reference}_{zlib.crc32(repr(filt).encode()):08x}"
    event = st.dataframe(shown, key=key, on_select="rerun", selection_mode="single-row",
                         hide_index=True, height=360, column_config={
                             "sentence": st.column_config.TextColumn(width="large"),
                             **{TABLE_COLUMNS[c]: st.column_config.NumberColumn(format="%.4f")
                                for c in ("p_positive", "confidence", *corpus.MEASURES)},
                         })
    picked = list(event.selection.rows) if event is not None else []
    if picked and picked[0] < len(rows):
        row = rows.iloc[picked[0]]
        from bam_viz import available_models

        in_explorer = reference if reference in available_models() else None
        if pd.isna(row["text"]):
            st.caption(f"{row['corpus']} sentence {row['id']}: its text is read from the corpora, which are not on "
                       "this machine (set BAM_VIZ_DATA to their folder), so it cannot open in the explorer.")
            return
        st.text(row["text"])
        st.link_button(f"Open in the explorer with {in_explorer or 'its default model'}",
                       explorer_link(row["text"], in_explorer), key="corpus_explorer_link")
        if in_explorer is None:
            st.caption(f"{md_escape(reference)} is not one of the explorer's models: the link opens the explorer's "
                       "default.")


def compare_section(frame: pd.DataFrame, filt: Filter, a: str, b: str) -> None:
    measure = filt.measure
    rows = corpus.select(frame, filt, a)
    pairs = corpus.paired(rows, a, b, measure)
    summary = corpus.paired_summary(pairs)
    shown_a, shown_b = md_escape(a), md_escape(b)          # model names a user chose: Markdown as text
    st.subheader(f"{shown_a} and {shown_b} side by side")
    everything, disagreements = summary["all"], summary["disagreements"]
    cols = st.columns(4)
    cols[0].metric("Sentences where their labels differ", f"{disagreements['n']:,} of {everything['n']:,}")
    cols[1].metric(f"{shown_a} more uncertain", f"{everything['a']:,}", help=f"by {corpus.MEASURE_NAMES[measure]}; "
                   f"{everything['tie']:,} ties")
    cols[2].metric(f"{shown_b} more uncertain", f"{everything['b']:,}")
    cols[3].metric("On the disagreements", f"{disagreements['a']:,} : {disagreements['b']:,}",
                   help=f"{shown_a} more uncertain : {shown_b} more uncertain, where their labels differ "
                        f"({disagreements['tie']:,} ties)")
    if disagreements["n_clear"]:
        right_a, right_b = (fmt(disagreements[f"accuracy_{s}"] * 100, 0) for s in "ab")
        st.caption(f"On the {disagreements['n_clear']:,} clear sentences where they disagree, {shown_a} is right on "
                   f"{right_a}% and {shown_b} on {right_b}%.")
    if len(pairs):
        top = corpus.measure_bound(measure, len(corpus.classes_in(frame)))
        st.altair_chart(charts.paired_chart(pairs, a, b, measure, measure_title=corpus.MEASURES[measure],
                                            measure_top=top), width="stretch")
        differ = pairs[pairs["disagree"]]
        if len(differ):
            table = differ[["text", "label", "predicted_a", "predicted_b", f"{measure}_a", f"{measure}_b"]].rename(
                columns={"text": "sentence", "predicted_a": a, "predicted_b": b,
                         f"{measure}_a": f"{a} {measure}", f"{measure}_b": f"{b} {measure}"})
            st.dataframe(table, hide_index=True, key="corpus_disagreements", height=240)


# ---- your own sentences -------------------------------------------------------------------------
# ---- the page -----------------------------------------------------------------------------------
def main() -> None:
    st.title("Corpus: where the model is wrong, unsure, and where people disagree")
    shipped, problem = load_shipped()
    ss["_corpus_no_shipped"] = shipped is None
    if problem:
        st.warning(problem)
    frames = {}
    if shipped is not None:
        frames[SHIPPED] = shipped
    if ss.get("corpus_scored") is not None:
        frames[UPLOAD] = ss["corpus_scored"]
    zoo = _zoo_models()
    if not frames:
        upload_section(zoo, DEFAULT_MODEL)
        return
    source = source_control(frames)
    frame = frames[source]
    models_here = corpus.models_in(frame)
    load_query_params(models_here, corpus.corpora_in(frame))
    reference, other = model_controls(models_here)
    measure = ss["corpus_measure"]
    models = [reference] + ([other] if other else [])
    filt = filter_controls(frame, reference, measure, SOURCE_IDS[source])
    keys = {name: chart_key(name, SOURCE_IDS[source], reference, measure) for name in CHARTS}
    filt = brushed(filt, keys)
    slice_controls(filt, reference)
    write_query_params(corpus.corpora_in(frame))
    if source == SHIPPED:
        st.caption("Every sentence of the four corpora's test splits, rated −4..+4 by about 20 people each, scored "
                   f"by every model with {N_SAMPLES} attention samples (seed {SEED}). movies is the training domain.")
    else:
        st.caption(f"{md_escape(ss.get('corpus_scored_name', 'your file'))}: scored here, classes "
                   f"{class_list(frame)}; uploads have no human ratings, so the views that need them say so.")

    brush_caption(filt)
    charts_section(frame, filt, models, reference, keys)
    if source == UPLOAD:
        st.subheader("Per class")
        classes_section(frame, filt, models, reference)
    st.subheader("Sentences")
    table_section(frame, filt, reference, SOURCE_IDS[source])
    st.subheader("Metrics: the whole set, the selection and saved slices")
    metrics_table(frame, filt, models, reference)
    if other:
        compare_section(frame, filt, reference, other)
    upload_section(zoo, DEFAULT_MODEL)


def _zoo_models() -> list[str]:
    from bam_viz import available_models

    return [*available_models(), score.VADER]


if __name__ == "__main__":         # Streamlit runs a page as __main__; views/lessons.py imports it
    main()
