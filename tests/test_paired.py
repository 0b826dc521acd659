"""Paired comparisons of two evaluate results (bam_viz.evaluation.paired): each metric of each model,
the difference a - b, and a bootstrap interval around it, for corpus and file results."""

import json

import numpy as np
import pytest

from bam_viz.core import metrics
from bam_viz.evaluation import paired


def _file_result(probs, labels, classes=("negative", "neutral", "positive"), name="m"):
    probs = np.asarray(probs)
    return {"predictor": name, "classes": list(classes), "per_sentence": {
        "rows": list(range(1, len(labels) + 1)), "labels": [classes[y] for y in labels],
        "mc_probs": probs.tolist(), "mc_entropy": metrics.predictive_entropy(probs).tolist()}}


def _random(n, k, seed):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(k), size=n), rng.integers(0, k, size=n)


def test_differences_are_a_minus_b_inside_their_interval(tmp_path):
    pa, y = _random(300, 3, 0)
    pb = 0.8 * pa + 0.2 * np.eye(3)[y]                       # b is better: closer to the labels
    means = np.random.default_rng(1).uniform(-2, 2, size=300)
    table = tmp_path / "test.csv"
    table.write_text("text,label,mean\n" + "".join(f"t{i},x,{m}\n" for i, m in enumerate(means)))
    a, b = paired.rows(_file_result(pa, y), table), paired.rows(_file_result(pb, y), table)
    out = paired.paired(a, b, n_boot=300)
    assert set(out) == {"accuracy", "nll", "brier", "ece", "auroc_error_entropy", "auroc_ambiguous_entropy"}
    assert out["nll"]["a"] == pytest.approx(metrics.nll(pa, y)) and out["nll"]["b"] == pytest.approx(metrics.nll(pb, y))
    for r in out.values():
        assert r["difference"] == pytest.approx(r["a"] - r["b"]) and r["low"] <= r["difference"] <= r["high"]
    assert out["nll"]["low"] > 0                               # a is worse, and the interval says so
    flags = np.array([abs(abs(m) - 0.5) < 0.25 for m in means])
    assert out["auroc_ambiguous_entropy"]["a"] == pytest.approx(
        metrics.auroc(metrics.predictive_entropy(pa), flags))


def test_corpus_results_use_the_clear_sentences_and_the_split_s_ambiguous_ones(tmp_path):
    p = np.random.default_rng(2).uniform(size=50)
    labels = ["positive", "negative", "ambiguous", "positive", "negative"] * 10
    result = {"predictor": "x", "per_sentence": {"ids": [str(i) for i in range(50)], "labels": labels,
                                                 "mc_p_positive": p.tolist(), "mc_entropy": p.tolist()}}
    path = tmp_path / "a.json"
    path.write_text(json.dumps(result))
    assert paired.main([str(path), str(path), "--n-boot", "50", "--json", str(tmp_path / "o.json")]) == 0
    out = json.loads((tmp_path / "o.json").read_text())["metrics"]
    assert out["accuracy"]["n"] == 40 and out["auroc_ambiguous_entropy"]["n"] == 50
    assert all(r["difference"] == 0 for r in out.values())


def test_results_on_other_sentences_are_refused(tmp_path, capsys):
    pa, y = _random(20, 3, 0)
    (tmp_path / "a.json").write_text(json.dumps(_file_result(pa, y)))
    (tmp_path / "b.json").write_text(json.dumps(_file_result(pa[:19], y[:19])))
    assert paired.main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    assert "same sentences" in capsys.readouterr().err
