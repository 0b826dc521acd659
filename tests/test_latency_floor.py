"""bench/latency_floor.py's variants are the explorer itself, switched by its `bench` URL parameter."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("latency_floor", ROOT / "bench" / "latency_floor.py")
lf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lf)


def _run(shape_k: float, bench: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["model"] = "bam-wc"
    at.query_params["shape_k"] = str(shape_k)
    at.query_params["text"] = lf.bl.SENTENCE_24
    if bench:
        at.query_params["bench"] = bench
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _footer(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("view "))


def test_the_variants_keep_the_sliders_and_footer_and_drop_the_panels():
    from views import state

    for name in lf.VARIANTS:
        at = _run(10.0, name)
        k = at.select_slider(key="shape_k").value          # 10 snapped to the slider's grid
        assert abs(k - 10.0) < 0.5
        assert f"shape_k={state.format_value(k)}" in _footer(at)
        assert not at.get("plotly_chart") and not at.metric and not at.get("download_button")
    # The full page has what the variants lack.
    full = _run(10.0)
    assert full.get("plotly_chart") and full.metric


def test_no_explain_asks_for_the_trained_value_whatever_the_slider_says(monkeypatch):
    from views import state

    asked = []
    original = state.get_result

    def spy(model, name, text, hyper, n_samples, seed):
        asked.append(dict(hyper))
        return original(model, name, text, hyper, n_samples, seed)

    monkeypatch.setattr(state, "get_result", spy)
    _run(10.0, "no-explain")
    _run(10.0, "no-panels")
    trained = 3.0                                              # bam-wc's card
    assert asked[0]["shape_k"] == trained and abs(asked[1]["shape_k"] - 10.0) < 0.5
