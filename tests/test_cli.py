"""`python -m bam_viz`: the options of every subcommand, dispatch, and `evaluate` from the command line."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_evaluate import FakePredictor
from test_predictors import FakeModel

from bam_viz import cli, zoo


def _by_name(load):
    """A stand-in for `zoo.load_model(name, root=...)` that reads only the name."""
    return lambda name, **_: load(name)


def _cli(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["evaluate", *argv])


def test_every_subcommand_parses_with_its_defaults() -> None:
    parser = cli.build_parser()
    train = parser.parse_args(["train", "--preset", "bam-wc", "--attention", "shape_k=3", "--kl-weight", "0.1"])
    assert (train.command, train.preset, train.attention, train.kl_weight, train.epochs) == (
        "train", "bam-wc", ["shape_k=3"], 0.1, None)          # None: the preset's 2, or 8 on a file
    assert (train.targets, train.limit, train.threads, train.patience, train.family) == ("hard", None, None, 2, None)
    assert parser.parse_args(["train", "--model", "softmax"]).preset == "softmax"   # the old spelling
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--preset", "bam-wc", "--family", "weibull"])   # one or the other
    evaluate = parser.parse_args(["evaluate", "--model", "vader"])
    assert (evaluate.corpus, evaluate.split, evaluate.samples, evaluate.seed, evaluate.batch_size) == (
        "movies", "test", 32, 0, 64)
    assert (evaluate.references, evaluate.hyper, evaluate.temperature, evaluate.update_card) == (True, [], None, False)
    assert evaluate.lenient is False and parser.parse_args(["evaluate", "--model", "vader", "--lenient"]).lenient
    report = parser.parse_args(["report"])
    assert (report.results, report.baseline, report.n_boot, report.seeds) == ("results", "softmax", 2000, None)
    bench = parser.parse_args(["bench", "--samples", "8"])
    assert (bench.model, bench.samples, bench.repeats, bench.tokens, bench.json) == ("bam-wc", 8, 30, None, None)
    assert (bench.training, bench.rows) == (False, 2000)
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--model", "mc-dropout"])        # reuses softmax's weights: not trained
    with pytest.raises(SystemExit):
        parser.parse_args([])                                        # a subcommand is required


def test_threads_sets_torch_before_the_command_runs(monkeypatch, capsys) -> None:
    import torch

    from bam_viz.evaluation import report

    seen = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    monkeypatch.setattr(report, "run_report", lambda args: f"report of {args.results} on {seen}")
    assert cli.main(["--threads", "3", "report", "--results", "somewhere"]) == 0
    assert capsys.readouterr().out == "report of somewhere on [3]\n"


@pytest.mark.parametrize("bad", ["shape_k", "=3", "shape_k=three"])
def test_a_malformed_hyper_fails_before_any_model_loads(bad, monkeypatch) -> None:
    loaded = []
    monkeypatch.setattr(zoo, "load_model", _by_name(loaded.append))
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

    monkeypatch.setattr(zoo, "load_model", _by_name(fake_load))
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
    assert r["n_samples"] == 1 and r["mc"]["accuracy"] == r["softmax"]["accuracy"]
    saved = json.loads(out.read_text())
    assert saved["mc"]["accuracy"] == r["mc"]["accuracy"]
    # The real corpora read strictly, and the JSON says which bytes were scored.
    assert saved["corpus_files"] == [
        {"corpus": "movies", "file": name, "sha256": hashlib.sha256((corpus_dir / name).read_bytes()).hexdigest(),
         "bytes": (corpus_dir / name).stat().st_size, "lenient": False, "problems": 0}
        for name in ("movieReviewSnippets_GroundTruth.txt", "movieReviewSnippets_anonDataRatings.txt")
    ]
    assert saved["per_sentence"]["ids"] == r["per_sentence"]["ids"]
    printed = capsys.readouterr().out
    assert "vader on movies/test" in printed and "accuracy" in printed


def test_all_corpora_in_one_run_share_the_reference_sentences(corpus_dir: Path, tmp_path: Path, monkeypatch) -> None:
    calls = []

    class Counting(FakeModel):
        def predict_samples(self, texts, **kw):
            calls.extend(texts)
            return super().predict_samples(texts, **kw)

    monkeypatch.setattr(zoo, "load_model", _by_name(lambda name: Counting()))
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

    monkeypatch.setattr(zoo, "load_model", fake_load)
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

    monkeypatch.setattr(zoo, "load_model", _by_name(lambda name: Opinionated()))
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


def test_a_temperature_fitted_on_movies_dev_records_the_movie_files(corpus_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(zoo, "load_model", _by_name(lambda name: FakeModel()))
    (r,) = cli.run_evaluate(_cli("--model", "x", "--corpus", "nyt", "--no-references", "--temperature", "dev",
                                 "--samples", "2", "--data", str(corpus_dir)))
    assert r["temperature"]["fitted_on"].startswith("movies dev")
    assert [(f["corpus"], f["file"]) for f in r["corpus_files"]] == [
        ("nyt", "nytEditorialSnippets_GroundTruth.txt"), ("nyt", "nytEditorialSnippets_anonDataRatings.txt"),
        ("movies", "movieReviewSnippets_GroundTruth.txt"), ("movies", "movieReviewSnippets_anonDataRatings.txt")]


@pytest.mark.parametrize("damage, says", [
    ("missing", "a file is missing"),
    ("a folder", "a folder stands where a file should"),
    ("empty", "a file is empty"),
    ("header only", "a file has no readable rows (line 1: skipped (could not convert string to float: 'mean')"),
])
def test_a_broken_corpus_is_one_line_and_status_2(corpus_dir: Path, tmp_path, monkeypatch, capsys, damage, says):
    """evaluate on a corpora folder with the movie texts missing, replaced by a folder, empty or only a
    header: one line on stderr naming the file, exit status 2, no traceback (it was a raw
    FileNotFoundError, IsADirectoryError, or a ZeroDivisionError in metrics.ece)."""
    broken = _copy(corpus_dir, tmp_path)
    target = broken / "movieReviewSnippets_GroundTruth.txt"
    if damage == "empty":
        target.write_text("")
    elif damage == "header only":
        target.write_bytes(b"id\tmean\ttext\r\n")
    else:
        target.unlink()
        if damage == "a folder":
            target.mkdir()
    for lenient in ([], ["--lenient"]):          # nothing to read is an error, lenient or not
        status = cli.main(["evaluate", "--model", "vader", "--corpus", "movies", "--split", "test",
                           "--data", str(broken), *lenient])
        err = capsys.readouterr().err.strip()
        assert status == 2 and "\n" not in err and "Traceback" not in err
        assert err.startswith(f"error: corpus file {target}: {says}")


def _copy(corpus_dir: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(corpus_dir, tmp_path / "corpora"))


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\r\n")


def _truncate(folder: Path) -> None:
    path = folder / "movieReviewSnippets_GroundTruth.txt"
    raw = path.read_bytes()
    path.write_bytes(raw[: raw.index(b"\r\n10500\t") + 20])     # 18 bytes into line 10500


def _not_utf8(folder: Path) -> None:
    path = folder / "movieReviewSnippets_GroundTruth.txt"
    lines = _lines(path)
    lines[9] += b" Caf\xe9."                                      # line 10, a movie test sentence
    path.write_bytes(b"\r\n".join(lines))


def _duplicate(folder: Path) -> None:
    path = folder / "movieReviewSnippets_GroundTruth.txt"
    path.write_bytes(path.read_bytes() + b"\r\n" + _lines(path)[9])


def _one_file_only(folder: Path) -> None:
    path = folder / "movieReviewSnippets_anonDataRatings.txt"
    lines = _lines(path)
    path.write_bytes(b"\r\n".join(lines[:9] + lines[10:]))        # id 10 keeps only its GroundTruth line


PROBLEM_LINES = {
    # Cut in its mean, line 10500 is malformed; the ratings of it and of the 105 lines after are unpaired.
    "truncated mid-line": (_truncate, "movieReviewSnippets_GroundTruth.txt",
                           "107 problem lines in this corpus: 1 in this file, at line 10500: skipped (2 fields, "
                           "expected 3): '10500\\t-2.368421052'; 106 in movieReviewSnippets_anonDataRatings.txt, first "
                           "at lines 10500, 10501, 10502: id '10500' is in anonDataRatings but not in GroundTruth "
                           "(skipped)"),
    "non-UTF-8 line": (_not_utf8, "movieReviewSnippets_GroundTruth.txt",
                       "1 problem line, at line 10: not UTF-8, read as Latin-1"),
    "duplicate id": (_duplicate, "movieReviewSnippets_GroundTruth.txt",
                     "1 problem line, at line 10606: duplicate id '10' skipped (first on line 10)"),
    "id in one file only": (_one_file_only, "movieReviewSnippets_GroundTruth.txt", "1 problem line, at line 10: "
                            "id '10' is in GroundTruth but not in anonDataRatings (skipped)"),
}


@pytest.mark.parametrize("damage", sorted(PROBLEM_LINES))
def test_a_problem_line_stops_evaluate_with_the_count_and_first_lines(corpus_dir: Path, tmp_path, capsys, damage):
    """It was read anyway: the ~100 lines a truncated file loses were recorded, never shown, and the run exited 0."""
    change, name, says = PROBLEM_LINES[damage]
    broken = _copy(corpus_dir, tmp_path)
    change(broken)
    out = tmp_path / "r.json"
    status = cli.main(["evaluate", "--model", "vader", "--data", str(broken), "--json", str(out)])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == "" and not out.exists()
    assert captured.err == f"error: corpus file {broken / name}: {says} (use --lenient to evaluate anyway)\n"


@pytest.mark.parametrize("damage", ["truncated mid-line", "id in one file only"])
def test_lenient_evaluates_warns_and_records_the_problems(corpus_dir: Path, tmp_path, capsys, damage):
    change, name, says = PROBLEM_LINES[damage]
    broken = _copy(corpus_dir, tmp_path)
    change(broken)
    out = tmp_path / "r.json"
    status = cli.main(["evaluate", "--model", "vader", "--data", str(broken), "--json", str(out), "--lenient"])
    captured = capsys.readouterr()
    assert status == 0 and "vader on movies/test" in captured.out
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: corpus file {broken / name}: {says}; evaluating anyway (--lenient)"]
    files = json.loads(out.read_text())["corpus_files"]
    assert [(f["corpus"], f["file"], f["lenient"]) for f in files] == [
        ("movies", "movieReviewSnippets_GroundTruth.txt", True),
        ("movies", "movieReviewSnippets_anonDataRatings.txt", True),
    ]
    for f in files:
        assert f["sha256"] == hashlib.sha256((broken / f["file"]).read_bytes()).hexdigest()
    counts = {f["file"]: f["problems"] for f in files}
    assert counts == ({"movieReviewSnippets_GroundTruth.txt": 1, "movieReviewSnippets_anonDataRatings.txt": 106}
                      if damage == "truncated mid-line" else
                      {"movieReviewSnippets_GroundTruth.txt": 1, "movieReviewSnippets_anonDataRatings.txt": 0})


def test_a_split_with_no_clear_sentence_is_an_error_not_a_zero_division(tmp_path, capsys):
    from test_data import ratings_line, truth_line, write_movies

    # Ids 10 and 20 fall in the test split, 1 in dev: the test split holds only an ambiguous sentence.
    ratings = {"10": (0, 0, 1), "1": (2, 2, 3)}
    folder = write_movies(tmp_path, [truth_line(i, r) for i, r in ratings.items()],
                          [ratings_line(i, r) for i, r in ratings.items()])
    status = cli.main(["evaluate", "--model", "vader", "--data", str(folder), "--no-references"])
    assert status == 2
    assert capsys.readouterr().err == (f"error: corpus file {folder / 'movieReviewSnippets_GroundTruth.txt'}: the test "
                                       "split has no clear sentence to score (1 ambiguous)\n")


def test_a_missing_corpora_folder_or_model_is_one_line(tmp_path, capsys):
    assert cli.main(["evaluate", "--model", "vader", "--data", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["examples", "--model", str(tmp_path / "nowhere" / "bam-wc")]) == 2
    assert "no model called" in capsys.readouterr().err


# ---- --model: a zoo name, a $BAM_VIZ_MODELS name or a model folder, in every command -----------------

@pytest.fixture(scope="module")
def sentiment(tmp_path_factory) -> Path:
    """A sentiment model folder on a tiny random BERT, written by train's own writer (a random head
    from a seeded generator: what it predicts means nothing), outside the zoo and $BAM_VIZ_MODELS."""
    import torch
    from tinybert import make_tiny_bert

    from bam_viz.model import BamClassifier, ModelConfig
    from bam_viz.nn.attention import AttentionConfig
    from bam_viz.train import write_model_folder

    root = tmp_path_factory.mktemp("folders")
    backbone = make_tiny_bert(root / "bert", seed=0)
    model = BamClassifier(ModelConfig("sentiment", AttentionConfig("weibull", "contextual",
                                                                   hyper={"shape_k": 3.0, "beta": 1.0}),
                                      stochastic_layers=(1,), backbone=str(backbone)))
    with torch.no_grad():
        model.head.weight.copy_(torch.randn(model.head.weight.shape, generator=torch.Generator().manual_seed(0)))
    card = {"name": "sentiment", "description": "a test model", "classes": list(model.classes),
            "config": model.config.to_dict(), "trained_hyper": dict(model.config.attention.hyper), "metrics": {}}
    return write_model_folder(root / "models" / "sentiment", model.trainable_state_dict(), card)


@pytest.fixture(scope="module")
def few_movies(corpus_dir, tmp_path_factory) -> Path:
    """The first 400 movie reviews as a corpora folder (--data; about 40 in dev): the commands that read
    the corpora, on a tiny model, in seconds."""
    folder = tmp_path_factory.mktemp("few-movies")
    for name in ("movieReviewSnippets_GroundTruth.txt", "movieReviewSnippets_anonDataRatings.txt"):
        (folder / name).write_bytes(b"".join((corpus_dir / name).read_bytes().splitlines(keepends=True)[:400]))
    return folder


def _labelled(path: Path) -> Path:
    import pandas as pd

    pd.DataFrame({"text": ["a good fun film", "an awful dull plot", "the music was fine", "bad acting"],
                  "label": ["positive", "negative", "positive", "negative"]}).to_csv(path, index=False)
    return path


def test_the_model_named_first_then_the_folder(tmp_path, monkeypatch) -> None:
    """A zoo name wins over a folder of that name in the working folder; "./name" is the folder. The
    library's `load(name)` stays names only (tests/test_zoo.py)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bam-wc").mkdir()
    assert zoo.resolve_model("bam-wc") == zoo.PRETRAINED / "bam-wc"
    assert zoo.resolve_model(str(zoo.PRETRAINED / "softmax")) == zoo.PRETRAINED / "softmax"
    with pytest.raises(zoo.CheckpointError, match="bam-wc is not a model folder: it has no card.json"):
        zoo.resolve_model("./bam-wc")
    with pytest.raises(zoo.UnknownModel, match="no model called 'runs/intents'"):
        zoo.resolve_model("runs/intents")
    with pytest.raises(zoo.UnknownModel, match="no model called"):
        zoo.model_folder(str(zoo.PRETRAINED / "softmax"))


def test_evaluate_and_score_take_a_model_folder_as_its_name(sentiment, tmp_path, monkeypatch, capsys) -> None:
    import pandas as pd

    from bam_viz.evaluation.score import scorer as score

    data = _labelled(tmp_path / "in.csv")
    by = {}
    for how, model in (("path", str(sentiment)), ("name", "sentiment")):
        if how == "name":
            monkeypatch.setenv(zoo.MODELS_ENV, str(sentiment.parent))
        assert cli.main(["evaluate", "--model", model, "--input", str(data), "--samples", "3",
                         "--json", str(tmp_path / f"{how}.json")]) == 0
        assert cli.main(["score", "--model", model, "--model", "vader", "--input", str(data), "--samples", "3",
                         "--out", str(tmp_path / f"{how}.parquet")]) == 0
        by[how] = (json.loads((tmp_path / f"{how}.json").read_text()), pd.read_parquet(tmp_path / f"{how}.parquet"))
    (evaluated, scored), (named, named_scores) = by["path"], by["name"]
    assert evaluated["predictor"] == "sentiment" and evaluated["mc"] == named["mc"]
    pd.testing.assert_frame_equal(scored, named_scores, check_exact=True)
    assert set(scored["model"]) == {"sentiment", "vader"}
    # The folder's rows are its own model's predictions.
    mine = score.finish(scored[scored["model"] == "sentiment"].reset_index(drop=True))
    fresh = score.score_frame(pd.read_csv(data), [zoo.load(path=sentiment)], text_column="text",
                              label_column="label", n_samples=3)
    np.testing.assert_array_equal(mine["p_positive"], fresh["p_positive"])
    capsys.readouterr()
    # The same model twice, by its name and by its folder.
    assert cli.main(["score", "--model", "sentiment", "--model", str(sentiment), "--input", str(data),
                     "--out", str(tmp_path / "twice.csv")]) == 2
    assert "model 'sentiment' is given twice" in capsys.readouterr().err
    assert not (tmp_path / "twice.csv").exists()


def test_evaluate_update_card_writes_the_folder_given(sentiment, few_movies, tmp_path) -> None:
    import shutil

    folder = shutil.copytree(sentiment, tmp_path / "sentiment")
    assert cli.main(["evaluate", "--model", str(folder), "--split", "dev", "--no-references", "--samples", "2",
                     "--data", str(few_movies), "--json", str(tmp_path / "dev.json"), "--update-card"]) == 0
    result = json.loads((tmp_path / "dev.json").read_text())
    assert zoo.load(path=folder).card["metrics"]["movies_dev"]["nll"] == result["mc"]["nll"]   # the manifest too
    assert "movies_dev" not in zoo.read_card(sentiment)["metrics"]


def test_examples_and_bench_take_a_model_folder(sentiment, few_movies, tmp_path, monkeypatch, capsys) -> None:
    from bam_viz.bench import library

    out = tmp_path / "examples.json"
    assert cli.main(["examples", "--model", str(sentiment), "--samples", "2", "--data", str(few_movies),
                     "--out", str(out)]) == 0
    assert json.loads(out.read_text())["model"] == "sentiment"

    class Loaded(Exception):
        pass

    def stop(model, tokens):             # the bench's first step after the load: what was loaded is enough
        raise Loaded(model.card["name"])

    monkeypatch.setattr(library, "sentence_of_length", stop)
    with pytest.raises(Loaded, match="^sentiment$"):
        cli.main(["bench", "--model", str(sentiment), "--repeats", "1"])


def test_the_inference_k_command_writes_the_selection_into_a_folders_card(sentiment, few_movies, tmp_path) -> None:
    """`make inference-k`'s command on a model folder: the dev sweep lands in its card and manifest (the
    folder still loads), the chosen value is the grid's lowest dev NLL, and the weights stay."""
    import shutil

    from bam_viz.evaluation import selection
    from bam_viz.nn.encoder import sha256_file

    folder = shutil.copytree(sentiment, tmp_path / "sentiment")
    weights = sha256_file(folder / "model.safetensors")
    argv = ["--model", str(folder), "--name", "shape_k", "--grid", "3,0.5", "--samples", "2",
            "--data", str(few_movies)]
    assert selection.main(argv) == 0
    block = zoo.load(path=folder).card["inference_selection"]
    assert block["name"] == "shape_k" and block["grid"] == [3.0, 0.5] and set(block["dev_nll"]) == {"3", "0.5"}
    assert block["chosen"] == min(block["grid"], key=lambda k: block["dev_nll"][f"{k:g}"])
    assert block["command"] == "python -m bam_viz.evaluation.selection " + " ".join(argv)
    assert block["dev_nll"]["3"] != block["dev_nll"]["0.5"]            # the grid's values were applied
    assert sha256_file(folder / "model.safetensors") == weights


@pytest.mark.parametrize("argv", [
    ["evaluate", "--input", "{data}"],
    ["score", "--input", "{data}", "--out", "{tmp}/o.csv"],
    ["examples", "--out", "{tmp}/examples.json"],
    ["bench", "--repeats", "1"],
])
def test_a_folder_that_is_not_a_model_is_one_line_and_status_2(argv, tmp_path, capsys) -> None:
    data = _labelled(tmp_path / "in.csv")
    argv = [a.format(data=data, tmp=tmp_path) for a in argv]
    (tmp_path / "runs" / "intents").mkdir(parents=True)
    for model, says in ((tmp_path / "runs" / "intents", f"{tmp_path / 'runs' / 'intents'} is not a model folder: "
                                                        "it has no card.json"),
                        (tmp_path / "runs" / "topics", "topics")):
        assert cli.main([argv[0], "--model", str(model), *argv[1:]]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "runs"]          # nothing written


def test_vader_and_all_keep_their_meaning_beside_folders_of_those_names(tmp_path, monkeypatch) -> None:
    import pandas as pd

    data = _labelled(tmp_path / "in.csv")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vader").mkdir()
    (tmp_path / "all").mkdir()
    assert cli.main(["evaluate", "--model", "vader", "--input", str(data), "--json", "v.json"]) == 0
    assert json.loads(Path("v.json").read_text())["predictor"] == "vader"
    assert cli.main(["score", "--model", "all", "--input", str(data), "--samples", "1", "--out", "all.csv"]) == 0
    shipped = [m for m in zoo.available_models() if m in zoo.RECIPES]
    assert list(dict.fromkeys(pd.read_csv("all.csv")["model"])) == [*shipped, "vader"]
