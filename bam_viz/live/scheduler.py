"""Who makes the live grids' frames ($BAM_VIZ_FRAMES): each page, in the browser ("browser", the app's
mode), or the threads here ("server", the library's), which make every grid's frames in the background.

A grid is anything with `touched`, `started`, `_making`, `final(i)`, `abandoned()`, `in_browser` and
`_work(i)`: `bam_viz.live.grid.LiveGrid`.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from contextlib import contextmanager

WORKERS = 2                     # frames made at once: this machine's cores


class FrameScheduler:
    """The background frames of every grid its pages do not make (`in_browser`), by WORKERS threads.

    Grids take turns, a frame each (round robin), and each grid's frames come in its own order
    (nearest to its slider first). With twenty sentences typed at once, every student gets the
    values next to their slider within a few rounds, instead of the twentieth waiting for the other
    nineteen grids to finish (a single queue in arrival order). A grid nobody asked about for a while
    (`LiveGrid.abandoned`) leaves the rotation (`LiveGrid.touch` brings it back)."""

    def __init__(self, workers: int = WORKERS):
        self.workers = workers
        self._turns: deque = deque()              # (grid, deque of frame indices still to make)
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self.busy = 0                             # frames being made now
        self.front = 0                            # requests being answered now (`foreground`)
        self._mode: str | None = None
        self._stopping = False                    # `stop`: no new frame starts

    @property
    def mode(self) -> str:
        """"server" or "browser", from $FRAMES_ENV (read once; `use` sets it)."""
        if self._mode is None:
            mode = os.environ.get(FRAMES_ENV, "server").strip().lower()
            if mode not in MODES:
                raise ValueError(f"${FRAMES_ENV} is one of {', '.join(MODES)}, not {mode!r}")
            self._mode = mode
        return self._mode

    @property
    def in_browser(self) -> bool:
        """Whether each page computes its grid's frames itself: the server makes a frame only when asked
        (`LiveGrid.frame`), and nothing in the background."""
        return self.mode == "browser"

    def use(self, mode: str) -> None:
        """Make the grids' frames here ("server") or in their pages ("browser")."""
        if mode not in MODES:
            raise ValueError(f"a mode is one of {', '.join(MODES)}, not {mode!r}")
        self._mode = mode

    def add(self, grid, order: list[int], first: bool = False) -> None:
        """Make `grid`'s frames `order` in the background, in that order, in place of any it had
        queued; its turn comes after every other grid's, or next (`first`: its user just moved)."""
        if getattr(grid, "in_browser", False):    # its pages make its frames
            return
        with self._cond:
            self._turns = deque(t for t in self._turns if t[0] is not grid)
            if order:
                (self._turns.appendleft if first else self._turns.append)((grid, deque(order)))
            if not self._threads:
                atexit.register(self.stop)
            while len(self._threads) < self.workers:
                t = threading.Thread(target=self._run, name=f"bam-viz-live-{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
            self._cond.notify_all()

    def _next(self):
        """The next (grid, frame) in turn, or None when no grid has frames to make (under the lock)."""
        while self._turns:
            grid, todo = self._turns.popleft()
            if grid.abandoned():                                # a new sentence came
                continue
            while todo and (grid.final(todo[0]) or todo[0] in grid._making):
                todo.popleft()
            if not todo:
                continue
            i = todo.popleft()
            if todo:
                self._turns.append((grid, todo))
            return grid, i
        return None

    @contextmanager
    def foreground(self):
        """Mark a request being answered (a page or fragment run): no background frame starts while
        one is, for up to YIELD_S: a frame holding the GIL stalls every run's Python."""
        with self._cond:
            self.front += 1
        try:
            yield
        finally:
            with self._cond:
                self.front -= 1
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._turns) or self._stopping)
                if self._stopping:
                    return
                # Runs first; after YIELD_S a frame starts anyway, so that a server that never pauses
                # still gets its grids (their polling stops only when they are done).
                self._cond.wait_for(lambda: self.front == 0 or self._stopping, timeout=YIELD_S)
                job = None if self._stopping else self._next()
                if job is None:
                    continue
                self.busy += 1
            try:
                job[0]._work(job[1])
            except Exception:           # one frame's failure must not stop the workers; asking again retries
                logging.getLogger(__name__).exception("bam-viz: a live grid frame failed")
            finally:
                with self._cond:
                    self.busy -= 1
                    self._cond.notify_all()

    @property
    def active(self) -> int:
        """Grids with frames still to make."""
        with self._cond:
            return len(self._turns) + (1 if self.busy and not self._turns else 0)

    def poll_interval(self) -> float:
        """How often a page fetches its grid's new frames while they are made: every POLL_S alone; with
        n grids being made, every n x POLL_COST_S / POLL_SHARE seconds (at most POLL_MAX_S), so that the
        class's polls together take about POLL_SHARE of a core, whatever else the server answers: each
        poll is a rerun of the page's fragment."""
        return min(max(POLL_S, self.active * POLL_COST_S / POLL_SHARE), POLL_MAX_S)

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self._turns and not self.busy

    def stop(self, timeout: float | None = None) -> bool:
        """For good, at interpreter exit (registered with atexit when the threads start): no new frame
        starts, the frames being made finish (for up to STOP_TIMEOUT_S), the threads end. A daemon thread
        still inside torch when Python finalizes is ended by a forced unwind through torch's C++ frames,
        which aborts the process ("terminate called without an active exception"). True when every
        thread ended."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            threads = list(self._threads)
        deadline = time.monotonic() + (STOP_TIMEOUT_S if timeout is None else timeout)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        ended = not any(t.is_alive() for t in threads)
        if not ended:
            logging.getLogger(__name__).warning("bam-viz: a background frame was still being made at exit")
        return ended


FRAMES = FrameScheduler()


POLL_S = 0.5                     # a page alone fetches its grid's new frames this often
POLL_COST_S = 0.08               # the server's time for one poll, a fragment rerun (docs/performance.md)
POLL_SHARE = 0.25                # of one core, what a class's polls may take together
POLL_MAX_S = 6.0                 # the longest between two polls (a grid is given up after IDLE_S: more)
FRAMES_ENV = "BAM_VIZ_FRAMES"
MODES = ("server", "browser")
YIELD_S = 0.25                   # the longest a background frame waits for requests being answered
STOP_TIMEOUT_S = 30.0            # at exit, the longest the frames being made are waited for (`FrameScheduler.stop`)


def wait_idle(timeout: float = 120.0) -> bool:
    """Until no frame is queued or being made, in any grid (tests); True when idle."""
    deadline = time.monotonic() + timeout
    while not FRAMES.idle and time.monotonic() < deadline:
        time.sleep(0.02)
    return FRAMES.idle
