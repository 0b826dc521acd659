"""A model folder's files (bam_viz/model_files.py, through `zoo.load` and the zoo's lists): a file
that is not a regular file, a card path that leaves the zoo, a card that disagrees with its
weights, each refused in one line that names no path of the server's disk; a refused folder is
listed as such and never offered; a refused load is refused again without a hash."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bam_viz import zoo
from bam_viz.model_files import MAX_CARD_BYTES, CheckpointError
from bam_viz.zoo import MANIFEST, PRETRAINED, write_folder_manifest


def _copy(tmp_path: Path, *names: str) -> Path:
    """Zoo folders copied into tmp_path/runs, joined to the app's models through $BAM_VIZ_MODELS."""
    root = tmp_path / "runs"
    for name in names:
        shutil.copytree(PRETRAINED / name, root / name)
    return root


def _refused(root: Path, name: str, monkeypatch) -> str:
    """The one line that refuses root/name: load's, checked against what every list says."""
    with pytest.raises(CheckpointError) as caught:
        zoo.load(path=root / name)
    message = str(caught.value)
    assert "\n" not in message and str(root.parent) not in message and str(Path.home()) not in message
    monkeypatch.setenv(zoo.MODELS_ENV, str(root))
    listed = f"runs/{name}" if (PRETRAINED / name).is_dir() else name      # a zoo name is qualified
    assert listed not in zoo.available_models()
    assert zoo.refused_models()[listed] == message
    return message


def test_a_checkpoint_error_is_one_line():
    assert str(CheckpointError("weights.safetensors cannot be read:\n  size mismatch\n\n for head\n")) == \
        "weights.safetensors cannot be read: size mismatch for head"


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


@pytest.mark.parametrize("file, damage, says", [
    ("card.json", _directory, "bam-wc/card.json is a folder, not a regular file"),
    ("card.json", _fifo, "bam-wc/card.json is a named pipe, not a regular file"),
    ("card.json", _dev_zero, "bam-wc/card.json is a device, not a regular file"),
    ("MANIFEST.json", _directory, "bam-wc/MANIFEST.json is a folder, not a regular file"),
    ("MANIFEST.json", _fifo, "bam-wc/MANIFEST.json is a named pipe, not a regular file"),
    ("model.safetensors", _directory, "bam-wc/model.safetensors is a folder, not a regular file"),
    ("model.safetensors", _dev_zero, "bam-wc/model.safetensors is a device, not a regular file"),
])
def test_a_file_that_is_not_a_regular_file_is_refused_before_it_is_opened(tmp_path, monkeypatch, file, damage, says):
    """A FIFO would block the open and /dev/zero read until memory runs out: neither is opened."""
    root = _copy(tmp_path, "bam-wc")
    damage(root / "bam-wc" / file)
    assert _refused(root, "bam-wc", monkeypatch) == says


@pytest.mark.parametrize("content, says", [
    ("[" * 100_000 + "]" * 100_000, "bam-wc/card.json is nested too deeply to be a card.json"),
    (" " * MAX_CARD_BYTES + "{}", f"bam-wc/card.json is {MAX_CARD_BYTES + 2:,} bytes, over the "
                                    f"{MAX_CARD_BYTES:,} it may have"),
    ("[]", "bam-wc/card.json is not a JSON object"),
])
def test_a_card_too_deep_too_large_or_not_an_object_is_one_line(tmp_path, monkeypatch, content, says):
    root = _copy(tmp_path, "bam-wc")
    (root / "bam-wc" / "card.json").write_text(content)
    assert _refused(root, "bam-wc", monkeypatch).startswith(says)


@pytest.mark.parametrize("source, says", [
    ("../../outside", "leaves the folder its model is in"),
    ("/etc", "leaves the folder its model is in"),
    (".", "leaves the folder its model is in"),         # the zoo's folder itself
    (3, "is not the name of a model folder"),
    ("", "is not the name of a model folder"),
])
def test_weights_from_that_leaves_the_zoo_is_refused(tmp_path, monkeypatch, source, says):
    root = _copy(tmp_path, "mc-dropout", "softmax")
    (tmp_path / "outside").mkdir()
    shutil.copy(root / "softmax" / "model.safetensors", tmp_path / "outside" / "model.safetensors")
    card = json.loads((root / "mc-dropout" / "card.json").read_text())
    card["weights_from"] = source
    (root / "mc-dropout" / "card.json").write_text(json.dumps(card))
    write_folder_manifest(root / "mc-dropout")
    message = _refused(root, "mc-dropout", monkeypatch)
    assert message.startswith("mc-dropout/card.json's weights_from") and message.endswith(says)


def test_a_weights_from_in_the_zoo_loads(tmp_path):
    root = _copy(tmp_path, "mc-dropout", "softmax")
    assert zoo.load(path=root / "mc-dropout").name == "mc-dropout"


def _k_class(tmp_path: Path, edit) -> Path:
    """A three-class model folder (tests/k_class_models.py) in tmp_path/runs whose card `edit` changes
    (the manifest follows: only the card and the weights disagree)."""
    from k_class_models import k_class_folder

    folder = k_class_folder(tmp_path / "runs")
    card = json.loads((folder / "card.json").read_text())
    edit(card)
    (folder / "card.json").write_text(json.dumps(card))
    write_folder_manifest(folder)
    return folder.parent


def _two_classes(card: dict) -> None:
    card["classes"] = card["config"]["classes"] = ["[click](https://example.org)", "politics"]


def test_classes_that_disagree_with_the_head_are_one_line_not_torch_s_size_mismatch(tmp_path, monkeypatch):
    root = _k_class(tmp_path, _two_classes)
    assert _refused(root, "t3", monkeypatch) == \
        "t3/model.safetensors has a head of 3 classes, but the card names 2: [click](https://example.org), politics"


def test_a_tensor_that_does_not_fit_the_card_s_model_is_named(tmp_path, monkeypatch):
    root = _k_class(tmp_path, lambda card: card["config"].update(lora_rank=card["config"]["lora_rank"] * 2))
    rank = json.loads((root / "t3" / "card.json").read_text())["config"]["lora_rank"] // 2
    message = _refused(root, "t3", monkeypatch)
    assert message.startswith("t3/model.safetensors does not fit its card: bert.encoder.layer.0.") and \
        f"lora_a is ({rank}, 384), the card's model has ({2 * rank}, 384) (and " in message


def test_a_refused_load_is_refused_again_without_a_hash_until_the_files_change(tmp_path, monkeypatch):
    root = _copy(tmp_path, "bam-wc")
    weights = root / "bam-wc" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF                                   # in a tensor's data: the header still reads
    weights.write_bytes(bytes(data))
    monkeypatch.setenv(zoo.MODELS_ENV, str(root))
    assert "runs/bam-wc" in zoo.available_models()      # nothing known against it before a load
    hashed = []
    real = zoo.sha256_file
    monkeypatch.setattr(zoo, "sha256_file", lambda path: hashed.append(Path(path).name) or real(path))
    with pytest.raises(CheckpointError, match="bam-wc/model.safetensors was changed") as first:
        zoo.load("runs/bam-wc")
    assert hashed == ["card.json", "model.safetensors"]  # each once
    hashed.clear()
    with pytest.raises(CheckpointError) as again:
        zoo.load("runs/bam-wc")
    assert str(again.value) == str(first.value) and hashed == []
    assert zoo.refused_models() == {"runs/bam-wc": str(first.value)} and "runs/bam-wc" not in zoo.available_models()
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1_000_000))
    with pytest.raises(CheckpointError, match="was changed"):
        zoo.load("runs/bam-wc")
    assert hashed == ["card.json", "model.safetensors"]  # the file changed: checked again


def test_the_shipped_zoo_is_offered_whole(monkeypatch):
    monkeypatch.delenv(zoo.MODELS_ENV, raising=False)
    assert zoo.refused_models() == {}
    assert zoo.available_models() == list(zoo.listed_folders()) and set(zoo.RECIPES) <= set(zoo.available_models())


@pytest.mark.parametrize("damage, says", [
    (lambda root: _directory(root / "t3" / "card.json"), "t3/card.json is a folder, not a regular file"),
    (lambda root: _k_class(root.parent, _two_classes), "t3/model.safetensors has a head of 3 classes"),
    (lambda root: _fifo(root / "t3" / MANIFEST), "t3/MANIFEST.json is a named pipe, not a regular file"),
])
def test_the_cli_refuses_a_broken_folder_in_one_line_with_status_2(tmp_path, monkeypatch, capsys, damage, says):
    import pandas as pd
    from k_class_models import k_class_folder

    from bam_viz import cli

    root = tmp_path / "runs"
    k_class_folder(root)
    damage(root)
    monkeypatch.setenv(zoo.MODELS_ENV, str(root))
    source = tmp_path / "in.csv"
    pd.DataFrame({"text": ["A late goal won the cup final."]}).to_csv(source, index=False)
    assert cli.main(["score", "--model", "t3", "--input", str(source), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {says}") and str(tmp_path) not in err
    assert not (tmp_path / "o.csv").exists()


# ---- the pages ----------------------------------------------------------------------------------
def test_the_explorer_s_load_error_is_one_escaped_line_then_the_model_is_listed_as_refused(tmp_path, monkeypatch):
    """A class name written as a Markdown link stays text in the error box, which names no server
    path; the page goes on, and its next run offers the other models and says why this one is not."""
    from app_pages import APP
    from streamlit.testing.v1 import AppTest

    from views.text import model_error

    root = _k_class(tmp_path, _two_classes)
    monkeypatch.setenv(zoo.MODELS_ENV, str(root))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params["model"] = "t3"
    at.run()
    assert not at.exception and len(at.error) == 1
    shown = at.error[0].value
    assert shown == model_error("t3", CheckpointError(zoo.refused_models()["t3"]))
    assert shown.startswith("Could not load the model “t3”\\: t3/model\\.safetensors has a head of 3 classes")
    assert "\\[click\\]\\(https\\://example\\.org\\)" in shown and str(tmp_path) not in shown
    at.run()
    assert not at.exception and not at.error
    assert "t3" not in at.selectbox(key="model").options and at.selectbox(key="model").value == "bam-wc"
    assert any(w.value.startswith("Not offered, as they cannot be loaded: **t3** (t3/model\\.safetensors has a head")
               for w in at.warning)


def test_the_corpus_page_scores_with_a_model_that_fails_to_load_in_one_line(tmp_path, monkeypatch):
    from app_pages import app_page

    from views.text import model_error

    root = _copy(tmp_path, "bam-wc")
    weights = root / "bam-wc" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF
    weights.write_bytes(bytes(data))
    monkeypatch.setenv(zoo.MODELS_ENV, str(root))
    at = app_page("views/corpus.py", 180).run()
    assert not at.exception
    at.file_uploader(key="corpus_upload").set_value(("mine.csv", b"text\nA wonderful film.\n", "text/csv"))
    at.run()
    at.multiselect(key="corpus_models_to_score").set_value(["runs/bam-wc"])
    at.button(key="corpus_score").click()
    at.run()
    assert not at.exception and [e.value for e in at.error] == [
        model_error("runs/bam-wc", CheckpointError(zoo.refused_models()["runs/bam-wc"]))]
    assert "bam\\-wc/model\\.safetensors was changed" in at.error[0].value and str(tmp_path) not in at.error[0].value
    at.run()
    assert not at.exception and not at.error
    assert "runs/bam-wc" not in at.multiselect(key="corpus_models_to_score").options
    assert any(c.value.startswith("Not offered, as they cannot be loaded: **runs/bam\\-wc**") for c in at.caption)


def test_the_app_loads_a_folder_again_once_its_files_change(tmp_path, monkeypatch):
    """The app keeps one model per version of its folder (views.state.get_model): the same files give
    the same model, and a folder trained again under the same name, or broken since, is read again."""
    from k_class_models import k_class_folder

    from views import state

    folder = k_class_folder(tmp_path / "runs")
    monkeypatch.setenv(zoo.MODELS_ENV, str(folder.parent))
    first = state.get_model("t3")
    assert state.get_model("t3") is first
    os.utime(folder / "model.safetensors", ns=(1, 1))
    assert state.get_model("t3") is not first
    _dev_zero(folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="t3/model.safetensors is a device"):
        state.get_model("t3")
