"""Attention as a random variable: the layer that draws its weights from an attention family.

The families themselves (what q and the prior are, how to sample them, their KL and densities)
live in `bam_viz.families`, one class each; this module is the mechanism they plug into: scores,
masks, the contextual prior network, S samples in one batched pass, and what a layer reports.

Priors (Fan et al. 2020, "Bayesian Attention Modules", sec. 3.3): a contextual prior from keys
only, pi_j = softmax_j(h^T act(W k_j + b)), or a constant (uniform) one.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from bam_viz import families
from bam_viz.families import AttentionFamily, Hyper, Softmax
from bam_viz.families.sampling import draw, masked_log_softmax

PRIORS = ("contextual", "constant")


class Mode(enum.Enum):
    """How a stochastic layer sets its weights."""

    SAMPLE = "sample"        # draw from q: one draw per sample
    MEAN = "mean"            # softmax(psi): the deterministic pass (E_q[S], the scores' mean; not E_q[w])
    ENUMERATE = "enumerate"  # a hard alignment: every key at once, marginalised exactly by the model


class Trace(enum.Enum):
    """What a layer records for `explain()` (training always gets the KL it needs)."""

    NONE = "none"            # nothing
    FULL = "full"            # everything, prior draws included
    STATS = "stats"          # everything but the prior draws (the mean pass)
    SAMPLES = "samples"      # the sampled weights and the prior's log pi per row; the caller draws
    #                          the prior, so the pass consumes the generator as an untraced one does


@dataclass(frozen=True)
class AttentionConfig:
    """An attention layer's family, its prior and its hyperparameters (one typed `Hyper`)."""

    family: str = Softmax.name
    prior: str = "contextual"         # "contextual" (BAM-*C) or "constant" (uniform pi)
    prior_hidden: int = 16            # hidden width of the contextual prior MLP (BAM code uses 10-20)
    hyper: Hyper | Mapping[str, float] | None = None   # None: the family's defaults

    def __post_init__(self):
        family = families.get(self.family)
        if self.prior not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r}; choose from {PRIORS}")
        object.__setattr__(self, "hyper", family.hyper(self.hyper))

    @property
    def attention_family(self) -> AttentionFamily:
        return families.get(self.family)

    def with_hyper(self, **overrides: float | None) -> Hyper:
        """The hyperparameters with inference-time overrides (the app's sliders); None keeps."""
        return self.hyper.replace(**overrides)

    def to_dict(self) -> dict:
        return {"family": self.family, "prior": self.prior, "prior_hidden": self.prior_hidden, **self.hyper}

    @classmethod
    def from_dict(cls, d: Mapping) -> AttentionConfig:
        d = dict(d)
        family = d.pop("family", Softmax.name)
        prior = d.pop("prior", "contextual")
        hidden = d.pop("prior_hidden", 16)
        return cls(family, prior, hidden, d)


def _key_mask(mask: torch.Tensor | None, ndim: int) -> torch.Tensor | None:
    """(B, T) key mask -> broadcastable (B, 1, ..., 1, T) with `ndim` dimensions."""
    if mask is None:
        return None
    return mask.reshape(mask.shape[0], *([1] * (ndim - 2)), mask.shape[-1]).bool()


class ContextualPrior(nn.Module):
    """pi_j = softmax_j(h^T act(W k_j + b)), one small MLP per head, from keys only (BAM sec. 3.3)."""

    def __init__(self, n_heads: int, d_head: int, hidden: int = 16):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_heads, d_head, hidden) / math.sqrt(d_head))
        self.bias = nn.Parameter(torch.zeros(n_heads, hidden))
        # h = 0 at initialisation: the prior starts uniform over keys and learns from the KL.
        self.out = nn.Parameter(torch.zeros(n_heads, hidden))

    def forward(self, keys: torch.Tensor) -> torch.Tensor:
        # keys: (B, H, T, d) -> prior logits (B, H, 1, T), shared by every query
        hidden = torch.tanh(torch.einsum("bhtd,hdk->bhtk", keys, self.weight) + self.bias[:, None])
        return torch.einsum("bhtk,hk->bht", hidden, self.out).unsqueeze(-2)


@dataclass
class AttentionTrace:
    """What one attention layer did, for `explain()`. Batch B' = rows in, B'' = rows out."""
    scores: torch.Tensor                  # (B', H, T, T) masked logits psi
    softmax_weights: torch.Tensor         # (B', H, T, T) softmax(psi): the deterministic pass's weights
    weights: torch.Tensor                 # (B'', H, T, T) the weights used (sampled or mean)
    prior_weights: torch.Tensor           # (B', H, T, T) prior mean pi (broadcast over queries)
    prior_sample_weights: torch.Tensor | None  # (B'', H, T, T) normalised draws from the prior
    kl: torch.Tensor                      # (B', H) KL(q || prior) summed over valid queries and keys
    posterior_params: dict = field(default_factory=dict)  # each (B', H, T, T)
    prior_params: dict = field(default_factory=dict)
    # Trace.SAMPLES leaves the prior draws to the caller and gives instead the prior's log pi for
    # every output row, (B'', H, 1, T): the keys, and so pi, differ between samples above the
    # first stochastic layer. Draw with `AttentionFamily.sample_prior`.
    prior_log_probs: torch.Tensor | None = None


def tile(x: torch.Tensor, reps: int) -> torch.Tensor:
    """(B, ...) -> (reps * B, ...), sample-major (row s * B + b)."""
    return x.repeat(reps, *([1] * (x.dim() - 1))) if reps > 1 else x


def dropout(x: torch.Tensor, p: float, generator) -> torch.Tensor:
    """Inverted dropout whose mask comes from `generator` (F.dropout cannot take one), or from a
    `NoiseTape`'s record."""
    if p <= 0:
        return x
    keep = draw(torch.rand, x.shape, x, generator) >= p
    return x * keep / (1 - p)


# What `probe` set: each watched core and the function its weights pass through. A context variable,
# not a module hook: one model serves every session's thread, and a probe set in one must not touch
# another's pass.
_PROBE: contextvars.ContextVar = contextvars.ContextVar("bam_viz_attention_probe", default=None)


@contextlib.contextmanager
def probe(core: BayesianAttention, fn: Callable[[torch.Tensor], torch.Tensor]):
    """Within the block, in this thread only, the weights `core` uses, after any dropout on them,
    (reps*B, H, Tq, Tk), are `fn(weights)`: read them (return them unchanged) or replace them.
    Probes on several cores nest. Attention attribution (Hao et al. 2021) replaces the weights with
    scaled ones; the f(E[w]) pass (`bam_viz.inference.gaps`) with their Monte Carlo mean."""
    token = _PROBE.set({**(_PROBE.get() or {}), core: fn})
    try:
        yield
    finally:
        _PROBE.reset(token)


def probed(core: BayesianAttention, weights: torch.Tensor) -> torch.Tensor:
    """`weights` through the probe set on `core` in this thread, if any."""
    fn = (_PROBE.get() or {}).get(core)
    return weights if fn is None else fn(weights)


class BayesianAttention(nn.Module):
    """Scaled dot-product attention whose weights are drawn from the configured family.

    forward(q, k, v, mask) with q, k, v (B, H, T, d) and mask (B, T) (True = real token).
    `n_samples` > 1 draws that many weight samples per input row in one batched pass and returns
    (n_samples * B, H, T, d), sample-major (row s * B + b). Mode.MEAN uses softmax(psi), the mean
    of the unnormalised scores (BAM's deterministic test-time pass); the normalised weights' mean
    E_q[w] differs from it for Weibull and Lognormal scores, and moves with k or sigma. `hyper` (a
    `Hyper` of this layer's family) overrides the configured values without touching the weights.
    q may have fewer rows than k (only the first queries, e.g. [CLS] in a top layer whose other
    rows nothing reads): row-sliceable families then draw the full pass's random numbers and keep
    those rows, so the generator moves on exactly as in the full pass.
    """

    def __init__(self, n_heads: int, d_head: int, config: AttentionConfig):
        super().__init__()
        self.n_heads, self.d_head, self.config = n_heads, d_head, config
        self.family = config.attention_family
        uses_prior_net = self.family.learned_prior and config.prior == "contextual"
        self.prior_net = ContextualPrior(n_heads, d_head, config.prior_hidden) if uses_prior_net else None

    def prior_logits(self, keys: torch.Tensor) -> torch.Tensor:
        if self.prior_net is None:
            return keys.new_zeros(keys.shape[0], keys.shape[1], 1, keys.shape[2])  # uniform pi
        return self.prior_net(keys)

    def resolve(self, hyper: Hyper | None) -> Hyper:
        """The hyperparameters in force: `hyper`, or the configured ones."""
        if hyper is None:
            return self.config.hyper
        if not isinstance(hyper, Hyper):
            raise TypeError(f"hyper must be a Hyper (e.g. config.with_hyper(...)), not {type(hyper).__name__}")
        if hyper.family != self.family.name:
            raise ValueError(f"hyperparameters of {hyper.family} attention given to a {self.family.name} layer")
        return hyper

    def forward(self, q, k, v, mask=None, *, n_samples: int = 1, generator=None, mode: Mode = Mode.SAMPLE,
                hyper: Hyper | None = None, trace: Trace = Trace.NONE, attn_dropout: float = 0.0):
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])         # (B, H, T, T)
        weights, log_p, kmask, reps, hyper = self.sample_weights(
            scores, mask, n_samples=n_samples, generator=generator, mode=mode, hyper=hyper,
            attn_dropout=attn_dropout)
        out = weights @ tile(v, reps)                                     # (reps*B, H, T, d)

        need_kl = self.training and self.family.learned_prior
        if trace is Trace.NONE and not need_kl:
            return out, None
        return out, self._trace(hyper, scores, log_p, weights, k, kmask, reps, generator, trace)

    def sample_weights(self, scores, mask=None, *, n_samples: int = 1, generator=None,
                       mode: Mode = Mode.SAMPLE, hyper: Hyper | None = None, attn_dropout: float = 0.0):
        """The weights from the scores psi (B, H, Tq, Tk): drawn from q (or its mean, Mode.MEAN),
        (reps*B, H, Tq, Tk) with reps = n_samples for a stochastic family. Also returns log
        softmax(psi), the key mask, reps and the hyperparameters in force."""
        hyper = self.resolve(hyper)
        T, n_keys = scores.shape[-2:]
        drawn = None if T == n_keys else n_keys                          # query rows the full pass has
        # (B, 1, 1, T); None when no key is padded (one sentence): four masked fills a layer fewer.
        kmask = None if mask is None or bool(mask.all()) else _key_mask(mask, 4)
        log_p = masked_log_softmax(scores, kmask)                         # log softmax_j(psi_ij)
        stochastic = self.family.stochastic and mode is Mode.SAMPLE
        reps = n_samples if stochastic else 1
        if not stochastic:
            weights = log_p.exp()
        else:
            if drawn is not None and not self.family.row_sliceable:
                raise ValueError(f"{self.family.name} draws cannot be sliced by query row: pass every query")
            km = tile(kmask, reps) if kmask is not None else None
            weights = self.family.sample(tile(log_p, reps), hyper, km, generator, drawn)
        weights = probed(self, dropout(weights, attn_dropout, generator))
        return weights, log_p, kmask, reps, hyper

    def _trace(self, hyper, scores, log_p, weights, keys, kmask, reps, generator, level: Trace):
        log_pi = masked_log_softmax(self.prior_logits(keys), kmask)      # (B, H, 1, T)
        if level is Trace.SAMPLES:
            return AttentionTrace(scores, log_p.exp(), weights, log_pi.exp().expand_as(log_p), None,
                                  kl=log_p.new_zeros(log_p.shape[:2]), prior_log_probs=tile(log_pi, reps))
        return self._stats_trace(hyper, scores, log_p, log_pi, weights, kmask, reps, generator, level)

    def at_hyper(self, trace: AttentionTrace, hyper: Hyper) -> AttentionTrace:
        """A Mode.MEAN pass's `trace` (Trace.STATS, no padded key: one sentence) at other hyperparameters.
        That pass's weights are softmax(psi) whatever they are, so only the KL and the distributions'
        parameters move: made again here exactly as the pass makes them, from its own scores and log pi
        (`bam_viz.inference.explain.deterministic_pass` keeps one pass per sentence)."""
        if trace.prior_log_probs is None or trace.prior_sample_weights is not trace.weights:
            raise ValueError("at_hyper takes a Mode.MEAN trace made with Trace.STATS")
        log_p = masked_log_softmax(trace.scores, None)
        return self._stats_trace(self.resolve(hyper), trace.scores, log_p, trace.prior_log_probs, trace.weights,
                                 None, 1, None, Trace.STATS)

    def _stats_trace(self, hyper, scores, log_p, log_pi, weights, kmask, reps, generator, level: Trace):
        valid = torch.ones_like(log_p, dtype=torch.bool) if kmask is None else kmask.expand_as(log_p)
        stats = self.family.statistics(log_p, log_pi, valid, hyper)
        cells = valid
        if kmask is not None and log_p.shape[-2] == log_p.shape[-1]:
            # A padded query row is no cell of the sentence: it adds no KL and no gradient.
            cells = valid & kmask.transpose(-1, -2)
        kl = stats.kl.masked_fill(~cells, 0.0).sum((-1, -2))              # (B, H) over real cells
        if level is Trace.NONE:  # training: only the KL is read
            return AttentionTrace(scores, log_p.exp(), weights, log_pi.exp(), weights, kl)
        if level is Trace.STATS:
            prior_samples = weights
        else:
            km = tile(kmask, reps) if kmask is not None else None
            prior_samples = self.family.sample_prior(tile(log_pi.expand_as(log_p), reps), hyper, km, generator)
        return AttentionTrace(
            scores=scores, softmax_weights=log_p.exp(), weights=weights,
            prior_weights=log_pi.exp().expand_as(log_p), prior_sample_weights=prior_samples, kl=kl,
            posterior_params=stats.posterior, prior_params=stats.prior,
            # Trace.STATS keeps log pi (B, H, 1, T) for `at_hyper`, unpadded: one sentence's pass
            prior_log_probs=log_pi if level is Trace.STATS and kmask is None else None,
        )
