"""The Corpus page's upload: a user's own file of sentences, read, checked and scored in memory, by
any of the app's models (`bam_viz.available_models()`, the user's model folders included), its
labels read as the chosen models' classes."""

from __future__ import annotations

import shlex

import pandas as pd
import streamlit as st

from bam_viz.evaluation import corpus
from bam_viz.evaluation.score import scorer as score
from bam_viz.zoo import refused_models
from views.text import md_escape, model_error, refused_models_line

ss = st.session_state
MAX_UPLOAD_BYTES = 1_000_000
MAX_UPLOAD_ROWS = 500
N_SAMPLES, SEED = 32, 0                 # those of the shipped scores, so an upload reads on the same scale
UPLOAD_TYPES = ["csv", "tsv", "txt", "jsonl", "ndjson", "parquet"]


def upload_section(models: list[str], default_model: str) -> None:
    """The expander that reads a user's file, lets them pick its columns and models, and scores it."""
    with st.expander("Score your own sentences (a CSV file)", expanded=ss.get("corpus_scored") is None
                     and ss.get("_corpus_no_shipped", False)):
        st.caption(f"Up to {MAX_UPLOAD_BYTES / 1e6:.0f} MB and {MAX_UPLOAD_ROWS} rows; a column of texts, and "
                   "optionally labels: the model's class names (for the sentiment models positive/negative, "
                   "1/0, or a rating). The file stays in the server's memory and is never written to disk.")
        upload = st.file_uploader("File", type=UPLOAD_TYPES, key="corpus_upload")
        if upload is None:
            return
        data = upload.getvalue()
        command = ("python -m bam_viz score " + " ".join(f"--model {m}" for m in (ss.get("corpus_models_to_score")
                   or [default_model])) + f" --input {shlex.quote(upload.name)} --out scored.parquet")

        def too_large(why: str) -> None:
            st.warning(f"{why}. Score it on your machine with:")
            st.code(command, language="bash")

        if len(data) > MAX_UPLOAD_BYTES:
            too_large(f"This file is {len(data) / 1e6:.1f} MB, over the {MAX_UPLOAD_BYTES / 1e6:.0f} MB scored here")
            return
        try:
            table = score.read_table(data, name=upload.name, max_bytes=MAX_UPLOAD_BYTES)
        except score.ScoreInputError as err:
            st.error(md_escape(str(err)))
            return
        if len(table) > MAX_UPLOAD_ROWS:
            too_large(f"This file has {len(table):,} rows, over the {MAX_UPLOAD_ROWS} scored here")
            return
        try:
            text_col, label_col, id_col = score.find_columns(table)
        except score.ScoreInputError as err:
            st.error(md_escape(str(err)))
            text_col, label_col, id_col = table.columns[0], None, None
        columns = list(table.columns)
        c1, c2, c3 = st.columns(3)
        text_col = c1.selectbox("Text column", columns, index=columns.index(text_col),
                                key=f"corpus_text_col_{upload.file_id}")
        label_col = c2.selectbox("Label column", [None, *columns],
                                 index=0 if label_col is None else columns.index(label_col) + 1,
                                 format_func=lambda c: "(none)" if c is None else c,
                                 key=f"corpus_label_col_{upload.file_id}")
        id_col = c3.selectbox("Id column", [None, *columns], index=0 if id_col is None else columns.index(id_col) + 1,
                              format_func=lambda c: "(none: from the text)" if c is None else c,
                              key=f"corpus_id_col_{upload.file_id}")
        chosen = ss.get("corpus_models_to_score")
        if chosen is not None and any(m not in models for m in chosen):   # refused since (its load failed)
            ss["corpus_models_to_score"] = [m for m in chosen if m in models]
        ss.setdefault("corpus_models_to_score", [m for m in (default_model,) if m in models] or models[:1])
        chosen = st.multiselect("Models", models, key="corpus_models_to_score",
                                help="Models of the same classes, scored into one table")
        if refused := refused_models():
            st.caption(refused_models_line(refused))
        st.caption(f"{len(table):,} rows × {len(chosen)} models, {N_SAMPLES} attention samples each (seed {SEED}), "
                   "as the shipped scores.")
        if st.button("Score", key="corpus_score", type="primary", disabled=not chosen):
            score_upload(table, chosen, text_col, label_col, id_col, upload.name)
    scored = ss.get("corpus_scored")
    if scored is not None:
        st.download_button("Download the scored sentences (CSV)", corpus.scored_csv(scored),
                           file_name="scored.csv", mime="text/csv", key="corpus_download",
                           on_click="ignore")


def score_upload(table: pd.DataFrame, models: list[str], text_col: str, label_col: str | None,
                 id_col: str | None, name: str) -> None:
    from views import state

    bar = st.progress(0.0, text="Loading the models…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Scored {done:,} of {total:,}")

    loaded = []
    for m in models:
        try:
            loaded.append(m if m == score.VADER else state.get_model(m))
        except Exception as err:           # a model folder that cannot be loaded: one line, the page goes on
            bar.empty()
            st.error(model_error(m, err))
            return
    try:
        scored = score.score_frame(table, loaded, text_column=text_col, label_column=label_col, id_column=id_col,
                                   n_samples=N_SAMPLES, seed=SEED, progress=progress)
    except score.ScoreInputError as err:
        bar.empty()
        st.error(md_escape(str(err)))
        return
    ss["corpus_scored"] = corpus.with_keys(scored)
    ss["corpus_scored_name"] = name
    ss["_corpus_show_upload"] = True
    st.rerun()
