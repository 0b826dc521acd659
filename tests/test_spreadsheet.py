"""CSV cells a spreadsheet would run (bam_viz/core/spreadsheet.py), in every CSV writer: `score --out
x.csv`, `table --out x.csv|tsv`, the Corpus page's download, the explorer's downloads. Text cells
that start with =, +, -, @, a tab or a carriage return get a leading '; numbers stay numbers; Parquet
and JSON keep the values as they are."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from bam_viz.core.spreadsheet import FORMULA_STARTS, safe_cell, safe_frame

# OWASP's CSV injection examples and the other starts a spreadsheet reads as a formula.
FORMULAS = ["=1+1", "=HYPERLINK(\"https://example.org\",\"x\")", "+SUM(A1:A2)", "-2+3", "@SUM(1,1)",
            "=cmd|' /C calc'!A0", "\t=1+1", "\r=1+1"]
PLAIN = ["a = b", "I+you", "", "'=already text", "5", "nice -- movie"]


@pytest.mark.parametrize("value", FORMULAS)
def test_a_formula_becomes_text(value):
    assert safe_cell(value) == "'" + value


@pytest.mark.parametrize("value", [*PLAIN, -0.25, -3, 0, None, math.nan, True])
def test_anything_else_is_kept(value):
    kept = safe_cell(value)
    assert kept is value or (isinstance(value, float) and math.isnan(value) and math.isnan(kept))


def test_a_frame_s_text_cells_and_names_change_its_numbers_do_not():
    frame = pd.DataFrame({"text": [FORMULAS[0], PLAIN[0], None], "score": [-0.5, 1.0, -2.0],
                          "count": [-1, 2, 3], "kind": pd.Categorical(["-x", "y", "-x"]), "=name": ["a", "b", "c"]})
    safe = safe_frame(frame)
    assert safe["text"].tolist()[:2] == ["'" + FORMULAS[0], PLAIN[0]] and pd.isna(safe["text"][2])
    assert safe["kind"].tolist() == ["'-x", "y", "'-x"] and list(safe.columns)[-1] == "'=name"
    assert safe["score"].dtype == np.float64 and safe["score"].tolist() == [-0.5, 1.0, -2.0]
    assert safe["count"].dtype == np.int64 and safe["count"].tolist() == [-1, 2, 3]
    assert frame["text"][0] == FORMULAS[0] and list(frame.columns)[-1] == "=name"     # the caller's frame kept
    plain = pd.DataFrame({"text": PLAIN, "score": -1.0})
    assert safe_frame(plain) is plain


def _cells(text: str, delimiter: str = ",") -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text), delimiter=delimiter) for cell in row]


def _runs(cell: str) -> bool:
    """A cell a spreadsheet would run: it starts like a formula and is no number."""
    if not cell.startswith(FORMULA_STARTS):
        return False
    try:
        float(cell)
    except ValueError:
        return True
    return False


def test_table_writes_csv_and_tsv_neutralised_and_jsonl_and_parquet_as_they_are(tmp_path):
    from bam_viz.data import write_table

    formulas = FORMULAS[:-1]                  # pandas leaves a lone \r unquoted: csv.reader could not read it back
    frame = pd.DataFrame({"text": formulas, "label": ["-1"] * len(formulas), "mean": -0.75})
    for suffix, delimiter in ((".csv", ","), (".tsv", "\t")):
        text = write_table(frame, tmp_path / f"t{suffix}").read_bytes().decode()
        assert not any(_runs(c) for c in _cells(text, delimiter)) and "-0.75" in text
        back = pd.read_csv(tmp_path / f"t{suffix}", sep=delimiter, keep_default_na=False)
        assert back["text"].tolist() == ["'" + f for f in formulas] and back["mean"].tolist() == [-0.75] * len(frame)
    assert pd.read_parquet(write_table(frame, tmp_path / "t.parquet"))["text"].tolist() == formulas
    lines = write_table(frame, tmp_path / "t.jsonl").read_text().splitlines()
    assert [json.loads(line)["text"] for line in lines] == formulas


CLASSES = ("=1+1", "+cmd", "@SUM(1,1)")


@pytest.fixture(scope="module")
def formula_model(tmp_path_factory):
    """A model folder whose class names are formulas (tests/k_class_models.py: a random head)."""
    from k_class_models import k_class_folder

    return k_class_folder(tmp_path_factory.mktemp("models"), CLASSES, name="formulas")


def test_score_out_csv_and_the_corpus_download_neutralise_formulas_parquet_keeps_them(formula_model, tmp_path,
                                                                                     capsys):
    from bam_viz import cli
    from bam_viz.evaluation import corpus

    source = tmp_path / "in.csv"
    pd.DataFrame({"text": ["=HYPERLINK(\"https://example.org\",\"click\") was a fine film",
                           "-- a dull plot, two hours long", "@home it was great"],
                  "label": list(CLASSES)}).to_csv(source, index=False)
    for out in ("scores.csv", "scores.parquet"):
        assert cli.main(["score", "--model", str(formula_model), "--input", str(source), "--out",
                         str(tmp_path / out), "--samples", "2"]) == 0, capsys.readouterr().err
    parquet = pd.read_parquet(tmp_path / "scores.parquet")
    assert set(parquet["label"]) == set(CLASSES) and parquet["text"][0].startswith("=HYPERLINK")
    text = (tmp_path / "scores.csv").read_bytes().decode()
    assert not any(_runs(c) for c in _cells(text))
    back = pd.read_csv(tmp_path / "scores.csv")
    assert back["label"].tolist() == ["'" + c for c in parquet["label"]]
    assert back["text"].tolist() == ["'" + t for t in parquet["text"]]
    numbers = parquet.select_dtypes("number").columns
    pd.testing.assert_frame_equal(back[numbers], parquet[numbers], check_dtype=False)   # numbers stay numbers
    download = corpus.scored_csv(parquet).decode("utf-8")
    assert not any(_runs(c) for c in _cells(download)) and "'=1+1" in download


def test_the_explorer_s_csv_downloads_neutralise_a_token(formula_model):
    from bam_viz import zoo
    from bam_viz.inference import export

    result = zoo.load(path=formula_model).explain("=1+1 @you -me", n_samples=2, seed=0)
    assert {"=", "@", "-"} <= set(result.tokens)
    for text in (export.view_csv(result, 5, 0), export.weights_csv(result)):
        cells = _cells("\n".join(line for line in text.splitlines() if not line.startswith("# ")))
        assert not any(_runs(c) for c in cells) and {"'=", "'@", "'-"} <= set(cells)
