"""What each explorer figure costs plotly.js to draw, outside Streamlit, in headless Debian chromium.

    .venv/bin/python bench/figure_draw.py [--repeats 8]

Builds the seven figures of the explorer from one real `explain()` result (bam-wc, the 24-token
sentence of bench/browser_latency.py, 32 samples, layer 5 head 0) and a second one at another
shape_k, loads the plotly.js bundled with the plotly Python package into a blank page, and times,
for each figure, `Plotly.newPlot` (a fresh chart) and then `Plotly.react` to the second result's
figure (an update in place), each followed by a forced layout. Medians over the repeats.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import plotly
import plotly.io as pio
import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]   # the shared chromium launcher, and bam_viz
import browser_latency as bl  # noqa: E402

from bam_viz import load, plots  # noqa: E402

TIME_JS = """async ([a, b, repeats]) => {
    const d = document.getElementById('chart');
    const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const fresh = [], update = [];
    for (let i = 0; i < repeats; i++) {
        Plotly.purge(d); await frames();
        let t = performance.now();
        await Plotly.newPlot(d, a.data, a.layout, {displaylogo: false});
        d.getBoundingClientRect(); fresh.push(performance.now() - t);
        await frames();
        t = performance.now();
        await Plotly.react(d, b.data, b.layout, {displaylogo: false});
        d.getBoundingClientRect(); update.push(performance.now() - t);
        await frames();
    }
    const median = x => x.sort((u, v) => u - v)[x.length >> 1];
    return [median(fresh), median(update)];
}"""


def figures(result, layer: int = 5, head: int = 0) -> dict:
    return {
        "prediction": plots.prediction_figure(result), "entropy": plots.entropy_figure(result),
        "prior_posterior": plots.prior_posterior_figure(result, layer, head, 0),
        "density": plots.key_density_figure(result, layer, head, 0, 1),
        "maps": plots.sampled_maps_figure(result, layer, head),
        "spread": plots.layer_head_figure(result, "spread", selected=(layer, head)),
        "kl": plots.layer_head_figure(result, "kl", selected=(layer, head)),
    }


def run(repeats: int = 8) -> dict:
    from playwright.sync_api import sync_playwright

    torch.set_num_threads(1)
    model = load("bam-wc")
    a = figures(model.explain(bl.SENTENCE_24, n_samples=32, seed=0, shape_k=3.0))
    b = figures(model.explain(bl.SENTENCE_24, n_samples=32, seed=0, shape_k=3.5))
    js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    out = {}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        page_file = Path(tmp) / "page.html"
        page_file.write_text(f"<html><body><div id='chart' style='width:1100px'></div>"
                             f"<script>{js}</script></body></html>")
        browser = bl.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_file.as_uri())
            for name in a:
                specs = [json.loads(pio.to_json(f[name], validate=False)) for f in (a, b)]
                fresh, update = page.evaluate(TIME_JS, [*specs, repeats])
                out[name] = {"newPlot_ms": round(fresh, 1), "react_ms": round(update, 1),
                             "spec_kB": len(json.dumps(specs[0])) // 1000}
        finally:
            browser.close()
    out["total"] = {k: round(sum(v[k] for v in out.values()), 1) for k in ("newPlot_ms", "react_ms")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    res = run(args.repeats)
    for name, r in res.items():
        print(f"{name:16s} newPlot {r['newPlot_ms']:6.1f} ms   react {r['react_ms']:6.1f} ms"
              + (f"   spec {r['spec_kB']} kB" if "spec_kB" in r else ""))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
