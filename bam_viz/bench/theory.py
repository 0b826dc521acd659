"""`python -m bam_viz bench --theory`: the Theory lab's server work per slider move, per panel.

Each timed call does what `views/theory.py` does when that panel's slider moves: the library's
computation, every figure and caption of the panel, and the figures' JSON (what `st.plotly_chart`
sends). What the page caches once per sentence (a real model's per-layer gaps, the alignment) or
once per process (the normalisation curves, the model cards) is made before the timing and timed
separately under `once`. Each repeat moves the slider to another value, so nothing is reused that the
page would not reuse. Median and p95 over `repeats` moves, all in one run; a benchmark, not a test.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import plotly.io
import torch

from bam_viz import theory

TARGET_MS = 50.0
# The explorer's default sentence (views/examples.json, which the library does not read): the page
# opens on it.
SENTENCE = "A glorious mess."


def _send(*figures) -> None:
    for fig in figures:
        plotly.io.to_json(fig, validate=False)


def _timed(move: Callable[[int], None], repeats: int) -> dict:
    move(0)                                  # warm-up: imports, first allocations
    times = []
    for i in range(1, repeats + 1):
        t0 = time.perf_counter()
        move(i)
        times.append(1000 * (time.perf_counter() - t0))
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(float(np.percentile(times, 95)), 2),
            "under_target": bool(np.percentile(times, 95) < TARGET_MS)}


def _once(make: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        make()
        times.append(1000 * (time.perf_counter() - t0))
    return round(statistics.median(times), 1)


def _cycle(options, i: int):
    return options[i % len(options)]


def _options(name: str) -> tuple[float, ...]:
    """The values the page's slider `name` offers."""
    return next(c.options for c in theory.CONTROLS if c.name == name)


def run_theory_bench(repeats: int = 30, text: str = SENTENCE) -> dict:
    """Per-panel server time of a slider move (median and p95 ms) and the once-per-sentence costs."""
    from bam_viz import zoo

    if "OMP_NUM_THREADS" not in os.environ:      # as the app runs (views/state.py): one torch thread
        torch.set_num_threads(1)
    panels, once, notes = {}, {}, []
    probabilities, sds = _options("jensen_p"), _options("jensen_sd")

    # 1. Jensen's gap: the toy moves; the model's per-layer gaps (of the page's default model) are a
    # cache hit redrawn.
    gaps, gap_model = None, theory.GAP_MODELS[0]
    if gap_model in zoo.available_models():
        model = zoo.load(gap_model)
        once[f"layer_gaps_{gap_model.replace('-', '_')}_ms"] = _once(lambda: theory.layer_gaps(model, text))
        gaps = theory.layer_gaps(model, text)
    else:
        notes.append(f"{gap_model} is missing: the per-layer gap is not timed")

    def jensen_move(i):
        dist = (theory.TwoPoint(0.0, 4.0, _cycle(probabilities, i)) if i % 2 else
                theory.Gaussian(0.5, _cycle(sds, i)))
        g = theory.jensen_gap(_cycle(tuple(theory.FUNCTIONS), i), dist)
        figures = [theory.jensen_figure(g)]
        theory.jensen_caption(g)
        if gaps is not None:
            figures.append(theory.layer_gap_figure(gaps))
            theory.layer_gap_caption(gaps)
        _send(*figures)

    panels["jensen"] = _timed(jensen_move, repeats)

    # 2. The ELBO: the alignment is a cache hit, q's slider moves.
    aligned = theory.ALIGNMENT_MODEL
    if aligned in zoo.available_models():
        aligner = zoo.load(aligned)
        once[f"alignment_{aligned.replace('-', '_')}_ms"] = _once(lambda: theory.alignment(aligner, text))
        al = theory.alignment(aligner, text)
        ts = _options("q_t")

        def elbo_move(i):
            path = theory.elbo_path(al, i % 2, _cycle(ts, i))
            _send(theory.alignment_figure(al, path), theory.elbo_figure(path))
            theory.alignment_caption(al, path)

        panels["elbo"] = _timed(elbo_move, repeats)
    else:
        notes.append(f"{aligned} is missing: the ELBO panel is not timed")

    # 3. Attention as inference: N moves only the example (the sweep is cached by noise and
    # temperature); noise or temperature recompute the sweep too.
    toy = theory.ExchangeableToy()
    sweep = theory.toy_sweep(toy)

    def toy_n_move(i):
        ex = theory.toy_example(toy, _cycle(theory.TOY_N, i))
        n = ex.draw.components.shape[1]
        _send(theory.toy_keys_figure(ex), theory.toy_estimate_figure(ex), theory.toy_error_figure(sweep, n))
        theory.toy_caption(sweep)

    def toy_temperature_move(i):
        ratio = _cycle(theory.TOY_TEMPERATURE_RATIOS, i)
        ex = theory.toy_example(toy, 64, ratio)
        sw = theory.toy_sweep(toy, ratio)
        _send(theory.toy_keys_figure(ex), theory.toy_estimate_figure(ex), theory.toy_error_figure(sw, 64))
        theory.toy_caption(sw)

    panels["inference_n"] = _timed(toy_n_move, repeats)
    panels["inference_noise_or_temperature"] = _timed(toy_temperature_move, repeats)

    # 4. BAM's distributions: every slider recomputes the pair, its KL check and both pictures;
    # the normalisation curves are made once per family and only redrawn. Each move takes the other
    # pair, its shape slider moved and the rest at their defaults.
    spreads = {}
    for family in theory.PAIRS:
        once[f"normalised_spread_{family}_ms"] = _once(lambda f=family: theory.normalised_spread(f), 1)
        spreads[family] = theory.normalised_spread(family)
    pairs = list(theory.PAIRS.values())

    def bam_move(i):
        panel = _cycle(pairs, i)
        current = _cycle(panel.shape.control.options, i)
        values = [current if c is panel.shape.control else c.default for c in panel.controls]
        pair = theory.score_pair(panel.family, *values)
        check = theory.kl_check(pair)
        _send(theory.density_figure(pair, check), theory.reparam_figure(pair),
              theory.spread_figure(spreads[panel.family], current))
        theory.score_caption(pair, check)
        theory.spread_caption(spreads[panel.family], current)

    panels["bam"] = _timed(bam_move, repeats)

    # 5. No slider: the page's first view of the section (cards and the seed spread read, figure and
    # caption made).
    def space_view(_):
        rows = theory.uncertainty_table()
        _send(theory.uncertainty_figure(rows))
        theory.uncertainty_caption(rows, theory.seed_spread())

    panels["space_first_view"] = _timed(space_view, repeats)
    return {
        "target_ms": TARGET_MS, "repeats": repeats, "sentence": text, "panels": panels, "once": once,
        "notes": notes, "torch_threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
    }


__all__ = ["run_theory_bench", "TARGET_MS", "SENTENCE"]
