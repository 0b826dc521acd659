"""What the explorer's two chart components draw, packed from a slider grid (`bam_viz.live.grid`) in
the format of `bam_viz.live.wire`: `summary_payload` (the headline, the sweep, the predictive
distribution, at every posterior value made) and `inside_payload` (the bars, densities, maps and the
layer x head grids of one selection, at every value of both sliders), with `page_style`, what the
page's JavaScript draws them with, from each fact's one home."""

from __future__ import annotations

import hashlib
import math

import numpy as np

from bam_viz.core.labels import LABELS, labels
from bam_viz.core.metrics import interval_multiplier
from bam_viz.core.task import entropy_bound
from bam_viz.core.text import display_token
from bam_viz.inference.result import MonteCarloErrors
from bam_viz.live.frames import MAP_PANELS, MAP_SAMPLES, QUANTILES, STATS, samples_drawn
from bam_viz.live.wire import FLOAT32_LIMIT, finite32, pack
from bam_viz.plots.captions import gap_sentence
from bam_viz.plots.format import SE_DIGITS, SE_MAX_DIGITS, samples_needed
from bam_viz.plots.style import (
    BAR_TICK_TOKENS,
    CLASS_BARS,
    KL_DECADES,
    MAX_TICK_TOKENS,
    PAGE_COLOURS,
    STD_RANGE,
    STD_SCALE,
    VALUE_SCALE,
    WEIGHT_RANGE,
    WEIGHT_SCALE,
)

__all__ = ["inside_payload", "page_style", "summary_payload"]

def _slider(spec, values, trained, current: int) -> dict | None:
    if spec is None:
        return None
    return {"name": spec.name, "label": spec.label, "help": spec.help, "scale": spec.scale,
            "values": [float(v) for v in values], "trained": trained, "current": current}


def _digest(*parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def page_style(kind: str) -> dict:
    """What the page's JavaScript draws a `kind` ("summary" or "inside") payload with, from each
    fact's one home: colours by their role on the page, and for the summary the decimals of an
    estimate and its error, the samples an error needs and the gap's two sentences ({half_width} left
    for the page to fill), for the inside the colour scales, fixed ranges and token label limits."""
    style = {"colours": dict(PAGE_COLOURS)}
    if kind == "summary":
        style["class_bars"] = CLASS_BARS                                             # `shown_classes`'s rule
        style["se_digits"] = {"digits": SE_DIGITS, "max_digits": SE_MAX_DIGITS}     # `se_digits`'s rule
        style["samples_needed"] = {q: samples_needed(q) for q in MonteCarloErrors.ESTIMATORS}
        style["gap_sentence"] = {"distinguishable": gap_sentence(True, "{half_width}"),
                                 "indistinguishable": gap_sentence(False, "{half_width}")}
    else:
        style["scales"] = {"weight": WEIGHT_SCALE, "std": STD_SCALE, "value": VALUE_SCALE}
        style |= {"weight_range": list(WEIGHT_RANGE), "std_range": list(STD_RANGE), "kl_decades": KL_DECADES,
                  "map_labels_max": MAX_TICK_TOKENS, "bar_labels_max": BAR_TICK_TOKENS}
    return style


def summary_payload(grid, current: int, extra: dict | None = None,
                    target: int | str | None = None) -> bytes:
    """What the headline, the sweep and the prediction panel draw, at every posterior value made so
    far, for the class `grid.target_at(current, target)`: its headline numbers `stats` (G, len(STATS))
    and each sample's probability of it `p_samples` (G, S), and for the predictive distribution
    `class_probs` (G, 4, C): every class's E[f(z)], the 5% and 95% points of its samples, and f(softmax).
    The header names the classes, the target and the class predicted at `current`, and the samples each
    frame drew (`frame_samples`)
    and the multiplier of an SE for its 95% interval at them (`frame_interval_z`, t with S - 1 df; null
    under 2 samples): the page's band and gap sentence read it."""
    C = len(grid.classes)
    t = grid.target_at(current, target)
    frames = list(grid.frames)                       # one snapshot for the header and the arrays
    drawn = samples_drawn(frames)
    ready = [n > 0 for n in drawn]
    arrays = grid.memo("summary", (tuple(drawn), t), lambda: _summary_arrays(grid, frames, t), keep=2)
    if grid.in_browser:                              # the page makes the frames: it is sent what they need
        arrays = arrays | {"states": grid.states[0].float().numpy()}                       # (T, hidden)
        extra = {"frames_here": grid.browser_frames(), "sentence": grid.sentence_key, **(extra or {})}
    header = {
        "kind": "summary", "id": _digest("summary", id(grid), drawn, t), "ready": ready, "frame_samples": drawn,
        "frame_interval_z": [z if math.isfinite(z := interval_multiplier(n)) else None for n in drawn],
        "n_samples": grid.n_samples, "seed": grid.seed, "model": grid.model.name, "stats": list(STATS),
        "labels": labels(display_token(grid.classes[t]), C), "style": page_style("summary"),
        "classes": list(grid.classes), "target": t, "predicted": grid.target_at(current, "predicted"),
        "entropy_bound": entropy_bound(C),
        "stochastic": bool(grid.stochastic_layers),
        "slider": _slider(grid.posterior_spec, grid.values, grid.model.trained_hyper.get(
            grid.posterior_spec.name) if grid.posterior_spec else None, current),
        **(extra or {}),
    }
    return pack(header, arrays)


def _summary_arrays(grid, frames: list, t: int) -> dict:
    """`summary_payload`'s arrays for the class index t, from the frames made (NaN rows for the others)."""
    G, S, C = len(grid.values), grid.n_samples, len(grid.classes)
    stats = np.full((G, len(STATS)), np.nan)
    p = np.full((G, S), np.nan)
    classes = np.full((G, 4, C), np.nan)
    mc, soft = STATS.index("p_mc"), STATS.index("p_softmax")
    for i, f in enumerate(frames):
        if f is not None:
            stats[i], p[i, : f.n_samples] = f.stats[t], f.p_samples[:, t]
            classes[i, 0], classes[i, 3] = f.stats[:, mc], f.stats[:, soft]
            classes[i, 1:3] = np.quantile(f.p_samples.astype(np.float64), QUANTILES, axis=0)
    return {"stats": finite32(stats), "p_samples": finite32(p), "class_probs": finite32(classes)}


def _inside_frame_arrays(grid, frames: list, layer: int, head: int, query: int) -> dict:
    """`inside_payload`'s arrays that its frames make, for one layer, head and query (the page's script
    makes the same from a frame graph's outputs: views/live/frame.js): `maps` (G, len(MAP_PANELS) + k,
    W, W) float32, `post_row` (G, 4, W) (`LiveGrid.posterior_row`) and `spread` (G, L, H); NaN rows,
    and maps of zeros beside softmax(psi), for the frames not made."""
    G, W = len(grid.values), len(grid.window)
    L, H = grid.model.n_layers, grid.model.n_heads
    k = min(MAP_SAMPLES, grid.n_samples)
    softmax_map = grid.softmax_weights[layer, head][grid.window][:, grid.window].numpy()
    maps = np.zeros((G, len(MAP_PANELS) + k, W, W), dtype=np.float32)
    maps[:, 1] = softmax_map
    spread = np.full((G, L, H), np.nan)
    post_row = np.full((G, 4, W), np.nan)
    for i, f in enumerate(frames):
        if f is None:
            continue
        spread[i] = f.spread
        post_row[i] = grid.posterior_row(i, layer, head, query)
        if layer in f.maps:
            m = f.maps[layer][head]
            maps[i, 0], maps[i, 2], maps[i, 3:] = m[0], m[1], m[4 : 4 + k]
        else:                                  # deterministic: every sample, and so their mean, is softmax
            maps[i, 0], maps[i, 3:] = softmax_map, softmax_map
    return {"maps": maps, "post_row": finite32(post_row), "spread": finite32(spread)}


def inside_payload(grid, current: int, prior_current: int, layer: int, head: int, query: int,
                   key: int, extra: dict | None = None) -> bytes:
    """What the inside-the-attention panels draw for one layer, head, query and key, at every value
    of both sliders: bars, the key's densities, the maps, and the layer x head spread and KL."""
    G, B = len(grid.values), len(grid.prior_values)
    L, H = grid.model.n_layers, grid.model.n_heads
    k = min(MAP_SAMPLES, grid.n_samples)
    kl = np.full((G, B, L, H), np.nan)
    frames = list(grid.frames)
    drawn = samples_drawn(frames)
    for i, f in enumerate(frames):
        if f is not None:
            kl[i] = f.kl
    arrays = _inside_frame_arrays(grid, frames, layer, head, query)
    if grid.in_browser:                    # the page makes the frames: the KL and this head's softmax(psi)
        kl = grid.kl_tables()
        arrays["softmax"] = grid.softmax_weights[layer, head].float().numpy()            # (T, T)
        extra = {"sentence": grid.sentence_key, **(extra or {})}
    # float16 goes as u2, which carries [0, 1] (`wire.pack`): a weight that dropout scaled past 1
    # (`attention_dropout`) goes as float32, so that the page shows it as it is
    if not grid.model.attention_dropout:
        arrays["maps"] = arrays["maps"].astype(np.float16)
    arrays |= {"prior_row": grid.prior_rows(layer, head, query), "kl": finite32(kl)}
    densities = grid.densities(layer, head, query, key)
    if densities is not None:
        arrays["post_density"], arrays["prior_density"] = (finite32(d) for d in densities)
    trained = grid.model.trained_hyper
    header = {
        "kind": "inside", "id": _digest("inside", id(grid), drawn, layer, head, query, key),
        "ready": [n > 0 for n in drawn], "frame_samples": drawn, "n_samples": grid.n_samples, "seed": grid.seed,
        "labels": LABELS,
        "style": page_style("inside"), "float32_limit": FLOAT32_LIMIT,
        "tokens": list(grid.tokens), "window": list(grid.window),
        "layer": layer, "head": head, "query": query, "key": key, "layers": L, "heads": H,
        "stochastic_layers": list(grid.stochastic_layers), "map_samples": k,
        "map_titles": [title for title, _ in MAP_PANELS] + [f"sample {m + 1}" for m in range(k)],
        "map_scales": [scale for _, scale in MAP_PANELS] + ["weight"] * k,
        "slider": _slider(grid.posterior_spec, grid.values,
                          trained.get(grid.posterior_spec.name) if grid.posterior_spec else None, current),
        "prior_slider": _slider(grid.prior_spec, grid.prior_values,
                                trained.get(grid.prior_spec.name) if grid.prior_spec else None, prior_current),
        **(extra or {}),
    }
    return pack(header, arrays)
