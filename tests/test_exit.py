"""A process that ran the app, or started a live grid, exits cleanly while its background frames are
being made: `FrameScheduler.stop` (atexit) lets them finish and ends the threads. Without it a daemon
thread still inside torch at interpreter finalisation is ended by a forced unwind through torch's C++
frames: "terminate called without an active exception", SIGABRT."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bam_viz.live import grid as live

ROOT = Path(__file__).resolve().parents[1]

APP_RUN = f"""
from streamlit.testing.v1 import AppTest
from bam_viz.live import grid as live
live.IDLE_S = float("inf")      # as tests/test_app.py: AppTest does not poll, so no grid is abandoned
at = AppTest.from_file({str(ROOT / "app.py")!r}, default_timeout=120)
at.run()
assert not at.exception, [e.value for e in at.exception]
print("idle at exit:", live.FRAMES.idle, flush=True)
"""

# Exits once every frame thread is making a frame (a few tenths of a second each at this length):
# without `stop`, a thread inside torch as Python finalizes aborts the process, nearly every run.
GRID_RUN = """
import time
import bam_viz
from bam_viz.live import grid as live
model = bam_viz.load("bam-wc")
grid = live.LiveGrid(model, " ".join(["the acting is superb but the plot is a tedious mess"] * 3), 32, 0)
grid.start(0)
deadline = time.monotonic() + 60
while live.FRAMES.busy < live.WORKERS and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.2)
print("busy at exit:", live.FRAMES.busy, flush=True)
"""


def run(script: str, **env: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert "terminate called" not in out.stderr, out.stderr[-3000:]
    assert out.returncode == 0, (out.returncode, out.stderr[-3000:])
    return out


def test_a_process_that_ran_the_app_exits_cleanly():
    run(APP_RUN)


def test_a_process_exits_cleanly_while_its_grid_is_being_made():
    out = run(GRID_RUN, BAM_VIZ_FRAMES="server")
    assert f"busy at exit: {live.WORKERS}" in out.stdout, out.stdout
