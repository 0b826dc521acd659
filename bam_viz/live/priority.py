"""The server's CPU priority and its frames': what a shared machine's kernel is told.

Three levels, from the first served: the server's runs (at the machine's default priority unless
$BAM_VIZ_SERVER_NICE lowers them: a page's run is tens of ms of CPU that everything on its page waits
for), the frames a request waits for (FRAME_NICE: a browser on the same machine, the teacher's on the
projector, gets three times their share of a busy core), and the background frames (NICE_STEP lower
still). `server_priority` is called once by app.py as the server starts; `frame_priority` by each
thread that makes frames, in the frame worker or in the server. Niceness counts only between threads
that want the same core: with nothing else running it changes nothing. Linux renices threads one by
one; elsewhere these are no-ops.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

SERVER_NICE_ENV = "BAM_VIZ_SERVER_NICE"
# The server's niceness (`server_priority`). Its runs go before the frames: at the frames' niceness, a
# class's page loads waited behind them (docs/performance.md, "A class of twenty").
SERVER_NICE = 0
# How long a thread holds the GIL before one waiting may take it (Python's default: 5 ms). The server's
# event loop, which sends every page its scripts and payloads, takes the GIL back many times a request;
# among twenty sessions' runs each take could wait 5 ms per runnable thread (docs/performance.md).
SWITCH_S = 0.001
# The frames a request waits for (over 100 ms of CPU each): a browser on the machine gets three times their
# share of a busy core, so its slider presses do not wait for the class's frames.
FRAME_NICE = 5
NICE_STEP = 10                   # background frames this much nicer than requests' frames: a ninth of their CPU weight
_server_nice = 0                 # what `server_priority` set


def server_priority() -> int:
    """Hand the GIL on every SWITCH_S, and lower every thread of this process to $BAM_VIZ_SERVER_NICE
    (default SERVER_NICE), once, and so
    every thread started later (a Linux thread starts at its creator's niceness): Streamlit's event
    loop, each script run, the frame worker (whose threads `frame_priority` lowers further). Called by the
    app as it starts. Under no contention it changes nothing: the kernel weighs niceness only between
    threads that want the same core. Returns the niceness set (0 where none can be, as on macOS and
    Windows, whose threads are not reniced one by one). A bad value is said in the log, the default kept."""
    global _server_nice
    if sys.getswitchinterval() > SWITCH_S:
        sys.setswitchinterval(SWITCH_S)
    try:
        want = int(os.environ.get(SERVER_NICE_ENV, SERVER_NICE))
    except ValueError:
        logging.getLogger(__name__).warning("bam-viz: $%s is a niceness from 0 to 19, not %r; using %d",
                                            SERVER_NICE_ENV, os.environ[SERVER_NICE_ENV], SERVER_NICE)
        want = SERVER_NICE
    want = min(max(want, 0), 19)
    if want <= _server_nice:
        return _server_nice
    try:
        for tid in os.listdir("/proc/self/task"):
            if os.getpriority(os.PRIO_PROCESS, int(tid)) < want:
                os.setpriority(os.PRIO_PROCESS, int(tid), want)
    except (AttributeError, OSError):
        return _server_nice
    _server_nice = want
    return want


def frame_priority(background: bool, server: int | None = None) -> None:
    """Lower the calling thread, one that makes frames, to FRAME_NICE (or to the server's niceness where
    that is higher: `server` in the frame worker, this process's otherwise), NICE_STEP more for
    background frames."""
    base = max(_server_nice if server is None else server, FRAME_NICE)
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, base + (NICE_STEP if background else 0)))
    except (AttributeError, OSError, PermissionError):
        pass


def server_nice() -> int:
    """The niceness `server_priority` set in this process (0 before it is called)."""
    return _server_nice
