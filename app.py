"""The Streamlit app: a router. Pages live in `views/`; the explorer is the default.

Run with `streamlit run app.py`.
"""

from pathlib import Path

import streamlit as st

# The tab's icon is a file here: a Material icon name would make the browser fetch the icon from
# fonts.gstatic.com, and the app must work without a network (a classroom, a laptop offline).
st.set_page_config(page_title="BAM: seeing attention uncertainty",
                   page_icon=str(Path(__file__).with_name("views") / "icon.png"), layout="wide")
page = st.navigation([
    st.Page("views/explorer.py", title="Explorer", icon=":material/visibility:", default=True),
    st.Page("views/about.py", title="About / theory", icon=":material/menu_book:"),
])
page.run()
