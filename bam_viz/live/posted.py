"""A frame made elsewhere, by the model's frame graph (`bam_viz.inference.graph`) and the reduction by
`frame_rules` in views/live/frame.js, read back from its numbers as JSON: what a caption reads of it
(`bam_viz.live.result.FrameResult`), checked against the grid it claims to be of, so that numbers that do
not fit are refused with one line rather than written into a caption.

The numbers: `sentence` (the grid's `sentence_key`), `index` (the posterior value), `n_samples`, `stats`
(C x len(STATS), row-major, null for NaN), `p_samples` (S x C), `spread` (L x H), `rows` (per stochastic
layer: `RowSummary`'s six fields, H x T each, and `MapSummary`'s as `query`, `key`, `std_max`, `std_mean`,
`map_share`, H each) and `sweep` (per posterior value, null or its stats: what the sweep's caption reads).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bam_viz.inference.rows import MapSummary, RowSummary
from bam_viz.live.frames import STATS, Frame
from bam_viz.live.wire import FLOAT32_LIMIT

__all__ = ["Posted", "read_posted"]

ROW_FIELDS = RowSummary._fields                       # top, mean, se, lo, hi, share: (H, T) each
MAP_FIELDS = ("query", "key", "std_max", "std_mean", "map_share")      # MapSummary's, share named apart
PROBABILITY_SLACK = 1e-5                              # float32 probabilities may pass 1 by rounding


@dataclass(frozen=True)
class Posted:
    """A frame read from its numbers: the grid's posterior value `index`, the `Frame` (no maps: the captions
    read none) and the stats of every value the sender had made (`sweep`: index -> (C, len(STATS)))."""

    index: int
    frame: Frame
    sweep: dict


def _numbers(value, n: int, name: str, low: float = -FLOAT32_LIMIT, high: float = FLOAT32_LIMIT,
             nan: bool = False) -> np.ndarray:
    if not isinstance(value, list) or len(value) != n:
        got = len(value) if isinstance(value, list) else type(value).__name__
        raise ValueError(f"{name} holds {got} numbers, not {n}")
    if nan:
        value = [math.nan if v is None else v for v in value]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{name} holds something other than numbers")
    a = np.asarray(value, dtype=np.float64)
    finite = a[np.isfinite(a)]
    if np.isinf(a).any() or (not nan and finite.size != a.size) or ((finite < low) | (finite > high)).any():
        raise ValueError(f"{name} holds a number outside [{low:g}, {high:g}]")
    return a


def _indices(value, n: int, name: str, allowed) -> np.ndarray:
    a = _numbers(value, n, name, 0, FLOAT32_LIMIT)
    if not (a == np.round(a)).all() or not np.isin(a, list(allowed)).all():
        raise ValueError(f"{name} holds an index that is not a token of the sentence's window")
    return a.astype(np.int64)


def _stats(value, C: int, name: str) -> np.ndarray:
    return _numbers(value, C * len(STATS), name, nan=True).reshape(C, len(STATS))


def read_posted(numbers, grid, kl: np.ndarray) -> Posted:
    """The frame in `numbers` (JSON as above) of the `LiveGrid` `grid`, with `kl` (B, L, H) its KL table
    (`grid.kl_table(index)`, closed form). ValueError (one line) when they are not a frame of this grid."""
    if not isinstance(numbers, dict):
        raise ValueError("the frame is not an object")
    if numbers.get("sentence") != grid.sentence_key:
        raise ValueError("the frame is of another sentence or setting")
    index, S = numbers.get("index"), numbers.get("n_samples")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(grid.values):
        raise ValueError(f"the frame's index {index!r} is not one of the slider's {len(grid.values)} values")
    if S != grid.n_samples:
        raise ValueError(f"the frame drew {S!r} samples, not the {grid.n_samples} asked for")
    C, L, H, T = len(grid.classes), grid.model.n_layers, grid.model.n_heads, grid.T
    stats = _stats(numbers.get("stats"), C, "stats")
    p = _numbers(numbers.get("p_samples"), S * C, "p_samples", 0.0, 1.0 + PROBABILITY_SLACK).reshape(S, C)
    spread = _numbers(numbers.get("spread"), L * H, "spread", 0.0).reshape(L, H)
    rows, given = {}, numbers.get("rows")
    if not isinstance(given, dict) or not set(given) <= {str(i) for i in grid.stochastic_layers}:
        raise ValueError("the frame's rows are not of the model's stochastic layers")
    window = set(grid.window)
    for layer, r in given.items():
        if not isinstance(r, dict):
            raise ValueError(f"the frame's rows of layer {layer} are not an object")
        row = RowSummary(_indices(r.get("top"), H * T, "top", range(T)).reshape(H, T).astype(np.int16),
                         *(_numbers(r.get(f), H * T, f, 0.0).reshape(H, T).astype(np.float32) for f in ROW_FIELDS[1:]))
        block = MapSummary(_indices(r.get("query"), H, "query", window), _indices(r.get("key"), H, "key", window),
                           *(_numbers(r.get(f), H, f, 0.0) for f in MAP_FIELDS[2:]))
        rows[int(layer)] = (row, block)
    sweep_in = numbers.get("sweep")
    if not isinstance(sweep_in, list) or len(sweep_in) != len(grid.values):
        raise ValueError(f"the frame's sweep is not one entry per slider value ({len(grid.values)})")
    sweep = {i: _stats(s, C, f"sweep[{i}]") for i, s in enumerate(sweep_in) if s is not None}
    sweep[index] = stats
    frame = Frame(stats=stats, p_samples=p.astype(np.float32), spread=spread, kl=kl, maps={}, rows=rows)
    return Posted(index, frame, sweep)
