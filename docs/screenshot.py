"""Takes the README's picture, docs/screenshot.png, from the explorer as it runs now.

    .venv/bin/python docs/screenshot.py [--out docs/screenshot.png]

A fresh server (bench/browser_latency.py's `serve`), bam-wc on its default sentence at 32 samples and
seed 0, every frame drawn, 1280 x 720, scrolled to the headline: the sliders, the numbers with their
Monte Carlo errors, the gap's sentence and the sweep over shape_k.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import browser_latency as bl  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot.png")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with bl.serve(ROOT / "app.py") as url, sync_playwright() as p:
        browser = bl.launch_chromium(p)
        try:
            page, _, _ = bl.open_explorer(browser, url, query="?model=bam-wc&n_samples=32&seed=0")
            page.set_viewport_size({"width": 1280, "height": 720})
            bl.painted(page, complete=True, settled=True)
            page.locator(".bamviz-root[data-kind=summary]").first.scroll_into_view_if_needed()
            page.evaluate("() => window.scrollBy(0, -40)")
            bl.painted(page, complete=True, settled=True)
            page.screenshot(path=str(args.out))
        finally:
            browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
