"""Links of tests/hostile_links.py rendered by Streamlit, for tests/test_browser_lessons.py: each case
through `safe_links` as a lesson's text is (`dead_<i>`, `live_<i>`), and the first as written (`raw`),
to show that Streamlit would keep it live."""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hostile_links import DEAD, LIVE  # noqa: E402

from views.text import safe_links  # noqa: E402

with st.container(key="raw"):
    st.markdown(DEAD[0])
for i, text in enumerate(DEAD):
    with st.container(key=f"dead_{i}"):
        st.markdown(safe_links(text))
for i, text in enumerate(LIVE):
    with st.container(key=f"live_{i}"):
        st.markdown(safe_links(text))
st.write("all drawn")
