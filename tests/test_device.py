"""The device is chosen once, at load, and no model code hard-codes one."""

import re
from pathlib import Path

import pytest
import torch

from bam_viz.device import choose_device

PACKAGE = Path(__file__).resolve().parents[1] / "bam_viz"


def test_override_from_the_environment(monkeypatch):
    monkeypatch.setenv("BAM_VIZ_DEVICE", "cpu")
    assert choose_device() == torch.device("cpu")


def test_an_unavailable_override_is_refused(monkeypatch):
    if torch.cuda.is_available():
        pytest.fail("this test expects a machine without CUDA (CI and the dev machines have none)")
    monkeypatch.setenv("BAM_VIZ_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        choose_device()


def test_default_order_falls_back_to_cpu(monkeypatch):
    monkeypatch.delenv("BAM_VIZ_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert choose_device().type == expected


def test_no_hard_coded_cuda_in_the_library():
    offenders = [str(p) for p in PACKAGE.rglob("*.py") if re.search(r"\.cuda\(", p.read_text())]
    assert offenders == []
