"""The closed-form KL divergences the attention families use, in the parameterisation they keep.

Only KL(Weibull || Gamma) is missing from torch.distributions; it is registered here, so that
`import bam_viz` suffices for `kl_divergence(Weibull(...), Gamma(...))`. The Lognormal pair is
torch's own formula; the Dirichlet pair is the same closed form as torch's, rearranged so that it
stays exact at concentrations far below float range, for log-space parameters and key masks.
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


def kl_dirichlet(log_a, log_b, mask=None):
    """KL(Dir(a) || Dir(b)) over the valid keys, from log a and log b; a float64 tensor of shape
    log_a.shape[:-1], whatever the inputs' dtype (their gradient comes back in their own dtype).

    The closed form (Penny 2001, "KL-divergences of Normal, Gamma, Dirichlet and Wishart densities"):

        KL = lgG(a0) - sum lgG(a_j) - lgG(b0) + sum lgG(b_j) + sum (a_j - b_j)(psi(a_j) - psi(a0))

    rewritten with the recurrences lgG(x) = lgG(1 + x) - log x and psi(x) = psi(1 + x) - 1/x
    (Abramowitz & Stegun 6.1.15, 6.3.5; DLMF 5.5.1, 5.5.2). They are identities, so no branch is
    an approximation: lgG(1 + x) and psi(1 + x) are smooth and bounded as x -> 0 (A&S 6.1.33,
    6.3.14; DLMF 5.7.3, 5.7.4), and the pole of psi leaves only

        (a_j - b_j)(1/a_j - 1/a0) = (1 - a_j/a0) - b_j (1/a_j - 1/a0),
        b_j (1/a_j - 1/a0) = exp(log b_j - log a_j + log(1 - a_j/a0)),

    kept in log space: it stays exact after a_j underflows (a softmax weight of e^-800 is a
    finite log). The result is +inf only where the exact value is beyond float64's range, or
    where a valid key has a_j = 0 or b_j = 0 (log -inf), the limit of the KL there. Padded keys
    (mask False) contribute nothing and may hold anything; a row without valid keys gives 0.
    """
    log_a, log_b = torch.broadcast_tensors(torch.as_tensor(log_a).double(), torch.as_tensor(log_b).double())
    valid = torch.ones_like(log_a, dtype=torch.bool) if mask is None else mask.to(torch.bool).expand_as(log_a)
    absent = valid & ((log_a == -math.inf) | (log_b == -math.inf))
    keep = valid & ~absent
    # Every value that a `where` leaves out stays finite, so that no NaN reaches the gradient.
    log_a, log_b = torch.where(keep, log_a, 0.0), torch.where(keep, log_b, 0.0)
    log_a0, e, sum_e = _log_total(log_a, keep)
    log_b0, _, _ = _log_total(log_b, keep)

    # 1 - a_j/a0 from the sum of the other keys' terms, not as a difference: near a_j = a0 the
    # difference would lose every digit. The largest key is the only one that can be close.
    top = torch.where(keep, log_a, -math.inf).argmax(-1, keepdim=True)
    is_top = torch.arange(log_a.shape[-1], device=log_a.device) == top
    rest_of_top = torch.where(is_top, 0.0, e).sum(-1, keepdim=True)
    others = torch.where(is_top, rest_of_top, sum_e - e)         # a0 - a_j, in units of the largest a
    some = keep & (others > 0)
    others = torch.where(some, others, 1.0)
    one_minus_c = torch.where(some, others / sum_e, 0.0)         # 1 - a_j/a0
    pole = torch.where(some, torch.exp(log_b - log_a + others.log() - sum_e.log()), 0.0)

    a, b, a0, b0 = log_a.exp(), log_b.exp(), log_a0.exp(), log_b0.exp()
    digamma_a0 = torch.digamma(1 + a0).unsqueeze(-1)
    per_key = (torch.lgamma(1 + b) - log_b - torch.lgamma(1 + a) + log_a
               + (a - b) * (torch.digamma(1 + a) - digamma_a0) - one_minus_c + pole)
    kl = (torch.lgamma(1 + a0) - log_a0 - torch.lgamma(1 + b0) + log_b0
          + torch.where(keep, per_key, 0.0).sum(-1))
    kl = torch.where(keep.any(-1), kl, 0.0)
    return torch.where(absent.any(-1), math.inf, kl)


def _log_total(log_x, keep):
    """log sum_j x_j over the kept keys, and the terms x_j / max x with their sum (>= 1), scaled by
    the largest so that neither underflows. The shift is detached: the total does not depend on it."""
    shift = torch.where(keep, log_x, -math.inf).amax(-1, keepdim=True)
    shift = torch.where(torch.isfinite(shift), shift, 0.0).detach()
    e = torch.where(keep, torch.exp(log_x - shift), 0.0)
    sum_e = e.sum(-1, keepdim=True)
    sum_e = torch.where(sum_e > 0, sum_e, 1.0)
    return (shift + sum_e.log()).squeeze(-1), e, sum_e
