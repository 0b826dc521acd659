"""Log-space sampling primitives the families share. Every draw takes an explicit generator."""

from __future__ import annotations

import torch
import torch.nn.functional as F


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


def first_rows(draw, shape, like: torch.Tensor, generator, drawn_rows: int | None) -> torch.Tensor:
    """`draw(shape)`, or, with `drawn_rows`, a draw shaped as if dimension -2 had `drawn_rows` rows,
    of which the first shape[-2] are kept: a pass that needs only the first queries ([CLS]) then
    consumes the generator exactly as the full pass does, and gets the full pass's numbers."""
    full = shape if drawn_rows is None else (*shape[:-2], drawn_rows, shape[-1])
    out = draw(full, generator=generator, device=like.device, dtype=like.dtype)
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
    g = _StandardGamma.apply(alpha + 1, generator)
    u = uniform(alpha.shape, alpha, generator)
    return g.log() + u.log() * torch.exp(-log_alpha)


def dirichlet_rsample(log_concentration, mask=None, generator=None):
    """w ~ Dirichlet(a) as normalised Gamma(a_j, 1) draws, implicitly reparameterised."""
    if mask is not None:
        log_concentration = log_concentration.masked_fill(~mask, 0.0)  # dummy a = 1, masked after
    return normalize_log(log_gamma_rsample(log_concentration, generator), mask)


def categorical_sample(log_probs, generator=None):
    """One-hot z ~ Cat(p) by the Gumbel-max trick (Gumbel 1954; Maddison et al. 2014)."""
    u = uniform(log_probs.shape, log_probs, generator)
    z = (log_probs - torch.log(-torch.log(u))).argmax(-1)
    return F.one_hot(z, log_probs.shape[-1]).to(log_probs.dtype)
