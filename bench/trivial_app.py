"""The baseline for bench/browser_latency.py: one slider, one line, the same footer marker."""

import streamlit as st

value = st.slider("value", 0, 100, 50, key="value")
st.write(f"The slider is at {value}.")
st.session_state["_runs"] = st.session_state.get("_runs", 0) + 1
with st.container(key="render_marker"):
    st.caption(f"view {st.session_state['_runs']} · value={value}")
