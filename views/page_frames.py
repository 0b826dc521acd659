"""The frame a page made, sent back for its captions. A page that makes its frames
(`BAM_VIZ_FRAMES=browser`) sends, once its slider rests and whenever a payload's captions wait for one
(`captions_wait`), the slider values and its frame at them, reduced (views/live/local.js): the component's
"frame" state. The server reads it (`bam_viz.live.posted.read_posted`), keeps it in this session only (a
page's numbers never reach another session's captions), and writes the captions from it. The server makes
a frame only for a sentence other sessions show and for a user alone (`result`). Numbers that
do not fit the grid are refused, and the captions say so in one line.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from bam_viz.live import grid as live
from bam_viz.live.posted import read_posted
from views import live_route, turns

ss = st.session_state
FRAME_STATE = "frame"            # the summary component's state the page sends its frame in
KEPT = "_page_frame"             # Session State: (sentence key, Posted) of the last frame read
PROBLEM = "_page_frame_problem"  # Session State: (sentence key, why the last frame was refused)
SENT = "_page_frame_sent"        # Session State: the numbers sent, until a run reads them with its grid


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
    session's captions; keep the reason instead when they are refused. Numbers of another sentence (sent
    before the page's sentence changed) are dropped: late, not wrong."""
    if SENT not in ss:
        return
    numbers = ss.pop(SENT)
    if isinstance(numbers, dict) and numbers.get("sentence") != grid.sentence_key:
        return
    try:
        index = numbers.get("index") if isinstance(numbers, dict) else None
        kl = grid.kl_tables()[index] if isinstance(index, int) and 0 <= index < len(grid.values) else None
        ss[KEPT] = (grid.sentence_key, read_posted(numbers, grid, kl))
        ss.pop(PROBLEM, None)
    except ValueError as err:
        ss[PROBLEM] = (grid.sentence_key, str(err))


def result(grid, post: int, prior: int, target: int | str | None = None) -> live.FrameResult:
    """The frame result a run reads at (post, prior): the page's frame at `post` when it sent it, else the
    grid's. Where the pages make the frames, the grid's is made on the server (one `explain()`, which the
    payloads carry: the page draws it before its own) only for a grid that other sessions show too (the
    class's first sentence, a lesson's step: one frame serves them all, and their pages send none) or when
    no other session has run the explorer for `ALONE_S` (a lone user's first charts: a page's first frame
    waits for its runtime, a second or more). Else the captions wait for the page's."""
    kept = ss.get(KEPT)
    if grid.in_browser and kept and kept[0] == grid.sentence_key and kept[1].index == post:
        return live.FrameResult(grid, post, prior, target, posted=kept[1])
    wait = grid.in_browser and not _shared(grid) and not _alone()
    return live.FrameResult(grid, post, prior, target, wait=wait)


# A user is alone when no other open session has run the explorer for this long: in a class someone always
# has (students join, type and rest their sliders every few seconds), and a frame the server made for each
# of them would cost it a third of its time (py-spy, 60 students), for first charts their pages make anyway.
ALONE_S = 30.0

_running: dict[int, int] = {}          # thread -> explorer runs in progress on it (nested fragments)
_seen: dict[str, float] = {}           # session -> when an explorer run of it last started or ended
_running_lock = threading.Lock()


def _session() -> str | None:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def running(fn):
    """Count `fn` (the explorer's fragments) as an explorer run of this session in progress on this thread."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        me, session = threading.get_ident(), _session()
        with _running_lock:
            _running[me] = _running.get(me, 0) + 1
            if session is not None:
                _seen[session] = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            with _running_lock:
                _running[me] -= 1
                last = not _running[me]
                if last:
                    del _running[me]
                if session is not None:
                    _seen[session] = time.monotonic()
            if last:                                # a deferred run's turn ends with it (`views.turns`)
                turns.end(ss.get(live_route.TOKEN_KEY))
    return run


def _gone(session: str) -> bool:
    """Whether `session`'s page is closed (its connection ended)."""
    from streamlit import runtime

    return runtime.exists() and not runtime.get_instance().is_active_session(session)


def _alone() -> bool:
    """Whether no explorer run but this thread's is in progress, and no other session still open ran one in
    the last `ALONE_S` seconds."""
    now, me = time.monotonic(), _session()
    with _running_lock:
        for session in [s for s, t in _seen.items() if now - t > ALONE_S or (s != me and _gone(s))]:
            del _seen[session]
        return set(_running) <= {threading.get_ident()} and set(_seen) <= {me}


_shown: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # grid -> the sessions that showed it
_shown_lock = threading.Lock()


def _shared(grid) -> bool:
    """Whether another session than this one has shown `grid` (this one is counted now)."""
    session = _session()
    with _shown_lock:
        seen = _shown.setdefault(grid, set())
        if session is not None:
            seen.add(session)
        return len(seen) > 1


def problem(grid) -> str | None:
    """Why the page's last frame of this grid's sentence was refused, if it was."""
    got = ss.get(PROBLEM)
    return got[1] if got and got[0] == grid.sentence_key else None
