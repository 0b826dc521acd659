"""Browser latency of the explorer, in headless Debian chromium, against a trivial Streamlit page.

    .venv/bin/python bench/browser_latency.py [--presses 20] [--runs 3] [--json out.json]

The explorer's sliders and charts live in the browser (views/components.py): a press repaints
canvases from data sent once per sentence. Measured, in one run per `--runs`, interleaved:

  slider press   ArrowRight on the `shape_k` slider (bam-wc, a 24-token sentence, 32 samples), from
                 the keypress to every chart component having painted the new value on screen
                 (each component writes the press's sequence number `window.bamviz.seq` into its
                 root's `data-seq` after painting; charts scrolled out of view follow 0.25 s
                 later), then two animation frames. The page is at its top, 1400 x 1000. The
                 pauses between presses are drawn uniformly from 0.2 to 1.5 s (seeded), as a
                 person's would be: each press is a release that sends the values to the server
                 0.4 s later (URL, captions), and that round trip lands during some later presses,
                 whose time then includes what it costs the page.
  trivial press  bench/trivial_app.py (one slider, one line of text): from the keypress to its
                 footer reading the next run ("view N+1"), Streamlit idle, two animation frames;
                 the same pauses.
  new visitor    a new page on the running server (model loaded), the default sentence already
                 computed: from `goto` to the first charts painted, and to every chart painted.
  new sentence   on an open page, a sentence never seen submitted: to the first charts painted with
                 it, and to the whole slider grid (every frame) drawn.
  fresh server   a server just started (health check passed), a new page: to the first charts.

Medians and p95 per run, the machine's load average beside each run.

The helpers here (free port, serving an app, launching chromium) are shared with
tests/test_browser.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# 22 words + [CLS] + [SEP] = 24 word pieces for the MiniLM tokenizer.
SENTENCE_24 = ("the acting is superb and the music is lovely but the plot drags and the ending "
               "feels rushed and far too long")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(app: Path, log: Path | None = None, timeout: float = 120.0, process: list | None = None):
    """`streamlit run app` on a free port; yields the URL and stops the server on exit. `process`,
    when given, receives the server's `Popen` (its pid is the server's)."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.port", str(port),
           "--server.fileWatcherType", "none"]
    out = open(log, "w") if log else subprocess.DEVNULL  # closed in the finally below
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    if process is not None:
        process.append(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit did not come up on {url} in {timeout}s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log:
            out.close()


def launch_chromium(playwright):
    """Debian's chromium through Playwright; fails loudly when it is missing (never downloads one)."""
    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(f"{CHROMIUM} not found: install Debian's chromium (make chromium)")
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


@contextlib.contextmanager
def explorer_session(log: Path | None = None):
    """A fresh server (`serve`) and one chromium page on its explorer, its charts painted: the page
    (the browser tests)."""
    from playwright.sync_api import sync_playwright

    with serve(ROOT / "app.py", log=log) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            painted(page)
            yield page
        finally:
            browser.close()


def marker_view(page) -> int:
    """N from the footer "view N · …" (0 before the first run has finished)."""
    loc = page.locator(".st-key-render_marker")
    if loc.count() == 0:
        return 0
    text = loc.first.inner_text().strip()
    return int(text.split()[1]) if text.startswith("view ") else 0


def wait_for_view(page, n: int, timeout_ms: float = 120_000) -> None:
    """Until the footer reads "view n" or later, nothing is running, and plotly has painted."""
    page.wait_for_function(
        """n => {
            const m = document.querySelector('.st-key-render_marker');
            if (!m) return false;
            const t = m.innerText.trim();
            if (!t.startsWith('view ') || parseInt(t.split(' ')[1]) < n) return false;
            return !document.querySelector('[data-testid="stStatusWidget"]');
        }""", arg=n, timeout=timeout_ms, polling="raf")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def timed_presses(page, slider_name: str, presses: int, pause_ms: float | list[float], arm) -> list[float]:
    """Seconds from each ArrowRight on a slider until the page is updated; `pause_ms` before each
    press (one value, or one per press). `arm()`, called before each press, returns the wait for
    its update (it may read the page's state first)."""
    slider = page.get_by_role("slider", name=slider_name)
    slider.focus()
    waits = pause_ms if isinstance(pause_ms, list) else [pause_ms] * presses
    times = []
    for wait in waits[:presses]:
        page.wait_for_timeout(wait)
        done = arm()
        t0 = time.perf_counter()
        page.keyboard.press("ArrowRight")            # always a new value: never a cached result
        done()
        times.append(time.perf_counter() - t0)
    return times


def measure(page, slider_name: str, presses: int, pause_ms: float | list[float] = 150) -> list[float]:
    """A server-side slider (the trivial page): each press until the page's next view."""
    def arm():
        before = marker_view(page)
        return lambda: wait_for_view(page, before + 1)

    return timed_presses(page, slider_name, presses, pause_ms, arm)


EXPLORER_QUERY = f"?model=bam-wc&n_samples=32&seed=0&text={quote(SENTENCE_24)}"


# True when both chart components have painted the sliders' latest value (see `painted`).
# The page's own clock for a press: from the key event's timestamp (set when the browser received the
# key, so it counts the time the event waited for a busy page) to the second animation frame after
# both chart components painted the move. A script injected before the page loads
# (`page.add_init_script`); `window.__press` holds one duration (ms) per ArrowRight or ArrowLeft. Unlike a
# benchmark's clock, it leaves out the round trips through Playwright's driver to the benchmark
# process, which on a busy machine wait for a core as well.
PRESS_CLOCK_JS = """(() => {
  window.__press = [];
  window.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
    const t0 = e.timeStamp;
    const check = () => {
      const roots = [...document.querySelectorAll('.bamviz-root[data-kind=summary], .bamviz-root[data-kind=inside]')];
      const seq = String((window.bamviz && window.bamviz.seq) || 0);
      const done = roots.length >= 2 && roots.every((r) => r.dataset.painted && r.dataset.painted !== '0'
                                                           && (r.dataset.seq || '0') === seq);
      if (done) requestAnimationFrame(() => requestAnimationFrame(() => window.__press.push(performance.now() - t0)));
      else requestAnimationFrame(check);
    };
    requestAnimationFrame(check);
  }, true);
})();"""

PAINTED_JS = """([old, complete, settled]) => {
            const roots = [...document.querySelectorAll('.bamviz-root[data-kind=summary], '
                                                        + '.bamviz-root[data-kind=inside]')];
            if (roots.length < 2 || !window.bamviz) return false;
            const seq = String(window.bamviz.seq || 0);
            for (const r of roots) {
                if (!r.dataset.painted || r.dataset.painted === '0' || (r.dataset.seq || '0') !== seq) return false;
                if (old !== null && r.dataset.kind === 'summary' && r.dataset.id === old) return false;
                if (complete && r.dataset.ready !== r.dataset.total) return false;
                if (settled && (r.dataset.dirty || '0') !== '0') return false;
            }
            return true;
        }"""


def painted(page, text_id: str | None = None, complete: bool = False, settled: bool = False,
            timeout_ms: float = 120_000) -> None:
    """Until both chart components have painted the sliders' latest value on screen (and, with
    `text_id`, a payload whose id differs from it; with `complete`, every frame of the grid; with
    `settled`, the charts off screen too, which follow a quarter of a second later), then two frames."""
    page.wait_for_function(PAINTED_JS, arg=[text_id, complete, settled], timeout=timeout_ms, polling="raf")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def summary_id(page) -> str | None:
    return page.evaluate("() => document.querySelector('.bamviz-root[data-kind=summary]')?.dataset.id ?? null")


PAUSES_S = (0.2, 1.5)          # a pause between presses, drawn uniformly from this range


def pauses(n: int, seed: int = 0) -> list[float]:
    """The pauses (ms) before each of n presses: the same for every page in a run."""
    import random

    rng = random.Random(seed)
    return [1000 * rng.uniform(*PAUSES_S) for _ in range(n)]


def press_live(page, slider_name: str, presses: int, pause_ms: float | list[float] = 500) -> list[float]:
    """A live slider (the explorer): each press until both chart components have painted it."""
    return timed_presses(page, slider_name, presses, pause_ms, lambda: lambda: painted(page))


def summary(times: list[float]) -> dict:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_s": statistics.median(times), "p95_s": p95, "n": len(times),
            "times_s": [round(t, 4) for t in times]}


def measure_app(browser, app: Path, slider: str, presses: int, query: str = "",
                pause_ms: float | list[float] = 150) -> dict:
    """A Streamlit page whose slider reruns the server (the trivial page): serve `app`, open it at
    `query`, press `slider` twice to warm up, then time `presses` presses to the next view."""
    with serve(app) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + query)
        wait_for_view(page, 1)
        measure(page, slider, 2)                      # warm-up: imports, first compile
        result = summary(measure(page, slider, presses, pause_ms))
        page.close()
    return result


# The first charts: the summary painted with a frame of its sentence (the server's, or where the page
# makes its frames, the page's own, its slider's value first: views/live/local.js).
FIRST_CHARTS_JS = ("() => { const r = document.querySelector('.bamviz-root[data-kind=summary]');"
                   " return r && r.dataset.painted && r.dataset.painted !== '0' && Number(r.dataset.ready || 0) > 0; }")


def open_explorer(browser, url: str, query: str = EXPLORER_QUERY, complete: bool = True, context=None):
    """A new page on the explorer (in `context`, whose cache a visit before it filled, else in a new
    one); returns it with the seconds to the first charts (`FIRST_CHARTS_JS`) and to all of them (both
    components, every frame, off-screen charts too)."""
    viewport = {"width": 1400, "height": 1000}
    page = context.new_page() if context is not None else browser.new_page(viewport=viewport)
    if context is not None:
        page.set_viewport_size(viewport)
    t0 = time.perf_counter()
    page.goto(url + query)
    page.wait_for_function(FIRST_CHARTS_JS, timeout=120_000, polling="raf")
    first = time.perf_counter() - t0
    painted(page, complete=complete, settled=True)
    return page, first, time.perf_counter() - t0


def new_sentence(page, text: str) -> tuple[float, float]:
    """Submit `text` on an open explorer: seconds to its first charts, and to its whole grid."""
    old = summary_id(page)
    box = page.get_by_label("Sentence (text)")
    box.fill(text)
    t0 = time.perf_counter()
    box.press("Control+Enter")
    painted(page, text_id=old)
    page.wait_for_function(FIRST_CHARTS_JS, timeout=120_000, polling="raf")
    first = time.perf_counter() - t0
    painted(page, complete=True)
    return first, time.perf_counter() - t0


# What the page's own frames cost it (views/live/local.js): the graph's bytes, its fetch and session.
LOCAL_JS = """() => { const l = window.bamviz && window.bamviz.local;
  return l && l.stats.loaded ? {bytes: l.stats.loaded.bytes, fetch_ms: l.stats.loaded.fetchMs,
    session_ms: l.stats.loaded.sessionMs, threads: l.stats.loaded.threads, frames: l.stats.frames} : null; }"""


def visits(browser, url: str) -> dict:
    """A first visit in a new browser context, then a second in the same one (its cache warm): seconds to
    the first charts and to every frame, and the bytes the page received in each (transfer sizes from the
    Resource Timing entries, 0 for what came from the cache), with the model graph's own cost."""
    out = {}
    context = browser.new_context()
    try:
        for visit in ("first_visit", "second_visit"):
            page, first, whole = open_explorer(browser, url, context=context)
            received = page.evaluate("() => performance.getEntriesByType('resource')"
                                     ".concat(performance.getEntriesByType('navigation'))"
                                     ".reduce((n, e) => n + (e.transferSize || 0), 0)")
            out[visit] = {"first_s": round(first, 3), "all_s": round(whole, 3), "bytes_received": received,
                          "graph": page.evaluate(LOCAL_JS)}
            page.close()
    finally:
        context.close()
    return out


FRESH_SENTENCES = ("the cast is charming but the story never finds its feet and the jokes land rarely at best",
                   "a cold and clever thriller whose twists arrive on time and whose heart never does sadly",
                   "i laughed more than i expected though the final act drags on long after it should end")


def run_once(browser, presses: int, slider: str, index: int, screenshot: Path | None = None) -> dict:
    """One run: a fresh server (its first page timed), presses on the explorer, a new visitor, a
    new sentence, and the trivial page."""
    load = os.getloadavg()[0]
    out: dict = {"load_1min": round(load, 2)}
    with serve(ROOT / "app.py") as url:
        page, first, _ = open_explorer(browser, url)
        out["fresh_server_first_s"] = first
        press_live(page, slider, 2)                                  # warm-up
        out["explorer"] = summary(press_live(page, slider, presses, pauses(presses, index)))
        if screenshot:
            page.screenshot(path=str(screenshot))
        out["new_sentence_first_s"], out["new_sentence_all_s"] = new_sentence(page, FRESH_SENTENCES[index % 3])
        page.close()
        visitor, first, everything = open_explorer(browser, url)
        out["new_visitor_first_s"], out["new_visitor_all_s"] = first, everything
        visitor.close()
        out |= visits(browser, url)
    out["trivial"] = measure_app(browser, ROOT / "bench" / "trivial_app.py", "value", presses,
                                 pause_ms=pauses(presses, index))
    return out


def run(presses: int = 20, screenshot: Path | None = None, slider: str = "shape_k", runs: int = 3) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            results = [run_once(browser, presses, slider, i, screenshot if i == 0 else None) for i in range(runs)]
        finally:
            browser.close()
    return {"runs": results, "setup": {
        "model": "bam-wc", "tokens": 24, "n_samples": 32, "presses": presses, "runs": runs,
        "slider": f"{slider} (ArrowRight, a new value each press)", "browser": CHROMIUM, "cpus": os.cpu_count()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--screenshot", type=Path, help="save a screenshot of the explorer here")
    parser.add_argument("--slider", default="shape_k", choices=["shape_k", "beta"],
                        help="the explorer's slider to press (beta changes only the prior's panels)")
    args = parser.parse_args()
    res = run(args.presses, args.screenshot, args.slider, args.runs)
    print(f"{'run':>3} {'load':>5} | {'explorer press med/p95':>22} | {'trivial press med/p95':>21} | "
          f"{'visitor first/all':>17} | {'sentence first/all':>18} | fresh server")
    for i, r in enumerate(res["runs"]):
        e, t = r["explorer"], r["trivial"]
        print(f"{i + 1:>3} {r['load_1min']:>5.2f} | {1000 * e['median_s']:8.1f} / {1000 * e['p95_s']:6.1f} ms   | "
              f"{1000 * t['median_s']:7.1f} / {1000 * t['p95_s']:6.1f} ms  | "
              f"{r['new_visitor_first_s']:6.2f} / {r['new_visitor_all_s']:5.2f} s | "
              f"{r['new_sentence_first_s']:7.2f} / {r['new_sentence_all_s']:5.2f} s | "
              f"{r['fresh_server_first_s']:.2f} s")
        for visit in ("first_visit", "second_visit"):
            v = r[visit]
            print(f"    {visit}: first charts {v['first_s']:.2f} s, every frame {v['all_s']:.2f} s, page received "
                  f"{v['bytes_received'] / 1e6:.2f} MB; graph {v['graph']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
