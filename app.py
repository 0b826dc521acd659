"""The Streamlit app: a router. Pages live in `views/`; the explorer is the default.

Run with `streamlit run app.py`. Streamlit reads this file twice: it imports it once as the server's
ASGI app (`app` below: Streamlit's, with its own frontend's scripts served compressed from memory,
the charts' payloads gzipped once and every page cross-origin isolated, `views.serving`), and runs it as
`__main__` for every page a session shows.
"""

import os
from pathlib import Path

import streamlit as st

# A server shared by a class gives freed memory back rather than keeping it for speed (bam_viz.core.device).
os.environ.setdefault("BAM_VIZ_MALLOC_TUNING", "memory")
# Each page makes its slider grid's frames itself, in the browser (views/live/local.js), and sends back the
# one its captions read (views/page_frames.py). BAM_VIZ_FRAMES=server makes every frame here instead.
os.environ.setdefault("BAM_VIZ_FRAMES", "browser")

if __name__ != "__main__":
    # `streamlit run app.py` found `app` here and imported this file to serve it (uvicorn's "app:app").
    from starlette.middleware import Middleware

    from views.live_route import LiveRoute
    from views.serving import BackendBase, CrossOriginIsolated, HashedStatic, PrecompressedStatic, ServedPayloads

    # The first is outermost: every response, the others' included, leaves cross-origin isolated.
    app = st.App(__file__, middleware=[Middleware(CrossOriginIsolated), Middleware(BackendBase),
                                       Middleware(PrecompressedStatic), Middleware(ServedPayloads),
                                       Middleware(HashedStatic), Middleware(LiveRoute)])
else:
    from views.join import LESSONS_PATH  # the join link and the route: one name

    # The only icon is a local file: a Material icon name makes the browser fetch its SVG from an outside
    # font server (the app must work without a network), and emoji cost a new visitor the colour-emoji font.
    st.set_page_config(page_title="BAM: seeing attention uncertainty",
                       page_icon=str(Path(__file__).with_name("views") / "icon.png"), layout="wide")
    page = st.navigation([
        st.Page("views/explorer.py", title="Explorer", default=True),
        st.Page("views/corpus.py", title="Corpus"),
        st.Page("views/about.py", title="About / theory"),
        st.Page("views/theory.py", title="Theory lab"),
        st.Page("views/lessons.py", title="Lessons", url_path=LESSONS_PATH),
    ])
    page.run()
