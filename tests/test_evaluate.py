"""evaluate() on the real corpora with a fake predictor, the model adapter, the CLI, and VADER."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

import bam_viz
from bam_viz import evaluate as ev


class FakePredictor:
    """Deterministic per text: a logit from the text's hash, samples scattered around it."""

    def __init__(self, name: str = "fake", spread: float = 2.0, salt: str = "") -> None:
        self.name = name
        self.spread = spread
        self.salt = salt

    def _logit(self, text: str) -> float:
        h = int(hashlib.sha256((self.salt + text).encode()).hexdigest()[:8], 16)
        return (h / 0xFFFFFFFF - 0.5) * 6.0

    def sample_probs(self, texts: list[str], n_samples: int, seed: int) -> np.ndarray:
        out = np.empty((len(texts), n_samples, 2))
        for i, text in enumerate(texts):
            rng = np.random.default_rng([seed, int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)])
            p = 1 / (1 + np.exp(-(self._logit(text) + self.spread * rng.normal(size=n_samples))))
            out[i] = np.stack([1 - p, p], axis=-1)
        return out

    def mean_field_probs(self, texts: list[str]) -> np.ndarray:
        p = 1 / (1 + np.exp(-np.array([self._logit(t) for t in texts])))
        return np.stack([1 - p, p], axis=-1)


VARIANT_KEYS = {
    "accuracy",
    "nll",
    "brier",
    "ece",
    "auroc_error_entropy",
    "spearman_human_mean",
    "spearman_entropy_rater_std",
}


@pytest.fixture(scope="module")
def fake_movies(corpus_dir: Path) -> dict:
    return ev.evaluate(
        FakePredictor(), "movies", "test", n_samples=8, seed=0, data=corpus_dir, batch_size=128
    )


def test_evaluate_keys_and_ranges(fake_movies: dict) -> None:
    r = fake_movies
    assert (r["predictor"], r["corpus"], r["split"], r["n_samples"], r["seed"]) == (
        "fake",
        "movies",
        "test",
        8,
        0,
    )
    assert r["n_clear"] + r["n_ambiguous"] == r["n"] == 1036
    assert r["counts"] == {"negative": 460, "positive": 519, "ambiguous": 57}
    assert set(r["mean_field"]) == VARIANT_KEYS
    assert set(r["mc"]) == VARIANT_KEYS | {"auroc_ambiguous_entropy", "auroc_ambiguous_mi",
                                           "auroc_ambiguous_in_split_entropy", "auroc_ambiguous_in_split_mi"}
    for variant in ("mc", "mean_field"):
        m = r[variant]
        for key in ("accuracy", "brier", "ece") + tuple(k for k in m if k.startswith("auroc")):
            assert 0.0 <= m[key] <= (2.0 if key == "brier" else 1.0), key
        assert m["nll"] > 0
        assert -1.0 <= m["spearman_human_mean"] <= 1.0 and -1.0 <= m["spearman_entropy_rater_std"] <= 1.0
        # The fake knows nothing about sentiment.
        assert abs(m["accuracy"] - 0.5) < 0.08
    # Its samples scatter, so averaging them differs from one pass at the mean.
    assert r["mc"]["nll"] != pytest.approx(r["mean_field"]["nll"])
    assert r["mc"]["ece"] != pytest.approx(r["mean_field"]["ece"])


def test_ambiguity_reference_is_all_562_ambiguous_movie_sentences(fake_movies: dict) -> None:
    assert fake_movies["n_ambiguous_reference"] == 562
    assert fake_movies["n_movies_test_clear_reference"] == fake_movies["n_clear"] == 979


def test_per_sentence_is_json_and_aligned(fake_movies: dict) -> None:
    per = fake_movies["per_sentence"]
    n = fake_movies["n"]
    assert {len(v) for v in per.values()} == {n}
    assert json.loads(json.dumps(per)) == per
    mc = np.array(per["mc_p_positive"])
    assert np.all((mc >= 0) & (mc <= 1))
    assert per["labels"].count("ambiguous") == fake_movies["n_ambiguous"]


def test_evaluate_is_deterministic(corpus_dir: Path, fake_movies: dict) -> None:
    again = ev.evaluate(
        FakePredictor(), "movies", "test", n_samples=8, seed=0, data=corpus_dir, batch_size=128
    )
    assert again["mc"] == fake_movies["mc"]


def test_out_of_domain_corpus_adds_ood_aurocs(corpus_dir: Path) -> None:
    r = ev.evaluate(FakePredictor(), "tweets", "test", n_samples=4, data=corpus_dir, batch_size=256)
    assert {"auroc_ood_entropy", "auroc_ood_mi"} <= set(r["mc"])
    assert "auroc_ood_mi" not in r["mean_field"]
    assert 0.0 <= r["mc"]["auroc_ood_mi"] <= 1.0
    assert r["n"] == 412


def test_compare_identical_results_is_zero_width(fake_movies: dict) -> None:
    for metric in ("accuracy", "nll", "brier", "ece"):
        assert ev.compare(fake_movies, fake_movies, metric, n_boot=100) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="metric must be"):
        ev.compare(fake_movies, fake_movies, "auroc")


def test_compare_aligns_by_id(fake_movies: dict) -> None:
    other = json.loads(json.dumps(fake_movies))
    per = other["per_sentence"]
    # Reverse the order and make b always right with p = 1: b beats a on accuracy by 1 - acc(a).
    for key in per:
        per[key].reverse()
    per["mc_p_positive"] = [1.0 if label == "positive" else 0.0 for label in per["labels"]]
    diff, lo, hi = ev.compare(fake_movies, other, "accuracy", n_boot=200)
    assert diff == pytest.approx(fake_movies["mc"]["accuracy"] - 1.0)
    assert lo <= diff <= hi < 0
    first_clear = per["labels"].index("positive")
    per["ids"][first_clear] = "not-an-id"
    with pytest.raises(ValueError, match="different sentences"):
        ev.compare(fake_movies, other, "accuracy")


def test_markdown_table(fake_movies: dict) -> None:
    second = dict(fake_movies, predictor="other", mc=dict(fake_movies["mc"], accuracy=float("nan")))
    table = ev.markdown_table([fake_movies, second])
    lines = table.strip().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("| predictor | corpus | split | S | n clear | acc mc | acc MF |")
    assert {line.count("|") for line in lines} == {lines[0].count("|")}
    assert lines[2].startswith("| fake | movies | test | 8 | 979 |")
    assert "| other | movies | test | 8 | 979 | – |" in lines[3]


class FakeModel:
    """Stands in for a bam_viz model: torch tensors out, hyperparameters recorded."""

    name = "fake-model"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def predict_samples(self, texts, n_samples, seed, **hyper):
        import torch

        self.calls.append(("samples", {"n_samples": n_samples, "seed": seed, **hyper}))
        return torch.full((len(texts), n_samples, 2), 0.5, dtype=torch.float32)

    def predict_mean_field(self, texts, **hyper):
        import torch

        self.calls.append(("mean_field", hyper))
        return torch.tensor([[0.25, 0.75]] * len(texts))


def test_model_predictor_adapter() -> None:
    model = FakeModel()
    predictor = ev.ModelPredictor(model, temperature=0.5)
    assert predictor.name == "fake-model@temperature=0.5"     # never mistaken for the trained model
    assert ev.ModelPredictor(model).name == "fake-model"
    samples = predictor.sample_probs(["a", "b"], n_samples=3, seed=7)
    assert isinstance(samples, np.ndarray) and samples.shape == (2, 3, 2) and samples.dtype == np.float64
    np.testing.assert_allclose(predictor.mean_field_probs(["a"]), [[0.25, 0.75]])
    assert model.calls == [
        ("samples", {"n_samples": 3, "seed": 7, "temperature": 0.5}),
        ("mean_field", {"temperature": 0.5}),
    ]


def _cli(*argv: str) -> argparse.Namespace:
    return ev.add_evaluate_args(argparse.ArgumentParser()).parse_args(list(argv))


def test_cli_loads_other_models_through_bam_viz_load(corpus_dir: Path, monkeypatch, capsys) -> None:
    loaded = []

    def fake_load(name):
        loaded.append(name)
        return FakeModel()

    monkeypatch.setattr(bam_viz, "load", fake_load, raising=False)
    (r,) = ev.run_evaluate(
        _cli("--model", "bam-tiny", "--corpus", "amazon", "--samples", "2", "--data", str(corpus_dir))
    )
    assert loaded == ["bam-tiny"]
    assert r["predictor"] == "fake-model" and r["corpus"] == "amazon"
    # Constant predictions: correlations are undefined and reported as such, not as warnings.
    assert math.isnan(r["mc"]["spearman_human_mean"])
    assert "fake-model on amazon/test" in capsys.readouterr().out


def test_vader_on_movies_test(corpus_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "results" / "vader.json"
    (r,) = ev.run_evaluate(_cli("--model", "vader", "--data", str(corpus_dir), "--json", str(out)))
    # Hutto & Gilbert's analyser on sentence-level movie reviews: about 65.6% and rho 0.45.
    assert 0.60 <= r["mc"]["accuracy"] <= 0.71
    assert 0.38 <= r["mc"]["spearman_human_mean"] <= 0.52
    assert r["n_samples"] == 1 and r["mc"]["accuracy"] == r["mean_field"]["accuracy"]
    saved = json.loads(out.read_text())
    assert saved["mc"]["accuracy"] == r["mc"]["accuracy"]
    assert saved["per_sentence"]["ids"] == r["per_sentence"]["ids"]
    printed = capsys.readouterr().out
    assert "vader on movies/test" in printed and "accuracy" in printed


def test_all_corpora_in_one_run_share_the_reference_sentences(corpus_dir: Path, tmp_path: Path, monkeypatch) -> None:
    calls = []

    class Counting(FakeModel):
        def predict_samples(self, texts, **kw):
            calls.extend(texts)
            return super().predict_samples(texts, **kw)

    monkeypatch.setattr(bam_viz, "load", lambda name: Counting(), raising=False)
    out = tmp_path / "{corpus}.json"
    results = ev.run_evaluate(_cli("--model", "x", "--corpus", "all", "--samples", "2", "--data",
                                   str(corpus_dir), "--json", str(out)))
    assert [r["corpus"] for r in results] == ["movies", "amazon", "nyt", "tweets"]
    assert all((tmp_path / f"{c}.json").exists() for c in ("movies", "amazon", "nyt", "tweets"))
    assert len(calls) == len(set(calls))  # every distinct sentence predicted once


def test_no_references_scores_only_the_split(corpus_dir: Path) -> None:
    seen: list[str] = []

    class Recording(FakePredictor):
        def sample_probs(self, texts, n_samples, seed):
            seen.extend(texts)
            return super().sample_probs(texts, n_samples, seed)

    r = ev.evaluate(Recording(), "movies", "dev", n_samples=4, data=corpus_dir, batch_size=512, references=False)
    dev = ev.load_split("movies", "dev", corpus_dir, include_ambiguous=True)
    # A sweep on dev never predicts a test sentence.
    assert sorted(seen) == sorted(s.text for s in dev)
    assert "auroc_ambiguous_entropy" not in r["mc"] and "auroc_ood_entropy" not in r["mc"]
    assert r["n_ambiguous"] > 20 and 0.0 <= r["mc"]["auroc_ambiguous_in_split_entropy"] <= 1.0


def test_in_split_ambiguity_auroc_rewards_entropy_on_ambiguous_sentences(corpus_dir: Path) -> None:
    ambiguous = {s.text for s in ev.load_split("movies", "dev", corpus_dir, include_ambiguous=True)
                 if s.label == ev.AMBIGUOUS}

    class Knows(FakePredictor):  # unsure exactly where the raters were
        def sample_probs(self, texts, n_samples, seed):
            p = np.array([0.5 if t in ambiguous else 0.9 for t in texts])[:, None].repeat(n_samples, 1)
            return np.stack([1 - p, p], axis=-1)

    r = ev.evaluate(Knows(), "movies", "dev", n_samples=2, data=corpus_dir, references=False)
    assert r["mc"]["auroc_ambiguous_in_split_entropy"] == 1.0


def test_cli_root_and_inference_overrides(corpus_dir: Path, monkeypatch) -> None:
    from bam_viz import zoo

    loaded, model = [], FakeModel()

    def fake_load(name, root):
        loaded.append((name, root))
        return model

    monkeypatch.setattr(zoo, "load", fake_load)
    args = _cli("--model", "bam-wc", "--root", "runs/k3", "--hyper", "shape_k=0.8", "--hyper", "beta=2",
                "--split", "dev", "--no-references", "--samples", "2", "--data", str(corpus_dir))
    (r,) = ev.run_evaluate(args)
    assert loaded == [("bam-wc", Path("runs/k3"))]
    assert r["split"] == "dev" and "auroc_ambiguous_entropy" not in r["mc"]
    assert model.calls[0] == ("samples", {"n_samples": 2, "seed": model.calls[0][1]["seed"], "shape_k": 0.8,
                                          "beta": 2.0})


def test_parse_assignments() -> None:
    assert ev.parse_assignments(["shape_k=3", " beta = 0.5"]) == {"shape_k": 3.0, "beta": 0.5}
    for bad in ("shape_k", "=3", "shape_k=three"):
        with pytest.raises(SystemExit, match="NAME=VALUE"):
            ev.parse_assignments([bad])


def test_temper_keeps_the_argmax_and_t1_is_the_identity() -> None:
    p = np.array([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]])
    np.testing.assert_allclose(ev.temper(p, 1.0), p)
    soft, sharp = ev.temper(p, 3.0), ev.temper(p, 0.3)
    assert (soft.argmax(1) == p.argmax(1)).all() and (sharp.argmax(1)[:2] == p.argmax(1)[:2]).all()
    assert soft[0, 0] < 0.9 < sharp[0, 0]
    np.testing.assert_allclose(ev.temper(p, 1e6), 0.5, atol=1e-5)
    np.testing.assert_allclose(soft.sum(1), 1.0)


def test_fit_temperature_recovers_a_known_overconfidence_and_agrees_with_scipy() -> None:
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(0)
    z = rng.normal(scale=2.0, size=20_000)
    labels = (rng.random(z.size) < 1 / (1 + np.exp(-z))).astype(np.int64)    # calibrated at logit z
    p = 1 / (1 + np.exp(-2.5 * z))                                            # 2.5x overconfident
    samples = np.stack([1 - p, p], axis=-1)[:, None, :]
    t = ev.fit_temperature(samples, labels)
    assert t == pytest.approx(2.5, rel=0.05)
    ref = minimize_scalar(lambda lt: ev.metrics.nll(ev.temper(samples, np.exp(lt)).mean(1), labels),
                          bounds=(np.log(0.05), np.log(20)), method="bounded", options={"xatol": 1e-8})
    assert t == pytest.approx(float(np.exp(ref.x)), rel=1e-3)


def test_cli_temperature_tempers_every_sample_and_dev_fits_it(corpus_dir: Path, monkeypatch) -> None:
    class Opinionated(FakeModel):      # confident, hash-based predictions instead of a constant 0.5
        def predict_samples(self, texts, n_samples, seed, **hyper):
            import torch

            return torch.from_numpy(FakePredictor(spread=0.5).sample_probs(texts, n_samples, seed))

    monkeypatch.setattr(bam_viz, "load", lambda name: Opinionated(), raising=False)
    base = ("--model", "x", "--samples", "2", "--data", str(corpus_dir))
    (plain,) = ev.run_evaluate(_cli(*base))
    (hot,) = ev.run_evaluate(_cli(*base, "--temperature", "4"))
    assert hot["temperature"] == {"T": 4.0, "fitted_on": None}
    assert hot["mc"]["accuracy"] == plain["mc"]["accuracy"]                  # argmax unchanged
    assert np.mean(hot["per_sentence"]["mc_entropy"]) > np.mean(plain["per_sentence"]["mc_entropy"])
    (fitted,) = ev.run_evaluate(_cli(*base, "--temperature", "dev"))
    assert fitted["temperature"]["fitted_on"].startswith("movies dev") and 0.05 < fitted["temperature"]["T"] < 20
    with pytest.raises(SystemExit, match="temperature"):
        ev.run_evaluate(_cli(*base, "--temperature", "warm"))
    with pytest.raises(ValueError, match="positive"):
        ev.TemperedPredictor(FakePredictor(), 0.0)
