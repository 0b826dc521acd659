"""Log-space sampling primitives the families share. Every draw takes an explicit generator, a
`NoiseTape` in its place (which replays a recorded pass's draws: see there), or a `UniformNoise`
(every draw made from uniforms: the stream both the library and the browser make, or a graph's inputs)."""

from __future__ import annotations

import math

import numpy as np
import torch

from bam_viz.core import portable_random


def masked_log_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.log_softmax(-1)


def normalize(samples: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Weights on the simplex along the last axis: w_ij = S_ij / sum_l S_il over valid keys l
    (BAM eq. 4; some write-ups print l != i, a typo)."""
    if mask is not None:
        samples = samples.masked_fill(~mask.bool(), 0.0)
    total = samples.sum(-1, keepdim=True)
    return samples / total.clamp_min(torch.finfo(samples.dtype).tiny)


def normalize_log(log_samples: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """`normalize(exp(log_samples))`, computed as a softmax so it stays finite for any log S."""
    if mask is not None:
        # A finite floor instead of -inf: a row with no valid key gives uniform, never NaN, weights.
        log_samples = log_samples.masked_fill(~mask.bool(), torch.finfo(log_samples.dtype).min)
    return log_samples.softmax(-1)


def draw(sampler, shape, like: torch.Tensor, generator) -> torch.Tensor:
    """`sampler(shape)` (torch.rand, torch.randn) from `generator`, on `like`'s device and dtype;
    from the record when `generator` is a `NoiseTape`. Every elementwise draw goes through here."""
    def make(g):
        return sampler(tuple(shape), generator=g, device=like.device, dtype=like.dtype)

    if isinstance(generator, UniformNoise):
        return generator.draw(sampler, shape, like)
    return generator.take(shape, make) if isinstance(generator, NoiseTape) else make(generator)


def log_of(x):
    """log x of a float or of a tensor (a hyperparameter that an exported graph takes as an input)."""
    return torch.log(x) if isinstance(x, torch.Tensor) else math.log(x)


def first_rows(sampler, shape, like: torch.Tensor, generator, drawn_rows: int | None) -> torch.Tensor:
    """`sampler(shape)`, or, with `drawn_rows`, a draw shaped as if dimension -2 had `drawn_rows` rows,
    of which the first shape[-2] are kept: a pass that needs only the first queries ([CLS]) then
    consumes the generator exactly as the full pass does, and gets the full pass's numbers (the portable
    stream's element indices follow the full shape too: `explain()`'s [CLS] row is a [CLS]-only pass's)."""
    full = shape if drawn_rows is None else (*shape[:-2], drawn_rows, shape[-1])
    out = draw(sampler, full, like, generator)
    return out if drawn_rows is None else out[..., : shape[-2], :]


def uniform(shape, like: torch.Tensor, generator: torch.Generator | None, drawn_rows: int | None = None):
    """U(0, 1) draws kept inside the open interval, so that log(u) and log(-log(u)) stay finite."""
    u = first_rows(torch.rand, shape, like, generator, drawn_rows)
    tiny = torch.finfo(like.dtype).tiny
    return u.clamp(tiny, 1 - torch.finfo(like.dtype).eps / 2)


def log_weibull_rsample(log_scale, shape_k, generator=None, drawn_rows=None):
    """log S for S ~ Weibull(k, lambda): S = lambda * E^(1/k), E ~ Exp(1) (inverse CDF)."""
    u = uniform(log_scale.shape, log_scale, generator, drawn_rows)
    return log_scale + torch.log(-torch.log(u)) / shape_k


def log_lognormal_rsample(loc, sigma, generator=None, drawn_rows=None):
    """log S for S ~ LogNormal(mu, sigma): mu + sigma * eps."""
    eps = first_rows(torch.randn, loc.shape, loc, generator, drawn_rows)
    return loc + sigma * eps


class _StandardGamma(torch.autograd.Function):
    """Gamma(alpha, 1) draws with implicit reparameterisation gradients (Figurnov et al. 2018):
    dx/dalpha = -(dF/dalpha) / p(x), which torch computes in `_standard_gamma_grad`. torch's own
    Gamma.rsample does the same but cannot take a generator."""

    @staticmethod
    def forward(ctx, alpha, generator):
        if isinstance(generator, NoiseTape):
            x = generator.standard_gamma(alpha)
        else:
            x = torch._standard_gamma(alpha, generator=generator)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * torch._standard_gamma_grad(alpha, x), None


def log_gamma_rsample(log_alpha, generator=None):
    """log G for G ~ Gamma(alpha, 1), finite for any alpha > 0.

    For small alpha, G itself underflows; the boost identity Gamma(a) = Gamma(a + 1) * U^(1/a)
    (Marsaglia & Tsang 2000, sec. 6) keeps log G exact: log G = log Gamma(a + 1) + log(U) / a.
    """
    alpha = log_alpha.exp()
    if isinstance(generator, UniformNoise):
        g = generator.standard_gamma(alpha + 1)
    else:
        g = _StandardGamma.apply(alpha + 1, generator)
    u = uniform(alpha.shape, alpha, generator)
    return g.log() + u.log() * torch.exp(-log_alpha)


def dirichlet_rsample(log_concentration, mask=None, generator=None):
    """w ~ Dirichlet(a) as normalised Gamma(a_j, 1) draws, implicitly reparameterised."""
    if mask is not None:
        log_concentration = log_concentration.masked_fill(~mask, 0.0)  # dummy a = 1, masked after
    return normalize_log(log_gamma_rsample(log_concentration, generator), mask)


def categorical_sample(log_probs, generator=None):
    """One-hot z ~ Cat(p) by the Gumbel-max trick (Gumbel 1954; Maddison et al. 2014). A `NoiseTape`
    keeps the drawn key itself, not its Gumbel noise (see there)."""
    def make(g):
        u = uniform(log_probs.shape, log_probs, g)
        z = (log_probs - torch.log(-torch.log(u))).argmax(-1, keepdim=True)
        # scatter, not F.one_hot: an exported graph keeps the number of keys as the input's
        return torch.zeros_like(log_probs).scatter(-1, z, 1.0)

    return generator.take(log_probs.shape, make) if isinstance(generator, NoiseTape) else make(generator)


# ---- holding samples fixed ----------------------------------------------------------------------
def _wilson_hilferty(alpha: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The Gamma(alpha, 1) quantile at standard normal quantile z, approximately (Wilson & Hilferty
    1931): alpha (1 - 1/(9 alpha) + z / (3 sqrt(alpha)))^3, its cube kept positive."""
    base = 1 - 1 / (9 * alpha) + z / (3 * alpha.sqrt())
    return alpha * base.clamp_min(0.05) ** 3


def gamma_at_quantile(alpha, log_tail, lower, start_alpha, start, iterations: int = 64,
                      tolerance: float = 1e-12) -> torch.Tensor:
    """x with P(alpha, x) = u, in float64: the Gamma(alpha, 1) draw whose CDF value is that of the
    draw `start` of Gamma(start_alpha, 1). The quantile is held as a log tail probability, log u
    where `lower` (u < 1/2) and log(1 - u) elsewhere, so that neither tail loses its digits.

    Newton's method on log x of log P (or log Q = log(1 - P)), both nearly linear in log x in their
    own tail, with d log P / d log x = x p(x) / P; from `start` moved by the ratio of Wilson-Hilferty
    quantiles, which is the answer itself at alpha = start_alpha and close elsewhere. Steps are kept
    within a factor e^3, and a tail that underflows to 0 moves x by that much towards it. Most cells
    converge in two steps; only those whose step in log x is still above `tolerance` take more."""
    shape = torch.broadcast_shapes(alpha.shape, start.shape)
    a, a0 = alpha.double().expand(shape).reshape(-1), start_alpha.double().expand(shape).reshape(-1)
    log_tail, lower = log_tail.expand(shape).reshape(-1), lower.expand(shape).reshape(-1)
    tail0 = log_tail.exp()
    z = torch.where(lower, torch.special.ndtri(tail0), -torch.special.ndtri(tail0))
    y = start.double().expand(shape).reshape(-1).log() + (_wilson_hilferty(a, z) / _wilson_hilferty(a0, z)).log()
    log_gamma_a = torch.lgamma(a)
    active = torch.arange(y.numel(), device=y.device)
    for _ in range(iterations):
        ai, yi, low = a[active], y[active], lower[active]
        x = yi.exp()
        tail = torch.empty_like(x)
        tail[low] = torch.special.gammainc(ai[low], x[low])
        tail[~low] = torch.special.gammaincc(ai[~low], x[~low])
        slope = torch.exp(ai * yi - x - log_gamma_a[active]) / tail     # |d log(tail) / d log x|
        step = ((tail.log() - log_tail[active]) / torch.where(low, slope, -slope)).nan_to_num(0.0)
        step = torch.where(tail > 0, step, torch.where(low, -3.0, 3.0)).clamp(-3.0, 3.0)
        y[active] = yi - step
        active = active[step.abs() > tolerance]
        if active.numel() == 0:
            break
    return y.exp().view(shape)


class NoiseTape:
    """The random draws of one sampled pass, recorded once and replayed: what makes attention sample
    s ONE deterministic network, which Integrated Gradients can follow along a path of inputs.

    Pass it where a `torch.Generator` goes. Recording (`NoiseTape(generator)`), every draw site
    draws from `generator` exactly as it would without the tape (the same calls in the same order:
    the pass gives an untaped pass's numbers) and keeps what it drew. `replay(rows)` gives a tape
    that answers the same sites, in the same order, from the record: in a pass whose row r is sample
    `rows[r]` (any number of rows, e.g. path points x samples), a site gets the recorded rows
    `rows`. What is kept is the reparameterisation noise, so that a sample is the same function of
    new attention scores:
      - uniforms (Weibull's inverse CDF, dropout masks, the Gamma boost's U) and
        normals (Lognormal): the numbers themselves;
      - a Gamma(alpha, 1) draw (Dirichlet): its CDF value u = P(alpha, G), solved again for each
        new alpha (`gamma_at_quantile`); its gradient stays the implicit one, -(dP/dalpha) / p(G);
      - a categorical draw: the drawn key (its one-hot). Its Gumbel noise would re-draw the key by
        argmax at every input: a piecewise constant function, whose gradient is zero almost
        everywhere and whose jumps Integrated Gradients cannot see.
    Draw sites: `draw` (hence `first_rows`, `uniform` and the dropout of `bam_viz.nn.attention`),
    `_StandardGamma` and `categorical_sample`.
    """

    def __init__(self, generator: torch.Generator | None, *, _record: list | None = None,
                 _rows: torch.Tensor | None = None):
        self.generator = generator
        self._record = [] if _record is None else _record
        self._rows = _rows
        self._cursor = 0

    @property
    def recording(self) -> bool:
        return self._rows is None

    def __len__(self) -> int:
        return len(self._record)

    def replay(self, rows: torch.Tensor) -> NoiseTape:
        """A tape that answers a pass whose row r is sample `rows[r]` with the recorded draws."""
        if not self.recording:
            raise RuntimeError("replay a recording tape, not a replaying one")
        rows = torch.as_tensor(rows, dtype=torch.long)
        return NoiseTape(None, _record=self._record, _rows=rows)

    @property
    def complete(self) -> bool:
        """Whether a replaying pass asked for every recorded draw."""
        return self._cursor == len(self._record)

    def _next(self, shape) -> object:
        shape = tuple(shape)
        if self._cursor >= len(self._record):
            raise RuntimeError(f"the replayed pass asks for draw {self._cursor + 1} of shape {shape}, "
                               f"but the recorded pass made only {len(self._record)}")
        kept_shape, kept = self._record[self._cursor]
        if kept_shape[1:] != shape[1:] or shape[0] != len(self._rows):
            raise RuntimeError(f"draw {self._cursor + 1} of the replayed pass has shape {shape}, "
                               f"the recorded one {kept_shape} for rows of {len(self._rows)}: not the same pass")
        self._cursor += 1
        return kept

    def _select(self, kept: torch.Tensor) -> torch.Tensor:
        return kept.index_select(0, self._rows.to(kept.device))

    def take(self, shape, make) -> torch.Tensor:
        """`make(generator)`, kept, when recording; its record's rows when replaying."""
        if self.recording:
            out = make(self.generator)
            self._record.append((tuple(shape), out))
            return out
        return self._select(self._next(shape))

    def standard_gamma(self, alpha: torch.Tensor) -> torch.Tensor:
        """Gamma(alpha, 1) draws: recorded as their CDF values, replayed at the new alpha."""
        if self.recording:
            x = torch._standard_gamma(alpha, generator=self.generator)
            a, xd = alpha.detach().double(), x.detach().double()
            p = torch.special.gammainc(a, xd)
            lower = p < 0.5
            log_tail = torch.where(lower, p, torch.special.gammaincc(a, xd)).log()
            self._record.append((tuple(alpha.shape), (a, xd, log_tail, lower)))
            return x
        a0, x0, log_tail, lower = (self._select(t) for t in self._next(alpha.shape))
        return gamma_at_quantile(alpha.detach(), log_tail, lower, a0, x0).to(alpha.dtype)


# ---- draws made from uniforms ----------------------------------------------------------------------
class UniformNoise:
    """Every draw of a pass made from uniforms in (0, 1), one array per draw site, in the order the
    pass asks: where a `torch.Generator` goes, this gives the same pass as a function of its uniforms,
    which an exported graph takes as inputs and the browser makes (`PortableNoise`, `GivenNoise`).

      torch.rand       the uniforms themselves, (*shape)
      torch.randn      Box-Muller, sqrt(-2 log u1) cos(2 pi u2), from (2, *shape)
      Gamma(a, 1)      for a >= 1 (the boost of `log_gamma_rsample` makes it so): Marsaglia & Tsang
                       (2000) with PROPOSALS candidates from (2 PROPOSALS, *shape), the first accepted
                       kept; if none is (probability <= 0.049^4 = 6e-6 a cell), the mode d = a - 1/3.
    `shapes` lists each site's shape as asked."""

    PROPOSALS = 4

    def __init__(self):
        self.shapes: list[tuple] = []

    def uniforms(self, shape: tuple, like: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _site(self, shape, like: torch.Tensor) -> torch.Tensor:
        shape = tuple(shape)
        u = self.uniforms(shape, like)
        self.shapes.append(shape)
        return u

    def draw(self, sampler, shape, like: torch.Tensor) -> torch.Tensor:
        if sampler is torch.rand:
            return self._site(shape, like)
        if sampler is torch.randn:
            return box_muller(self._site((2, *shape), like))
        raise ValueError(f"no uniform form of {sampler!r}")

    def standard_gamma(self, alpha: torch.Tensor) -> torch.Tensor:
        u = self._site((2 * self.PROPOSALS, *alpha.shape), alpha)
        P = self.PROPOSALS
        d = alpha - 1 / 3
        c = torch.rsqrt(9 * d)
        x = torch.sqrt(-2 * torch.log(u[: P // 2])) * torch.cos(2 * math.pi * u[P // 2 : P])
        y = torch.sqrt(-2 * torch.log(u[: P // 2])) * torch.sin(2 * math.pi * u[P // 2 : P])
        normals = torch.cat([x, y])                                                   # (P, *shape)
        v = (1 + c * normals) ** 3
        log_v = torch.log(v.clamp_min(torch.finfo(v.dtype).tiny))
        accept = (v > 0) & (torch.log(u[P:]) < 0.5 * normals**2 + d - d * v + d * log_v)
        out = d
        for p in reversed(range(P)):
            out = torch.where(accept[p], d * v[p], out)
        return out


def box_muller(u: torch.Tensor) -> torch.Tensor:
    """Standard normals from uniforms (2, *shape): sqrt(-2 log u[0]) cos(2 pi u[1])."""
    return torch.sqrt(-2 * torch.log(u[0])) * torch.cos(2 * math.pi * u[1])


class PortableNoise(UniformNoise):
    """Site i's uniforms from `bam_viz.core.portable_random` at `seed`: the numbers the browser makes."""

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed

    def uniforms(self, shape, like):
        n = int(np.prod(shape)) if shape else 1
        u = portable_random.uniforms(self.seed, len(self.shapes), n).reshape(shape)
        return torch.from_numpy(u).to(device=like.device, dtype=like.dtype)


class GivenNoise(UniformNoise):
    """The uniforms given, one tensor per site in order (an exported graph's noise inputs)."""

    def __init__(self, tensors):
        super().__init__()
        self.tensors = list(tensors)

    def uniforms(self, shape, like):
        i = len(self.shapes)
        if i >= len(self.tensors):
            raise RuntimeError(f"the pass asks for draw {i + 1}, but {len(self.tensors)} were given")
        u = self.tensors[i]
        if tuple(u.shape) != tuple(shape):
            raise RuntimeError(f"draw {i + 1} has shape {tuple(shape)}, the given one {tuple(u.shape)}")
        return u.to(like.dtype)
