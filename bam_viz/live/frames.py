"""One frame of a live grid (the sentence at one slider value, reduced to what the page draws and
what its captions read), and the worker process that can make every frame.

A frame is one `explain()` call reduced by `make_frame`. Without a worker, the explorer makes the
frame a user waits for in the request's thread and the other values of the slider in background
threads of the server (`bam_viz.live.scheduler`), which share its GIL with every request: under a
class the server's Python is the bottleneck, and a page, a release or the event loop sending a
student the page's scripts waits behind other students' frames. With $BAM_VIZ_FRAME_WORKER=process,
`FrameWorker` makes every frame in a process of its own: the frames a request waits for first
("now", on threads at FRAME_NICE, in arrival order, a sentence's first frame FIRST_LEAD_S ahead of
its place), the background ones after (on threads NICE_STEP nicer, each starting only while no
"now" frame waits or runs). The server then keeps its GIL for pages and requests;
docs/performance.md ("A class of twenty") has both measured.

The server sends each model to the worker once, its weights as shared memory (the server's own pages,
mapped, not copied: `FrameScheduler.prepare` moves them there when the model is loaded); torch
releases the GIL in its kernels. The worker exits when the server does (it watches its parent). A job
whose worker died fails with `WorkerGone`, and the next job starts a new worker (the grid makes that
frame in the server meanwhile); a model without an origin (built in code, not loaded from the zoo,
so of classes the worker may not be able to import) is never sent.

Under load a request's frame is a preview: while other requests' frames wait or are being made, it
draws `preview_samples` of its samples (a quarter, at least PREVIEW_MIN), with its own, wider Monte
Carlo errors, and the grid makes the whole frame in the background and puts it in its place
(`bam_viz.live.grid.LiveGrid.final`). Alone, a request's frame draws every sample.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bam_viz.core.labels import LABELS
from bam_viz.core.metrics import MI_ROUNDING
from bam_viz.inference.result import MonteCarloErrors
from bam_viz.inference.rows import RowSummary
from bam_viz.live.wire import FLOAT32_LIMIT

MAP_SAMPLES = 3                 # sampled maps drawn beside the mean, softmax and std maps: two rows of three
# The headline's numbers per frame and class (`bam_viz.inference.gaps` defines them): the class's E[f(z)]
# and its SE; f(E[w]) and Deng's gap with its jackknife SE; f(softmax) and the gap against it with
# its paired SE; then what is one for every class: the bias-corrected mutual information, its SE and
# the interval shown, and the entropy bar's total H[E p] and parts, the expected entropy and the plug-in
# mutual information (`bam_viz.plots.wording.EntropyParts`).
STATS = ("p_mc", "p_se", "p_mean_attention", "gap", "gap_se", "p_softmax", "gap_softmax", "gap_softmax_se",
         "mi", "mi_se", "mi_lo", "mi_hi", "predictive_entropy", "expected_entropy", "mi_plugin")
# Per frame and stochastic layer: the Monte Carlo mean of the sampled weights, their std, 5% and 95%
# quantiles, then MAP_SAMPLES sampled maps. The softmax map (the deterministic pass) is per grid.
MAP_KINDS = ("mean", "std", "q05", "q95")
# The inside panel's first maps (title, colour scale), then the sampled ones.
MAP_PANELS = ((LABELS["posterior_mean"], "weight"), (LABELS["softmax_weights"], "weight"), (LABELS["std"], "std"))
# The band a frame's maps (MAP_KINDS' q05 and q95) and the predictive distribution's bars show of the samples.
QUANTILES = (0.05, 0.95)
WORKER_THREADS = 2              # background frames made at once in the worker
NOW_THREADS = 2                 # and frames a request waits for: under a class most releases land on one not made
WORKER_WORK_MB = 192            # the worker's own working-memory budget ($BAM_VIZ_WORK_MB there)
WORKER_CACHE_MB = 32            # and cache ($BAM_VIZ_CACHE_MB there): a frame reuses only its sentence's
                                # lower layers, and what the page reads again is kept by the server
START_TIMEOUT_S = 120.0         # importing torch and loading a model in a fresh process
FRAME_TIMEOUT_S = 300.0         # a frame not answered by then is made in the server instead
PREVIEW_SHARE = 4               # under load, a request's frame draws this share of its samples...
PREVIEW_MIN = 8                 # ...but at least this many (the mutual information's SE needs a few)
# A sentence's first frame goes before the released values' frames that came up to this long before it:
# its page has nothing to draw until it comes, where a release's page still shows the last value. A lead,
# not a lane of its own: every frame still waits at most this much longer than in arrival order, so
# neither kind can starve the other (docs/performance.md, "A class of twenty").
FIRST_LEAD_S = 1.0
PREVIEWS_ENV = "BAM_VIZ_PREVIEWS"
PREVIEW_MODES = ("load", "always", "never")   # when a request's frame is a preview (`previews`)


@dataclass(frozen=True)
class Frame:
    """The sentence at one posterior value: what does not depend on the selected head or query, for
    every class at once, so that the page picks the class it shows without a frame made again."""

    stats: np.ndarray               # (C, len(STATS)) row c: the headline for class c; NaN: an error not estimable
    p_samples: np.ndarray           # (S, C) float32 f(z_s): each attention sample's predictive distribution
    spread: np.ndarray              # (L, H)
    kl: np.ndarray                  # (B, L, H) KL(q || prior) at every prior value, nats
    maps: dict                      # stochastic layer -> (H, 4 + MAP_SAMPLES', W, W) float16, MAP_KINDS then samples
    # stochastic layer -> (RowSummary over every query, MapSummary) of the window (`bam_viz.inference.rows`):
    # what the captions read of the sampled weights (`bam_viz.live.result.FrameResult`)
    rows: dict

    @property
    def n_samples(self) -> int:
        """The attention samples this frame drew: the grid's, or fewer for a preview."""
        return self.p_samples.shape[0]


@dataclass(frozen=True)
class FrameParts:
    """A frame before its KL table (which the grid adds from its deterministic pass), and, when asked
    for, the softmax weights of the deterministic pass and the prior's pi (L, H, T, T): the same at
    every slider value."""

    stats: np.ndarray
    p_samples: np.ndarray
    spread: np.ndarray
    maps: dict
    rows: dict
    softmax_weights: torch.Tensor | None = None
    prior_weights: torch.Tensor | None = None


def samples_drawn(frames) -> list[int]:
    """The samples each of `frames` drew (`Frame.n_samples`), 0 for one not made (None)."""
    return [0 if f is None else f.n_samples for f in frames]


def preview_samples(n_samples: int) -> int:
    """The samples a preview of an `n_samples` frame draws: 1/PREVIEW_SHARE of them, at least PREVIEW_MIN,
    and never more than `n_samples` (a frame that small has no preview)."""
    return min(n_samples, max(PREVIEW_MIN, n_samples // PREVIEW_SHARE))


def previews() -> str:
    """When a request's frame is a preview, from $BAM_VIZ_PREVIEWS: "load" (the default: while other
    requests' frames wait or are being made), "always" or "never". A bad value is said in the log
    (once) and the default kept: a server setting must not stop a class."""
    return _preview_mode(os.environ.get(PREVIEWS_ENV, PREVIEW_MODES[0]))


@functools.lru_cache(maxsize=8)
def _preview_mode(raw: str) -> str:
    mode = raw.strip().lower()
    if mode in PREVIEW_MODES:
        return mode
    logging.getLogger(__name__).warning("bam-viz: $%s is one of %s, not %r; using %r", PREVIEWS_ENV,
                                        ", ".join(PREVIEW_MODES), mode, PREVIEW_MODES[0])
    return PREVIEW_MODES[0]


def request_samples(n_samples: int, others: int) -> int:
    """The samples a frame a request waits for draws: all of them alone, a preview's while `others`
    such frames wait or are being made (under a class most releases land on a value not made yet, and
    a frame's cost is mostly its samples: docs/performance.md, "A class of twenty"); `previews` can
    make every such frame a preview, or none."""
    mode = previews()
    if mode == "never" or (mode == "load" and others <= 0):
        return n_samples
    return preview_samples(n_samples)


class RequestFrames:
    """The frames requests wait for that this process makes itself (no worker process, or while it is
    replaced), counted as the worker counts its own: each request's thread makes its frame at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self.making = 0

    @contextmanager
    def samples(self, n_samples: int):
        """The samples this request's frame draws (`request_samples`), counted while it is made."""
        with self._lock:
            self.making += 1
            others = self.making - 1
        try:
            yield request_samples(n_samples, others)
        finally:
            with self._lock:
                self.making -= 1


REQUESTS = RequestFrames()


def quantiles(w: torch.Tensor, qs: tuple[float, ...]) -> torch.Tensor:
    """torch.quantile over dimension 0 (linear interpolation), from one sort: (len(qs), *w.shape[1:]).
    NumPy's sort along the first axis, because torch.quantile (and torch's sort over the samples) is
    far slower on this shape (docs/performance.md, "A new sentence in the live explorer")."""
    s = torch.from_numpy(np.sort(w.numpy(), axis=0))
    n = s.shape[0]
    out = []
    for q in qs:
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        out.append(s[lo] + (pos - lo) * (s[hi] - s[lo]))
    return torch.stack(out)


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def class_stats(r) -> np.ndarray:
    """(C, len(STATS)) the headline's numbers of an `ExplainResult` with each class c as the target
    (row c is what `r.for_target(c)` shows: its gaps, in float64 from the float32 probabilities)."""
    mc, mean, soft = (p.detach().cpu().double().numpy() for p in (r.mc_probs, r.mean_attention_probs, r.softmax_probs))
    errors = r.class_errors                                                   # (3, C)
    mi_lo, mi_hi = r.mutual_information_interval or (None, None)
    columns = {"p_mc": mc, "p_se": errors[0], "p_mean_attention": mean, "gap": mc - mean, "gap_se": errors[1],
               "p_softmax": soft, "gap_softmax": mc - soft, "gap_softmax_se": errors[2],
               "mi": r.mutual_information, "mi_se": _nan(r.se.mutual_information), "mi_lo": _nan(mi_lo),
               "mi_hi": _nan(mi_hi), "predictive_entropy": r.predictive_entropy,
               "expected_entropy": r.expected_entropy, "mi_plugin": r.mutual_information_plugin}
    return np.stack([np.broadcast_to(np.asarray(columns[name], dtype=np.float64), mc.shape) for name in STATS], 1)


def caption_rows(summary: RowSummary) -> RowSummary:
    """A `RowSummary` as a frame keeps it, for every query: the top key as int16, the rest float32
    (a grid holds one per frame and stochastic layer; the captions print 2 decimals of them)."""
    return RowSummary(summary.top.astype(np.int16), *(a.astype(np.float32) for a in summary[1:]))


def window_maps(w: torch.Tensor) -> torch.Tensor:
    """(H, 4 + MAP_SAMPLES', W, W) float32 of one layer's sampled weights `w` (S, H, W, W) in the token
    window: MAP_KINDS (the mean, the std with ddof 1, 0 for one sample, the QUANTILES by `quantiles`),
    then the first MAP_SAMPLES samples (MAP_SAMPLES' = min(MAP_SAMPLES, S)). The page's script makes
    the same from a frame graph's weights (views/live/frame.js)."""
    S = w.shape[0]
    # NumPy: torch's std over a strided first dimension is slow; one copy serves the mean and std.
    drawn = w.numpy()
    mean = torch.from_numpy(drawn.mean(0, dtype=np.float64)).float()           # (H, W, W) E[w] in the window
    std = torch.from_numpy(drawn.std(0, ddof=1)) if S > 1 else torch.zeros_like(w[0])
    q = quantiles(w, QUANTILES)
    return torch.stack([mean, std, q[0], q[1], *w[:MAP_SAMPLES]], 1)


def frame_rules() -> dict:
    """What the page's script reduces a frame graph's outputs by as `make_frame` and the payloads do
    (views/live/frame.js: frameFromOutputs, summaryArrays, insideArrays), each from its one home, as JSON:
    the `stats` columns, the sampled maps a frame keeps, MAP_KINDS, the inside maps' first panels, the MI's
    rounding to 0, what float32 clips to, the QUANTILES and the samples each Monte Carlo error needs."""
    return {"stats": list(STATS), "map_samples": MAP_SAMPLES, "map_kinds": list(MAP_KINDS),
            "map_panels": len(MAP_PANELS), "mi_rounding": MI_ROUNDING, "float32_limit": FLOAT32_LIMIT,
            "quantiles": list(QUANTILES), "samples_needed": dict(MonteCarloErrors.SAMPLES_NEEDED)}


def make_frame(model, text: str, n_samples: int, seed: int, hyper: dict, window: list[int],
               weights: bool = False, rng: str = "torch") -> FrameParts:
    """`explain()` at `hyper`, reduced to a frame: the headline's estimates and Monte Carlo errors for
    every class (`class_stats`), each sample's predictive distribution, the spread, and every
    stochastic head's `window_maps` in the token `window`, as float16. A frame serves every class:
    which one the page shows is picked when a payload is packed. `rng`: explain()'s generator."""
    r = model.explain(text, n_samples=n_samples, seed=seed, cache=False, rng=rng, **hyper)
    stats = class_stats(r)
    idx = torch.tensor(window)
    maps, rows = {}, {}
    for layer in r.stochastic_layers:
        rows[layer] = (caption_rows(r.row_summary(layer, window)), r.map_summary(layer, window))
        w = r.sample_weights[:, layer][:, :, idx][:, :, :, idx]                    # (S, H, W, W)
        maps[layer] = window_maps(w).half().numpy()                               # (H, K, W, W)
    return FrameParts(stats=stats, p_samples=r.sample_probs.float().numpy().copy(),
                      spread=r.spread.double().numpy(), maps=maps, rows=rows,
                      softmax_weights=r.softmax_weights.clone() if weights else None,
                      prior_weights=r.prior_weights.clone() if weights else None)


# ---- the worker process ---------------------------------------------------------------------------
LATER, NOW, FIRST = "later", "now", "first"     # a job's lane: the background, a request's frame, a sentence's first


class WorkerGone(RuntimeError):
    """The worker process could not start, or ended (killed, out of memory) before answering a job."""


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:          # the server is gone: nobody will read what we make
            os._exit(0)
        time.sleep(1.0)


def now_order(arrived: float, first: bool) -> float:
    """Where a frame a request waits for goes in the worker's queue, smallest first: its arrival time,
    FIRST_LEAD_S earlier for a sentence's first frame."""
    return arrived - (FIRST_LEAD_S if first else 0.0)


def serve(address: str, parent: int, threads: int = WORKER_THREADS, server_nice: int = 0) -> None:
    """The worker's main (run by `FrameWorker`, with the server's process key on stdin): NOW_THREADS
    threads answering the frames a request waits for ("now" jobs), in `now_order`, each a preview
    while others wait or are being made (`request_samples`), and `threads`
    answering the background ones, each starting only while no "now" job waits or
    runs (a frame holding this process's GIL would slow it); each at its `frame_priority`. A job is (job
    id, lane, model key, text, S, seed, hyper, window, weights), its lane LATER, NOW or FIRST, answered
    (job id, parts or None, error or None). A model comes before its first job, as ("model", key,
    model): its tensors arrive as shared memory, the server's own pages, not a copy."""
    import multiprocessing
    import sys
    from multiprocessing.connection import Client

    import torch.multiprocessing  # noqa: F401  (registers the reductions that receive tensors as shared memory)

    from bam_viz.core.device import tune_allocator
    from bam_viz.live.priority import frame_priority

    torch.set_num_threads(1)
    tune_allocator()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    # The server's key: the connection's, and the one its tensors' file descriptors are fetched with.
    multiprocessing.current_process().authkey = bytes.fromhex(sys.stdin.readline().strip())
    conn = Client(address, authkey=multiprocessing.current_process().authkey)
    models, send_lock = {}, threading.Lock()
    now_jobs, later_jobs = queue.PriorityQueue(), deque()     # ((now_order, arrival count), job), and jobs
    quiet = threading.Condition()         # background frames wait on it while a "now" job waits or runs
    busy_now = [0]                        # "now" jobs received and not yet answered

    def answer(job, n_samples: int) -> None:
        job_id, _, key, text, _, seed, hyper, window, weights = job
        try:
            reply = (job_id, make_frame(models[key], text, n_samples, seed, hyper, window, weights), None)
        except Exception as e:          # one frame's failure is the server's to report
            reply = (job_id, None, f"{type(e).__name__}: {e}")
        with send_lock:
            conn.send(reply)

    def now_loop():
        torch.set_num_threads(1)          # in each thread: OpenMP's thread count is the calling thread's
        frame_priority(background=False, server=server_nice)
        while True:
            _, job = now_jobs.get()
            try:
                with quiet:                   # the other frames requests wait for, waiting or being made
                    others = busy_now[0] - 1
                answer(job, request_samples(job[4], others))
            finally:
                with quiet:
                    busy_now[0] -= 1
                    quiet.notify_all()

    def later_loop():
        torch.set_num_threads(1)
        frame_priority(background=True, server=server_nice)
        while True:
            with quiet:
                quiet.wait_for(lambda: later_jobs and not busy_now[0])
                job = later_jobs.popleft()
            answer(job, job[4])                 # every sample: the background's frames are whole

    arrivals = itertools.count()
    for _ in range(NOW_THREADS):
        threading.Thread(target=now_loop, daemon=True).start()
    for _ in range(threads):
        threading.Thread(target=later_loop, daemon=True).start()
    try:
        while True:
            message = conn.recv()
            if message[0] == "model":       # before any job that needs it: the connection keeps the order
                models[message[1]] = message[2].eval()
            elif message[1] != LATER:
                with quiet:
                    busy_now[0] += 1
                now_jobs.put(((now_order(time.monotonic(), message[1] == FIRST), next(arrivals)), message))
            else:
                with quiet:
                    later_jobs.append(message)
                    quiet.notify_all()
    except (EOFError, OSError):             # the server closed the connection
        os._exit(0)


class FrameWorker:
    """The server's handle on the worker process: `submit` a frame, get a `Future` of its parts.
    Thread-safe. The worker is a fresh interpreter running `serve` (never a fork, which the
    server's threads and torch's pools do not survive, nor multiprocessing's spawn, which would
    import the server's main script again), started on the first job and again after it died. It
    talks to the server over one authenticated local connection."""

    def __init__(self, threads: int = WORKER_THREADS, work_mb: int = WORKER_WORK_MB):
        self.threads, self.work_mb = threads, work_mb
        self._lock = threading.Lock()
        self._proc = self._conn = None
        self._sent: set = set()                  # the models the current process holds
        self._pending: dict[int, tuple] = {}     # job id -> (the process it went to, its Future)
        self._ids = itertools.count()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _start(self) -> None:
        """Under the lock: a fresh process, its connection, and the thread that reads its answers."""
        import multiprocessing
        import subprocess
        import sys
        from multiprocessing.connection import Listener

        import torch.multiprocessing  # noqa: F401  (registers the reductions that send tensors as shared memory)

        from bam_viz.core.cache import BUDGET_ENV, WORK_ENV
        from bam_viz.live.priority import server_nice

        # This process's own key: the worker needs it to fetch the file descriptors of shared tensors.
        key = multiprocessing.current_process().authkey
        with Listener(family="AF_UNIX", authkey=key) as listener:
            # Budgets of its own: its explain()s are not the server's.
            env = {**os.environ, WORK_ENV: str(self.work_mb), BUDGET_ENV: str(WORKER_CACHE_MB)}
            env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
            # -c, not -m: the answers' classes must pickle as bam_viz.live.frames', not as a __main__ copy's.
            main = (f"from bam_viz.live.frames import serve; serve({listener.address!r}, {os.getpid()}, "
                    f"{self.threads}, {server_nice()})")
            proc = subprocess.Popen([sys.executable, "-c", main], stdin=subprocess.PIPE, env=env)
            proc.stdin.write(bytes(key).hex().encode() + b"\n")
            proc.stdin.close()
            listener._listener._socket.settimeout(START_TIMEOUT_S)
            try:
                conn = listener.accept()
            except OSError as e:
                proc.kill()
                raise WorkerGone(f"the frame worker did not connect: {e}") from e
        self._proc, self._conn, self._sent = proc, conn, set()
        threading.Thread(target=self._receive, args=(proc, conn), daemon=True, name="bam-viz-frames").start()

    def ensure(self) -> None:
        """Start the worker now if none runs (the app does it as a model loads, in a thread of its
        own, so that the first page does not wait for a fresh interpreter to import torch)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                try:
                    self._start()
                except WorkerGone:          # said again, with its reason, when a frame asks
                    pass

    def submit(self, model, text: str, n_samples: int, seed: int, hyper: dict, window: list[int],
               weights: bool = False, now: bool = False, first: bool = False) -> Future:
        """Frame parts of `model` (a zoo model: one with an `origin`) for these arguments (see
        `make_frame`), made in the worker; raises `WorkerGone` when no worker can be started. `now`: a
        request waits for it, so it goes before every background frame, at FRAME_NICE; `first` (with
        `now`): it is a sentence's first frame, which goes FIRST_LEAD_S ahead (`now_order`). The
        model goes to the worker once, its tensors as shared memory: the worker adds no copy of the
        weights, only its own working memory."""
        future: Future = Future()
        key = tuple(model.origin)
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            job_id = next(self._ids)
            self._pending[job_id] = (self._proc, future)
            try:
                if key not in self._sent:
                    self._conn.send(("model", key, model))
                    self._sent.add(key)
                lane = (FIRST if first else NOW) if now else LATER
                self._conn.send((job_id, lane, key, text, int(n_samples), int(seed),
                                 {k: float(v) for k, v in hyper.items()}, [int(i) for i in window], weights))
            except OSError as e:
                self._pending.pop(job_id)
                raise WorkerGone(f"the frame worker is gone: {e}") from e
        return future

    def _receive(self, proc, conn) -> None:
        while True:
            try:
                job_id, parts, error = conn.recv()
            except (EOFError, OSError):
                break
            except Exception:               # an answer that does not unpickle: its job times out in the grid
                logging.getLogger(__name__).exception("bam-viz: an unreadable answer from the frame worker")
                continue
            with self._lock:
                _, future = self._pending.pop(job_id, (None, None))
            if future is None:
                continue
            if error is None:
                future.set_result(parts)
            else:
                future.set_exception(RuntimeError(f"the frame worker failed: {error}"))
        proc.wait()
        with self._lock:
            futures = [self._pending.pop(job)[1] for job, (p, _) in list(self._pending.items()) if p is proc]
        if futures:
            logging.getLogger(__name__).warning("bam-viz: the frame worker (pid %s) ended with %d frames unmade; "
                                                "the next frame starts a new one", proc.pid, len(futures))
        for future in futures:
            future.set_exception(WorkerGone(f"the frame worker (pid {proc.pid}) ended"))

    def close(self) -> None:
        with self._lock:
            proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
        if conn is not None:
            conn.close()                        # the worker exits when its connection closes
        if proc is not None:
            try:
                proc.wait(5)
            except Exception:
                proc.kill()
                proc.wait(5)
