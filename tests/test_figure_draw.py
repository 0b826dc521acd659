"""bench/figure_draw.py: every explorer figure is drawn by plotly.js in chromium, fresh and updated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.browser


def test_every_figure_is_drawn_fresh_and_updated():
    spec = importlib.util.spec_from_file_location("figure_draw", ROOT / "bench" / "figure_draw.py")
    fd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fd)
    res = fd.run(repeats=1)
    names = {"prediction", "entropy", "prior_posterior", "density", "maps", "spread", "kl"}
    assert set(res) == names | {"total"}
    for name in names:
        # (an error inside plotly.js fails page.evaluate, and so this test)
        assert res[name]["newPlot_ms"] > 1 and res[name]["react_ms"] > 0.5 and res[name]["spec_kB"] > 1
    assert res["total"]["newPlot_ms"] == pytest.approx(sum(res[n]["newPlot_ms"] for n in names), abs=0.2)
