"""`python -m bam_viz`: the options of every subcommand, dispatch, and `evaluate` from the command line."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_evaluate import FakePredictor
from test_predictors import FakeModel

from bam_viz import cli, zoo


def _by_name(load):
    """A stand-in for `zoo.load(name, root=...)` that reads only the name."""
    return lambda name, **_: load(name)


def _cli(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["evaluate", *argv])


def test_every_subcommand_parses_with_its_defaults() -> None:
    parser = cli.build_parser()
    train = parser.parse_args(["train", "--model", "bam-wc", "--attention", "shape_k=3", "--kl-weight", "0.1"])
    assert (train.command, train.model, train.attention, train.kl_weight, train.epochs) == (
        "train", "bam-wc", ["shape_k=3"], 0.1, 2)
    assert (train.targets, train.limit, train.threads) == ("hard", None, None)
    evaluate = parser.parse_args(["evaluate", "--model", "vader"])
    assert (evaluate.corpus, evaluate.split, evaluate.samples, evaluate.seed, evaluate.batch_size) == (
        "movies", "test", 32, 0, 64)
    assert (evaluate.references, evaluate.hyper, evaluate.temperature, evaluate.update_card) == (True, [], None, False)
    report = parser.parse_args(["report"])
    assert (report.results, report.baseline, report.n_boot, report.seeds) == ("results", "softmax", 2000, None)
    bench = parser.parse_args(["bench", "--samples", "8"])
    assert (bench.model, bench.samples, bench.repeats, bench.tokens, bench.json) == ("bam-wc", 8, 30, 24, None)
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--model", "mc-dropout"])        # reuses softmax's weights: not trained
    with pytest.raises(SystemExit):
        parser.parse_args([])                                        # a subcommand is required


def test_threads_sets_torch_before_the_command_runs(monkeypatch, capsys) -> None:
    import torch

    from bam_viz import report

    seen = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    monkeypatch.setattr(report, "run_report", lambda args: f"report of {args.results} on {seen}")
    assert cli.main(["--threads", "3", "report", "--results", "somewhere"]) == 0
    assert capsys.readouterr().out == "report of somewhere on [3]\n"


@pytest.mark.parametrize("bad", ["shape_k", "=3", "shape_k=three"])
def test_a_malformed_hyper_fails_before_any_model_loads(bad, monkeypatch) -> None:
    loaded = []
    monkeypatch.setattr(zoo, "load", _by_name(loaded.append))
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        cli.main(["evaluate", "--model", "bam-wc", "--hyper", bad])
    assert loaded == []


@pytest.mark.parametrize("extra", [["--hyper", "shape_k=1"], ["--temperature", "dev"], ["--root", "runs/x"]])
def test_a_card_never_gets_the_metrics_of_another_configuration(extra, capsys):
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--model", "bam-wc", "--update-card", *extra])
    assert "--update-card" in capsys.readouterr().err


def test_cli_loads_other_models_through_zoo_load(corpus_dir: Path, monkeypatch, capsys) -> None:
    loaded = []

    def fake_load(name):
        loaded.append(name)
        return FakeModel()

    monkeypatch.setattr(zoo, "load", _by_name(fake_load))
    (r,) = cli.run_evaluate(
        _cli("--model", "bam-tiny", "--corpus", "amazon", "--samples", "2", "--data", str(corpus_dir))
    )
    assert loaded == ["bam-tiny"]
    assert r["predictor"] == "fake-model" and r["corpus"] == "amazon"
    # Constant predictions: correlations are undefined and reported as such, not as warnings.
    assert math.isnan(r["mc"]["spearman_human_mean"])
    assert "fake-model on amazon/test" in capsys.readouterr().out


def test_vader_on_movies_test(corpus_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "results" / "vader.json"
    (r,) = cli.run_evaluate(_cli("--model", "vader", "--data", str(corpus_dir), "--json", str(out)))
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

    monkeypatch.setattr(zoo, "load", _by_name(lambda name: Counting()))
    out = tmp_path / "{corpus}.json"
    results = cli.run_evaluate(_cli("--model", "x", "--corpus", "all", "--samples", "2", "--data",
                                   str(corpus_dir), "--json", str(out)))
    assert [r["corpus"] for r in results] == ["movies", "amazon", "nyt", "tweets"]
    assert all((tmp_path / f"{c}.json").exists() for c in ("movies", "amazon", "nyt", "tweets"))
    assert len(calls) == len(set(calls))  # every distinct sentence predicted once


def test_cli_root_and_inference_overrides(corpus_dir: Path, monkeypatch) -> None:
    from bam_viz import zoo

    loaded, model = [], FakeModel()

    def fake_load(name, root):
        loaded.append((name, root))
        return model

    monkeypatch.setattr(zoo, "load", fake_load)
    args = _cli("--model", "bam-wc", "--root", "runs/k3", "--hyper", "shape_k=0.8", "--hyper", "beta=2",
                "--split", "dev", "--no-references", "--samples", "2", "--data", str(corpus_dir))
    (r,) = cli.run_evaluate(args)
    assert loaded == [("bam-wc", Path("runs/k3"))]
    assert r["split"] == "dev" and "auroc_ambiguous_entropy" not in r["mc"]
    assert model.calls[0] == ("samples", {"n_samples": 2, "seed": model.calls[0][1]["seed"], "shape_k": 0.8,
                                          "beta": 2.0})


def test_parse_assignments() -> None:
    assert cli.parse_assignments(["shape_k=3", " beta = 0.5"]) == {"shape_k": 3.0, "beta": 0.5}
    for bad in ("shape_k", "=3", "shape_k=three"):
        with pytest.raises(SystemExit, match="NAME=VALUE"):
            cli.parse_assignments([bad])


def test_cli_temperature_tempers_every_sample_and_dev_fits_it(corpus_dir: Path, monkeypatch) -> None:
    class Opinionated(FakeModel):      # confident, hash-based predictions instead of a constant 0.5
        def predict_samples(self, texts, n_samples, seed, **hyper):
            import torch

            return torch.from_numpy(FakePredictor(spread=0.5).sample_probs(texts, n_samples, seed))

    monkeypatch.setattr(zoo, "load", _by_name(lambda name: Opinionated()))
    base = ("--model", "x", "--samples", "2", "--data", str(corpus_dir))
    (plain,) = cli.run_evaluate(_cli(*base))
    (hot,) = cli.run_evaluate(_cli(*base, "--temperature", "4"))
    assert hot["temperature"] == {"T": 4.0, "fitted_on": None}
    assert hot["mc"]["accuracy"] == plain["mc"]["accuracy"]                  # argmax unchanged
    assert np.mean(hot["per_sentence"]["mc_entropy"]) > np.mean(plain["per_sentence"]["mc_entropy"])
    (fitted,) = cli.run_evaluate(_cli(*base, "--temperature", "dev"))
    assert fitted["temperature"]["fitted_on"].startswith("movies dev") and 0.05 < fitted["temperature"]["T"] < 20
    with pytest.raises(SystemExit, match="temperature"):
        cli.run_evaluate(_cli(*base, "--temperature", "warm"))


@pytest.mark.parametrize("damage, says", [
    ("missing", "a file is missing"),
    ("a folder", "a folder stands where a file should"),
    ("empty", "a file has no readable rows"),
])
def test_a_broken_corpus_is_one_line_and_status_2(corpus_dir: Path, tmp_path, monkeypatch, capsys, damage, says):
    """evaluate on a corpora folder with the movie texts missing, replaced by a folder, or empty:
    one line on stderr naming the file, exit status 2, no traceback (it was a raw
    FileNotFoundError, IsADirectoryError, or a ZeroDivisionError in metrics.ece)."""
    import shutil

    broken = tmp_path / "corpora"
    shutil.copytree(corpus_dir, broken)
    target = broken / "movieReviewSnippets_GroundTruth.txt"
    if damage == "empty":
        target.write_text("")
    else:
        target.unlink()
        if damage == "a folder":
            target.mkdir()
    status = cli.main(["evaluate", "--model", "vader", "--corpus", "movies", "--split", "test",
                       "--data", str(broken)])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err and "Traceback" not in err
    assert err.startswith("error: corpus file ") and "movieReviewSnippets_GroundTruth.txt" in err and says in err


def test_a_missing_corpora_folder_or_model_is_one_line(tmp_path, capsys):
    assert cli.main(["evaluate", "--model", "vader", "--data", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["examples", "--model", "../pretrained/bam-wc"]) == 2
    assert "no model called" in capsys.readouterr().err
