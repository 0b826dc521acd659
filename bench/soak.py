"""Memory soak of the explorer: does the server's RSS stay bounded and come back when idle?

    .venv/bin/python bench/soak.py [--urls 30] [--moves 200] [--sessions 4] [--idle 60] [--json out.json]

On a fresh server (loopback only), in headless Debian chromium:
  1. `--urls` distinct long URLs, each in a new browser session: sentences of ~128 tokens (the models'
     maximum) at 64 samples (the explorer's maximum), cycling through every model of the zoo, each
     opened until its first charts are painted, then closed;
  2. `--moves` slider presses spread over `--sessions` open sessions (round robin, pauses of 0.2-1.5 s
     drawn with a fixed seed), each on a long sentence of its own: every release reruns the server (a
     page whose slider goes away is reported, `pages_lost`, with its console and what it showed);
  3. `--idle` seconds with no page open.
The server's RSS (/proc/PID/status VmRSS), plus any child process's private pages, is sampled every
0.5 s throughout. Reported: the RSS after the first page (the whole zoo is loaded only as the URLs reach
each model), the plateau (the median of the last 20 s of step 2), the peak, and the RSS after the
idle (the median of its last 5 s), with `after_idle / plateau`; the goal is a peak under 2.5 GiB and
an after-idle no more than 10% above the plateau (memory that stays up after the load is what leaks;
below the plateau is memory given back).
Bounded in time (`--max-seconds`, default 1500): a phase that runs out stops and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_latency import ROOT, launch_chromium, painted, serve  # noqa: E402

WORDS = ("the film is a slow tender and often funny portrait of a family that never quite knows what it wants "
         "but the acting is superb the score is lovely and the final scene left half the audience in tears "
         "while others walked out bored by the long silences and the plot that goes nowhere at all").split()
MODELS = ("bam-wc", "bam-lc", "dirichlet", "categorical", "mc-dropout", "softmax")
SLIDER = {"bam-wc": "shape_k", "bam-lc": "sigma", "dirichlet": "concentration"}
GOAL_PEAK_GB, GOAL_RATIO = 2.5, 0.10


def long_sentence(i: int, words: int = 140) -> str:
    """A distinct sentence of about `words` words (over 128 word pieces: the models truncate)."""
    rng = random.Random(i)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def url_for(base: str, i: int, model: str) -> str:
    return f"{base}/?model={model}&n_samples=64&seed={i}&text={quote(long_sentence(i))}"


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, from /proc/PID/task/*/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def status_kb(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def private_kb(pid: int) -> int:
    """The pages only `pid` holds (Private_Clean + Private_Dirty): what a child adds to its parent."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    return sum(int(fields[k].split()[0]) for k in ("Private_Clean", "Private_Dirty"))


class RssSampler(threading.Thread):
    """Samples the server's memory every `every` seconds, with a phase label: its resident set size
    plus what any child process holds privately (a child maps the server's libraries: summing its RSS
    would count those pages twice)."""

    def __init__(self, pid: int, every: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.every, self.phase, self.samples = pid, every, "start", []
        self.t0, self._halt = time.monotonic(), threading.Event()

    def rss_mb(self) -> float:
        total = status_kb(self.pid)            # raises when the server is gone: the sampler stops
        for child in descendants(self.pid)[1:]:
            try:
                total += private_kb(child)
            except OSError:                    # a worker that just ended
                pass
        return total / 1024

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.samples.append((round(time.monotonic() - self.t0, 2), self.phase, round(self.rss_mb(), 1)))
            except OSError:
                return
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def window(self, phase: str, last_s: float) -> list[float]:
        rows = [(t, r) for t, p, r in self.samples if p == phase]
        if not rows:
            return []
        end = rows[-1][0]
        return [r for t, r in rows if t >= end - last_s]


# What a page whose slider went away shows: its footer, whether a connection error is up, its panels.
LOST_JS = """() => ({footer: document.querySelector('.st-key-render_marker')?.innerText,
  text: document.body.innerText.slice(0, 300), sliders: document.querySelectorAll('[role=slider]').length,
  roots: [...document.querySelectorAll('.bamviz-root')].map(r => ({...r.dataset}))})"""


def first_paint(page, url: str, timeout_ms: float) -> float:
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function("() => { const r = document.querySelector('.bamviz-root[data-kind=summary]');"
                           " return r && r.dataset.painted && r.dataset.painted !== '0'; }",
                           timeout=timeout_ms, polling="raf")
    return time.perf_counter() - t0


def soak(urls: int = 30, moves: int = 200, sessions: int = 4, idle: float = 60.0, max_seconds: float = 1500.0,
         log: Path | None = None) -> dict:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    left = lambda: max_seconds - (time.monotonic() - started)          # noqa: E731
    out: dict = {"urls": urls, "moves": moves, "sessions": sessions, "idle_s": idle, "stopped_early": [],
                 "cache_mb": os.environ.get("BAM_VIZ_CACHE_MB", "default"),
                 "work_mb": os.environ.get("BAM_VIZ_WORK_MB", "default")}
    proc: list = []
    with serve(ROOT / "app.py", log=log, process=proc) as base, sync_playwright() as pw:
        sampler = RssSampler(proc[0].pid)
        sampler.start()
        browser = launch_chromium(pw)
        sampler.phase = "urls"
        loads = []
        for i in range(urls):
            if left() < idle + 60:
                out["stopped_early"].append(f"urls after {i}")
                break
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            loads.append(first_paint(page, url_for(base, i, MODELS[i % len(MODELS)]), 1000 * min(left(), 300)))
            context.close()
            if i == 0:
                out["rss_after_first_page_mb"] = sampler.rss_mb()
        out["url_first_paint_s"] = {"median": round(statistics.median(loads), 2), "max": round(max(loads), 2),
                                    "n": len(loads), "each": [round(t, 2) for t in loads]} if loads else None

        sampler.phase = "moves"
        rng = random.Random(0)
        pages, consoles = [], []
        for j in range(sessions):
            model = ("bam-wc", "bam-lc", "dirichlet")[j % 3]
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            consoles.append(console := [])
            page.on("console", lambda m, c=console: m.type in ("warning", "error") and len(c) < 50 and c.append(
                f"{m.type}: {m.text[:300]}"))
            page.on("pageerror", lambda e, c=console: len(c) < 50 and c.append(f"pageerror: {str(e)[:300]}"))
            first_paint(page, url_for(base, 1000 + j, model), 300_000)
            slider = page.get_by_role("slider", name=re.compile(f"^{SLIDER[model]} "))
            pages.append((context, page, slider))
        done, unpainted, direction = 0, 0, ["ArrowRight"] * sessions
        lost: dict[int, dict] = {}                  # pages whose slider went away: what they showed and said
        for k in range(moves):
            if left() < idle + 30:
                out["stopped_early"].append(f"moves after {k}")
                break
            if k % sessions in lost:
                continue
            _, page, slider = pages[k % sessions]
            page.bring_to_front()                   # a page in the background gets no animation frames
            page.wait_for_timeout(1000 * rng.uniform(0.2, 1.5))
            try:
                slider.focus()
            except PlaywrightTimeout:
                lost[k % sessions] = {"move": k, "console": consoles[k % sessions],
                                      "state": page.evaluate(LOST_JS)}
                continue
            key = direction[k % sessions]
            if rng.random() < 0.15:                 # now and then turn round, as a person exploring does
                direction[k % sessions] = key = "ArrowLeft" if key == "ArrowRight" else "ArrowRight"
            page.keyboard.press(key)
            try:
                painted(page, timeout_ms=10_000)
            except PlaywrightTimeout:               # memory is measured here, not latency: count and go on
                unpainted += 1
            done += 1
        out["moves_done"], out["moves_not_painted_in_10s"] = done, unpainted
        out["pages_lost"] = [{"session": j, **v} for j, v in lost.items()]
        page.wait_for_timeout(5000)                 # the last releases reach the server
        for context, _, _ in pages:
            context.close()
        browser.close()

        sampler.phase = "idle"
        time.sleep(idle)
        sampler.stop()
        plateau = sampler.window("moves", 20)
        after = sampler.window("idle", 5)
        peak = max(r for _, _, r in sampler.samples)
        out.update({
            "plateau_mb": round(statistics.median(plateau), 1) if plateau else None,
            "peak_mb": round(peak, 1),
            "after_idle_mb": round(statistics.median(after), 1) if after else None,
            "seconds": round(time.monotonic() - started, 1),
        })
        if plateau and after:
            out["after_idle_over_plateau"] = round(out["after_idle_mb"] / out["plateau_mb"], 3)
            ratio = out["after_idle_over_plateau"]
            out["meets_goal"] = bool(peak <= GOAL_PEAK_GB * 1024 and ratio <= 1 + GOAL_RATIO)
        out["rss_timeline"] = sampler.samples[::4]             # every 2 s
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--urls", type=int, default=30)
    ap.add_argument("--moves", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--max-seconds", type=float, default=1500.0)
    ap.add_argument("--log", type=Path, default=None, help="the server's output")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    result = soak(args.urls, args.moves, args.sessions, args.idle, args.max_seconds, args.log)
    brief = {k: v for k, v in result.items() if k != "rss_timeline"}
    print(json.dumps(brief, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
