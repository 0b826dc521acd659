"""The Streamlit app: a router. Pages live in `views/`; the explorer is the default.

Run with `streamlit run app.py`.
"""

import os
from pathlib import Path

import streamlit as st

# A server shared by a class gives freed memory back rather than keeping it for speed (bam_viz.device).
os.environ.setdefault("BAM_VIZ_MALLOC_TUNING", "memory")
# Background frames of the live sliders are made in a worker process at nice 19, off the server's GIL
# (bam_viz.frames): a class's sweeps never stall a request.
os.environ.setdefault("BAM_VIZ_FRAME_WORKER", "process")

# The only icon is a local file: a Material icon name makes the browser fetch its SVG from an outside
# font server (the app must work without a network), and emoji cost a new visitor the colour-emoji font.
st.set_page_config(page_title="BAM: seeing attention uncertainty",
                   page_icon=str(Path(__file__).with_name("views") / "icon.png"), layout="wide")
page = st.navigation([
    st.Page("views/explorer.py", title="Explorer", default=True),
    st.Page("views/about.py", title="About / theory"),
])
page.run()
