"""A class on one server: twenty browser sessions at once, each with its own sentence and sliders.

    .venv/bin/python bench/load.py [--sessions 20] [--browsers B] [--stagger 10] [--presses 10] [--samples 32]
                                   [--apart] [--json out.json]

On a fresh server (loopback only), in one headless Debian chromium, each session in a browser
context of its own (its own Streamlit session):
  single   one session alone, first: opens the explorer (bam-wc, `--samples` 32), types a sentence of
           its own, then moves `shape_k` with the arrow keys, pauses of 0.2-1.5 s between presses;
           as many presses as the class's pages make in all (`--single-presses`), so that the two
           p95s are the same order statistic;
  load     `--sessions` sessions doing the same at once, `--presses` each, started `--stagger`
           seconds apart in all.
Per session: the page load (to its first charts painted; a failure after 60 s), the new sentence (to
its first charts, and to the page's own first frame of it painted: a lone page's first charts are the
server's frame, a class's page makes its own), each press, and the settle (after the last press, until
the server's footer shows this session's sentence and its last slider value: the values back in Session
State, which the page sends `views.live_route.HYPER_SEND_MS` after the last release). Cross-talk: each
session must end with its own sentence's fingerprint in the footer the server wrote for it, its own
sentence in its URL, and the shape_k it moved to.

A press is timed by two clocks, both to the second animation frame after both chart components
painted the move:
  in the page   from the key event's own timestamp, set when the browser received the key (so a key
                that waits for a busy page counts its wait): what the student sees
                (`browser_latency.PRESS_CLOCK_JS`). The goal, a p95 at most 3 times the single
                user's, is judged on this clock.
  benchmark     from this process sending the key through Playwright to the answer coming back: it
                adds two round trips through Playwright's driver and this process, which on a busy
                machine wait for a core too; reported beside it.
Each press also records what the page was doing (long tasks, payload fetches, frames of the grid
it had; the long animation frames with their scripts are kept in the JSON).

Beside them: the CPU seconds of the server (and per student), chromium and this process while the
class worked, how busy the whole machine was each second (`machine_busy`), the server's memory over the
whole run, counted as bench/soak.py counts it and judged against its bound (`memory`), and each chromium
page's console warnings and errors, with what its charts showed when it stopped answering (`stalled_state`).

With `--lesson ID:STEP` (the lesson case), every session opens that step of a lesson (`/lessons?lesson=ID&step=STEP`,
an explorer step of a model with a posterior slider) as a class does when the teacher shows its QR code,
and types nothing: all of them look at the step's sentence, and press and release as above.

With `--browsers B` (B < sessions), only B sessions are chromium pages (spread evenly through the
stagger) and the others are `protocol_client.Student`s: students whose browsers run on machines of
their own, as in a classroom. A student asks of the server everything the page asks (the page and
its scripts, the runs, the polls, the chart payloads, the new sentence, a release after each of its
`--presses` slider moves) without a browser's CPU on this machine. Their round trips (page to first
charts, new sentence, release to the last byte of the payloads the live route's answer names) are
reported beside one student alone, in the same run, and the releases by when in the class they came
(`releases_by_time`).

With `--apart`, the server runs on half of this machine's cores and the benchmark, its students and the
chromium pages on the other half (`split_cores`): the pages' own frames then take no core of the
server's, as on the laptops of a classroom, and the pages' figures are against a page alone on the same
cores.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_latency import CHROMIUM, CHROMIUM_ARGS, PAINTED_JS, PAUSES_S, PRESS_CLOCK_JS, ROOT, serve, summary  # noqa: E402
from protocol_client import Student  # noqa: E402
from soak import GOAL_PEAK_GB, RssSampler  # noqa: E402

SAMPLES = 32               # the explorer's samples per slider value: a frame's cost grows with it (`--samples`)


def start_path(samples: int = SAMPLES) -> str:
    """The explorer's link every session opens first."""
    return f"/?model=bam-wc&n_samples={samples}&seed=0"


START = start_path()
LESSON: dict = {}          # the lesson case (`--lesson`, `lesson_case`): the step's path, page and sentence
SUBJECTS = ("the actor", "the script", "the director", "the score", "the camera", "the editing", "the cast",
            "the villain", "the ending", "the sequel", "the remake", "the pacing", "the dialogue", "the plot",
            "the heroine", "the costumes", "the soundtrack", "the finale", "the premise", "the humour",
            "the lighting", "the twist", "the setting", "the story")
VERDICTS = ("is a quiet delight", "never quite works", "feels tired and long", "carries the whole film",
            "made me laugh out loud", "is oddly forgettable", "deserves every award", "drags the middle down")
# Waits other than a press's check every POLL_MS: a check on every animation frame ("raf") keeps each
# of twenty pages drawing 60 frames a second, which is the benchmark loading the machine, not the app.
# A press is timed on animation frames, as in bench/browser_latency.py.
POLL_MS = 50
# Why a press was slow, from the page: the main thread's long tasks (over 50 ms, the browser's own
# count), the payload fetches, and the long animation frames (over 100 ms) with the scripts that ran
# in them (Streamlit's React rendering a rerun, this app's component, ...), kept in the JSON.
PAGE_PROBES_JS = """(() => { window.__long = 0; window.__fetches = 0; window.__loaf = [];
  try { new PerformanceObserver(l => { for (const e of l.getEntries()) window.__long += e.duration; })
          .observe({type: 'longtask', buffered: true}); } catch (e) {}
  try { new PerformanceObserver(l => { for (const e of l.getEntries())
          if (e.name.includes('/app/static/live/')) window.__fetches += 1; })
          .observe({type: 'resource', buffered: true}); } catch (e) {}
  try { new PerformanceObserver(l => { for (const e of l.getEntries()) if (e.duration > 100)
          window.__loaf.push({start: Math.round(e.startTime), ms: Math.round(e.duration),
            blocking_ms: Math.round(e.blockingDuration || 0),
            scripts: (e.scripts || []).map(s => ({invoker: s.invoker, url: (s.sourceURL || '').split('/').pop(),
                                                  ms: Math.round(s.duration)}))}); })
          .observe({type: 'long-animation-frame', buffered: true}); } catch (e) {} })();"""
PAGE_STATE_JS = """() => { const r = document.querySelector('.bamviz-root[data-kind=inside]');
  return {ready: Number(r?.dataset.ready ?? -1), total: Number(r?.dataset.total ?? -1),
          long_ms: window.__long || 0, fetches: window.__fetches || 0, now: performance.now()}; }"""
STALLED_JS = """() => ({seq: window.bamviz?.seq,
  focus: document.activeElement?.className || document.activeElement?.tagName,
  roots: [...document.querySelectorAll('.bamviz-root')].map(r => ({...r.dataset}))})"""
CLASS_START = [time.perf_counter()]       # when the class began (reset by run_async): the presses' `at_s`
# The first charts: the summary painted with a frame of its sentence, the server's or (where each page makes
# its own) the page's, its slider's value first (views/live/local.js).
FIRST_CHARTS = ("() => { const r = document.querySelector('.bamviz-root[data-kind=summary]');"
                " return r && r.dataset.painted && r.dataset.painted !== '0' && Number(r.dataset.ready || 0) > 0; }")


OWN_FRAME = ("() => { const v = window.bamviz.views.summary; const l = window.bamviz.local;"
             " return !!(v && v.h && l && v.h.sentence === l.key && l.stats.frames >= 1"
             " && Number(v.root.dataset.local || 0) >= 1); }")


def sentence(j: int) -> str:
    """Session j's own sentence: distinct for every j below len(SUBJECTS) * len(VERDICTS)."""
    subject, verdict = SUBJECTS[j % len(SUBJECTS)], VERDICTS[(j // len(SUBJECTS) + j) % len(VERDICTS)]
    return f"{subject} {verdict}, and by the end {subject} is what i will remember about this one"


def press_key(n: int) -> str:
    """The key of press n (from 1): 25 to the right, then 25 back, and so on, so that any number of
    presses stays inside shape_k's 46 values from its trained 3 (the 15th) and every press moves it."""
    return "ArrowRight" if (n - 1) // BOUNCE % 2 == 0 else "ArrowLeft"


BOUNCE = 25


def tag(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


async def session(browser, base: str, j: int, presses: int, delay: float, timeout_s: float) -> dict:
    """One student: open, type, press; returns what was measured and seen."""
    rng = random.Random(j)
    await asyncio.sleep(delay)
    rec: dict = {"session": j, "text": LESSON.get("text") or sentence(j), "presses_s": []}
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    await page.add_init_script(PRESS_CLOCK_JS)
    await page.add_init_script(PAGE_PROBES_JS)
    # The page's own warnings and errors (a failed payload fetch, a repaint that threw), with the
    # seconds since the class began: what a stalled page was saying.
    console = rec["console"] = []
    page.on("console", lambda m: m.type in ("warning", "error") and len(console) < 50 and console.append(
        f"{time.perf_counter() - CLASS_START[0]:.1f}s {m.type}: {m.text[:300]}"))
    page.on("pageerror", lambda e: len(console) < 50 and console.append(
        f"{time.perf_counter() - CLASS_START[0]:.1f}s pageerror: {str(e)[:300]}"))
    frames = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    try:
        t0 = time.perf_counter()
        await page.goto(base + LESSON.get("path", START), timeout=timeout_s * 1000)
        await page.wait_for_function(FIRST_CHARTS, timeout=timeout_s * 1000, polling=POLL_MS)
        rec["load_s"] = round(time.perf_counter() - t0, 3)
    except Exception as err:                       # a timeout is this benchmark's failure to report
        rec["load_failed"] = f"{type(err).__name__}: {str(err).splitlines()[0]}"
        await context.close()
        return rec
    try:
        if not LESSON:
            old = await page.evaluate("() => document.querySelector('.bamviz-root[data-kind=summary]')?.dataset.id")
            box = page.get_by_label("Sentence (text)")
            await box.fill(rec["text"])
            t0 = time.perf_counter()
            await box.press("Control+Enter")
            await page.wait_for_function(PAINTED_JS, arg=[old, False, False], timeout=timeout_s * 1000,
                                         polling=POLL_MS)
            await page.wait_for_function(FIRST_CHARTS, timeout=timeout_s * 1000, polling=POLL_MS)
            rec["sentence_s"] = round(time.perf_counter() - t0, 3)
            # the page's own first frame of it, painted: where the server drew the first charts (a lone page),
            # later than them; what a page in a class, which gets no frame from the server, waits for
            await page.wait_for_function(OWN_FRAME, timeout=timeout_s * 1000, polling=POLL_MS)
            rec["sentence_own_s"] = round(time.perf_counter() - t0, 3)
        slider = page.get_by_role("slider", name=re.compile(r"^shape_k "))
        await slider.focus()
        rec["presses_page_s"], rec["press_detail"] = [], []
        for n in range(1, presses + 1):
            await page.wait_for_timeout(1000 * rng.uniform(*PAUSES_S))
            before = await page.evaluate(PAGE_STATE_JS)
            t0 = time.perf_counter()
            await page.keyboard.press(press_key(n))
            await page.wait_for_function(PAINTED_JS, arg=[None, False, False], timeout=timeout_s * 1000,
                                         polling="raf")
            await page.evaluate(frames)
            rec["presses_s"].append(round(time.perf_counter() - t0, 4))
            await page.wait_for_function(f"() => window.__press.length >= {n}", timeout=timeout_s * 1000,
                                         polling=POLL_MS)
            in_page = await page.evaluate(f"() => window.__press[{n - 1}]")
            rec["presses_page_s"].append(round(in_page / 1000, 4))
            after = await page.evaluate(PAGE_STATE_JS)
            rec["press_detail"].append({
                "at_s": round(t0 - CLASS_START[0], 2), "page_ms": round(before["now"]),
                "grid_ready": [before["ready"], before["total"]],
                "long_task_ms": round(after["long_ms"] - before["long_ms"], 1),
                "payload_fetches": after["fetches"] - before["fetches"]})
        shown = await slider.get_attribute("aria-valuetext") or await slider.input_value()
        rec["shape_k_shown"] = shown
        rec["long_frames"] = await page.evaluate("() => window.__loaf")
        # Chart views made and parked views taken up again, by kind: a view made twice is a panel
        # that went blank and fetched its payload again.
        rec["views"] = await page.evaluate("() => ({made: window.bamviz.mounts, adopted: window.bamviz.adopted})")
        t0 = time.perf_counter()
        want = f"text {tag(rec['text'])} "
        await page.wait_for_function(
            """([want, k]) => { const m = document.querySelector('.st-key-render_marker');
                 return m && m.innerText.includes(want) && m.innerText.includes('shape_k=' + k); }""",
            arg=[want, _format(shown)], timeout=timeout_s * 1000, polling=POLL_MS)
        rec["settle_s"] = round(time.perf_counter() - t0, 3)
        marker = await page.locator(".st-key-render_marker").inner_text()
        href = await page.evaluate("() => location.href")
        rec["own_text_in_footer"] = want in marker
        rec["own_text_in_url"] = parse_qs(urlparse(href).query).get("text", [""])[0] == rec["text"]
    except Exception as err:
        rec["error"] = f"{type(err).__name__}: {str(err).splitlines()[0]}"
        try:                                       # what the page showed when it stopped answering
            rec["stalled_state"] = await page.evaluate(STALLED_JS)
        except Exception as e:
            rec["stalled_state"] = f"unreadable: {type(e).__name__}"
    finally:
        await context.close()
    return rec


async def student(base: str, j: int, presses: int, delay: float, timeout_s: float) -> dict:
    """One student whose browser is elsewhere (`protocol_client.Student`): the same steps as
    `session`; each press is its release (a press alone never reaches the server), answered by the
    live route, and the values reach the footer once the slider rests."""
    rng = random.Random(j)
    await asyncio.sleep(delay)
    rec: dict = {"session": j, "text": LESSON.get("text") or sentence(j), "releases_s": [], "browser": False}
    s = Student(base)
    try:
        t0 = time.perf_counter()
        path, _, query = LESSON.get("path", START).partition("?")
        await s.start(query, page=path.strip("/"))
        await s.until_charts(timeout_s)
        rec["load_s"], rec["load_timeline"] = round(time.perf_counter() - t0, 3), dict(s.timeline)
    except Exception as err:
        rec["load_failed"] = f"{type(err).__name__}: {str(err).splitlines()[0]}"
        await s.close()
        return rec
    try:
        if not LESSON:
            rec["sentence_s"] = round(await s.type(rec["text"], timeout_s), 3)
            rec["sentence_server_s"] = s.sentence_server_s
        values, current = s.slider_values("shape_k")
        i = values.index(current) if current in values else 0
        for _ in range(presses):
            await asyncio.sleep(rng.uniform(*PAUSES_S))
            i = min(i + 1, len(values) - 1)
            took = await s.release("shape_k", values[i], timeout_s)     # None: its page asks the server nothing
            if took is not None:
                rec["releases_s"].append(round(took, 4))
        if presses:
            t0 = time.perf_counter()
            await s.settle("shape_k", values[i], timeout_s)      # the values sent once the slider rests
            rec["settle_s"] = round(time.perf_counter() - t0, 3)
        rec.update(s.own(rec["text"]))
        rec["grid_ready"], rec["polls"], rec["bytes_in"] = list(s.grid()), s.polls, s.bytes_in
        rec["model_bytes"] = s.model_bytes
        rec["releases_at_s"] = [round(r["at"] - CLASS_START[0], 3) for r in s.release_log]
    except Exception as err:
        rec["error"] = f"{type(err).__name__}: {str(err).splitlines()[0]}"
    finally:
        await s.close()
    return rec


def cpu_seconds(pid: int | None = None, comm: str | None = None) -> float:
    """CPU seconds (user + system) used so far by process `pid`, or by every process whose name
    contains `comm` (chromium's many processes)."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid] if pid is not None else [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    total = 0.0
    for p in pids:
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            if comm is not None and comm not in name:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError):
            continue
    return total


BUSY: list[float] = []            # the machine's busy cores, each second of the class (`machine_busy`)


async def machine_busy() -> None:
    """Every second until cancelled: how many of the machine's cores were busy (/proc/stat), in BUSY."""
    def ticks():
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(v), v[3] + v[4]                                  # all, idle + iowait
    BUSY.clear()
    cores = os.cpu_count() or 1
    prev = ticks()
    while True:
        await asyncio.sleep(1.0)
        now = ticks()
        total = now[0] - prev[0]
        if total > 0:
            BUSY.append(round(cores * (1 - (now[1] - prev[1]) / total), 2))
        prev = now


def busy_summary(busy: list[float]) -> dict:
    """The class's seconds by how busy the machine was: the median and 90th percentile of busy cores,
    and the share of seconds with at least 95% of every core busy."""
    if not busy:
        return {}
    cores, ranked = os.cpu_count() or 1, sorted(busy)
    return {"cores": cores, "seconds": len(busy), "median": ranked[len(ranked) // 2],
            "p90": ranked[min(len(ranked) - 1, int(0.9 * len(ranked)))],
            "saturated_share": round(sum(b >= 0.95 * cores for b in busy) / len(busy), 2)}


def memory_summary(samples: list[tuple]) -> dict:
    """The server's memory over the whole run (warm-up, single user and class): its peak, its last
    sample, and whether the peak is under bench/soak.py's bound (GOAL_PEAK_GB)."""
    if not samples:
        return {}
    peak = max(r for _, _, r in samples)
    return {"peak_mb": round(peak, 1), "at_end_mb": samples[-1][2], "samples": len(samples),
            "under_bound": bool(peak <= GOAL_PEAK_GB * 1024)}


def _format(shown: str) -> str:
    """The footer's format of a slider value (`views.state.format_value`: 3 significant digits)."""
    try:
        return f"{float(shown):.3g}"
    except ValueError:
        return shown


def lesson_case(spec: str) -> dict:
    """`--lesson ID:STEP`: the step's address and sentence, read by the app's own lesson reader."""
    from views.lesson_files import load_lessons

    lesson_id, _, step = spec.partition(":")
    lessons = {lesson.id: lesson for lesson in load_lessons()[0]}
    if lesson_id not in lessons or not step.isdigit() or not 1 <= int(step) <= len(lessons[lesson_id].steps):
        raise SystemExit(f"--lesson {spec}: no such lesson step (lessons: {', '.join(lessons)})")
    view = lessons[lesson_id].steps[int(step) - 1].view
    if view.page != "explorer" or "text" not in view.params:
        raise SystemExit(f"--lesson {spec}: the step's view is not an explorer sentence")
    return {"path": f"/lessons?lesson={lesson_id}&step={step}", "page": "lessons", "text": view.params["text"]}


def browser_slots(sessions: int, browsers: int) -> set[int]:
    """Which of the sessions are chromium pages: `browsers` of them, spread evenly through the stagger."""
    browsers = max(0, min(browsers, sessions))
    return {round(i * sessions / browsers) for i in range(browsers)} if browsers else set()


def split_cores(server_pid: int) -> dict | None:
    """`--apart`: the server (every thread of it) on the first half of this machine's cores, this process and
    what it starts from now on (chromium, Playwright's driver, the students' connections) on the other half,
    so that the pages' frames take no core of the server's, as on the laptops of a classroom. None, and
    nothing moved, on a machine of one core."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    server, rest = set(cores[: len(cores) // 2]), set(cores[len(cores) // 2 :])
    for task in os.listdir(f"/proc/{server_pid}/task"):
        os.sched_setaffinity(int(task), server)
    os.sched_setaffinity(0, rest)            # this thread, and what it starts
    return {"server": sorted(server), "benchmark_and_pages": sorted(rest)}


async def run_async(sessions: int, stagger: float, presses: int, timeout_s: float, log: Path | None,
                    browsers: int | None = None, single_presses: int | None = None, apart: bool = False) -> dict:
    from playwright.async_api import async_playwright

    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(f"{CHROMIUM} not found: install Debian's chromium (make chromium)")
    browsers = sessions if browsers is None else browsers
    in_browser = browser_slots(sessions, browsers)
    out: dict = {"sessions": sessions, "browsers": len(in_browser), "stagger_s": stagger, "presses": presses,
                 "lesson": LESSON.get("path"),
                 "load_1min": os.getloadavg()[0]}
    proc: list = []
    with serve(ROOT / "app.py", log=log, process=proc) as base:
        memory = RssSampler(proc[0].pid)      # the server's pages, as bench/soak.py counts them
        memory.start()
        out["cores"] = split_cores(proc[0].pid) if apart else None
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            await session(browser, base, 10_000, 2, 0.0, timeout_s)          # warm-up: model, first compile
            # As many presses alone as the class's pages make in all, so that both p95s are the same
            # order statistic (the 4th slowest of 80 with 4 pages of 20), not the slowest of 20 against
            # the 4th of 80.
            single = await session(browser, base, 9_999, single_presses or presses * max(len(in_browser), 1),
                                   0.0, timeout_s)
            alone = await student(base, 9_998, presses, 0.0, timeout_s) if len(in_browser) < sessions else None
            t0 = CLASS_START[0] = time.perf_counter()
            cpu0 = (cpu_seconds(proc[0].pid), cpu_seconds(comm="chrom"), 0.0,
                    cpu_seconds(os.getpid()), cpu_seconds(comm="node"))
            busy = asyncio.create_task(machine_busy())
            crowd = await asyncio.gather(*[
                (session(browser, base, j, presses, delay, timeout_s) if j in in_browser
                 else student(base, j, presses, delay, timeout_s))
                for j, delay in ((j, j * stagger / max(sessions - 1, 1)) for j in range(sessions))])
            out["load_seconds"] = round(time.perf_counter() - t0, 1)
            busy.cancel()
            out["machine_busy"] = busy_summary(BUSY)
            # Where the machine's time went while the class worked: the server, and every chromium process
            out["cpu_seconds"] = {"server": round(cpu_seconds(proc[0].pid) - cpu0[0], 1),
                                  "chromium": round(cpu_seconds(comm="chrom") - cpu0[1], 1),
                                  "benchmark": round(cpu_seconds(os.getpid()) - cpu0[3], 1),
                                  "playwright_driver": round(cpu_seconds(comm="node") - cpu0[4], 1),
                                  "available": round(out["load_seconds"] * (os.cpu_count() or 1), 1)}
            out["server_cpu_s_per_student"] = round(out["cpu_seconds"]["server"] / max(sessions, 1), 3)
            await browser.close()
        memory.stop()
        out["memory"] = memory_summary(memory.samples)
    out["single"] = _report([single])
    out["load"] = _report(crowd)
    if alone is not None:
        out["student_single"] = _report([alone])
        out["students"] = _report([r for r in crowd if r["session"] not in in_browser])
        if out["student_single"]["releases"] and out["students"]["releases"]:
            out["release_p95_ratio"] = round(out["students"]["releases"]["p95_s"]
                                             / out["student_single"]["releases"]["p95_s"], 2)
    if out["single"]["presses"] and out["load"]["presses"]:
        out["p95_ratio"] = round(out["load"]["presses"]["p95_s"] / out["single"]["presses"]["p95_s"], 2)
        out["median_ratio"] = round(out["load"]["presses"]["median_s"] / out["single"]["presses"]["median_s"], 2)
    if out["single"]["presses_in_page"] and out["load"]["presses_in_page"]:
        out["p95_ratio_in_page"] = round(out["load"]["presses_in_page"]["p95_s"]
                                         / out["single"]["presses_in_page"]["p95_s"], 2)
    out["sessions_detail"] = [single, *([alone] if alone else []), *crowd]
    return out


def _report(recs: list[dict]) -> dict:
    def stats(key):
        values = [r[key] for r in recs if r.get(key) is not None]
        return {"median_s": round(statistics.median(values), 3), "p95_s": round(summary(values)["p95_s"], 3),
                "max_s": round(max(values), 3), "n": len(values)} if values else None

    presses = [t for r in recs for t in r.get("presses_s", [])]
    in_page = [t for r in recs for t in r.get("presses_page_s", [])]
    releases = [t for r in recs for t in r.get("releases_s", [])]
    return {
        "load": stats("load_s"), "sentence": stats("sentence_s"), "sentence_own_frame": stats("sentence_own_s"),
        "sentence_server": stats("sentence_server_s"),
        "settle": stats("settle_s"),
        "presses": {k: v for k, v in summary(presses).items() if k != "times_s"} if presses else None,
        "presses_in_page": {k: v for k, v in summary(in_page).items() if k != "times_s"} if in_page else None,
        "releases": {k: v for k, v in summary(releases).items() if k != "times_s"} if releases else None,
        "releases_by_time": releases_by_time(recs),
        "load_failures": [r["session"] for r in recs if "load_failed" in r],
        "errors": {r["session"]: r["error"] for r in recs if "error" in r},
        "cross_talk": [r["session"] for r in recs if "load_failed" not in r and "error" not in r
                       and not (r.get("own_text_in_footer") and r.get("own_text_in_url"))],
    }


def releases_by_time(recs: list[dict], edges: tuple[float, ...] = (0.0, 16.0, 32.0)) -> list[dict] | None:
    """The students' releases by when in the class they were sent (from the first session's start):
    how many, and their round trip (median, p95): where the release p95 comes from, by how full the
    machine was."""
    rows = [(at, s) for r in recs for at, s in zip(r.get("releases_at_s", []), r.get("releases_s", []), strict=True)]
    out = []
    for lo, hi in zip(edges, (*edges[1:], float("inf")), strict=True):
        part = [s for at, s in rows if lo <= at < hi]
        if part:
            out.append({"from_s": lo, "n": len(part), "median_s": round(statistics.median(part), 3),
                        "p95_s": round(summary(part)["p95_s"], 3)})
    return out or None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--stagger", type=float, default=10.0, help="seconds over which the sessions start")
    ap.add_argument("--presses", type=int, default=10)
    ap.add_argument("--browsers", type=int, default=None,
                    help="how many sessions are chromium pages (default: all); the rest are protocol students")
    ap.add_argument("--single-presses", type=int, default=None,
                    help="presses of the single user (default: --presses times the number of pages)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a wait counts as failed")
    ap.add_argument("--log", type=Path, default=None, help="the server's output")
    ap.add_argument("--lesson", default=None, help="ID:STEP: every session opens this lesson step (the lesson case)")
    ap.add_argument("--samples", type=int, default=SAMPLES,
                    help="samples per slider value (32): what the class costs if a frame costs less")
    ap.add_argument("--apart", action="store_true",
                    help="the server on half the cores, the pages and the benchmark on the other half")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    global START
    START = start_path(args.samples)
    if args.lesson:
        LESSON.update(lesson_case(args.lesson))
    result = asyncio.run(run_async(args.sessions, args.stagger, args.presses, args.timeout, args.log,
                                    args.browsers, args.single_presses, args.apart))
    result["samples"] = args.samples
    print(json.dumps({k: v for k, v in result.items() if k != "sessions_detail"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
