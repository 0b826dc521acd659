"""Corpus scoring (bam_viz.evaluation.score.scorer): reading user files and every way they can be wrong, finding their
columns, labels, the seeding rule that makes a sentence's row independent of everything else in the
run, the meaning of each column, the `score` subcommand, and the shipped scores against a fresh run."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bam_viz import cli, zoo
from bam_viz.core import metrics
from bam_viz.data import AMBIGUOUS, CORPORA, load_corpus, load_split
from bam_viz.evaluation.score import scorer as score
from bam_viz.evaluation.score.scorer import COLUMNS, ScoreInputError

ROOT = Path(__file__).resolve().parents[1]

SENTENCES = [
    "A gorgeous, witty film that never stops surprising.",
    "The plot is thin, and the jokes land with a thud.",
    "It is neither good nor bad, just long.",
    "Smart, moving and beautifully acted from start to finish.",
]
LABELS = ["positive", "negative", "ambiguous", "positive"]


@pytest.fixture(scope="module")
def bam_wc():
    return zoo.load("bam-wc")


def small_frame(with_id: bool = True, with_label: bool = True) -> pd.DataFrame:
    frame = pd.DataFrame({"text": SENTENCES})
    if with_id:
        frame.insert(0, "id", [f"s{i}" for i in range(len(SENTENCES))])
    if with_label:
        frame["label"] = LABELS
    return frame


def write(frame: pd.DataFrame, path) -> None:
    suffix = path.suffix
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".tsv":
        frame.to_csv(path, index=False, sep="\t")
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    else:
        frame.to_parquet(path)


def exit_status(*argv: str) -> int:
    """What `python -m bam_viz score ...` exits with: main's return, or argparse's SystemExit."""
    try:
        return cli.main(["score", *argv])
    except SystemExit as stop:
        return stop.code


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# ---- reading files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("with_id", [True, False])
@pytest.mark.parametrize("with_label", [True, False])
def test_every_format_reads_back_its_sentences(tmp_path, suffix, with_id, with_label):
    path = tmp_path / f"in{suffix}"
    write(small_frame(with_id, with_label), path)
    frame = score.read_table(path)
    text, label, id_ = score.find_columns(frame)
    assert text == "text" and (label == "label") == with_label and (id_ == "id") == with_id
    assert list(frame[text]) == SENTENCES
    if with_label:
        assert score.parse_labels(frame[label]) == LABELS
    # The same bytes as an upload, named by the file name, read the same.
    upload = score.read_table(path.read_bytes(), name=path.name)
    assert upload.equals(frame)


def test_a_text_column_is_found_by_its_contents_or_named(tmp_path):
    path = tmp_path / "in.csv"
    pd.DataFrame({"ref": ["a1", "a2", "a3", "a4"], "Customer Words": SENTENCES,
                  "stars": ["5", "1", "3", "5"]}).to_csv(path, index=False)
    frame = score.read_table(path)
    assert score.find_columns(frame) == ("Customer Words", None, None)
    assert score.find_columns(frame, text="customer words", id="ref") == ("Customer Words", None, "ref")
    assert score.find_columns(frame, text="Customer Words", label="stars") == ("Customer Words", "stars", None)
    with pytest.raises(ScoreInputError, match="no column 'review'.*'ref', 'Customer Words', 'stars'"):
        score.find_columns(frame, text="review")


def test_a_byte_order_mark_and_a_csv_saved_with_tabs_are_read(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(b"\xef\xbb\xbf" + small_frame().to_csv(index=False, sep="\t").encode())
    frame = score.read_table(path)
    assert list(frame.columns) == ["id", "text", "label"] and list(frame["text"]) == SENTENCES
    txt = tmp_path / "in.txt"
    txt.write_text(small_frame().to_csv(index=False))
    assert list(score.read_table(txt)["text"]) == SENTENCES


def test_ids_are_read_as_written(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("id,text\n007,A fine film indeed.\n1.50,A dull film indeed.\n")
    assert list(score.read_table(path)["id"]) == ["007", "1.50"]


MALFORMED = {
    "empty": (b"", "in.csv", "is empty"),
    "only whitespace": (b"\n \n", "in.csv", "is empty"),
    "header only": (b"id,text\n", "in.csv", "has no rows"),
    "binary": (bytes(range(256)) * 4, "in.csv", "is binary, not text"),
    "latin-1": ("id,text\n1,Un film très réussi.\n".encode("latin-1"), "in.csv",
                r"not UTF-8 \(byte 0xe8 on line 2.*UTF-8"),
    "utf-16": ("id,text\n1,A film.\n".encode("utf-16"), "in.csv", "UTF-16.*save it as UTF-8"),
    "a workbook": (b"PK\x03\x04" + b"\x00" * 100, "in.csv", "zip archive"),
    "a row too wide": (b'id,text\n1,A fine film.\n2,A dull, slow film.\n', "in.csv",
                       "line 3 has 3 fields where the header has 2.*quote"),
    "bad json": (b'{"text": "A fine film."}\n{"text": "broken\n', "in.jsonl", "line 2 is not JSON"),
    "json not an object": (b'["A fine film."]\n', "in.jsonl", "line 1 is a JSON list, not an object"),
    "not parquet": (b"text\nA fine film.\n", "in.parquet", "is not a Parquet file"),
    "broken parquet": (b"PAR1" + b"\x01" * 64, "in.parquet", "cannot be read as Parquet"),
    "unknown type": (b"text\nA fine film.\n", "in.xlsx", "unknown file type '.xlsx'"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_every_malformed_file_is_one_clear_error(tmp_path, capsys, case):
    data, name, message = MALFORMED[case]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ScoreInputError, match=message):
        score.read_table(path)
    with pytest.raises(ScoreInputError, match=message):
        score.read_table(data, name=name)
    assert cli.main(["score", "--model", "vader", "--input", str(path), "--out", str(tmp_path / "o.csv")]) == 2
    assert message.split(".*")[0].replace("\\", "") in one_error_line(capsys).replace("\\", "")
    assert not (tmp_path / "o.csv").exists()


def test_limits_say_what_they_are_and_point_to_the_command(tmp_path):
    path = tmp_path / "in.csv"
    small_frame().to_csv(path, index=False)
    with pytest.raises(ScoreInputError, match="4 rows, over the limit of 3 here.*python -m bam_viz score"):
        score.read_table(path, max_rows=3)
    with pytest.raises(ScoreInputError, match="over the limit of 0.0 MB here.*python -m bam_viz score"):
        score.read_table(path.read_bytes(), name="in.csv", max_bytes=100)
    with pytest.raises(ScoreInputError, match="over the limit"):
        score.read_table(path, max_bytes=100)
    assert len(score.read_table(path, max_rows=4, max_bytes=10_000)) == 4
    with pytest.raises(ScoreInputError, match="no such file"):
        score.read_table(tmp_path / "missing.csv")
    with pytest.raises(ScoreInputError, match="is a folder"):
        score.read_table(tmp_path)


def test_a_table_without_an_obvious_text_column_lists_its_columns():
    no_text = pd.DataFrame({"id": ["1", "2"], "score": [0.5, 0.1]})
    with pytest.raises(ScoreInputError, match=r"which column is the text\? no column.*'id', 'score'.*--text-column"):
        score.find_columns(no_text)
    two_texts = pd.DataFrame({"pros": SENTENCES, "cons": list(reversed(SENTENCES))})
    with pytest.raises(ScoreInputError, match="several columns hold texts.*'pros', 'cons'"):
        score.find_columns(two_texts)
    two_names = pd.DataFrame({"text": SENTENCES, "review": SENTENCES})
    with pytest.raises(ScoreInputError, match="columns 'text', 'review' could each be the text"):
        score.find_columns(two_names)
    # Named, either is fine; the label column is found by its name beside it.
    assert score.find_columns(two_texts.assign(sentiment=LABELS), text="cons") == ("cons", "sentiment", None)


def test_the_cli_says_no_text_column_in_one_line(tmp_path, capsys):
    path = tmp_path / "in.csv"
    pd.DataFrame({"id": ["1", "2"], "stars": ["4", "2"]}).to_csv(path, index=False)
    assert cli.main(["score", "--model", "vader", "--input", str(path), "--out", str(tmp_path / "o.csv")]) == 2
    assert "which column is the text?" in one_error_line(capsys)
    bad = tmp_path / "bad.csv"
    small_frame().assign(label=["good", "bad", "meh", "good"]).to_csv(bad, index=False)
    assert cli.main(["score", "--model", "vader", "--input", str(bad), "--out", str(tmp_path / "o.csv")]) == 2
    assert "labels not understood: 'good', 'bad', 'meh'" in one_error_line(capsys)


# ---- labels ----------------------------------------------------------------------------------------

def test_labels_in_every_usual_spelling():
    assert score.parse_labels(["Positive", " neg ", "pos", "NEGATIVE", "neutral", "mixed", "true", "False"]) == [
        "positive", "negative", "positive", "negative", AMBIGUOUS, AMBIGUOUS, "positive", "negative"]
    assert score.parse_labels([True, False, None, math.nan, "", "NaN", pd.NA]) == [
        "positive", "negative", None, None, None, None, None]


def test_numbers_are_read_as_a_column():
    assert score.parse_labels([1, 0, 1]) == ["positive", "negative", "positive"]
    assert score.parse_labels(["1", "0"]) == ["positive", "negative"]
    assert score.parse_labels([1, -1]) == ["positive", "negative"]
    # -1 beside 0 is three-way: 0 is the middle.
    assert score.parse_labels([-1, 0, 1]) == ["negative", AMBIGUOUS, "positive"]
    # Any number outside {-1, 0, 1} makes the column a rating, read by label_of: 0 and 0.5 are ambiguous.
    assert score.parse_labels([2.5, -0.7, 0.3, 0, 1, 0.5, -3]) == [
        "positive", "negative", AMBIGUOUS, AMBIGUOUS, "positive", AMBIGUOUS, "negative"]
    assert score.parse_labels(np.array([0.6, -0.51])) == ["positive", "negative"]


def test_unknown_labels_are_named():
    with pytest.raises(ScoreInputError, match="labels not understood: 'great', 'awful', 'ok', 'fine' and 1 more"):
        score.parse_labels(["great", "awful", "ok", "fine", "great", "meh", "positive"])
    with pytest.raises(ScoreInputError, match="labels not understood: 'inf'"):
        score.parse_labels([1.0, "inf"])


# ---- seeding ---------------------------------------------------------------------------------------

def test_sentence_seeds_are_the_same_in_every_process():
    keys = ["10", "1_3", "a sentence id", "é"]
    here = [score.sentence_seed(7, k) for k in keys]
    code = f"from bam_viz.evaluation.score.scorer import sentence_seed; print([sentence_seed(7, k) for k in {keys!r}])"
    for hashseed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                              env={**os.environ, "PYTHONHASHSEED": hashseed})
        assert json.loads(done.stdout) == here
    assert all(0 <= s < 2**63 for s in here) and len(set(here)) == len(here)
    assert here[0] == int(hashlib.sha256(b"7:10").hexdigest()[:16], 16) >> 1
    assert score.sentence_seed(8, "10") != here[0]


@pytest.fixture(scope="module")
def movies40():
    snippets = load_split("movies", "test", include_ambiguous=True)[:40]
    return pd.DataFrame({"id": [s.id for s in snippets], "text": [s.text for s in snippets],
                         "label": [s.label for s in snippets]})


def _by_id(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index(["model", "id"]).sort_index()


@pytest.mark.slow
def test_a_sentences_row_does_not_depend_on_the_rest_of_the_run(bam_wc, movies40):
    kw = {"text_column": "text", "label_column": "label", "id_column": "id", "n_samples": 8, "seed": 0}
    whole = score.score_frame(movies40, ["bam-wc"], **kw)
    assert list(whole["id"]) == list(movies40["id"])                       # input order kept
    shuffled = score.score_frame(movies40.sample(frac=1, random_state=1), [bam_wc], **kw)
    assert list(shuffled["id"]) != list(whole["id"])
    parts = pd.concat([score.score_frame(movies40.iloc[i : i + 14], ["bam-wc"], **kw) for i in (0, 14, 28)])
    for other in (shuffled, parts):
        pd.testing.assert_frame_equal(_by_id(other), _by_id(whole), check_exact=True)
    reseeded = score.score_frame(movies40, ["bam-wc"], **{**kw, "seed": 1})
    assert (reseeded["p_positive"] != whole["p_positive"]).all()
    assert (reseeded["p_positive_softmax"] == whole["p_positive_softmax"]).all()   # no noise there


def test_rows_without_ids_are_keyed_and_seeded_by_their_text(bam_wc):
    frame = small_frame(with_id=False)
    out = score.score_frame(frame, [bam_wc], text_column="text", n_samples=4, seed=3)
    assert list(out["id"]) == [hashlib.sha256(t.encode()).hexdigest()[:16] for t in SENTENCES]
    again = score.score_frame(frame.iloc[::-1], [bam_wc], text_column="text", n_samples=4, seed=3)
    pd.testing.assert_frame_equal(_by_id(again), _by_id(out), check_exact=True)
    assert out["label"].isna().all() and out["correct"].isna().all()


def test_each_row_is_the_models_own_prediction_with_the_sentences_seed(bam_wc):
    out = score.score_frame(small_frame(), ["bam-wc"], text_column="text", id_column="id", n_samples=6, seed=5)
    for row in out.itertuples():
        with score.one_thread():                          # as scoring runs, so that float32 sums agree
            samples = bam_wc.predict_samples([row.text], n_samples=6, seed=score.sentence_seed(5, row.id))[0, :, 1]
            mean_field = float(bam_wc.predict_softmax([row.text])[0, 1])
        p = samples.double().numpy()
        assert row.p_positive == pytest.approx(p.mean(), abs=1e-12)
        assert row.gap_softmax_se == pytest.approx(p.std(ddof=1) / math.sqrt(6), abs=1e-12)
        assert row.p_positive_softmax == pytest.approx(mean_field, abs=1e-12)


# ---- the columns -----------------------------------------------------------------------------------

LONG_TEXT = " ".join(["a slow and tender film about a family that never knows what it wants"] * 12)


@pytest.fixture(scope="module")
def scored(bam_wc):
    frame = pd.concat([small_frame(), pd.DataFrame({"id": ["long"], "text": [LONG_TEXT], "label": [None]})])
    progress = []
    out = score.score_frame(frame, [bam_wc, "softmax", "vader"], text_column="text", label_column="label",
                            id_column="id", n_samples=8, seed=0, progress=lambda d, t: progress.append((d, t)))
    return out, progress


def test_the_frame_has_exactly_the_columns_model_major(scored):
    out, progress = scored
    assert tuple(out.columns) == COLUMNS and dict(out.dtypes.astype(str)) == score.DTYPES
    assert list(out["model"]) == ["bam-wc"] * 5 + ["softmax"] * 5 + ["vader"] * 5
    assert list(out["id"]) == ["s0", "s1", "s2", "s3", "long"] * 3
    assert progress == [(i, 15) for i in range(1, 16)]
    assert (out["n_samples"] == 8).all() and (out["seed"] == 0).all()
    assert out["corpus"].isna().all() and out["split"].isna().all()
    assert out[["human_mean", "raters_std", "share_positive"]].isna().all().all()


def test_gap_entropies_and_prediction_are_consistent(scored):
    out, _ = scored
    assert (out["gap_softmax"] == out["p_positive"] - out["p_positive_softmax"]).all()
    mi = out["predictive_entropy"] - out["expected_entropy"]
    np.testing.assert_allclose(out["mutual_information"], mi, atol=metrics.MI_ROUNDING)
    assert (out["mutual_information"] >= 0).all() and (out["gap_softmax_se"] >= 0).all()
    assert (out["predicted"] == np.where(out["p_positive"] > 0.5, "positive", "negative")).all()
    bam = out[out["model"] == "bam-wc"]
    assert (bam["mutual_information"] > 0).all() and (bam["gap_softmax_se"] > 0).all()
    fixed = out[out["model"] != "bam-wc"]                      # softmax and vader draw no noise
    assert (fixed["gap_softmax_se"] == 0).all() and (fixed["mutual_information"] == 0).all()
    assert (fixed["predictive_entropy"] == fixed["expected_entropy"]).all()


def test_correct_agrees_with_label_and_prediction(scored):
    out, _ = scored
    clear = out["label"].isin(["positive", "negative"])
    assert (out.loc[clear, "correct"] == (out.loc[clear, "predicted"] == out.loc[clear, "label"])).all()
    assert out.loc[~clear, "correct"].isna().all() and clear.sum() == 9
    assert set(out.loc[~clear, "label"].dropna()) == {AMBIGUOUS}


def test_vader_rows_are_vaders_compound(scored):
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    out, _ = scored
    vader = out[out["model"] == "vader"]
    analyser = SentimentIntensityAnalyzer()
    expected = [(analyser.polarity_scores(t)["compound"] + 1) / 2 for t in vader["text"]]
    np.testing.assert_allclose(vader["p_positive"], expected, rtol=0, atol=1e-15)
    assert (vader["gap_softmax"] == 0).all() and not vader["truncated"].any()
    # Its n_tokens is MiniLM's count, like every other model's row of the same sentence.
    assert list(vader["n_tokens"]) == list(out[out["model"] == "bam-wc"]["n_tokens"])


def test_truncated_marks_texts_longer_than_the_model_reads(scored, bam_wc):
    out, _ = scored
    long = out[out["id"] == "long"]
    assert (long["n_tokens"] == bam_wc.tokenizer.length(LONG_TEXT)).all()
    assert (long["n_tokens"] > bam_wc.max_tokens).all()
    assert list(long["truncated"]) == [True, True, False]                 # vader reads it whole
    short = out[out["id"] != "long"]
    assert not short["truncated"].any()
    assert list(short["n_tokens"][:4]) == [len(bam_wc.tokenize(t)) for t in SENTENCES]


def test_the_human_columns_of_a_corpus_are_its_snippets():
    out = score.score_corpora(["vader"], corpora=["tweets", "nyt"], split="test")
    snippets = {(c, s.id): s for c in ("tweets", "nyt") for s in load_corpus(c).split("test", include_ambiguous=True)}
    assert len(out) == len(snippets) and set(zip(out["corpus"], out["id"], strict=True)) == set(snippets)
    assert (out["label"] == AMBIGUOUS).sum() > 0 and (out["split"] == "test").all()
    for row in out.itertuples():
        s = snippets[(row.corpus, row.id)]
        assert (row.text, row.label, row.human_mean, row.raters_std, row.share_positive) == (
            s.text, s.label, s.mean, s.std, s.human_p_positive)
        assert (row.correct is pd.NA) == (s.label == AMBIGUOUS)


# ---- bad calls -------------------------------------------------------------------------------------

def test_bad_calls_are_score_input_errors():
    frame = small_frame()
    kw = {"text_column": "text"}
    with pytest.raises(ScoreInputError, match="unknown model 'bam-xx'"):
        score.score_frame(frame, ["bam-xx"], **kw)
    with pytest.raises(ScoreInputError, match="'vader' is given twice"):
        score.score_frame(frame, ["vader", "vader"], **kw)
    with pytest.raises(ScoreInputError, match="no model given"):
        score.score_frame(frame, [], **kw)
    with pytest.raises(ScoreInputError, match="unknown engine 'spark'"):
        score.score_frame(frame, ["vader"], engine="spark", **kw)
    with pytest.raises(ScoreInputError, match="n_samples must be at least 1"):
        score.score_frame(frame, ["vader"], n_samples=0, **kw)
    with pytest.raises(ScoreInputError, match="num_workers must be a whole number"):
        score.score_frame(frame, ["vader"], num_workers=0, **kw)
    with pytest.raises(ScoreInputError, match="no column 'body' for the text"):
        score.score_frame(frame, ["vader"], text_column="body")
    blank = frame.assign(text=["A film.", "  ", None, "Fine."])
    with pytest.raises(ScoreInputError, match=r"2 rows without text in column 'text' \(row 2, 3\)"):
        score.score_frame(blank, ["vader"], **kw)
    with pytest.raises(ScoreInputError, match="unknown corpus 'imdb'"):
        score.score_corpora(["vader"], corpora=["imdb"])
    with pytest.raises(TypeError, match="unexpected options"):
        score.score_corpora(["vader"], corpora=["tweets"], workers=2)


def test_the_ray_engine_without_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)               # makes `import ray` fail
    with pytest.raises(ScoreInputError, match=r"pip install 'ray\[data\]'"):
        score.score_frame(small_frame(), ["vader"], text_column="text", engine="ray")


def test_shipped_scores_say_how_to_make_them_when_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(score, "SHIPPED", tmp_path / "test.parquet")
    with pytest.raises(FileNotFoundError, match="make scores"):
        score.shipped_scores()


# ---- the command -----------------------------------------------------------------------------------

def test_the_command_writes_parquet_or_csv_and_a_card(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    write(small_frame(), path)
    expected = score.score_frame(small_frame(), ["vader", "bam-wc"], text_column="text", label_column="label",
                                 id_column="id", n_samples=4, seed=2)
    base = ["score", "--model", "vader", "--model", "bam-wc", "--input", str(path), "--samples", "4", "--seed", "2"]
    assert cli.main([*base, "--out", str(tmp_path / "o.parquet"), "--card", str(tmp_path / "o.json")]) == 0
    written = pd.read_parquet(tmp_path / "o.parquet")
    pd.testing.assert_frame_equal(score.finish(written), expected, check_exact=True)
    card = json.loads((tmp_path / "o.json").read_text())
    assert card["sha256"] == hashlib.sha256((tmp_path / "o.parquet").read_bytes()).hexdigest()
    assert card["rows"] == 8 and card["models"] == ["vader", "bam-wc"] and card["n_samples"] == 4
    assert card["command"].startswith("python -m bam_viz score --model vader")
    assert cli.main([*base, "--out", str(tmp_path / "o.csv")]) == 0
    from_csv = pd.read_csv(tmp_path / "o.csv", dtype={"id": str})
    np.testing.assert_allclose(from_csv["p_positive"], expected["p_positive"], rtol=1e-15)
    assert list(from_csv.columns) == list(COLUMNS)
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--model", "bam-xx", "--corpus", "tweets", "--out", "o.parquet"], "unknown model 'bam-xx'"),
    (["--model", "vader", "--corpus", "imdb", "--out", "o.parquet"], "unknown corpus 'imdb'"),
    (["--model", "vader", "--corpus", "tweets", "--out", "o.xlsx"], "write a .parquet or .csv file"),
    (["--model", "vader", "--corpus", "tweets", "--out", "folder"], "needs --engine ray"),
    (["--model", "vader", "--corpus", "tweets", "--samples", "0", "--out", "o.csv"], "n_samples must be at least 1"),
    (["--model", "vader", "--corpus", "tweets", "--samples", "many", "--out", "o.csv"], "invalid int value: 'many'"),
    (["--model", "vader", "--out", "o.csv"], "one of the arguments --input --corpus is required"),
    (["--model", "vader", "--corpus", "tweets", "--input", "x.csv", "--out", "o.csv"], "not allowed with"),
    (["--model", "vader", "--corpus", "tweets", "--text-column", "t", "--out", "o.csv"], "are for --input files"),
    (["--model", "vader", "--input", "x.csv", "--split", "dev", "--out", "o.csv"], "--split is for --corpus"),
    (["--model", "vader", "--corpus", "tweets", "--engine", "spark", "--out", "o.csv"], "invalid choice: 'spark'"),
    (["--model", "vader", "--corpus", "tweets"], "the following arguments are required: --out"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert exit_status(*argv) == 2
    assert message in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_the_bench_has_a_scoring_option():
    args = cli.build_parser().parse_args(["bench", "--scoring"])
    assert (args.scoring, args.sentences, args.scoring_repeats, args.model, args.samples) == (
        True, 200, 3, "bam-wc", 32)
    assert cli.build_parser().parse_args(["bench"]).scoring is False


# ---- the shipped scores ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shipped():
    return score.shipped_scores()


def test_the_shipped_scores_cover_every_model_and_every_test_sentence(shipped):
    assert tuple(shipped.columns) == COLUMNS
    models = [*(m for m in zoo.available_models() if m in zoo.RECIPES), "vader"]   # the sentiment zoo
    assert list(shipped["model"].unique()) == models
    sentences = {(c, s.id) for c in CORPORA for s in load_corpus(c).split("test", include_ambiguous=True)}
    assert len(shipped) == len(models) * len(sentences)
    for _, rows in shipped.groupby("model"):
        assert set(zip(rows["corpus"], rows["id"], strict=True)) == sentences and len(rows) == len(sentences)
    assert set(shipped["corpus"]) == set(CORPORA) and (shipped["split"] == "test").all()
    assert (shipped["label"] == AMBIGUOUS).sum() > 0
    assert (shipped["n_samples"] == 32).all() and (shipped["seed"] == 0).all()


def test_the_shipped_card_describes_the_file(shipped):
    card = json.loads(score.SHIPPED.with_suffix(".json").read_text())
    data = score.SHIPPED.read_bytes()
    assert card["sha256"] == hashlib.sha256(data).hexdigest() and card["bytes"] == len(data) < 5 * 2**20
    assert card["rows"] == len(shipped) and card["models"] == list(shipped["model"].unique())
    assert (card["n_samples"], card["seed"], card["split"]) == (32, 0, "test")
    from bam_viz.data import split_fingerprint

    assert card["split_fingerprint"] == split_fingerprint()
    for f in card["corpus_files"]:
        assert f["sha256"] in {g.sha256 for g in load_corpus(f["corpus"]).files}


@pytest.mark.slow
def test_shipped_rows_equal_a_fresh_scoring(shipped):
    rng = np.random.default_rng(0)
    threads = torch.get_num_threads()
    for model, rows in shipped.groupby("model", sort=False):
        sample = rows.iloc[rng.choice(len(rows), size=10, replace=False)]
        fresh = score.score_frame(sample[["id", "text", "label"]], [model], text_column="text", label_column="label",
                                  id_column="id", n_samples=32, seed=0)
        for column in ("p_positive", "p_positive_softmax", "gap_softmax", "gap_softmax_se", "predictive_entropy",
                       "expected_entropy", "mutual_information"):
            # Equal to float32 rounding: torch's sums may run in another order with another thread count or
            # another CPU's vector width (Dirichlet's Gamma draws here: 1.3e-6 on one host); another stream or
            # model would differ by far more than this.
            np.testing.assert_allclose(fresh[column], sample[column], rtol=0, atol=1e-5, err_msg=f"{model} {column}")
        for column in ("id", "predicted", "n_tokens", "truncated", "label", "correct"):
            assert list(fresh[column]) == list(sample[column]), (model, column)
    assert torch.get_num_threads() == threads


def test_the_shipped_file_reads_as_plain_pandas():
    raw = pd.read_parquet(io.BytesIO(score.SHIPPED.read_bytes()))
    assert tuple(raw.columns) == COLUMNS and len(raw) > 0


def test_the_shipped_file_holds_no_corpus_text_and_the_scores_read_it_from_the_corpora(shipped, tmp_path):
    raw = pd.read_parquet(score.SHIPPED)
    assert raw["text"].isna().all()             # the corpora are never copied into the repository
    texts = {(c, s.id): s.text for c in CORPORA for s in load_corpus(c).snippets}
    assert shipped["text"].notna().all()
    assert all(texts[(c, i)] == t for c, i, t in zip(shipped["corpus"], shipped["id"], shipped["text"], strict=True))
    # Without the corpora the scores still load, with no text
    bare = score.shipped_scores(data=tmp_path)
    assert bare["text"].isna().all() and bare["p_positive"].equals(shipped["p_positive"])


def test_no_text_writes_an_empty_text_column(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("id,text\na,a fine film .\nb,dull and slow .\n")
    out = tmp_path / "out.parquet"
    assert cli.main(["score", "--model", "vader", "--input", str(src), "--no-text", "--out", str(out)]) == 0
    written = pd.read_parquet(out)
    assert written["text"].isna().all() and list(written["id"]) == ["a", "b"]
    assert written["p_positive"].notna().all()


# ---- K classes -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def topics(tmp_path_factory):
    """A three-class model loaded from its folder (random head: what it predicts means nothing)."""
    from k_class_models import k_class_folder

    return zoo.load(path=k_class_folder(tmp_path_factory.mktemp("models")))


TOPIC_LABELS = ["sports", " Politics ", "SCIENCE", None]


def test_a_k_class_table_has_a_column_per_class(topics):
    from bam_viz.core.task import entropy_bound

    frame = small_frame().assign(label=TOPIC_LABELS)
    out = score.score_frame(frame, [topics], text_column="text", label_column="label", id_column="id",
                            n_samples=6, seed=5)
    classes = topics.classes
    assert tuple(out.columns) == score.columns_for(classes) and score.classes_of(out) == classes
    assert dict(out.dtypes.astype(str)) == score.dtypes_for(classes)
    per_class = [f"p_{c}" for c in classes]
    assert not {"p_positive", "p_positive_softmax"} & set(out.columns)
    assert out["label"].fillna("-").tolist() == ["sports", "politics", "science", "-"]
    for row in out.itertuples():
        with score.one_thread():
            samples = topics.predict_samples([row.text], n_samples=6, seed=score.sentence_seed(5, row.id))[0]
            softmax = topics.predict_softmax([row.text])[0].double().numpy()
        mean = samples.double().numpy().mean(0)
        np.testing.assert_allclose([getattr(out.loc[row.Index], c) for c in per_class], mean, rtol=0, atol=1e-12)
        k = int(np.argmax(mean))
        assert row.predicted == classes[k]
        # gap_softmax is the predicted class's: E[f(z)] - f(softmax) in the probability the prediction rests on
        assert row.p_predicted_softmax == pytest.approx(softmax[k], abs=1e-12)
        assert row.gap_softmax == pytest.approx(mean[k] - softmax[k], abs=1e-12)
        p = samples[:, k].double().numpy()
        assert row.gap_softmax_se == pytest.approx(metrics.paired_gap_se(p, softmax[k]), abs=1e-12)
        assert 0 <= row.mutual_information <= row.predictive_entropy <= entropy_bound(3) + 1e-12
        assert (row.correct is pd.NA) if row.label is pd.NA else row.correct == (row.predicted == row.label)


def test_k_class_labels_are_the_models_class_names_or_indices():
    classes = ("sports", "politics", "none")
    assert score.parse_class_labels(["sports", " POLITICS", "none", None, math.nan, "", "n/a"], classes) == [
        "sports", "politics", "none", None, None, None, None]             # "none" is a class here
    digits = tuple(str(i) for i in range(50))
    assert score.parse_class_labels([3, 49.0, "7", " 12.0 ", np.int64(0)], digits) == ["3", "49", "7", "12", "0"]
    stars = ("1", "2", "3", "4", "5")                                       # names that are numbers, not from 0
    assert score.parse_class_labels([5, "1.0", 3.0], stars) == ["5", "1", "3"]
    with pytest.raises(ScoreInputError, match="labels not understood: '0', '6'; the labels of t5 are its classes: "
                                              "'1', '2', '3', '4', '5'"):
        score.parse_class_labels([0, 6, 5], stars, "t5")
    with pytest.raises(ScoreInputError, match=r"'True', '2.5', 'football', 'Sports!' and 1 more; .*'sports', "
                                              r"'politics', 'none'$"):
        score.parse_class_labels([True, 2.5, "football", "Sports!", "x", "sports"], classes)
    with pytest.raises(ScoreInputError, match=r"'50'; .*'0', '1', .* '11' and 38 more"):
        score.parse_class_labels([50], digits)
    # Another case is a class where only one class folds to it; classes that differ only in case are
    # matched as written, never guessed.
    assert score.parse_class_labels(["B", "C ", "c"], ("b", "c", "C")) == ["b", "C", "c"]
    with pytest.raises(ScoreInputError, match="labels not understood: 'Ab'"):
        score.parse_class_labels(["Ab"], ("ab", "AB"))
    # The sentiment pair keeps its own reading.
    assert score.read_labels(["pos", 0], ("negative", "positive")) == ["positive", "negative"]


def test_a_k_class_label_not_among_the_classes_stops_before_scoring(topics):
    frame = small_frame()                                             # sentiment labels for a topic model
    calls = []
    with pytest.raises(ScoreInputError, match="labels not understood: 'positive', 'negative', 'ambiguous'; the "
                                              "labels of t3 are its classes: 'sports', 'politics', 'science'"):
        score.score_frame(frame, [topics], text_column="text", label_column="label",
                          progress=lambda d, t: calls.append(d))
    assert calls == []


def test_models_with_different_classes_are_not_scored_into_one_table(topics):
    for models in ([topics, "vader"], ["bam-wc", topics]):
        with pytest.raises(ScoreInputError, match=r"the models predict different classes \(.*t3 predicts sports, "
                                                  r"politics, science.*\): .*separate tables"):
            score.score_frame(small_frame(with_label=False), models, text_column="text", n_samples=2)
    with pytest.raises(ScoreInputError, match="a class called 'predicted_softmax' would name the column "
                                              "'p_predicted_softmax'"):
        score.columns_for(("predicted_softmax", "other"))
    with pytest.raises(ScoreInputError, match="a probability column per class"):
        score.classes_of(["id", "text"])


def test_the_command_scores_a_model_folder_into_a_k_class_file(topics, tmp_path, monkeypatch, capsys):
    folder = Path(topics.origin[1]) / topics.origin[0]
    monkeypatch.setenv(zoo.MODELS_ENV, str(folder))
    assert "t3" in zoo.available_models()
    src = tmp_path / "in.csv"
    small_frame().assign(label=TOPIC_LABELS).to_csv(src, index=False)
    expected = score.score_frame(small_frame().assign(label=TOPIC_LABELS), [topics], text_column="text",
                                 label_column="label", id_column="id", n_samples=3, seed=1)
    base = ["score", "--model", "t3", "--input", str(src), "--samples", "3", "--seed", "1"]
    assert cli.main([*base, "--out", str(tmp_path / "o.parquet"), "--card", str(tmp_path / "o.json")]) == 0
    pd.testing.assert_frame_equal(score.finish(pd.read_parquet(tmp_path / "o.parquet")), expected, check_exact=True)
    card = json.loads((tmp_path / "o.json").read_text())
    assert card["classes"] == list(topics.classes) and card["columns"] == list(expected.columns)
    assert cli.main([*base, "--out", str(tmp_path / "o.csv")]) == 0
    back = score.finish(pd.read_csv(tmp_path / "o.csv", dtype={"id": str}))
    assert score.classes_of(back) == topics.classes
    np.testing.assert_allclose(back["p_sports"], expected["p_sports"], rtol=1e-15)
    capsys.readouterr()
    assert cli.main(["score", "--model", "t3", "--model", "vader", "--input", str(src), "--out",
                     str(tmp_path / "mixed.csv")]) == 2
    assert "the models predict different classes" in one_error_line(capsys)
    assert not (tmp_path / "mixed.csv").exists()


def test_fifty_classes_with_index_labels():
    from k_class_models import k_class_model

    digits = tuple(str(i) for i in range(50))
    model = k_class_model(digits, "t50")
    frame = pd.DataFrame({"text": SENTENCES[:2], "label": [7, 49]})
    out = score.score_frame(frame, [model], text_column="text", label_column="label", n_samples=2)
    assert [c for c in out.columns if c.startswith("p_")][:3] == ["p_0", "p_1", "p_2"]
    assert score.classes_of(out) == digits and list(out["label"]) == ["7", "49"]
    np.testing.assert_allclose(out[[f"p_{c}" for c in digits]].sum(axis=1), 1.0, atol=1e-6)
    assert (out["predictive_entropy"] <= math.log(50) + 1e-12).all()
