"""The device is chosen once, at load, and no model code hard-codes one."""

import os
import re
import sys
from pathlib import Path

import pytest
import torch

from bam_viz.core.device import choose_device

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


def _run(code: str, **env) -> str:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **env})
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_allocator_tuning_is_applied_once_and_can_be_refused():
    code = ("from bam_viz.core.device import tune_allocator as t; a = t(); b = t(); "
            "import bam_viz.core.device as d; print(a, b, d._allocator_tuned)")
    assert _run(code, BAM_VIZ_MALLOC_TUNING="1") == "True True True"
    assert _run(code, BAM_VIZ_MALLOC_TUNING="0") == "False False False"
    assert _run(code, BAM_VIZ_MALLOC_TUNING="memory") == "True True True"
    assert _run(code, BAM_VIZ_MALLOC_TUNING="fast please") == "False False False"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_the_server_gives_memory_back_and_trim_hands_free_pages_to_the_system():
    """app.py asks for the "memory" profile; after a large freed block, malloc_trim lowers RSS."""
    app = (Path(__file__).resolve().parents[1] / "app.py").read_text()
    assert 'os.environ.setdefault("BAM_VIZ_MALLOC_TUNING", "memory")' in app
    code = ("import bam_viz.core.device as d; d.tune_allocator(); "
            "rss = lambda: int(open('/proc/self/statm').read().split()[1]) * 4096; "
            "blocks = [bytearray(3 << 20) for _ in range(100)]; full = rss(); "
            "del blocks[:-1]; d.trim_heap(); print(full - rss() > 200 << 20)")
    assert _run(code, BAM_VIZ_MALLOC_TUNING="memory") == "True"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_loading_a_model_tunes_the_allocator():
    code = ("import bam_viz, bam_viz.core.device as d; print(d._allocator_tuned); "
            "bam_viz.load('softmax'); print(d._allocator_tuned)")
    assert _run(code).split() == ["None", "True"]
