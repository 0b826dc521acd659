"""Where a `shape_k` press's time goes: the explorer against variants of itself with parts removed.

    .venv/bin/python bench/latency_floor.py [--presses 20] [--json out.json]

Measures, in one headless chromium and exactly as `bench/browser_latency.py` measures the
explorer (same sentence, bam-wc, 32 samples, a new k each press, the clock stopped by the footer):

  explorer      the shipped page
  no-panels     the explorer's own code without its panels (metrics, charts, captions, downloads):
                the sidebar's controls, `explain()` and the footer
  no-explain    the same, with `explain()` answered from the cache (asked for the trained k every
                time), so only the sliders and the footer are redrawn
  trivial       bench/trivial_app.py, one slider and one line of text

The variants are written to a temporary folder from views/explorer.py, so they follow the page's
code; if the lines they remove change, `variants()` says so instead of measuring something else.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import browser_latency as bl  # noqa: E402

PANELS = ("    headline(result)\n    prediction_panel(result)\n    inspection(result, model)\n"
          "    st.divider()\n    downloads(result)\n")
EXPLAIN = "state.get_result(model, name, text, hyper, n_samples, seed)"
CACHED = ("state.get_result(model, name, text, tuple((h, float(model.trained_hyper[h])) "
          "for h in model.hyper_names if h in HYPER_RANGES), n_samples, seed)")
FUTURE = "from __future__ import annotations\n"
HEAD = FUTURE + 'import streamlit as st\n\nst.set_page_config(page_title="latency variant", layout="wide")\n'


def variants(folder: Path) -> dict[str, Path]:
    """Write the two variant pages into `folder`; returns {name: path}."""
    src = (bl.ROOT / "views" / "explorer.py").read_text()
    for part in (PANELS, EXPLAIN, FUTURE):
        if part not in src:
            raise RuntimeError(f"views/explorer.py no longer has {part.strip()[:40]!r}: update bench/latency_floor.py")
    body = src.replace(FUTURE, "", 1).replace(PANELS, "")
    pages = {"no-panels": body, "no-explain": body.replace(EXPLAIN, CACHED)}
    out = {}
    for name, text in pages.items():
        out[name] = folder / f"{name.replace('-', '_')}.py"
        out[name].write_text(HEAD + text)
    return out


def run(presses: int = 20) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        pages = variants(Path(tmp))
        browser = bl.launch_chromium(p)
        try:
            return {
                "explorer": bl.measure_app(browser, bl.ROOT / "app.py", "shape_k", presses, 7,
                                           bl.EXPLORER_QUERY),
                **{name: bl.measure_app(browser, page, "shape_k", presses, 0, bl.EXPLORER_QUERY)
                   for name, page in pages.items()},
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
