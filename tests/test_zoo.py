"""The shipped models: present, small, safetensors only, honest cards, refusing corrupt files."""

import json
import re
import shutil

import pytest
import torch

import bam_viz
from bam_viz.data import load_split, split_fingerprint
from bam_viz.nn.encoder import sha256_file
from bam_viz.zoo import (
    MANIFEST,
    PRETRAINED,
    RECIPES,
    SHARED_WEIGHTS,
    CheckpointError,
    load,
    write_folder_manifest,
)

NAMES = list(RECIPES)


def test_every_recipe_is_shipped():
    assert bam_viz.available_models()[: len(NAMES)] == NAMES


def test_checkpoints_are_small_safetensors_only():
    files = [p for p in PRETRAINED.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} <= {".safetensors", ".json", ".md"}
    weights = [p for p in files if p.suffix == ".safetensors"]
    assert all(p.stat().st_size <= 6 * 2**20 for p in weights)
    assert sum(p.stat().st_size for p in files) <= 30 * 2**20


@pytest.mark.parametrize("name", NAMES)
def test_card_is_complete_and_matches_the_files(name):
    card = json.loads((PRETRAINED / name / "card.json").read_text())
    for key in ("config", "trained_hyper", "training", "command", "data", "metrics", "files"):
        assert key in card, key
    assert card["config"]["name"] == name
    assert card["data"]["split_fingerprint"] == split_fingerprint()
    assert "kl_weight_per_cell" in card["training"] and "kl_anneal_fraction" in card["training"]
    # the command that produced the weights (global options such as --threads may come first)
    trained = SHARED_WEIGHTS.get(name, name)
    command = card["command"]
    # (--model is the old spelling of --preset, in the cards of models the new command left unchanged)
    assert re.match(rf"python -m bam_viz (--threads \d+ )?train --(preset|model) {trained}( |$)", command), command
    for rel, digest in card["files"].items():
        assert sha256_file((PRETRAINED / name / rel).resolve()) == digest
    test = card["metrics"]["movies_test"]
    for key in ("accuracy", "nll", "brier", "ece"):
        assert 0 <= test[key] and test["softmax"][key] >= 0


@pytest.fixture(scope="module")
def movies_test():
    clear = load_split("movies", "test")
    return [s.text for s in clear], torch.tensor([s.label == "positive" for s in clear]).long()


@pytest.mark.parametrize("name", ["bam-wc", "softmax", "categorical"])
def test_shipped_weights_reproduce_their_card(name, movies_test):
    """f(E[z]) accuracy on movies test, recomputed from the shipped files, equals the card's."""
    texts, labels = movies_test
    model = load(name)
    acc = float((model.predict_softmax(texts).argmax(-1) == labels).float().mean())
    card = model.card["metrics"]["movies_test"]["softmax"]["accuracy"]
    assert abs(acc - card) <= 2.5e-3  # padding differs between batchings: at most ~2 sentences flip
    assert acc > 0.8


def test_loaded_model_explains(tmp_path):
    m = bam_viz.load("bam-wc")
    r = m.explain("A gorgeous, witty, seductive movie.", n_samples=4, seed=0)
    assert r.mc_probs[1] > 0.5 and r.hyper["shape_k"] == m.trained_hyper["shape_k"]


def _copy_zoo(tmp_path, name):
    root = tmp_path / "pretrained"
    for n in {name, "softmax"}:
        shutil.copytree(PRETRAINED / n, root / n)
    return root


def weights_path(name, root):
    return root / SHARED_WEIGHTS.get(name, name) / "model.safetensors"


def test_a_flipped_byte_is_refused(tmp_path):
    root = _copy_zoo(tmp_path, "bam-wc")
    f = weights_path("bam-wc", root)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model.safetensors was changed"):   # the manifest has its sha256
        load("bam-wc", root=root)


def test_a_truncated_file_with_a_matching_card_is_refused(tmp_path):
    root = _copy_zoo(tmp_path, "bam-lc")
    f = weights_path("bam-lc", root)
    f.write_bytes(f.read_bytes()[:1000])
    card = json.loads((root / "bam-lc" / "card.json").read_text())
    card["files"]["model.safetensors"] = sha256_file(f)   # someone "fixed" the hash
    (root / "bam-lc" / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="card.json was changed"):      # the manifest says so
        load("bam-lc", root=root)
    write_folder_manifest(root / "bam-lc")                # and "fixed" the manifest too
    with pytest.raises(CheckpointError, match="safetensors"):
        load("bam-lc", root=root)


def test_a_broken_card_or_missing_model_is_refused(tmp_path):
    root = _copy_zoo(tmp_path, "dirichlet")
    (root / "dirichlet" / "card.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load("dirichlet", root=root)
    with pytest.raises(CheckpointError, match="no model called"):
        load("nonexistent", root=root)


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in PRETRAINED.glob("*/card.json")))
def test_each_folder_manifest_covers_its_files(folder):
    recorded = json.loads((PRETRAINED / folder / MANIFEST).read_text())["sha256"]
    files = sorted(p.name for p in (PRETRAINED / folder).iterdir() if p.name != MANIFEST)
    assert sorted(recorded) == files
    assert all(recorded[f] == sha256_file(PRETRAINED / folder / f) for f in files)


def _edit_card(tmp_path, name, edit):
    root = _copy_zoo(tmp_path, name)
    path = root / name / "card.json"
    card = json.loads(path.read_text())
    edit(card)
    path.write_text(json.dumps(card))
    return root


def test_an_edited_card_is_refused_like_edited_weights(tmp_path):
    root = _edit_card(tmp_path, "bam-wc", lambda c: c["config"]["attention"].update(shape_k=2.5))
    with pytest.raises(CheckpointError, match="card.json was changed"):
        load("bam-wc", root=root)
    (root / "bam-wc" / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match="MANIFEST.json is missing"):
        load("bam-wc", root=root)


@pytest.mark.parametrize("edit, field", [
    (lambda c: c["config"]["attention"].update(shape_k=-5), "config.attention.shape_k must lie in"),
    (lambda c: c["config"]["attention"].update(shape_k="3"), "config.attention.shape_k must be a number"),
    (lambda c: c["config"].update(max_tokens=10**9), "config.max_tokens must lie in [2, 512]"),
    (lambda c: c["config"].update(max_tokens=128.5), "config.max_tokens must be an int"),
    (lambda c: c["config"].pop("lora_rank"), "config.lora_rank is missing"),
    (lambda c: c["config"].update(surprise=1), "config.surprise is not a known field"),
    (lambda c: c["config"].update(stochastic_layers=[3, 9]), "config.stochastic_layers must be distinct"),
    (lambda c: c["config"]["attention"].update(family="gaussian"), "config.attention.family must be one of"),
    (lambda c: c["config"]["attention"].update(bogus=1.0), "config.attention.bogus is not a hyperparameter"),
    (lambda c: c["config"].update(dropout=float("nan")), "config.dropout must lie in"),
    (lambda c: c.pop("files"), "files is missing"),
    (lambda c: c.update(name="softmax"), "name is 'softmax', not 'bam-wc'"),
])
def test_a_bad_card_field_is_named(tmp_path, edit, field):
    """The card's config is checked field by field: one CheckpointError naming the field, never a
    KeyError, TypeError or IndexError from building the model."""
    root = _edit_card(tmp_path, "bam-wc", edit)
    write_folder_manifest(root / "bam-wc")                # a consistent manifest: the schema must catch it
    with pytest.raises(CheckpointError) as caught:
        load("bam-wc", root=root)
    assert field in str(caught.value)


@pytest.mark.parametrize("name", ["../pretrained/bam-wc", str(PRETRAINED / "bam-wc"), "BAM-WC", "", None])
def test_only_zoo_names_are_names(name):
    with pytest.raises(CheckpointError, match="no model called"):
        bam_viz.load(name)


def test_a_folder_is_loaded_by_path(tmp_path):
    root = _copy_zoo(tmp_path, "bam-wc")
    model = bam_viz.load(path=root / "bam-wc")
    assert model.name == "bam-wc" and model.trained_hyper["shape_k"] == 3.0
