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


def test_two_score_tables_compare_each_model_on_each_corpus(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 60
    labels = (["positive", "negative", "ambiguous"] * 20)

    def table(shift):
        p = np.clip(rng.uniform(size=n) + shift, 0.01, 0.99)
        entropy = metrics.predictive_entropy(np.stack([1 - p, p], 1))
        return pd.DataFrame({"model": "m", "corpus": "movies", "id": [f"{i:03d}" for i in range(n)], "label": labels,
                             "p_positive": p, "predictive_entropy": entropy})

    old, new = table(0.0), table(0.1)
    old.to_parquet(tmp_path / "old.parquet")
    new.sample(frac=1, random_state=0).to_parquet(tmp_path / "new.parquet")     # row order does not matter
    assert paired.main(["--scores", str(tmp_path / "old.parquet"), str(tmp_path / "new.parquet"), "--n-boot", "50",
                        "--json", str(tmp_path / "o.json")]) == 0
    out = json.loads((tmp_path / "o.json").read_text())["metrics"]["m"]["movies"]
    y = np.array([1 if v == "positive" else 0 for v in labels if v != "ambiguous"])
    clear = np.array([v != "ambiguous" for v in labels])
    p_old = old["p_positive"].to_numpy()[clear]
    assert out["nll"]["a"] == pytest.approx(metrics.nll(np.stack([1 - p_old, p_old], 1), y))
    assert out["accuracy"]["n"] == 40 and out["auroc_ambiguous_entropy"]["n"] == 60
