"""A page that fails, for tests/test_browser.py: what a user sees of an uncaught error."""

import streamlit as st

st.write("before the failure")
raise RuntimeError(f"internal detail {__file__}")
