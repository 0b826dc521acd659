"""The closed-form KL divergences the attention families use, in the parameterisation they keep.

Only KL(Weibull || Gamma) is missing from torch.distributions; it is registered here, so that
`import bam_viz` suffices for `kl_divergence(Weibull(...), Gamma(...))`. The Lognormal and
Dirichlet pairs are torch's own formulas, written for log-space parameters and key masks.
"""

from __future__ import annotations

import math

import torch
from torch.distributions import Gamma, Normal, Weibull, kl_divergence, register_kl

EULER_GAMMA = 0.5772156649015329


def kl_weibull_gamma(log_scale, shape_k, alpha, beta):
    """KL(Weibull(k, lambda) || Gamma(alpha, beta)) from log(lambda), every constant kept.

    Zhang, Chen, Guo & Zhou (2018), "WHAI: Weibull Hybrid Autoencoding Inference", eq. 7;
    Fan et al. (2020), "Bayesian Attention Modules", eq. 9:

        KL = gamma*alpha/k - alpha*log(lambda) + log(k) + beta*lambda*Gamma(1 + 1/k)
             - gamma - 1 - alpha*log(beta) + log Gamma(alpha)

    with gamma the Euler-Mascheroni constant. Taking log(lambda) rather than lambda keeps the
    result finite when lambda underflows (a tiny softmax weight divided by Gamma(1 + 1/k)).
    """
    log_scale = torch.as_tensor(log_scale)
    dtype = log_scale.dtype   # every argument in log_scale's precision: beta.log() in float32 is off by 6e-8 * alpha
    log_scale, shape_k, alpha, beta = torch.broadcast_tensors(
        log_scale, torch.as_tensor(shape_k, dtype=dtype), torch.as_tensor(alpha, dtype=dtype),
        torch.as_tensor(beta, dtype=dtype),
    )
    # beta * lambda * Gamma(1 + 1/k) = beta * E_q[S], computed in log space.
    mean_term = torch.exp(beta.log() + log_scale + torch.lgamma(1 + 1 / shape_k))
    return (
        EULER_GAMMA * alpha / shape_k
        - alpha * log_scale
        + shape_k.log()
        + mean_term
        - EULER_GAMMA
        - 1
        - alpha * beta.log()
        + torch.lgamma(alpha)
    )


@register_kl(Weibull, Gamma)
def _kl_weibull_gamma(p: Weibull, q: Gamma) -> torch.Tensor:
    """Closed form of `kl_weibull_gamma` for torch's distribution objects."""
    return kl_weibull_gamma(p.scale.log(), p.concentration, q.concentration, q.rate)


def kl_lognormal(loc_q, sigma_q, loc_p, sigma_p):
    """KL between log-normals equals KL between the normals of log S (invariance under exp)."""
    return kl_divergence(Normal(loc_q, torch.as_tensor(sigma_q, dtype=loc_q.dtype).expand_as(loc_q)),
                         Normal(loc_p, torch.as_tensor(sigma_p, dtype=loc_p.dtype).expand_as(loc_p)))


DIRICHLET_KL_FLOOR = 1e-8


def kl_dirichlet(log_a, log_b, mask=None):
    """KL(Dir(a) || Dir(b)) over the valid keys only (standard closed form, e.g. Penny 2001):
    lgG(a0) - sum lgG(a_j) - lgG(b0) + sum lgG(b_j) + sum (a_j - b_j)(psi(a_j) - psi(a0)).

    Concentrations are floored at DIRICHLET_KL_FLOOR: as a_j -> 0 the term b_j / a_j (from
    psi(a_j) ~ -1/a_j) leaves float range long before a_j underflows, and a weight with a_j < 1e-8
    is zero in every draw anyway. Above the floor the formula is exact (tested against torch)."""
    floor = math.log(DIRICHLET_KL_FLOOR)
    a, b = log_a.clamp_min(floor).exp(), log_b.clamp_min(floor).exp()
    if mask is not None:
        a, b = a.masked_fill(~mask, 1.0), b.masked_fill(~mask, 1.0)
    m = torch.ones_like(a) if mask is None else mask.to(a.dtype).expand_as(a)
    a0, b0 = (a * m).sum(-1), (b * m).sum(-1)
    return (torch.lgamma(a0) - (torch.lgamma(a) * m).sum(-1) - torch.lgamma(b0)
            + (torch.lgamma(b) * m).sum(-1)
            + ((a - b) * (torch.digamma(a) - torch.digamma(a0).unsqueeze(-1)) * m).sum(-1))
