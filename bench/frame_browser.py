"""Frames made in the browser: a model's frame graph run by onnxruntime-web (WASM) in the explorer's
frame worker (views/live/frame_worker.js), in headless Debian chromium, beside the same frame in Python.

    .venv/bin/python bench/frame_browser.py [--frames 10] [--threads 1 2] [--json out.json]

bam-wc's frame graph at S = 32 (`views.runtime.graph_url`), served by the app (bench/browser_latency.serve)
to a page of its origin, cross-origin isolated as every page of the app is. Per sentence (24 and 128 word
pieces) and per WASM thread count, a new worker loads the runtime and the graph, then makes one frame per
shape_k value, one at a time: the first is a warm-up, the next `--frames` are timed. Reported:

  browser    the worker's time per frame (the noise drawn by random.js, the run, the outputs copied out),
             median and p95; the noise alone, drawn in the page; the graph's bytes, its fetch, and the
             time to create the session
  onnxruntime  Python's onnxruntime, one thread, the same graph, seed and values: the run, and the
             noise drawn by bam_viz.core.portable_random
  pytorch    `model.explain(text, n_samples=32, seed, cache=False, shape_k=...)` on one thread (its lower
             layers included, as a frame the server makes)

and the ratios of the browser's medians to onnxruntime's and PyTorch's. The machine's load average
goes beside the figures: other work on the machine slows every column.

The harness (`open_page`, `drive`, `worker_url`, `runtime_entry`) is shared with tests/test_browser_frames.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]     # the shared chromium launcher and server, and bam_viz, views

from browser_latency import CHROMIUM, ROOT, launch_chromium, serve  # noqa: E402

MODEL, S, SEED = "bam-wc", 32, 2**40 + 11
# 24 and 128 word pieces for bam-wc's tokenizer ([CLS] and [SEP] included; the second cut to 128)
SENTENCE_24 = "the acting is superb and the music is lovely but the plot drags and the ending feels rushed and too long"
SENTENCE_128 = " ".join(["the film was long and loud but the actors were wonderful"] * 14)


def worker_url() -> str:
    """The frame worker's URL: beside live.js in the explorer's hashed module folder (views.components)."""
    from views import components

    return components._modules().rsplit("/", 1)[0] + "/frame_worker.js"


def runtime_entry() -> str:
    """The URL of onnxruntime-web's module as the app serves it (views.runtime)."""
    from views import runtime

    return runtime.runtime_url() + runtime.ENTRY


def open_page(browser, server: str, isolated: bool = True):
    """A page of the app's origin that loads nothing else (the server's health check), cross-origin isolated
    as the app's pages are, or with the isolation headers taken off its response (`isolated=False`)."""
    page = browser.new_page()
    url = server + "/_stcore/health"
    if not isolated:
        def strip(route):
            response = route.fetch()
            kept = {k: v for k, v in response.headers.items() if not k.lower().startswith("cross-origin-")}
            route.fulfill(response=response, headers=kept)

        page.route(url, strip)
    page.goto(url)
    return page


# Start a module worker at `worker`, post `start`, post `later` when the first frame arrives, and collect
# what it posts until sentence `until` is done or fails, an error of no sentence comes (a load's), or
# `timeoutMs` passes. A "sentence" goes
# with its states as a Float32Array (`states`: the numbers, or a count of zeros) and its seed a BigInt.
DRIVE = """async ({ worker, start, later, until, timeoutMs, keepData }) => {
  const prepare = (m) => (m.type !== "sentence" ? m : { ...m, seed: BigInt(m.seed),
    states: typeof m.states === "number" ? new Float32Array(m.states) : Float32Array.from(m.states) });
  const w = new Worker(worker, { type: "module" });
  const got = [];
  const t0 = performance.now();
  const ended = new Promise((resolve) => {
    let sentLater = false;
    w.onmessage = ({ data }) => {
      const at = performance.now() - t0;
      if (data.type === "frame" && data.frame) {        // reduced in the worker: its stats and samples
        const { stats, pSamples, maps } = data.frame;
        got.push({ ...data, frame: { stats: Array.from(stats, (v) => (Number.isNaN(v) ? null : v)),
          pSamples: Array.from(pSamples), layers: Object.keys(maps) }, at });
        if (!sentLater) { sentLater = true; later.forEach((m) => w.postMessage(prepare(m))); }
      } else if (data.type === "frame") {
        const outputs = {};
        for (const [name, { data: a, dims }] of Object.entries(data.outputs)) {
          outputs[name] = { dims, data: keepData ? Array.from(a) : a.length };
        }
        got.push({ ...data, outputs, at });
        if (!sentLater) { sentLater = true; later.forEach((m) => w.postMessage(prepare(m))); }
      } else {
        got.push({ ...data, at });
      }
      if ((data.type === "error" && (data.id === undefined || data.id === until))
          || (data.type === "done" && data.id === until)) resolve(false);
    };
    w.onerror = (e) => {
      got.push({ type: "error", error: `the worker's script: ${e.message}`, at: performance.now() - t0 });
      resolve(false);
    };
  });
  for (const m of start) w.postMessage(prepare(m));
  const timedOut = await Promise.race([ended, new Promise((r) => setTimeout(() => r(true), timeoutMs))]);
  w.terminate();
  return { got, timedOut };
}"""


def drive(page, worker: str, start: list[dict], later: list[dict] = (), until=None, timeout_s: float = 120.0,
          keep_data: bool = True) -> dict:
    """{"got": the worker's messages in order (a frame's outputs' data as lists, or their lengths when not
    `keep_data`, and "at": ms since the worker started), "timedOut": bool}."""
    return page.evaluate(DRIVE, {"worker": worker, "start": list(start), "later": list(later), "until": until,
                                 "timeoutMs": timeout_s * 1000, "keepData": keep_data})


def load_message(graph_folder_url: str, manifest: dict, threads: int) -> dict:
    return {"type": "load", "runtimeUrl": runtime_entry(), "graphUrl": graph_folder_url + manifest["graph"],
            "manifest": manifest, "threads": threads}


def sentence_message(id_, states, values: list[dict], current: int = 0, seed: int = SEED, n_samples: int = S,
                     reduce: dict | None = None) -> dict:
    """`states`: (1, T, hidden) array-like; `reduce`: the worker posts reduced frames (`reduce_options`)."""
    import numpy as np

    x = np.asarray(states, dtype=np.float32)
    out = {"type": "sentence", "id": id_, "states": x.ravel().tolist(), "T": int(x.shape[1]), "S": n_samples,
           "seed": str(seed), "values": values, "current": current}
    return out | ({"reduce": reduce} if reduce is not None else {})


def reduce_options(here: dict) -> dict:
    """A sentence message's `reduce` (frame.js's frameFromOutputs options) from a grid's `browser_frames()`,
    as views/live/local.js sends it."""
    return {"rules": here["rules"], "softmaxProbs": here["softmax_probs"], "window": here["window"],
            "stochastic": here["stochastic"], "intervalZ": here["interval_z"], "layers": here["layers"],
            "heads": here["heads"]}


# Draw a frame's noise as the worker does (engine.js's noiseFeeds), in the page: its share of a frame.
NOISE = """async ({ engine, manifest, S, T, seed, times }) => {
  const { noiseFeeds } = await import(engine);
  const ms = [];
  for (let i = 0; i < times; i++) {
    const t = performance.now();
    noiseFeeds(manifest, S, T, BigInt(seed) + BigInt(i));
    ms.push(performance.now() - t);
  }
  return ms;
}"""


def stats(ms: list[float]) -> dict:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": round(statistics.median(ms), 2), "p95_ms": round(p95, 2), "n": len(ms)}


def shape_values(model, n: int) -> list[dict]:
    """`n` shape_k values around the trained one, each frame a new one (log-spaced from / 4 to * 4)."""
    import numpy as np

    k = model.hyper()["shape_k"]
    return [{"shape_k": float(v)} for v in k * np.geomspace(0.25, 4.0, n)]


def browser_frames(browser, server: str, graph: str, manifest: dict, states, values: list[dict], threads: int) -> dict:
    page = open_page(browser, server)
    try:
        run = drive(page, worker_url(), [load_message(graph, manifest, threads),
                                         sentence_message("bench", states, values)], until="bench",
                    timeout_s=600, keep_data=False)
        errors = [m["error"] for m in run["got"] if m["type"] == "error"]
        if errors or run["timedOut"]:
            raise RuntimeError(f"the worker failed ({threads} threads): {errors or 'timed out'}")
        loaded = next(m for m in run["got"] if m["type"] == "loaded")
        frames = [m["ms"] for m in run["got"] if m["type"] == "frame"][1:]
        noise = page.evaluate(NOISE, {"engine": worker_url().rsplit("/", 1)[0] + "/engine.js", "manifest": manifest,
                                      "S": S, "T": int(states.shape[1]), "seed": str(SEED), "times": 5})
    finally:
        page.close()
    return {"threads": loaded["threads"], "note": loaded["note"], "fetch_ms": round(loaded["fetchMs"], 1),
            "session_ms": round(loaded["sessionMs"], 1), "frame": stats(frames), "noise": stats(noise[1:])}


def python_frames(model, folder: Path, manifest: dict, text: str, states, values: list[dict]) -> dict:
    """The same frames in Python's onnxruntime (one thread) and PyTorch's explain (one thread)."""
    import numpy as np
    import onnxruntime
    import torch

    from bam_viz.core import portable_random

    T = states.shape[1]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(folder / manifest["graph"]), options, providers=["CPUExecutionProvider"])
    run_ms, noise_ms = [], []
    for v in values:
        t = time.perf_counter()
        feeds = {"states": np.asarray(states, np.float32),
                 "hyper": np.array([v[n] for n in manifest["hyper"]], np.float32)}
        for i, site in enumerate(manifest["noise"]):
            dims = [T if d == "T" else d for d in site["dims"]]
            feeds[site["name"]] = portable_random.uniforms(SEED, i, int(np.prod(dims))).reshape(dims)
        noise_ms.append(1000 * (time.perf_counter() - t))
        t = time.perf_counter()
        session.run(None, feeds)
        run_ms.append(1000 * (time.perf_counter() - t))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch_ms = []
        for v in values:
            t = time.perf_counter()
            model.explain(text, n_samples=S, seed=SEED, cache=False, **v)
            torch_ms.append(1000 * (time.perf_counter() - t))
    finally:
        torch.set_num_threads(threads)
    return {"onnxruntime": stats(run_ms[1:]), "onnxruntime_noise": stats(noise_ms[1:]), "pytorch": stats(torch_ms[1:])}


def run(frames: int = 10, threads: tuple[int, ...] = (1, 2)) -> dict:
    from playwright.sync_api import sync_playwright

    import bam_viz
    from bam_viz.inference.explain import lower_states
    from bam_viz.inference.graph import graph_for
    from views import runtime

    model = bam_viz.load(MODEL)
    started = time.perf_counter()
    graph = runtime.graph_url(model, S)
    link_s = time.perf_counter() - started
    folder, manifest = graph_for(model, S)
    values = shape_values(model, frames + 1)
    sentences = {}
    for text in (SENTENCE_24, SENTENCE_128):
        states = lower_states(model, text).x.numpy()
        sentences[states.shape[1]] = (text, states)
    assert sorted(sentences) == [24, 128], sorted(sentences)
    out = {"setup": {"model": MODEL, "n_samples": S, "frames": frames, "graph_bytes": manifest["graph_bytes"],
                     "graph_url_s": round(link_s, 2), "browser": CHROMIUM, "cpus": os.cpu_count()}, "sentences": {}}
    with serve(ROOT / "app.py") as server, sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            for T, (_, states) in sentences.items():
                row = {"load_1min": os.getloadavg()[0]}
                for n in threads:
                    row[f"wasm_{n}"] = browser_frames(browser, server, graph, manifest, states, values, n)
                out["sentences"][T] = row
        finally:
            browser.close()
    for T, (text, states) in sentences.items():
        row = out["sentences"][T]
        row |= python_frames(model, folder, manifest, text, states, values)
        for n in threads:
            wasm = row[f"wasm_{n}"]["frame"]["median_ms"]
            row[f"wasm_{n}"]["vs_onnxruntime"] = round(wasm / row["onnxruntime"]["median_ms"], 2)
            row[f"wasm_{n}"]["vs_pytorch"] = round(wasm / row["pytorch"]["median_ms"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10, help="timed frames per case, after one warm-up")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="the WASM thread counts")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    res = run(args.frames, tuple(args.threads))
    setup = res["setup"]
    print(f"{setup['model']}, S = {setup['n_samples']}: graph {setup['graph_bytes'] / 1e6:.1f} MB; "
          f"{setup['frames']} frames after a warm-up; {setup['cpus']} CPUs")
    print(f"{'T':>4} {'load':>5} | {'case':<12} | {'frame med/p95 ms':>17} | {'noise ms':>8} | {'fetch ms':>8} | "
          f"{'session ms':>10} | vs ort, torch")
    for T, row in res["sentences"].items():
        for key in [k for k in row if k.startswith("wasm_")]:
            w = row[key]
            print(f"{T:>4} {row['load_1min']:>5.2f} | {key + ' (' + str(w['threads']) + ')':<12} | "
                  f"{w['frame']['median_ms']:8.1f} / {w['frame']['p95_ms']:6.1f} | {w['noise']['median_ms']:8.1f} | "
                  f"{w['fetch_ms']:8.1f} | {w['session_ms']:10.1f} | "
                  f"{w['vs_onnxruntime']:.2f}x, {w['vs_pytorch']:.2f}x")
        for key in ("onnxruntime", "pytorch"):
            extra = f" (+ noise {row['onnxruntime_noise']['median_ms']:.1f})" if key == "onnxruntime" else ""
            print(f"{T:>4} {'':>5} | {key:<12} | {row[key]['median_ms']:8.1f} / {row[key]['p95_ms']:6.1f}{extra}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
