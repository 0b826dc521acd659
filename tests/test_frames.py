"""The live grid's frames made in a worker process (bam_viz.live.frames.FrameWorker): the same numbers as
the server's own, a worker at the server's priority whose frames a request waits for go first, one
that dies is replaced without losing a frame, and one whose server is gone exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bam_viz import zoo
from bam_viz.live import frames, priority
from bam_viz.live import grid as live
from bam_viz.live import scheduler as scheduling

TEXT = "a gorgeous , witty , seductive movie ."
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model():
    return zoo.load("bam-wc")


@pytest.fixture()
def process_frames(model):
    """The module's scheduler making its frames in a worker process, for one test, with the model
    prepared as the app prepares it when loaded."""
    live.FRAMES.use("process")
    live.FRAMES.prepare(model)
    yield live.FRAMES
    live.FRAMES.use("threads")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


def same_frames(a, b) -> None:
    assert np.array_equal(a.stats, b.stats, equal_nan=True)
    assert np.array_equal(a.p_samples, b.p_samples)
    assert np.array_equal(a.spread, b.spread)
    assert np.array_equal(a.kl, b.kl)
    assert a.maps.keys() == b.maps.keys() and all(np.array_equal(a.maps[k], b.maps[k]) for k in a.maps)
    assert a.rows.keys() == b.rows.keys()
    for layer in a.rows:
        for x, y in zip(a.rows[layer], b.rows[layer], strict=True):
            assert all(np.array_equal(u, v) for u, v in zip(x, y, strict=True))


def test_a_zoo_model_knows_where_another_process_loads_it(model):
    name, root = model.origin
    assert name == "bam-wc" and Path(root) == zoo.PRETRAINED.resolve()


@pytest.fixture()
def one_thread():
    """The app's setting (views/state.py): one intra-op thread, as in the worker, so that reductions
    add in the same order and the numbers agree to the bit."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_frames_made_in_the_worker_equal_the_servers_own(model, process_frames, one_thread):
    grid = live.LiveGrid(model, TEXT, 8, 3)
    grid.start(5)
    assert grid.wait(180)
    pid = process_frames.worker.pid
    assert pid is not None and pid != os.getpid()
    # The worker starts at the server's niceness (field 19 of /proc/PID/stat); its threads that make the
    # frames a request waits for run at FRAME_NICE (the server's runs go first), those that make the
    # background ones NICE_STEP below that.
    def nice(stat: Path) -> int:
        return int(stat.read_text().rsplit(")", 1)[1].split()[16])

    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert nice(Path(f"/proc/{pid}/stat")) == base
    # (A thread that torch starts from one of them keeps its creator's niceness.)
    threads = [nice(t / "stat") for t in Path(f"/proc/{pid}/task").iterdir()]
    now = max(base, priority.FRAME_NICE)
    later = min(19, now + priority.NICE_STEP)
    assert set(threads) == {base, now, later}
    assert threads.count(now) >= frames.NOW_THREADS and threads.count(later) >= frames.WORKER_THREADS
    here = live.LiveGrid(model, TEXT, 8, 3)            # made in this process, in this thread
    for i in range(len(grid.values)):
        local = frames.make_frame(model, TEXT, 8, 3, dict(here.hyper_at(i, None)), here.window,
                                  weights=here.softmax_weights is None)
        same_frames(grid.frames[i], here._store(i, local))
    assert grid.softmax_weights is not None and here.softmax_weights is not None
    assert np.array_equal(grid.softmax_weights.numpy(), here.softmax_weights.numpy())


def test_the_weights_reach_the_worker_as_shared_memory_not_a_copy(model, process_frames):
    assert all(p.is_shared() for p in model.parameters())
    process_frames.worker.submit(model, TEXT, 4, 0, {}, [0, 1]).result(180)
    status = Path(f"/proc/{process_frames.worker.pid}/status").read_text()
    shared_kb = int(next(line for line in status.splitlines() if line.startswith("RssShmem:")).split()[1])
    # Every weight a pass reads is resident in the worker as the server's pages. (Of the word
    # embeddings, 45 MB, only the sentence's rows are ever touched.)
    read = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "word_embeddings" not in n)
    assert shared_kb * 1024 > 0.9 * read


def test_a_frame_a_request_waits_for_goes_before_the_background(model, process_frames):
    """A "now" frame sent after six background ones is answered before the last four: the worker's
    two background threads finish the frames they hold and start no other while it is made."""
    worker = process_frames.worker
    worker.submit(model, TEXT, 4, 0, {}, [0, 1]).result(180)            # started, the model sent
    done: list[str] = []
    later = [worker.submit(model, TEXT, 16, s, {}, list(range(8))) for s in range(6)]
    for i, f in enumerate(later):
        f.add_done_callback(lambda _, i=i: done.append(f"later {i}"))
    now = worker.submit(model, TEXT, 16, 99, {}, list(range(8)), now=True)
    now.add_done_callback(lambda _: done.append("now"))
    now.result(180)
    for f in later:
        f.result(180)
    assert done.index("now") <= 2, done


def test_a_sentences_first_frame_goes_before_the_releases_frames_queued_just_before_it(model, process_frames):
    """Six released values' frames, then a new sentence's first: the first is answered as soon as a
    "now" thread is free, before the four releases still queued (they came under FIRST_LEAD_S before it)."""
    worker = process_frames.worker
    window = list(range(8))
    worker.submit(model, TEXT, 4, 0, {}, [0, 1]).result(180)            # started, the model sent
    done: list[str] = []
    releases = [worker.submit(model, TEXT, 128, s, {}, window, now=True) for s in range(6)]
    for i, f in enumerate(releases):
        f.add_done_callback(lambda _, i=i: done.append(f"release {i}"))
    first = worker.submit(model, TEXT, 32, 99, {}, window, now=True, first=True)
    first.add_done_callback(lambda _: done.append("first"))
    for f in [first, *releases]:
        f.result(180)
    assert done.index("first") <= frames.NOW_THREADS, done


def test_a_first_frames_lead_is_bounded_so_neither_kind_starves():
    """The worker's order: a first frame goes before releases that came less than FIRST_LEAD_S before
    it, never before one that has waited longer; among one kind, arrival order."""
    t = 100.0
    assert frames.now_order(t, first=True) < frames.now_order(t - 0.9 * frames.FIRST_LEAD_S, first=False)
    assert frames.now_order(t, first=True) > frames.now_order(t - 1.1 * frames.FIRST_LEAD_S, first=False)
    assert frames.now_order(t, first=False) < frames.now_order(t + 0.1, first=False)
    assert frames.now_order(t, first=True) < frames.now_order(t + 0.1, first=True)


def test_only_a_grids_first_frame_asks_to_go_first(model, monkeypatch):
    """The grid marks the frame a request waits for as a sentence's first while it has none made; the
    released values' after it are not, nor are the background's."""
    asked: list[tuple[bool, bool]] = []

    class Recorder:
        def submit(self, model, text, n_samples, seed, hyper, window, weights=False, now=False, first=False):
            asked.append((now, first))
            from concurrent.futures import Future

            f: Future = Future()
            f.set_result(frames.make_frame(model, text, n_samples, seed, hyper, window, weights))
            return f

    monkeypatch.setattr(type(live.FRAMES), "worker", property(lambda self: Recorder()))
    grid = live.LiveGrid(model, TEXT + " first", 4, 0)
    grid.frame(3)
    grid.frame(4)
    grid._work(5)
    assert asked == [(True, True), (True, False), (False, False)]


def test_a_worker_that_dies_is_replaced_and_no_frame_is_lost(model, process_frames):
    worker = process_frames.worker
    first = worker.submit(model, TEXT, 4, 0, {}, [0, 1, 2])
    assert first.result(180).stats.shape == (len(model.classes), len(frames.STATS))
    old = worker.pid
    os.kill(old, signal.SIGKILL)
    grid = live.LiveGrid(model, TEXT + " yes", 4, 0)
    grid.start(0)
    assert grid.wait(180), "frames sent to the dead worker were never made"
    assert worker.pid not in (None, old)          # the next job started a new worker


def test_a_job_of_a_worker_killed_while_it_works_fails_with_worker_gone(model, process_frames):
    worker = process_frames.worker
    worker.submit(model, TEXT, 4, 0, {}, [0]).result(180)       # started and the model loaded
    jobs = [worker.submit(model, TEXT, 64, s, {}, [0]) for s in range(6)]
    os.kill(worker.pid, signal.SIGKILL)
    outcomes = []
    for job in jobs:
        try:
            job.result(60)
            outcomes.append("made")
        except frames.WorkerGone:
            outcomes.append("gone")
    assert "gone" in outcomes


def test_a_model_without_an_origin_is_made_in_the_server(model, process_frames):
    built = zoo.load("softmax")
    del built.origin                     # as a model built in code, not loaded from the zoo
    grid = live.LiveGrid(built, TEXT, 4, 0)
    grid.start(0)
    assert grid.wait(60)


def test_the_worker_exits_when_its_server_is_gone():
    script = (
        "import os, sys\n"
        "from bam_viz import zoo\n"
        "from bam_viz.live import frames\n"
        "m = zoo.load('softmax')\n"
        "w = frames.FrameWorker()\n"
        "w.submit(m, 'fine .', 2, 0, {}, [0]).result(180)\n"
        "print(w.pid, flush=True)\n"
        "os._exit(0)\n"           # no clean-up: as a server that was killed
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=240,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 15
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pid)


def test_the_mode_is_read_from_the_environment(monkeypatch):
    scheduler = scheduling.FrameScheduler()
    monkeypatch.setenv(live.FRAME_WORKER_ENV, "process")
    assert isinstance(scheduler.worker, frames.FrameWorker)
    monkeypatch.setenv(live.FRAME_WORKER_ENV, "threads")
    assert scheduler.worker is not None           # read once
    scheduler.use("threads")
    assert scheduler.worker is None
    other = scheduling.FrameScheduler()
    monkeypatch.setenv(live.FRAME_WORKER_ENV, "gpu")
    with pytest.raises(ValueError, match="one of threads, process, browser, not 'gpu'"):
        _ = other.worker
    monkeypatch.setenv(live.FRAME_WORKER_ENV, "browser")
    browser = scheduling.FrameScheduler()
    assert browser.in_browser and browser.worker is None


@pytest.mark.parametrize("n_classes", [2, 3, 50])
def test_a_frame_holds_every_class_and_row_t_is_the_result_for_target_t(n_classes):
    """`class_stats`: what the page shows for class t, whichever t it is asked for, from one result."""
    from fake_result import make_fake_result

    r = make_fake_result("weibull", S=6, n_classes=n_classes)
    stats = frames.class_stats(r)
    assert stats.shape == (n_classes, len(frames.STATS))
    for t in {0, n_classes - 1, r.predicted}:
        v = r.for_target(t)
        row = dict(zip(frames.STATS, stats[t], strict=True))
        mc, mean = r.sample_probs.double().mean(0), r.mean_attention_probs.double()
        assert row["gap"] == pytest.approx(float(mc[t] - mean[t]), abs=1e-6) == pytest.approx(v.gap, abs=1e-6)
        assert (row["p_se"], row["gap_se"], row["gap_softmax_se"]) == pytest.approx(
            (v.se.p_target, v.se.gap, v.se.gap_softmax), rel=1e-12)
        assert (row["mi"], row["mi_se"], row["expected_entropy"]) == pytest.approx(
            (v.mutual_information, v.se.mutual_information, v.expected_entropy), rel=1e-12)
    one = frames.class_stats(make_fake_result("weibull", S=1, n_classes=n_classes))
    assert np.isnan(one[:, frames.STATS.index("p_se")]).all() and np.isfinite(one[:, 0]).all()


def test_under_load_the_workers_request_frames_are_previews(model, process_frames, one_thread):
    """Six frames requests wait for, sent at once: each taken while others wait or are being made draws
    a preview's samples; each equals the frame made here at the samples it drew. A lone request's
    frame draws every sample."""
    worker = process_frames.worker
    window = list(range(8))
    worker.submit(model, TEXT, 4, 0, {}, [0, 1]).result(180)              # started, the model sent
    assert worker.submit(model, TEXT, 32, 7, {}, window, now=True).result(180).p_samples.shape[0] == 32
    jobs = [worker.submit(model, TEXT, 32, seed, {}, window, now=True) for seed in range(6)]
    got = [job.result(180) for job in jobs]
    drawn = [parts.p_samples.shape[0] for parts in got]
    assert drawn[1:5] == [8, 8, 8, 8] and {drawn[0], drawn[5]} <= {8, 32}, drawn
    for seed, parts in enumerate(got):
        here = frames.make_frame(model, TEXT, drawn[seed], seed, {}, window)
        assert np.array_equal(parts.stats, here.stats, equal_nan=True)
        assert np.array_equal(parts.p_samples, here.p_samples)
