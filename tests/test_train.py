"""`python -m bam_viz train`: a zoo preset on a slice of the movie reviews, and a user's labelled file
with any number of classes on any BERT backbone (a tiny random one here), end to end: it writes a
folder that loads, predicts and explains, and refuses bad input in one line with exit status 2."""

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
from tinybert import make_tiny_bert

import bam_viz
from bam_viz import train as train_module
from bam_viz.cli import main
from bam_viz.model import BamClassifier, ModelConfig
from bam_viz.nn.attention import AttentionConfig
from bam_viz.nn.encoder import sha256_file
from bam_viz.zoo import CheckpointError, load

WORDS = "good great fun bad awful dull fine film story music plot ending scene actor".split()


def test_a_preset_writes_a_card_and_weights_that_load(tmp_path):
    out = tmp_path / "bam-wc"
    assert main(["train", "--preset", "bam-wc", "--limit", "48", "--epochs", "1", "--batch-size", "16",
                 "--attention", "shape_k=3", "--dev-samples", "2", "--out", str(out)]) == 0
    card = json.loads((out / "card.json").read_text())
    assert card["training"]["steps"] == 3 and card["training"]["objective"] == "ELBO"
    # The --attention override is the trained value, and the card says so.
    assert card["trained_hyper"] == {"shape_k": 3.0, "beta": 1.0}
    assert card["config"]["attention"]["shape_k"] == 3.0 and "--attention shape_k=3" in card["command"]
    assert card["data"]["train_sentences"] == 48 and card["classes"] == ["negative", "positive"]
    assert card["dev_metrics"]["epoch"] == 1 and card["dev_metrics"]["nll"] > 0
    assert card["backbone"]["name"] == "all-MiniLM-L6-v2"
    model = load("bam-wc", root=tmp_path)
    # Something was learned: the head moved away from its initialisation for the same seed.
    torch.manual_seed(0)
    fresh = torch.nn.Linear(384, 2)
    assert not torch.allclose(model.head.weight, fresh.weight)
    assert model.predict(["Lovely."], n_samples=2).shape == (1, 2)


def test_soft_targets_reduce_to_hard_labels_when_raters_agree():
    from bam_viz.data import load_split
    from bam_viz.train import loss_terms, soft_targets
    from bam_viz.zoo import RECIPES

    snippets = load_split("movies", "dev")[:6]
    soft = soft_targets(snippets)
    assert soft.shape == (6, 2) and torch.allclose(soft.sum(-1), torch.ones(6))
    assert all(abs(float(row[1]) - s.human_p_positive) < 1e-6 for row, s in zip(soft, snippets, strict=True))
    labels = torch.tensor([0, 1, 1, 0])
    one_hot = torch.nn.functional.one_hot(labels, 2).float()
    texts = ["Dull.", "Lovely.", "A joy.", "Awful, just awful."]
    for name in ("softmax", "categorical"):
        torch.manual_seed(0)
        model = BamClassifier(RECIPES[name]).eval()
        torch.nn.init.normal_(model.head.weight, std=0.5)
        ids, mask = model.tokenizer.batch(texts)
        with torch.no_grad():
            hard, _ = loss_terms(model, ids, mask, labels, torch.Generator().manual_seed(0))
            as_probs, _ = loss_terms(model, ids, mask, one_hot, torch.Generator().manual_seed(0))
            half, _ = loss_terms(model, ids, mask, torch.full((4, 2), 0.5), torch.Generator().manual_seed(0))
        torch.testing.assert_close(as_probs, hard)
        assert not torch.isclose(half, hard)      # the targets matter


# ---- a user's data on a tiny BERT ---------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny") / "bert", seed=0)


def _sentences(n: int, seed: int) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    return [" ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (int(torch.randint(3, 9, (1,), generator=g)),),
                                                          generator=g)) for _ in range(n)]


def _write(path: Path, labels: list, texts: list | None = None) -> Path:
    texts = texts if texts is not None else _sentences(len(labels), 1)
    frame = pd.DataFrame({"text": texts, "label": labels})
    {".csv": lambda: frame.to_csv(path, index=False), ".parquet": lambda: frame.to_parquet(path),
     ".jsonl": lambda: frame.to_json(path, orient="records", lines=True)}[path.suffix]()
    return path


def _train(data: Path, out: Path, tiny: Path, *extra: str) -> int:
    return main(["train", "--data", str(data), "--family", "weibull", "--backbone", str(tiny), "--epochs", "2",
                 "--batch-size", "8", "--dev-samples", "2", "--out", str(out), *extra])


def test_three_classes_on_a_tiny_bert_train_save_load_predict_and_explain(tmp_path, tiny, monkeypatch):
    labels = ["neutral", "positive", "negative"] * 20
    data = _write(tmp_path / "intents.csv", labels)
    out = tmp_path / "models" / "intents"
    assert _train(data, out, tiny, "--attention", "shape_k=2") == 0
    card = json.loads((out / "card.json").read_text())
    assert card["classes"] == ["negative", "neutral", "positive"]          # sorted names, the stated rule
    assert card["data"]["sha256"] == sha256_file(data)
    assert card["data"]["split_rule"].startswith("stratified, seeded")
    assert card["data"]["dev"]["counts"] == {"negative": 2, "neutral": 2, "positive": 2}
    assert card["command"].startswith("python -m bam_viz train --data ")
    assert card["backbone"]["sha256"] == sha256_file(tiny / "model.safetensors")
    assert card["config"]["stochastic_layers"] == [1] and card["trained_hyper"]["shape_k"] == 2.0
    assert {"nll", "accuracy", "ece", "epoch"} <= set(card["dev_metrics"])
    assert len(card["dev_history"]) >= 1 and card["dev_metrics"] in card["dev_history"]
    assert sorted(p.name for p in out.iterdir()) == ["MANIFEST.json", "card.json", "model.safetensors"]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]   # no partial folder left

    model = load(path=out)
    assert model.classes == ("negative", "neutral", "positive") and model.n_layers == 2
    probs = model.predict(["good fun film", "awful dull plot"], n_samples=3)
    assert probs.shape == (2, 3) and torch.allclose(probs.sum(-1), torch.ones(2))
    r = model.explain("good fun film", n_samples=3)
    assert r.classes == ["negative", "neutral", "positive"] and r.sample_probs.shape == (3, 3)

    # The app sees it beside the zoo; the loader checks it like the zoo's.
    monkeypatch.setenv("BAM_VIZ_MODELS", str(out.parent))
    assert "intents" in bam_viz.available_models()
    assert bam_viz.load("intents").classes == model.classes
    card["classes"] = ["a", "b", "c"]
    (out / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="card.json was changed"):
        bam_viz.load("intents")


def test_fifty_classes_and_integer_labels_from_parquet(tmp_path, tiny):
    data = _write(tmp_path / "topics.parquet", [i % 50 for i in range(150)])
    out = tmp_path / "topics"
    assert _train(data, out, tiny, "--epochs", "1") == 0
    model = load(path=out)
    assert model.classes == tuple(str(i) for i in range(50))
    assert model.predict(["good film"], n_samples=2).shape == (1, 50)


def test_the_same_seed_gives_the_same_weights(tmp_path, tiny):
    data = _write(tmp_path / "d.jsonl", ["x", "y"] * 12)
    for name in ("a", "b"):
        assert _train(data, tmp_path / name, tiny, "--epochs", "1") == 0
    assert sha256_file(tmp_path / "a" / "model.safetensors") == sha256_file(tmp_path / "b" / "model.safetensors")


def test_an_interrupted_training_leaves_nothing_that_loads(tmp_path, tiny, monkeypatch, capsys):
    data = _write(tmp_path / "d.csv", ["x", "y"] * 12)
    out = tmp_path / "m"

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "dev_metrics", interrupt)
    assert _train(data, out, tiny) == 2
    assert "interrupted" in capsys.readouterr().err
    assert not out.exists() and os.listdir(tmp_path) == ["d.csv"]
    # A write that fails half-way leaves no folder either, and an existing model is kept.
    monkeypatch.undo()
    assert _train(data, out, tiny, "--epochs", "1") == 0
    before = sha256_file(out / "model.safetensors")
    monkeypatch.setattr(train_module, "write_folder_manifest", interrupt)
    assert _train(data, out, tiny, "--epochs", "1", "--overwrite", "--seed", "3") == 2
    assert sha256_file(out / "model.safetensors") == before and load(path=out).n_classes == 2
    assert sorted(os.listdir(tmp_path)) == ["d.csv", "m"]


def test_an_existing_folder_is_kept_without_overwrite(tmp_path, tiny, capsys):
    data = _write(tmp_path / "d.csv", ["x", "y"] * 12)
    (tmp_path / "m").mkdir()
    assert _train(data, tmp_path / "m", tiny) == 2
    assert "pass --overwrite" in capsys.readouterr().err


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.mark.parametrize("make, message", [
    (lambda p: _write(p / "d.csv", ["x", "y"] * 6).write_text("words,label\nfine,x\nbad,y\n"), "text"),
    (lambda p: _write(p / "d.csv", ["x"] * 12), "one class"),
    (lambda p: _write(p / "d.csv", ["x"] * 11 + ["y"]), "'y'"),
    (lambda p: _write(p / "d.csv", ["x", "y"] * 6, [""] * 12), "empty"),
    (lambda p: _write(p / "d.parquet", ["x", "y"] * 6, list(range(12))), "text"),
    (lambda p: _write(p / "d.csv", [0.5, 1.5] * 6), "labels must be class names or integers"),
    (lambda p: _write(p / "d.parquet", [0.0, float("nan")] * 6), "label"),
    (lambda p: _write(p / "d.csv", [f"id{i}" for i in range(10_000)], ["good film"] * 10_000), "distinct"),
    (lambda p: (p / "d.csv").write_bytes("text,label\ncaf\xe9 good,x\nbad,y\n".encode("latin-1")), "UTF-8"),
])
def test_bad_data_is_one_line_and_status_2(tmp_path, tiny, capsys, make, message):
    make(tmp_path)
    data = next(tmp_path.glob("d.*"))
    assert _train(data, tmp_path / "m", tiny) == 2
    assert message in _one_error_line(capsys)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("break_it, message", [
    (lambda b: (b / "config.json").unlink(), "config.json"),
    (lambda b: (b / "config.json").write_text(json.dumps(
        {**json.loads((b / "config.json").read_text()), "model_type": "roberta"})), "roberta"),
    (lambda b: (b / "vocab.txt").write_text((b / "vocab.txt").read_text() + "\n".join(
        f"extra{i}" for i in range(5000)) + "\n"), "tokenizer"),
])
def test_a_bad_backbone_is_one_line_and_status_2(tmp_path, capsys, break_it, message):
    backbone = make_tiny_bert(tmp_path / "bert")
    break_it(backbone)
    data = _write(tmp_path / "d.csv", ["x", "y"] * 12)
    assert _train(data, tmp_path / "m", backbone) == 2
    assert message in _one_error_line(capsys)


def test_a_model_whose_backbone_changed_is_refused(tmp_path):
    backbone = make_tiny_bert(tmp_path / "bert", seed=0)
    data = _write(tmp_path / "d.csv", ["x", "y"] * 12)
    assert _train(data, tmp_path / "m", backbone, "--epochs", "1") == 0
    make_tiny_bert(backbone, seed=1)                     # the same folder, other weights
    with pytest.raises(CheckpointError, match="trained on a backbone"):
        load(path=tmp_path / "m")


def test_the_kl_counts_only_real_cells(tiny):
    """A padded query row adds no KL: a sentence's KL in a padded batch is its KL alone, and the loss
    divides the batch's KL by its real cells (valid queries x valid keys x heads x layers)."""
    config = ModelConfig("t", AttentionConfig("weibull", "contextual", hyper={"shape_k": 2.0, "beta": 1.0}),
                         stochastic_layers=(1,), dropout=0.0, backbone=str(tiny))
    torch.manual_seed(0)
    model = BamClassifier(config).train()
    texts = ["good", "awful dull plot and a bad ending too"]

    def kl_of(batch):
        ids, mask = model.tokenizer.batch(batch)
        x, _ = model.lower(ids, mask)
        return model.upper(x, mask, generator=torch.Generator().manual_seed(0))[2].detach(), mask

    # One stochastic layer on deterministic states: the KL is closed form in its scores, no draw in it.
    both, mask = kl_of(texts)
    alone = torch.cat([kl_of([t])[0] for t in texts])
    torch.testing.assert_close(both, alone, rtol=1e-4, atol=1e-5)
    ids, mask = model.tokenizer.batch(texts)
    with torch.no_grad():
        _, kl = train_module.loss_terms(model, ids, mask, torch.tensor([0, 1]), torch.Generator().manual_seed(0))
    cells = float((mask.sum(1).float() ** 2 * model.n_heads).sum())
    assert abs(float(kl) - float(alone.sum()) / cells) < 1e-4 * float(kl)


@pytest.mark.parametrize("family", ["softmax", "weibull", "lognormal", "dirichlet", "categorical"])
def test_every_registered_family_trains_with_its_defaults(tmp_path, tiny, family):
    from bam_viz import families

    data = _write(tmp_path / "d.csv", ["x", "y", "z"] * 8)
    out = tmp_path / family
    assert main(["train", "--data", str(data), "--family", family, "--backbone", str(tiny), "--epochs", "1",
                 "--batch-size", "8", "--dev-samples", "2", "--out", str(out)]) == 0
    model = load(path=out)
    fam = families.get(family)
    assert model.family == family and model.trained_hyper == dict(fam.hyper(None))
    assert model.config.stochastic_layers == (1,)   # of 2 layers: the upper half, or the top for an alignment
    assert model.explain("good film", n_samples=2).sample_probs.shape == (2, 3)


def test_balanced_class_weights_make_a_rare_class_count(tmp_path, tiny):
    assert train_module.class_weights(torch.tensor([0, 0, 0, 1]), 2).tolist() == pytest.approx([4 / 6, 2.0])
    labels = ["common"] * 36 + ["rare"] * 4
    data = _write(tmp_path / "d.csv", labels)
    texts = list(pd.read_csv(data)["text"])
    p_rare = {}
    for weights in ("none", "balanced"):
        out = tmp_path / weights
        assert _train(data, out, tiny, "--epochs", "3", "--class-weights", weights, "--lr", "0.01") == 0
        card = json.loads((out / "card.json").read_text())
        n = card["data"]["train"]["counts"]                   # the weights are the training split's
        expected = None if weights == "none" else {c: round(sum(n.values()) / (2 * n[c]), 4) for c in n}
        assert card["training"]["class_weights"] == expected
        p_rare[weights] = float(load(path=out).predict(texts, n_samples=2)[:, 1].mean())
    assert p_rare["balanced"] > p_rare["none"]
