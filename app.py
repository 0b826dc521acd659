"""The Streamlit app: a router. Pages live in `views/`; the explorer is the default.

Run with `streamlit run app.py`.
"""

import streamlit as st

st.set_page_config(page_title="BAM: seeing attention uncertainty", page_icon=":material/visibility:",
                   layout="wide")
page = st.navigation([
    st.Page("views/explorer.py", title="Explorer", icon=":material/visibility:", default=True),
    st.Page("views/about.py", title="About / theory", icon=":material/menu_book:"),
])
page.run()
