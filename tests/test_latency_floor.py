"""bench/latency_floor.py: its variants of the explorer are the page minus the named parts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("latency_floor", ROOT / "bench" / "latency_floor.py")
lf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lf)


def _run(path: Path, shape_k: float) -> AppTest:
    at = AppTest.from_file(str(path), default_timeout=120)
    at.query_params["model"] = "bam-wc"
    at.query_params["shape_k"] = str(shape_k)
    at.query_params["text"] = lf.bl.SENTENCE_24
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _footer(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("view "))


def test_the_variants_keep_the_sliders_and_footer_and_drop_the_panels(tmp_path):
    from views import state

    pages = lf.variants(tmp_path)
    for name in ("no-panels", "no-explain"):
        at = _run(pages[name], 10.0)
        k = at.select_slider(key="shape_k").value          # 10 snapped to the slider's grid
        assert abs(k - 10.0) < 0.5
        assert f"shape_k={state.format_value(k)}" in _footer(at)
        assert not at.get("plotly_chart") and not at.metric and not at.get("download_button")
    # The full page has what the variants lack.
    full = _run(ROOT / "app.py", 10.0)
    assert full.get("plotly_chart") and full.metric


def test_only_no_explain_swaps_the_model_call_for_the_cached_one(tmp_path):
    pages = lf.variants(tmp_path)
    no_explain, no_panels = pages["no-explain"].read_text(), pages["no-panels"].read_text()
    assert lf.CACHED in no_explain and lf.EXPLAIN not in no_explain
    assert lf.EXPLAIN in no_panels and lf.CACHED not in no_panels
    assert lf.PANELS not in no_panels and lf.PANELS not in no_explain


def test_a_changed_page_is_reported_not_measured(tmp_path, monkeypatch):
    src = (ROOT / "views" / "explorer.py").read_text()
    monkeypatch.setattr(lf, "PANELS", lf.PANELS + "    gone()\n")
    assert lf.PANELS not in src
    try:
        lf.variants(tmp_path)
    except RuntimeError as err:
        assert "update bench/latency_floor.py" in str(err)
    else:
        raise AssertionError("variants() measured a page it could not build")
