"""The live explorer's browser side: one Streamlit custom component (v2, in the page, no iframe),
mounted three times, whose JavaScript (`views/live/live.js`) draws on canvases.

  sliders   the attention hyperparameter sliders (sidebar): a move repaints the charts in the
            browser; releasing it sends the values back (Session State, then the URL).
  summary   headline estimates with their errors, the sweep, the prediction (`bam_viz.live.summary_payload`)
  inside    prior vs posterior, density, maps, layer x head grids (`bam_viz.live.inside_payload`)

Every value of the sliders is in the bytes sent, so a slider move never waits for the server.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

HERE = Path(__file__).with_name("live")
SLIDERS_KEY, SUMMARY_KEY, INSIDE_KEY = "live_sliders", "live_summary", "live_inside"


@st.cache_resource(show_spinner=False)
def _component():
    return st.components.v2.component(
        "bamviz_live", html='<div class="bamviz-host"></div>',
        css=(HERE / "live.css").read_text(encoding="utf-8"), js=(HERE / "live.js").read_text(encoding="utf-8"),
        isolate_styles=False)


def sliders(data: dict, on_change) -> None:
    """The sidebar's sliders; `on_change` runs (before the rerun) when the browser sends new values."""
    _component()(data=data, key=SLIDERS_KEY, on_hyper_change=on_change)


def charts(payload: bytes, key: str) -> None:
    _component()(data=payload, key=key)


def sent_hyper(session_state) -> dict[str, float]:
    """The slider values the browser last sent ({} before any)."""
    state = session_state.get(SLIDERS_KEY) or {}
    hyper = state.get("hyper") if isinstance(state, dict) else None
    return {str(k): v for k, v in hyper.items()} if isinstance(hyper, dict) else {}
