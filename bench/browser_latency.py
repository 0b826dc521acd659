"""Browser latency: from a slider keypress to the updated charts, in headless Debian chromium.

    .venv/bin/python bench/browser_latency.py [--presses 20] [--json out.json]

Measures the explorer (model bam-wc, a 24-token sentence, 32 samples, pressing ArrowRight on the
`shape_k` slider, or `beta` with --slider beta) and, in the same run, `bench/trivial_app.py`
(one slider, one line of text), and prints median and p95 of each and their ratio.

How "updated" is detected: both apps end every full run with a footer inside a container keyed
`render_marker` whose text starts "view N" (N counts the session's runs). The explorer hides it
from users (shown only with the URL parameter debug=1), so the page measured is the users' page; a
hidden element's `innerText` is still its text, which is all the bench reads. After each keypress
the clock stops when (1) the footer reads "view N+1", (2) Streamlit's running indicator
(`[data-testid="stStatusWidget"]`) is gone, and (3) two animation frames have passed, so plotly has
drawn the new figures. The footer is written after every chart, so (1) means every chart's data
has reached the browser. Each press moves shape_k one grid step (~15%) to the right, from the
trained k = 3 towards 1000 (40 steps away), so every press asks for a value not seen before and
recomputes `explain()`: no press hits the result cache. The footer's server time is reported
beside each figure, to split the server's share from the browser's.

The helpers here (free port, serving an app, launching chromium) are shared with
tests/test_browser.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
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
def serve(app: Path, log: Path | None = None, timeout: float = 120.0):
    """`streamlit run app` on a free port; yields the URL and stops the server on exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.port", str(port),
           "--server.fileWatcherType", "none"]
    out = open(log, "w") if log else subprocess.DEVNULL  # closed in the finally below
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
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


def marker_server_ms(page) -> float | None:
    """The server's time on the last run, from the footer's "server N ms" (None if it has none)."""
    text = page.locator(".st-key-render_marker").first.inner_text()
    found = re.search(r"server (\d+) ms", text)
    return float(found.group(1)) if found else None


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


def wait_for_charts(page, n_charts: int, timeout_ms: float = 120_000) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2 * n",
        arg=n_charts, timeout=timeout_ms)


def measure(page, slider_name: str, presses: int, server: list | None = None) -> list[float]:
    """Seconds from each keypress on the slider to the updated page; the server's own seconds on
    each run are appended to `server` when the app reports them."""
    slider = page.get_by_role("slider", name=slider_name)
    slider.focus()
    times = []
    for _ in range(presses):
        key = "ArrowRight"                 # always a new value: never a cached result
        before = marker_view(page)
        t0 = time.perf_counter()
        page.keyboard.press(key)
        wait_for_view(page, before + 1)
        times.append(time.perf_counter() - t0)
        ms = marker_server_ms(page)
        if server is not None and ms is not None:
            server.append(ms / 1000)
        page.wait_for_timeout(150)          # let the slider's debounce settle before the next press
    return times


def summary(times: list[float]) -> dict:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_s": statistics.median(times), "p95_s": p95, "n": len(times),
            "times_s": [round(t, 4) for t in times]}


EXPLORER_QUERY = f"?model=bam-wc&n_samples=32&seed=0&text={quote(SENTENCE_24)}"


def measure_app(browser, app: Path, slider: str, presses: int, n_charts: int = 0, query: str = "",
                screenshot: Path | None = None) -> dict:
    """Serve `app`, open it at `query`, wait for its first view (and `n_charts` plotly charts),
    press `slider` twice to warm up, then time `presses` presses: their summary, and the server's."""
    with serve(app) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + query)
        wait_for_view(page, 1)
        wait_for_charts(page, n_charts)
        measure(page, slider, 2)                      # warm-up: imports, first compile
        server: list[float] = []
        result = summary(measure(page, slider, presses, server))
        if server:
            result["server"] = summary(server)
        if screenshot:
            page.screenshot(path=str(screenshot))
        page.close()
    return result


def run(presses: int = 20, screenshot: Path | None = None, slider: str = "shape_k") -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            results = {
                "explorer": measure_app(browser, ROOT / "app.py", slider, presses, 8, EXPLORER_QUERY,
                                        screenshot),
                "trivial": measure_app(browser, ROOT / "bench" / "trivial_app.py", "value", presses),
            }
        finally:
            browser.close()
    results["ratio_median"] = results["explorer"]["median_s"] / results["trivial"]["median_s"]
    results["ratio_p95"] = results["explorer"]["p95_s"] / results["trivial"]["p95_s"]
    results["setup"] = {"model": "bam-wc", "tokens": 24, "n_samples": 32, "presses": presses,
                        "slider": f"{slider} (ArrowRight, a new value each press)", "browser": CHROMIUM}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--screenshot", type=Path, help="save a screenshot of the explorer here")
    parser.add_argument("--slider", default="shape_k", choices=["shape_k", "beta"],
                        help="the explorer's slider to press (beta changes only the prior's panels)")
    args = parser.parse_args()
    res = run(args.presses, args.screenshot, args.slider)
    for label in ("explorer", "trivial"):
        r = res[label]
        print(f"{label:9s} median {1000 * r['median_s']:7.1f} ms   p95 {1000 * r['p95_s']:7.1f} ms"
              f"   ({r['n']} presses)")
        if "server" in r:
            print(f"  of which the server's run: median {1000 * r['server']['median_s']:.1f} ms, "
                  f"p95 {1000 * r['server']['p95_s']:.1f} ms")
    print(f"ratio     median {res['ratio_median']:.2f}x   p95 {res['ratio_p95']:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
