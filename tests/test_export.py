"""bam_viz.inference.export: the whole result, and the one-head view the explorer's downloads hold."""

from __future__ import annotations

import pytest
import torch

from bam_viz.inference import export


def _eleven_tokens():
    from fake_result import make_fake_result

    r = make_fake_result("weibull", T=11, S=32, L=6, H=12, target="positive")   # the shipped models' shape
    r.model_name, r.seed = "bam-wc", 7
    return r


def test_view_json_holds_the_selected_head_with_its_settings():
    import json
    import tomllib
    from pathlib import Path

    from bam_viz.inference.export import package_version

    r = _eleven_tokens()
    view = export.view_json(r, 5, 3)
    header = view["header"]
    assert {k: header[k] for k in ("text", "tokens", "model", "family", "hyper", "n_samples", "seed", "layer",
                                   "head", "classes", "target", "target_class", "predicted")} == {
        "text": r.text, "tokens": r.tokens, "model": "bam-wc", "family": "weibull", "hyper": r.hyper,
        "n_samples": 32, "seed": 7, "layer": 5, "head": 3, "classes": ["negative", "positive"], "target": 1,
        "target_class": "positive", "predicted": int(r.mc_probs.argmax())}
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert header["bam_viz_version"] == package_version() == pyproject["project"]["version"]
    headline = dict(view["headline"])
    assert headline.pop("se_estimators") == r.se.ESTIMATORS
    assert headline.pop("mutual_information_estimator") == "bias-corrected (jackknife)"
    assert headline == pytest.approx({
        "p_target": float(r.mc_probs[1]), "p_target_mean_attention": float(r.mean_attention_probs[1]),
        "p_target_softmax": float(r.softmax_probs[1]), "gap": r.gap, "gap_softmax": r.gap_softmax,
        "mutual_information": r.mutual_information, "mutual_information_plugin": r.mutual_information_plugin,
        "predictive_entropy": r.predictive_entropy, "expected_entropy": r.expected_entropy,
        "se_p_target": r.se.p_target, "se_gap": r.se.gap, "se_gap_softmax": r.se.gap_softmax,
        "se_mutual_information": r.se.mutual_information, "gap_distinguishable": r.gap_distinguishable})
    # what each weight is, by name: the samples' mean, the deterministic pass, the prior's pi and mean
    sampled = r.sample_weights[:, 5, 3].double()
    for name, full in (("sample_weights", r.sample_weights[:, 5, 3]), ("prior_sample_weights", r.prior_draws(5, 3)),
                       ("posterior_mean_weights", sampled.mean(0)),
                       ("posterior_mean_se", sampled.std(0) / 32**0.5),
                       ("softmax_weights", r.softmax_weights[5, 3]), ("prior_pi_weights", r.prior_weights[5, 3]),
                       ("prior_mean_weights", r.prior_draws(5, 3).double().mean(0)),
                       ("sample_probs", r.sample_probs)):
        got = torch.tensor(view[name], dtype=torch.float64)
        assert got.shape == full.shape, name
        torch.testing.assert_close(got, full.double(), rtol=1e-5, atol=1e-12)   # 6 significant digits
    assert not any("mean_field" in key or key == "mean_weights" for key in (*view, *view["headline"]))
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
    assert list(rows[0]) == export.CSV_COLUMNS
    cell = r.sample_weights[:, 5, 3, 4, 6].double()
    for column, value in (("posterior_mean_weight", cell.mean()), ("posterior_mean_se", cell.std() / S**0.5),
                          ("softmax_weight", r.softmax_weights[5, 3, 4, 6]),
                          ("prior_pi_weight", r.prior_weights[5, 3, 4, 6]),
                          ("prior_mean_weight", r.prior_draws(5, 3)[:, 4, 6].double().mean())):
        assert float(row[column]) == pytest.approx(float(value), rel=1e-5), column
    assert float(row["sample_p_target"]) == pytest.approx(float(r.sample_probs[2, 1]), rel=1e-5)
    negative = export.view_csv(r.for_target("negative"), 5, 3).splitlines()
    row = next(csv.DictReader(line for line in negative if not line.startswith("# ")))
    assert float(row["sample_p_target"]) == pytest.approx(float(r.sample_probs[0, 0]), rel=1e-5)
    assert '# target_class: "negative"' in negative


def test_the_full_download_names_every_mean_and_both_gaps():
    import json

    r = _eleven_tokens()
    full = export.full_json(r)
    assert json.loads(json.dumps(full, allow_nan=False)) == full                  # strict JSON
    torch.testing.assert_close(torch.tensor(full["posterior_mean_weights"], dtype=torch.float64),
                               r.sample_weights.double().mean(0), rtol=1e-6, atol=1e-12)
    torch.testing.assert_close(torch.tensor(full["softmax_weights"]), r.softmax_weights.double().float(),
                               rtol=0, atol=0, check_dtype=False)
    torch.testing.assert_close(torch.tensor(full["prior_mean_weights"], dtype=torch.float64),
                               r.prior_sample_weights.double().mean(0), rtol=1e-12, atol=0)
    for name in ("mc_probs", "mean_attention_probs", "softmax_probs", "mean_attention_loo_probs"):
        torch.testing.assert_close(torch.tensor(full[name]), getattr(r, name).double(), check_dtype=False)
    assert (full["gap"], full["gap_softmax"], full["se_gap"], full["se_gap_softmax"]) == (
        r.gap, r.gap_softmax, r.se.gap, r.se.gap_softmax)
    assert not any("mean_field" in key or key == "mean_weights" for key in full)


def test_one_sample_has_no_standard_error_and_says_so_in_valid_json():
    import json

    from fake_result import make_fake_result

    r = make_fake_result("weibull", T=5, S=1, L=6, H=2)
    view = export.view_json(r, 5, 0)
    json.dumps(view, allow_nan=False)
    assert all(v is None for row in view["posterior_mean_se"] for v in row)     # one draw: no spread to measure
    assert view["headline"]["mutual_information_estimator"] == "plug-in"
    assert "posterior_mean_se" in export.view_csv(r, 5, 0)
    json.dumps(export.full_json(r), allow_nan=False)


def test_file_name_says_the_settings():
    r = _eleven_tokens()
    assert export.file_name(r, 5, 0, "json") == "bam-wc_shape_k10_beta1_S32_seed7_L5H0.json"
    r.model_name, r.hyper = "my model/../x", {"shape_k": 0.237, "beta": 1e-4}
    assert export.file_name(r, 4, 11, ".csv") == "my-model-..-x_shape_k0.237_beta0.0001_S32_seed7_L4H11.csv"


@pytest.mark.parametrize("which", ["three_classes", "fifty_classes"])
def test_a_k_class_export_names_its_classes_and_the_one_its_numbers_are_for(which, request):
    import json

    from bam_viz.inference.explain import explain

    model = request.getfixturevalue(which)
    K = model.n_classes
    r = explain(model, "A quietly moving film.", n_samples=3, seed=0)
    for target, t in (("c1", 1), (K - 1, K - 1), (None, r.predicted)):
        shown = r.for_target(target)
        view = export.view_json(shown, 5, 0)
        assert view["header"]["classes"] == list(model.classes) and len(view["sample_probs"][0]) == K
        assert (view["header"]["target"], view["header"]["target_class"]) == (t, f"c{t}")
        assert view["header"]["predicted"] == int(r.mc_probs.argmax())
        headline = view["headline"]
        assert headline["p_target"] == pytest.approx(float(r.mc_probs[t]))
        assert headline["gap"] == pytest.approx(float(r.mc_probs[t] - r.mean_attention_probs[t]), abs=1e-7)
        assert headline["se_p_target"] == pytest.approx(float(r.sample_probs[:, t].double().std() / 3**0.5))
        full = export.full_json(shown)
        assert (full["classes"], full["target"], full["target_class"]) == (list(model.classes), t, f"c{t}")
        assert len(full["mc_probs"]) == K and full["gap"] == headline["gap"]
        json.dumps(full, allow_nan=False)
