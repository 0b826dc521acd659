"""KL divergences that torch.distributions lacks, registered so that `import bam_viz` suffices.

Only KL(Weibull || Gamma) is missing from torch; the other pairs BAM needs (LogNormal/LogNormal,
Dirichlet/Dirichlet, Categorical/Categorical) are torch's own.
"""

from __future__ import annotations

import torch
from torch.distributions import Gamma, Weibull, register_kl

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
    log_scale, shape_k, alpha, beta = torch.broadcast_tensors(
        torch.as_tensor(log_scale), torch.as_tensor(shape_k, dtype=torch.as_tensor(log_scale).dtype),
        torch.as_tensor(alpha), torch.as_tensor(beta),
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
