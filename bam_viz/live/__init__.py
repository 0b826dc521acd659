"""The explorer's slider grid: every slider value's charts made ahead of the user.

`grid` holds `LiveGrid` (one sentence's grid), `frames` makes a value's frame and the rules by which the
page makes its own, `result` reads a frame as the captions' result, `scheduler` says who makes the frames
(each page, or the server's threads in the background), `payloads` and `wire` pack them for the browser.
`from bam_viz.live import LiveGrid` keeps working; the grid module loads on first use.
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    if name == "LiveGrid":
        return importlib.import_module("bam_viz.live.grid").LiveGrid
    raise AttributeError(f"module 'bam_viz.live' has no attribute {name!r}")
