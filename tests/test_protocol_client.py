"""bench/protocol_client.py against the real app: the load benchmark's students (browsers on other
machines) must make the server do what a page does, and see only their own sentence."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import browser_latency as bl
import pytest
from protocol_client import Student, tag

ROOT = Path(__file__).resolve().parents[1]

TEXTS = ("the script is a quiet delight from start to end", "the ending drags the middle down and never recovers")


async def _student(base: str, text: str) -> dict:
    s = Student(base)
    try:
        await s.start("model=bam-wc&n_samples=8&seed=0")
        await s.until_charts(120)
        first = set(s.fetched)
        await s.type(text, 120)
        values, current = s.slider_values("shape_k")
        i = values.index(current)
        moved = []
        for step in (1, 2):          # answered by the live route (its charts at the value), or not asked
            took = await s.release("shape_k", values[i + step], 60)
            moved.append(None if took is None else s.summary["captions_at"][0] == i + step)
        await s.settle("shape_k", values[i + 2], 60)      # then the values reach the server's footer
        await s._until(lambda: s.summary["captions_at"][0] == i + 2, 60)      # and its captions, for them
        for _ in range(600):                              # the grid's polling, until the server stops it
            if s.grid()[0] == s.grid()[1] and not s.polling:
                break
            await asyncio.sleep(0.1)
        return {"own": s.own(text), "moved": moved, "grid": s.grid(), "polling": s.polling,
                "polls": s.polls, "new_payloads": len(s.fetched - first), "tag": tag(text), "marker": s.marker,
                "model_bytes": s.model_bytes, "captions": s.summary.get("captions"), "frames_sent": s.frames_sent}
    finally:
        await s.close()


@pytest.mark.parametrize("frames", ["browser", "server"])
def test_students_drive_the_app_and_see_only_their_own_sentence(frames, monkeypatch):
    """Where each page makes its frames (the app's mode), a student fetches the runtime and the model's
    graph once, is sent no frame but one the server made while no other explorer ran, asks no route and
    never polls, and its captions come from the frames it sends (with the values its slider rests at);
    where the server makes them, its releases go to the route and it polls until every frame is made."""
    async def both(base):
        return await asyncio.gather(*[_student(base, t) for t in TEXTS])

    monkeypatch.setenv("BAM_VIZ_FRAMES", frames)
    with bl.serve(ROOT / "app.py") as base:
        results = asyncio.run(both(base))
    for r in results:
        assert r["own"] == {"own_text_in_footer": True, "own_text_in_url": True}, r["marker"]
        # each release answered at its own value, or, where the page makes its frames, not sent
        assert r["moved"] == ([None, None] if frames == "browser" else [True, True])
        ready, total = r["grid"]
        assert total > 1 and not r["polling"] and r["new_payloads"] >= 1     # the new sentence's charts fetched
        if frames == "browser":
            # at most the frame of a sentence shown while no other explorer ran; the rest's frame is the page's
            assert ready <= 1 and r["polls"] == 0 and r["model_bytes"] > 20e6 and r["frames_sent"] >= 1
            assert r["captions"] and r["captions"]["prediction"]
        else:
            assert ready == total and r["polls"] >= 1 and r["model_bytes"] == 0   # polled until every frame
    assert results[0]["tag"] != results[1]["tag"]


def test_browser_slots_spread_the_real_browsers():
    import load

    assert load.browser_slots(20, 4) == {0, 5, 10, 15}
    assert load.browser_slots(20, 20) == set(range(20)) and load.browser_slots(20, 0) == set()
    assert load.browser_slots(3, 9) == {0, 1, 2}


def test_the_load_benchmark_presses_stay_on_the_slider_and_compare_like_with_like():
    """Any number of presses bounces inside shape_k's 46 values from its trained 3 (the 15th), so every
    press moves the slider; and the report gives both press clocks, each p95 over the presses made."""
    import load

    index = 14
    for n in range(1, 201):
        index += 1 if load.press_key(n) == "ArrowRight" else -1
        assert 0 <= index <= 45
    single = {"session": 9_999, "presses_s": [0.05] * 19 + [0.2], "presses_page_s": [0.03] * 19 + [0.1]}
    r = load._report([single])
    assert r["presses"]["n"] == 20 and r["presses_in_page"]["n"] == 20
    assert r["presses_in_page"]["median_s"] == 0.03 and r["presses"]["median_s"] == 0.05


def test_a_student_opens_a_lesson_step_and_sees_its_sentence():
    """The load benchmark's lesson case (`bench/load.py --lesson`): a student who opens a lesson step's
    link is shown the step's sentence, in the explorer embedded under the lesson."""
    import load

    case = load.lesson_case("attention-random-variable:1")

    async def one(base):
        s = Student(base)
        try:
            path, _, query = case["path"].partition("?")
            await s.start(query, page=path.strip("/"))
            await s.until_charts(120)
            return s.marker, s.own(case["text"]), s.slider_values("shape_k")
        finally:
            await s.close()

    with bl.serve(ROOT / "app.py") as base:
        marker, own, (values, current) = asyncio.run(one(base))
    assert f"text {tag(case['text'])} " in marker and own["own_text_in_footer"], marker
    assert current in values


def test_a_student_reads_payload_headers_when_run_as_the_benchmark_is():
    """`python bench/load.py` puts bench/ alone on the path: the student's reader parses each summary's
    header with bam_viz's own reader, so protocol_client must find bam_viz itself (before it did, every
    student's reader died on that import and the class timed out with empty footers)."""
    code = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
            f"sys.path.insert(0, {str(ROOT / 'bench')!r}); import protocol_client; "
            "from bam_viz.live.wire import header_of; print(header_of.__module__)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "bam_viz.live.wire"


def test_a_reader_that_died_is_said_not_timed_out():
    """A student whose websocket reader failed raises that failure at its next wait, at once."""

    async def go():
        s = Student("http://127.0.0.1:9")

        async def broken():
            raise ValueError("a message it could not read")

        s._tasks = [asyncio.create_task(broken())]
        await asyncio.sleep(0)
        try:
            await s._until(lambda: False, timeout=30)
        finally:
            s._pool.shutdown(wait=False)

    with pytest.raises(RuntimeError, match="could not read"):
        asyncio.run(go())


def test_apart_puts_the_server_and_the_benchmark_on_cores_of_their_own():
    """`load.py --apart`: every thread of the server on the first half of the cores, the benchmark (and what
    it starts) on the rest; on one core nothing moves. In a child process: this one's cores stay."""
    code = ("import os, subprocess, load; p = subprocess.Popen(['sleep', '30']); c = load.split_cores(p.pid); "
            "print(c, sorted(os.sched_getaffinity(p.pid)), sorted(os.sched_getaffinity(0))); p.kill()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "bench")}).stdout.strip()
    cores = sorted(os.sched_getaffinity(0))
    half = len(cores) // 2
    if len(cores) < 2:
        assert out == f"None {cores} {cores}"
    else:
        want = {"server": cores[:half], "benchmark_and_pages": cores[half:]}
        assert out == f"{want} {cores[:half]} {cores[half:]}"
