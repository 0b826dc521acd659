"""The frame a page made, sent back for its captions. A page that makes its frames
(`BAM_VIZ_FRAMES=browser`) sends, once its slider rests and whenever a payload's captions wait for one
(`captions_wait`), the slider values and its frame at them, reduced (views/live/local.js): the component's
"frame" state. The server reads it (`bam_viz.live.posted.read_posted`), keeps it in this session only (a
page's numbers never reach another session's captions), and writes the captions from it: the server makes
no frame. Numbers that do not fit the grid are refused, and the captions say so in one line.
"""

from __future__ import annotations

import streamlit as st

from bam_viz.live import grid as live
from bam_viz.live.posted import read_posted

ss = st.session_state
FRAME_STATE = "frame"            # the summary component's state the page sends its frame in
KEPT = "_page_frame"             # Session State: (sentence key, Posted) of the last frame read
PROBLEM = "_page_frame_problem"  # Session State: (sentence key, why the last frame was refused)


SENT = "_page_frame_sent"         # Session State: the numbers sent, until a run reads them with its grid


def sent(key: str) -> dict:
    """The callback of the component `key`'s "frame" state: its slider values are returned (the caller keeps
    them as a slider's), its numbers wait for the run, which has the grid to read them by (`take`)."""
    state = ss.get(key) or {}
    got = state.get(FRAME_STATE) if isinstance(state, dict) else None
    if not isinstance(got, dict):
        return {}
    if got.get("numbers") is not None:          # None: the page could not make it, its values still count
        ss[SENT] = got["numbers"]
    hyper = got.get("hyper")
    return {str(k): v for k, v in hyper.items()} if isinstance(hyper, dict) else {}


def take(grid) -> None:
    """Read the numbers the page sent last, if no run has, as a frame of `grid`, and keep it for this
    session's captions; keep the reason instead when they are refused."""
    if SENT not in ss:
        return
    numbers = ss.pop(SENT)
    try:
        index = numbers.get("index") if isinstance(numbers, dict) else None
        kl = grid.kl_table(index) if isinstance(index, int) and 0 <= index < len(grid.values) else None
        ss[KEPT] = (grid.sentence_key, read_posted(numbers, grid, kl))
        ss.pop(PROBLEM, None)
    except ValueError as err:
        ss[PROBLEM] = (grid.sentence_key, str(err))


def result(grid, post: int, prior: int, target: int | str | None = None) -> live.FrameResult:
    """The frame result a run reads at (post, prior): the page's frame at `post` when it sent it, else the
    grid's (made on the server unless the page makes the frames: then it is waiting)."""
    kept = ss.get(KEPT)
    if grid.in_browser and kept and kept[0] == grid.sentence_key and kept[1].index == post:
        return live.FrameResult(grid, post, prior, target, posted=kept[1])
    return live.FrameResult(grid, post, prior, target)


def problem(grid) -> str | None:
    """Why the page's last frame of this grid's sentence was refused, if it was."""
    got = ss.get(PROBLEM)
    return got[1] if got and got[0] == grid.sentence_key else None
