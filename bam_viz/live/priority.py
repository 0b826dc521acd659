"""The server's CPU priority and its background work's: what a shared machine's kernel is told.

The server lowers itself once as it starts (`server_priority`, called by app.py), so that a browser
on the same machine (the teacher's, on the projector) gets the cores before the class's work; the
threads that make background frames go NICE_STEP lower still (`lower_priority`), in the server or in its
frame worker (which starts at the server's niceness). Niceness counts only between threads that want the same
core: with nothing else running it changes nothing. Linux renices threads one by one; elsewhere
these are no-ops.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

SERVER_NICE_ENV = "BAM_VIZ_SERVER_NICE"
# The server's niceness (`server_priority`): a browser on the server's own machine gets three times
# the server's share of a busy core, so its slider presses do not wait for the class's work. 0 turns it off.
SERVER_NICE = 5
# How long a thread holds the GIL before one waiting may take it (Python's default: 5 ms). The server's
# event loop, which sends every page its scripts and payloads, takes the GIL back many times a request;
# among twenty sessions' runs each take could wait 5 ms per runnable thread (docs/performance.md).
SWITCH_S = 0.001
NICE_STEP = 10                   # background frames this much nicer than requests: a ninth of their CPU weight
_server_nice = 0                 # what `server_priority` set


def server_priority() -> int:
    """Hand the GIL on every SWITCH_S, and lower every thread of this process to $BAM_VIZ_SERVER_NICE
    (default SERVER_NICE), once, and so
    every thread started later (a Linux thread starts at its creator's niceness): Streamlit's event
    loop, each script run, the background frames (`lower_priority`, NICE_STEP below). Called by the
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


def lower_priority(base: int | None = None) -> None:
    """Lower the calling thread's CPU priority to NICE_STEP below the server's niceness (`base`: the
    server's, given to its frame worker; else what `server_priority` set in this process): frames made
    in the background yield a core to a request being answered."""
    try:
        nice = _server_nice if base is None else base
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, nice + NICE_STEP))
    except (AttributeError, OSError, PermissionError):
        pass


def server_nice() -> int:
    """The niceness `server_priority` set in this process (0 before it is called)."""
    return _server_nice
