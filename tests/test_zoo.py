"""The shipped models: present, small, safetensors only, honest cards, refusing corrupt files."""

import json
import re
import shutil

import pytest
import torch

import bam_viz
from bam_viz.data import load_split, split_fingerprint
from bam_viz.encoder import sha256_file
from bam_viz.zoo import PRETRAINED, RECIPES, SHARED_WEIGHTS, CheckpointError, load, weights_path

NAMES = list(RECIPES)


def test_every_recipe_is_shipped():
    assert bam_viz.available_models() == NAMES


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
    assert re.match(rf"python -m bam_viz (--threads \d+ )?train --model {trained}( |$)", command), command
    for rel, digest in card["files"].items():
        assert sha256_file((PRETRAINED / name / rel).resolve()) == digest
    test = card["metrics"]["movies_test"]
    for key in ("accuracy", "nll", "brier", "ece"):
        assert 0 <= test[key] and test["mean_field"][key] >= 0


@pytest.fixture(scope="module")
def movies_test():
    clear = load_split("movies", "test")
    return [s.text for s in clear], torch.tensor([s.label == "positive" for s in clear]).long()


@pytest.mark.parametrize("name", ["bam-wc", "softmax", "categorical"])
def test_shipped_weights_reproduce_their_card(name, movies_test):
    """f(E[z]) accuracy on movies test, recomputed from the shipped files, equals the card's."""
    texts, labels = movies_test
    model = load(name)
    acc = float((model.predict_mean_field(texts).argmax(-1) == labels).float().mean())
    card = model.card["metrics"]["movies_test"]["mean_field"]["accuracy"]
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


def test_a_flipped_byte_is_refused(tmp_path):
    root = _copy_zoo(tmp_path, "bam-wc")
    f = weights_path("bam-wc", root)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        load("bam-wc", root=root)


def test_a_truncated_file_with_a_matching_card_is_refused(tmp_path):
    root = _copy_zoo(tmp_path, "bam-lc")
    f = weights_path("bam-lc", root)
    f.write_bytes(f.read_bytes()[:1000])
    card = json.loads((root / "bam-lc" / "card.json").read_text())
    card["files"]["model.safetensors"] = sha256_file(f)   # someone "fixed" the hash
    (root / "bam-lc" / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="safetensors"):
        load("bam-lc", root=root)


def test_a_broken_card_or_missing_model_is_refused(tmp_path):
    root = _copy_zoo(tmp_path, "dirichlet")
    (root / "dirichlet" / "card.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load("dirichlet", root=root)
    with pytest.raises(CheckpointError, match="no model called"):
        load("nonexistent", root=root)
