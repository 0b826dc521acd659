"""bam_viz.export: the whole result, and the one-head view the explorer's downloads hold."""

from __future__ import annotations

import pytest
import torch

from bam_viz import export


def _eleven_tokens():
    from fake_result import make_fake_result

    r = make_fake_result("weibull", T=11, S=32, L=6, H=12)          # the shipped models' shape
    r.model_name, r.seed = "bam-wc", 7
    return r


def test_view_json_holds_the_selected_head_with_its_settings():
    import json
    import tomllib
    from pathlib import Path

    from bam_viz.export import package_version

    r = _eleven_tokens()
    view = export.view_json(r, 5, 3)
    header = view["header"]
    assert {k: header[k] for k in ("text", "tokens", "model", "family", "hyper", "n_samples", "seed", "layer",
                                   "head")} == {
        "text": r.text, "tokens": r.tokens, "model": "bam-wc", "family": "weibull", "hyper": r.hyper,
        "n_samples": 32, "seed": 7, "layer": 5, "head": 3}
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert header["bam_viz_version"] == package_version() == pyproject["project"]["version"]
    assert view["headline"] == pytest.approx({
        "p_positive": float(r.mc_probs[1]), "p_positive_mean_field": float(r.mean_field_probs[1]), "gap": r.gap,
        "mutual_information": r.mutual_information, "predictive_entropy": r.predictive_entropy,
        "expected_entropy": r.expected_entropy, "se_p_positive": r.se.p_positive, "se_gap": r.se.gap,
        "se_mutual_information": r.se.mutual_information, "gap_distinguishable": r.gap_distinguishable})
    for name, full in (("sample_weights", r.sample_weights[:, 5, 3]), ("prior_sample_weights", r.prior_draws(5, 3)),
                       ("mean_weights", r.mean_weights[5, 3]), ("prior_weights", r.prior_weights[5, 3]),
                       ("sample_probs", r.sample_probs)):
        got = torch.tensor(view[name], dtype=torch.float64)
        assert got.shape == full.shape, name
        torch.testing.assert_close(got, full.double(), rtol=1e-5, atol=1e-12)   # 6 significant digits
    assert view["kl"] == pytest.approx(float(r.kl[5, 3]))
    # All 72 heads, every sample and prior draw: some MB. One head: tens of kB.
    size = len(json.dumps(view))
    assert size < 150_000 and size * 50 < len(json.dumps(export.full_json(r)))


def test_view_csv_is_long_form_under_the_same_header():
    import csv
    import json

    r = _eleven_tokens()
    text = export.view_csv(r, 5, 3)
    comments = [line for line in text.splitlines() if line.startswith("# ")]
    header = {line[2:].split(": ", 1)[0]: json.loads(line[2:].split(": ", 1)[1]) for line in comments}
    assert header == json.loads(json.dumps({**export.view_header(r, 5, 3), **export.view_headline(r)}))
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("# ")))
    S, T = 32, 11
    assert len(rows) == S * T * T and len(text) < 400_000
    row = rows[(2 * T + 4) * T + 6]                                  # sample 2, query 4, key 6
    assert (row["sample"], row["query"], row["key"]) == ("2", "4", "6")
    assert (row["query_token"], row["key_token"]) == (r.tokens[4], r.tokens[6])
    assert float(row["weight"]) == pytest.approx(float(r.sample_weights[2, 5, 3, 4, 6]), rel=1e-5)
    assert float(row["prior_draw"]) == pytest.approx(float(r.prior_draws(5, 3)[2, 4, 6]), rel=1e-5)
    assert float(row["mean_weight"]) == pytest.approx(float(r.mean_weights[5, 3, 4, 6]), rel=1e-5)
    assert float(row["prior_weight"]) == pytest.approx(float(r.prior_weights[5, 3, 4, 6]), rel=1e-5)
    assert float(row["sample_p_positive"]) == pytest.approx(float(r.sample_probs[2, 1]), rel=1e-5)


def test_file_name_says_the_settings():
    r = _eleven_tokens()
    assert export.file_name(r, 5, 0, "json") == "bam-wc_shape_k10_beta1_S32_seed7_L5H0.json"
    r.model_name, r.hyper = "my model/../x", {"shape_k": 0.237, "beta": 1e-4}
    assert export.file_name(r, 4, 11, ".csv") == "my-model-..-x_shape_k0.237_beta0.0001_S32_seed7_L4H11.csv"
