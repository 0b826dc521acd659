"""One frame of a live grid: the sentence at one slider value, reduced to what the page draws and what
its captions read (`make_frame`, one `explain()` call), and the rules by which the page's script
reduces a frame it makes itself the same way (`frame_rules`, views/live/frame.js)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from bam_viz.core.labels import LABELS
from bam_viz.core.metrics import MI_ROUNDING
from bam_viz.inference.explain import DEFAULT_RNG
from bam_viz.inference.result import MonteCarloErrors
from bam_viz.inference.rows import RowSummary
from bam_viz.live.wire import FLOAT32_LIMIT

MAP_SAMPLES = 3                 # sampled maps drawn beside the mean, softmax and std maps: two rows of three
# The headline's numbers per frame and class (`bam_viz.inference.gaps` defines them): the class's E[f(z)]
# and its SE; f(E[w]) and Deng's gap with its jackknife SE; f(softmax) and the gap against it with
# its paired SE; then what is one for every class: the bias-corrected mutual information, its SE and
# the interval shown, and the entropy bar's total H[E p] and parts, the expected entropy and the plug-in
# mutual information (`bam_viz.plots.wording.EntropyParts`).
STATS = ("p_mc", "p_se", "p_mean_attention", "gap", "gap_se", "p_softmax", "gap_softmax", "gap_softmax_se",
         "mi", "mi_se", "mi_lo", "mi_hi", "predictive_entropy", "expected_entropy", "mi_plugin")
# Per frame and stochastic layer: the Monte Carlo mean of the sampled weights, their std, 5% and 95%
# quantiles, then MAP_SAMPLES sampled maps. The softmax map (the deterministic pass) is per grid.
MAP_KINDS = ("mean", "std", "q05", "q95")
# The inside panel's first maps (title, colour scale), then the sampled ones.
MAP_PANELS = ((LABELS["posterior_mean"], "weight"), (LABELS["softmax_weights"], "weight"), (LABELS["std"], "std"))
# The band a frame's maps (MAP_KINDS' q05 and q95) and the predictive distribution's bars show of the samples.
QUANTILES = (0.05, 0.95)
FRAME_TIMEOUT_S = 300.0         # a request waits this long for the frame another request is making


@dataclass(frozen=True)
class Frame:
    """The sentence at one posterior value: what does not depend on the selected head or query, for
    every class at once, so that the page picks the class it shows without a frame made again."""

    stats: np.ndarray               # (C, len(STATS)) row c: the headline for class c; NaN: an error not estimable
    p_samples: np.ndarray           # (S, C) float32 f(z_s): each attention sample's predictive distribution
    spread: np.ndarray              # (L, H)
    kl: np.ndarray                  # (B, L, H) KL(q || prior) at every prior value, nats
    maps: dict                      # stochastic layer -> (H, 4 + MAP_SAMPLES', W, W) float16, MAP_KINDS then samples
    # stochastic layer -> (RowSummary over every query, MapSummary) of the window (`bam_viz.inference.rows`):
    # what the captions read of the sampled weights (`bam_viz.live.result.FrameResult`)
    rows: dict

    @property
    def n_samples(self) -> int:
        """The attention samples this frame drew."""
        return self.p_samples.shape[0]


@dataclass(frozen=True)
class FrameParts:
    """A frame before its KL table (which the grid adds from its deterministic pass)."""

    stats: np.ndarray
    p_samples: np.ndarray
    spread: np.ndarray
    maps: dict
    rows: dict


def samples_drawn(frames) -> list[int]:
    """The samples each of `frames` drew (`Frame.n_samples`), 0 for one not made (None)."""
    return [0 if f is None else f.n_samples for f in frames]


def quantiles(w: torch.Tensor, qs: tuple[float, ...]) -> torch.Tensor:
    """torch.quantile over dimension 0 (linear interpolation), from one sort: (len(qs), *w.shape[1:]).
    NumPy's sort along the first axis, because torch.quantile (and torch's sort over the samples) is
    far slower on this shape (docs/performance.md, "A frame on the server")."""
    s = torch.from_numpy(np.sort(w.numpy(), axis=0))
    n = s.shape[0]
    out = []
    for q in qs:
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        out.append(s[lo] + (pos - lo) * (s[hi] - s[lo]))
    return torch.stack(out)


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def class_stats(r) -> np.ndarray:
    """(C, len(STATS)) the headline's numbers of an `ExplainResult` with each class c as the target
    (row c is what `r.for_target(c)` shows: its gaps, in float64 from the float32 probabilities)."""
    mc, mean, soft = (p.detach().cpu().double().numpy() for p in (r.mc_probs, r.mean_attention_probs, r.softmax_probs))
    errors = r.class_errors                                                   # (3, C)
    mi_lo, mi_hi = r.mutual_information_interval or (None, None)
    columns = {"p_mc": mc, "p_se": errors[0], "p_mean_attention": mean, "gap": mc - mean, "gap_se": errors[1],
               "p_softmax": soft, "gap_softmax": mc - soft, "gap_softmax_se": errors[2],
               "mi": r.mutual_information, "mi_se": _nan(r.se.mutual_information), "mi_lo": _nan(mi_lo),
               "mi_hi": _nan(mi_hi), "predictive_entropy": r.predictive_entropy,
               "expected_entropy": r.expected_entropy, "mi_plugin": r.mutual_information_plugin}
    return np.stack([np.broadcast_to(np.asarray(columns[name], dtype=np.float64), mc.shape) for name in STATS], 1)


def caption_rows(summary: RowSummary) -> RowSummary:
    """A `RowSummary` as a frame keeps it, for every query: the top key as int16, the rest float32
    (a grid holds one per frame and stochastic layer; the captions print 2 decimals of them)."""
    return RowSummary(summary.top.astype(np.int16), *(a.astype(np.float32) for a in summary[1:]))


def window_maps(w: torch.Tensor) -> torch.Tensor:
    """(H, 4 + MAP_SAMPLES', W, W) float32 of one layer's sampled weights `w` (S, H, W, W) in the token
    window: MAP_KINDS (the mean, the std with ddof 1, 0 for one sample, the QUANTILES by `quantiles`),
    then the first MAP_SAMPLES samples (MAP_SAMPLES' = min(MAP_SAMPLES, S)). The page's script makes
    the same from a frame graph's weights (views/live/frame.js)."""
    S = w.shape[0]
    # NumPy: torch's std over a strided first dimension is slow; one copy serves the mean and std.
    drawn = w.numpy()
    mean = torch.from_numpy(drawn.mean(0, dtype=np.float64)).float()           # (H, W, W) E[w] in the window
    std = torch.from_numpy(drawn.std(0, ddof=1)) if S > 1 else torch.zeros_like(w[0])
    q = quantiles(w, QUANTILES)
    return torch.stack([mean, std, q[0], q[1], *w[:MAP_SAMPLES]], 1)


def frame_rules() -> dict:
    """What the page's script reduces a frame graph's outputs by as `make_frame` and the payloads do
    (views/live/frame.js: frameFromOutputs, summaryArrays, insideArrays), each from its one home, as JSON:
    the `stats` columns, the sampled maps a frame keeps, MAP_KINDS, the inside maps' first panels, the MI's
    rounding to 0, what float32 clips to, the QUANTILES and the samples each Monte Carlo error needs."""
    return {"stats": list(STATS), "map_samples": MAP_SAMPLES, "map_kinds": list(MAP_KINDS),
            "map_panels": len(MAP_PANELS), "mi_rounding": MI_ROUNDING, "float32_limit": FLOAT32_LIMIT,
            "quantiles": list(QUANTILES), "samples_needed": dict(MonteCarloErrors.SAMPLES_NEEDED)}


def make_frame(model, text: str, n_samples: int, seed: int, hyper: dict, window: list[int],
               rng: str = DEFAULT_RNG) -> FrameParts:
    """`explain()` at `hyper`, reduced to a frame: the headline's estimates and Monte Carlo errors for
    every class (`class_stats`), each sample's predictive distribution, the spread, and every
    stochastic head's `window_maps` in the token `window`, as float16. A frame serves every class:
    which one the page shows is picked when a payload is packed. `rng`: explain()'s generator."""
    r = model.explain(text, n_samples=n_samples, seed=seed, cache=False, rng=rng, **hyper)
    stats = class_stats(r)
    idx = torch.tensor(window)
    maps, rows = {}, {}
    for layer in r.stochastic_layers:
        rows[layer] = (caption_rows(r.row_summary(layer, window)), r.map_summary(layer, window))
        w = r.sample_weights[:, layer][:, :, idx][:, :, :, idx]                    # (S, H, W, W)
        maps[layer] = window_maps(w).half().numpy()                               # (H, K, W, W)
    return FrameParts(stats=stats, p_samples=r.sample_probs.float().numpy().copy(),
                      spread=r.spread.double().numpy(), maps=maps, rows=rows)
