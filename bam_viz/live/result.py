"""The live explorer's result: a slider grid's frame read as the part of an `ExplainResult` that the
explorer's controls and captions read (`bam_viz.plots.captions`), so that a page run, a poll or a
slider release costs no model call once the frame is made.

A frame (`bam_viz.live.frames.Frame`) holds the headline's numbers for every class, each sample's
predictive distribution, the spread and KL of every head, and what the captions read of the sampled
weights (`bam_viz.inference.rows`); the grid holds the deterministic pass (softmax weights, the prior's
pi) and the prior's draws. Every number is the one `explain()` gives at the same settings, with one
difference, on purpose: the prior a caption quotes is the grid's, the one the prior's bars draw
(`bam_viz.live.grid`: drawn from the deterministic pass's keys, where `explain()` draws each
sample's keys above the first stochastic layer), so that a caption and its chart say the same.
`tests/test_frame_result.py` checks both.
"""

from __future__ import annotations

import numpy as np
import torch

from bam_viz.core.task import resolve_target
from bam_viz.inference import rows
from bam_viz.inference.result import ExplainResult, MonteCarloErrors
from bam_viz.live.frames import STATS

__all__ = ["FrameResult"]


def _none(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


class FrameResult:
    """`ExplainResult`'s reading side, from frame i of a `LiveGrid` at prior value j: its numbers for the
    class `target`, and `for_target` for another. Read-only, like a result.

    The frame is `posted`'s (`bam_viz.live.posted.Posted`: made and reduced elsewhere, by the frame graph)
    when given, else the grid's: made now if it is not, unless `wait` (by default, on a grid whose frames
    are made elsewhere, `in_browser`). Then, until one is posted, the result is `waiting`, with the grid's
    numbers (tokens, softmax, prior, KL) and none of a frame's, and no caption is written from it."""

    # What is computed from these attributes the same way as for a result: one home, `ExplainResult`'s.
    target_name = ExplainResult.target_name
    predicted = ExplainResult.predicted
    _samples = ExplainResult._samples
    predictive_entropy = ExplainResult.predictive_entropy
    gap = ExplainResult.gap
    gap_softmax = ExplainResult.gap_softmax
    gap_distinguishable = ExplainResult.gap_distinguishable

    def __init__(self, grid, i: int, j: int = 0, target: int | str | None = None, posted=None,
                 wait: bool | None = None):
        if posted is not None and posted.index != i:
            raise ValueError(f"the posted frame is of slider value {posted.index}, not {i}")
        wait = grid.in_browser if wait is None else wait
        frame = posted.frame if posted is not None else grid.frames[i] if wait else grid.frame(i)
        self.grid, self.frame, self.index, self.prior_index = grid, frame, i, j
        self.waiting = frame is None
        self.sweep_stats = posted.sweep if posted is not None else None      # None: the grid's frames
        model = grid.model
        self.text, self.tokens, self.truncated = grid.encoded, list(grid.tokens), grid.truncated
        self.classes, self.model_name, self.family = list(grid.classes), model.name, model.family
        self.stochastic_layers = list(grid.stochastic_layers)
        self.attention_dropout = model.attention_dropout
        self.hyper = dict(grid.hyper_at(i, j if grid.prior_spec is not None else None))
        # the frame's own samples: its errors and the captions' sample counts are its own
        self.n_samples = grid.n_samples if frame is None else frame.n_samples
        self.seed, self.notes = grid.seed, list(grid.notes)
        C, L, H = len(self.classes), model.n_layers, model.n_heads
        stats = np.full((C, len(STATS)), np.nan) if frame is None else frame.stats
        self._column = column = {name: stats[:, k] for k, name in enumerate(STATS)}
        # float32, as a result's probabilities are: its gaps are their float32 differences
        self.mc_probs, self.mean_attention_probs, self.softmax_probs = (
            column[name].astype(np.float32) for name in ("p_mc", "p_mean_attention", "p_softmax"))
        self.sample_probs = torch.from_numpy(np.zeros((0, C), np.float32) if frame is None else frame.p_samples)
        self.spread = np.full((L, H), np.nan) if frame is None else frame.spread
        self.kl = grid.kl_tables()[i, j] if frame is None else frame.kl[j]
        self.softmax_weights, self.prior_weights = grid.softmax_weights, grid.prior_weights
        self.target = resolve_target(self.classes, target, self._predicting())

    def _predicting(self) -> list[float]:
        """What "predicted" reads: E[f(z)], and while waiting for the frame, f(softmax)."""
        return (self.grid.softmax_probs if self.waiting else self.mc_probs).tolist()

    def for_target(self, target: int | str | None) -> FrameResult:
        index = resolve_target(self.classes, target, self._predicting())
        if index == self.target:
            return self
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.target = index
        return view

    # ---- the headline ----------------------------------------------------------------------------
    @property
    def expected_entropy(self) -> float:
        return float(self._column["expected_entropy"][0])

    @property
    def mutual_information(self) -> float:
        return float(self._column["mi"][0])

    @property
    def mutual_information_plugin(self) -> float:
        return float(self._column["mi_plugin"][0])

    @property
    def mutual_information_interval(self) -> tuple[float, float] | None:
        lo, hi = self._column["mi_lo"][0], self._column["mi_hi"][0]
        return None if np.isnan(lo) or np.isnan(hi) else (float(lo), float(hi))

    @property
    def se(self) -> MonteCarloErrors:
        c, t = self._column, self.target
        return MonteCarloErrors(p_target=_none(c["p_se"][t]), gap=_none(c["gap_se"][t]),
                                gap_softmax=_none(c["gap_softmax_se"][t]), mutual_information=_none(c["mi_se"][0]),
                                n_samples=self.n_samples)

    # ---- inside the attention ---------------------------------------------------------------------
    def _check_window(self, idx: list[int]) -> None:
        if list(idx) != list(self.grid.window):
            raise ValueError(f"this grid's frames hold the tokens {self.grid.window}, not {list(idx)}")

    def row_summary(self, layer: int, idx: list[int]) -> rows.RowSummary:
        """The frame's `RowSummary` of a stochastic layer; a deterministic layer's, from its softmax."""
        self._check_window(idx)
        if layer in self.frame.rows:
            return self.frame.rows[layer][0]
        soft = self.softmax_weights[layer]                                            # (H, T, T)
        return rows.row_summary(soft, soft[None], idx)

    def map_summary(self, layer: int, idx: list[int]) -> rows.MapSummary:
        self._check_window(idx)
        if layer in self.frame.rows:
            return self.frame.rows[layer][1]
        soft = self.softmax_weights[layer]
        return rows.map_summary(soft, soft[None], idx)

    def prior_mean_weights(self, layer: int, head: int) -> np.ndarray:
        """(T, T) what the prior's bars show for every query: the mean of the grid's prior draws at
        this prior value (the same for every query), or pi where the bars show pi."""
        if self.grid.draws_prior(layer):
            row = self.grid.prior_draw_stats(layer, head)[self.prior_index, 0]
            return np.broadcast_to(row, (len(row), len(row)))
        return self.prior_weights[layer, head].double().numpy()
