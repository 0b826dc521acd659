"""Turns: what a student waits for goes first.

A page opening and a new sentence (full runs of the explorer, `urgent`) are what a student waits for; the
captions written from a frame the page has already drawn, and the URL once its sliders rest, are not. A page
that makes its frames asks the live route for a turn (`wait`, views/live/local.js) before it sends such a
frame, and its run ends the turn (`end`, from `views.page_frames.running`). Turns go TURNS at a time, in the
order they were asked for, while no urgent run is in progress, or once asked DEFER_MAX_S ago.

The wait is the route's, on the event loop, before the run: a run that waited inside Streamlit would hold
back what the run before it showed (Streamlit drops a fragment's unsent elements when it reruns it).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
import time

DEFER_MAX_S = 10.0       # a turn asked for this long ago goes while urgent runs are in progress
GIVE_UP_S = 20.0         # and one asked for this long ago goes, whatever holds the turns
TURN_S = 3.0             # a turn whose run has not ended after this long (a page closed) is over
TURNS = 2                # turns held at once: a run's own waits (its page's ask, its messages) overlap
CHECK_S = 0.5            # a waiting ask looks again this often, woken or not

_lock = threading.Lock()
_urgent = [0]                          # urgent runs in progress
_held: dict[str, float] = {}           # the holders (live-route tokens) whose runs go now -> since when
_queue: list[int] = []                 # the tickets of the turns asked for, oldest first
_woken: dict[int, tuple] = {}          # ticket -> (its loop, its asyncio.Event)
_asking: set[str] = set()              # the holders waiting for a turn
_tickets = itertools.count()


def urgent(fn):
    """Count `fn` (the explorer's full run) as a run a student waits for."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _lock:
            _urgent[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with _lock:
                _urgent[0] -= 1
                if not _urgent[0]:
                    _wake()
    return run


def _wake() -> None:
    """Wake the asks that may go next (under `_lock`)."""
    for ticket in _queue[:TURNS]:
        loop, event = _woken[ticket]
        loop.call_soon_threadsafe(event.set)


def _take(ticket: int, holder: str, asked: float) -> bool:
    """Take a turn for `holder` if `ticket` may go now."""
    now = time.monotonic()
    with _lock:
        for gone in [h for h, since in _held.items() if now - since > TURN_S]:
            del _held[gone]
        free = holder in _held or len(_held) < TURNS
        go = now - asked > GIVE_UP_S or (ticket in _queue[:TURNS] and free
                                          and (not _urgent[0] or now - asked > DEFER_MAX_S))
        if go:
            _held[holder] = now
        return go


async def wait(holder: str) -> float | None:
    """Until a turn for `holder`, which it then holds; the seconds waited. None at once when `holder` is
    waiting for one already (a page asks one at a time: another ask is not a page's)."""
    asked, ticket, event = time.monotonic(), next(_tickets), asyncio.Event()
    with _lock:
        if holder in _asking:
            return None
        _asking.add(holder)
        _queue.append(ticket)
        _woken[ticket] = (asyncio.get_running_loop(), event)
    try:
        while not _take(ticket, holder, asked):
            try:
                await asyncio.wait_for(event.wait(), CHECK_S)
            except TimeoutError:
                pass
            event.clear()
    finally:
        with _lock:
            _queue.remove(ticket)
            del _woken[ticket]
            _asking.discard(holder)
            _wake()
    return time.monotonic() - asked


def end(holder: str | None) -> None:
    """`holder`'s run ended: so does its turn, if it holds one."""
    with _lock:
        if _held.pop(holder, None) is not None:
            _wake()
