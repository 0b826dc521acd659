"""Where a `shape_k` press's time goes: the explorer against variants of itself with parts removed.

    .venv/bin/python bench/latency_floor.py [--presses 20] [--json out.json]

Measures, in one headless chromium and exactly as `bench/browser_latency.py` measures the
explorer (same sentence, bam-wc, 32 samples, a new k each press, the clock stopped by the footer,
which is hidden unless the URL says debug=1 and read all the same):

  explorer      the shipped page
  no-panels     the explorer without its panels (metrics, charts, captions, downloads): the
                sidebar's controls, `explain()` and the footer (the URL parameter bench=no-panels)
  no-explain    the same, with `explain()` answered from the cache (asked for the trained k every
                time), so only the sliders and the footer are redrawn (bench=no-explain)
  trivial       bench/trivial_app.py, one slider and one line of text

The variants are the explorer's own code, switched by its `bench` URL parameter.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import browser_latency as bl  # noqa: E402

VARIANTS = ("no-panels", "no-explain")


def run(presses: int = 20) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = bl.launch_chromium(p)
        try:
            return {
                "explorer": bl.measure_app(browser, bl.ROOT / "app.py", "shape_k", presses, 8,
                                           bl.EXPLORER_QUERY),
                **{name: bl.measure_app(browser, bl.ROOT / "app.py", "shape_k", presses, 0,
                                        f"{bl.EXPLORER_QUERY}&bench={name}")
                   for name in VARIANTS},
                "trivial": bl.measure_app(browser, bl.ROOT / "bench" / "trivial_app.py", "value", presses),
            }
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    res = run(args.presses)
    for label, r in res.items():
        server = f"   server median {1000 * r['server']['median_s']:.0f} ms" if "server" in r else ""
        print(f"{label:11s} median {1000 * r['median_s']:6.0f} ms   p95 {1000 * r['p95_s']:6.0f} ms{server}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
