"""bench/figure_draw.py: every explorer figure is drawn by plotly.js in chromium, fresh and updated."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_every_figure_is_drawn_fresh_and_updated():
    import figure_draw as fd

    res = fd.run(repeats=1)
    names = {"prediction", "entropy", "prior_posterior", "density", "maps", "spread", "kl"}
    assert set(res) == names | {"total"}
    for name in names:
        # (an error inside plotly.js fails page.evaluate, and so this test)
        assert res[name]["newPlot_ms"] > 1 and res[name]["react_ms"] > 0.5 and res[name]["spec_kB"] > 1
    assert res["total"]["newPlot_ms"] == pytest.approx(sum(res[n]["newPlot_ms"] for n in names), abs=0.2)
