"""What the explorer's captions read of one layer's attention, in a form both an `ExplainResult` and
a live grid's frame (`bam_viz.live.frames`) can hold: per head and query, the key a query attends
to most and what its draws say there (`RowSummary`), and per head where the sampled weights
disagree most over the keys shown (`MapSummary`). A frame keeps these few numbers instead of every
sampled weight, so that a slider release is captioned without running the model again."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["MapSummary", "RowSummary", "finite", "map_summary", "row_summary"]


def finite(t) -> np.ndarray:
    """A tensor or array as finite float64: slider extremes may produce inf/NaN, and charts draw
    those as blanks."""
    a = np.asarray(t.detach().cpu().double() if hasattr(t, "detach") else t, dtype=np.float64)
    return np.nan_to_num(a, nan=0.0, posinf=np.finfo(np.float32).max, neginf=0.0)


class RowSummary(NamedTuple):
    """Of every head's and query's row of E[w] (the Monte Carlo mean of the sampled weights), each
    (H, T_q): the key with the largest mean among all T keys (`top`), the mean there, its Monte Carlo
    SE, the 5% and 95% points of that key's draws, and the row's mean weight on the keys shown."""

    top: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    share: np.ndarray

    def at(self, head: int, query: int) -> RowSummary:
        """One head's and query's numbers, each a scalar."""
        return RowSummary(*(a[head, query] for a in self))


class MapSummary(NamedTuple):
    """Of the std of the sampled weights over the keys shown as queries and keys (the std map), per
    head (H,): the token indices of its largest cell, that std and the mean over the cells; and E[w]'s
    mean row weight on the keys shown."""

    query: np.ndarray
    key: np.ndarray
    std_max: np.ndarray
    std_mean: np.ndarray
    share: np.ndarray

    def at(self, head: int) -> MapSummary:
        return MapSummary(*(a[head] for a in self))


def row_summary(mean, draws, idx: list[int]) -> RowSummary:
    """`RowSummary` from one layer's E[w] (H, Q, T) and its draws (S, H, Q, T) (tensors or arrays; made
    finite), with `idx` the keys shown. The SE is the draws' sd / sqrt(S) at the top key (0 with one draw),
    as `ExplainResult.posterior_mean_se` is at every key."""
    post, w = finite(mean), finite(draws)
    top = post.argmax(-1)                                                        # (H, Q)
    at_top = np.take_along_axis(w, top[None, ..., None], -1)[..., 0]             # (S, H, Q)
    lo, hi = np.quantile(at_top, [0.05, 0.95], axis=0)
    S = w.shape[0]
    se = at_top.std(0, ddof=1) / np.sqrt(S) if S > 1 else np.zeros(top.shape)
    return RowSummary(top, np.take_along_axis(post, top[..., None], -1)[..., 0], se, lo, hi, post[..., idx].sum(-1))


def map_summary(mean, draws, idx: list[int]) -> MapSummary:
    """`MapSummary` from one layer's E[w] (H, T, T) and draws (S, H, T, T), over the block of `idx`
    (as queries and keys); the std (ddof 1) is 0 with fewer than two draws."""
    post = finite(mean)[:, idx][:, :, idx]                                       # (H, W, W)
    w = finite(draws)[:, :, idx][:, :, :, idx]
    std = w.std(0, ddof=1) if w.shape[0] > 1 else np.zeros(w.shape[1:])
    H, W = std.shape[0], std.shape[1]
    flat = std.reshape(H, -1).argmax(-1)
    q, k = np.unravel_index(flat, (W, W))
    ids = np.asarray(idx)
    return MapSummary(ids[q], ids[k], std.reshape(H, -1).max(-1), std.reshape(H, -1).mean(-1),
                      post.sum(-1).mean(-1))
