"""The Streamlit app: a router. Pages live in `views/`; the explorer is the default.

Run with `streamlit run app.py`.
"""

from pathlib import Path

import streamlit as st

# Icons are a file and emoji, never Material icon names: those make the browser fetch an SVG from
# fonts.gstatic.com, and the app must work without a network (a classroom, a laptop offline).
st.set_page_config(page_title="BAM: seeing attention uncertainty",
                   page_icon=str(Path(__file__).with_name("views") / "icon.png"), layout="wide")
page = st.navigation([
    st.Page("views/explorer.py", title="Explorer", icon="👁️", default=True),
    st.Page("views/about.py", title="About / theory", icon="📖"),
])
page.run()
