"""BAM-W: Weibull attention scores with a Gamma prior (Fan et al. 2020, secs. 3.2-3.3).

  q:      S_ij ~ Weibull(k, lambda_ij),  lambda_ij = softmax_j(psi_ij) / Gamma(1 + 1/k),
          so that E_q[S_ij] = lambda_ij Gamma(1 + 1/k) = softmax_j(psi_ij)
  prior:  S_ij ~ Gamma(beta pi_j, rate beta),  so that E_p[S_ij] = pi_j
"""

from __future__ import annotations

import math

import torch
from torch.distributions import Gamma, Weibull

from bam_viz.families.base import AttentionFamily, CellStatistics, HyperSpec, Marginal
from bam_viz.families.kl import EULER_GAMMA, kl_weibull_gamma
from bam_viz.families.sampling import (
    log_gamma_rsample,
    log_of,
    log_weibull_rsample,
    masked_log_softmax,
    normalize_log,
)


class WeibullFamily(AttentionFamily):
    name = "weibull"
    label = "Weibull (BAM-W)"
    short_label = "Weibull"
    mean_pull = "k shrinks"
    source = "Fan et al. 2020, sec. 3"
    learned_prior = True
    has_density = True
    row_sliceable = True
    hyper_specs = (
        HyperSpec("shape_k", 10.0, 0.2, 1000.0, "log", "shape_k · Weibull shape k (log scale)",
                  "Weibull shape k: larger k gives less random attention (k → ∞ is plain softmax)."),
        HyperSpec("beta", 1.0, 1e-4, 1e4, "log", "beta · Gamma prior rate β (log scale)",
                  "Rate β of the Gamma prior: how tightly the prior holds each score near its mean.",
                  prior_only=True),
    )

    @staticmethod
    def log_scale(log_p: torch.Tensor, shape_k: float) -> torch.Tensor:
        """log lambda_ij = log softmax_j(psi_ij) - log Gamma(1 + 1/k) (BAM sec. 3.2)."""
        return log_p - math.lgamma(1 + 1 / shape_k)

    def sample(self, log_p, hyper, mask, generator, drawn_rows=None):
        k = hyper.shape_k
        # Gamma(1 + 1/k) divides every key's scale alike, which the normalisation removes: a tensor k
        # (an exported graph's input, `bam_viz.inference.graph`) leaves it out, as ONNX has no lgamma.
        log_scale = log_p if isinstance(k, torch.Tensor) else self.log_scale(log_p, k)
        return normalize_log(log_weibull_rsample(log_scale, k, generator, drawn_rows), mask)

    def sample_prior(self, log_pi, hyper, mask, generator):
        # S ~ Gamma(beta * pi, beta): the rate cancels in the normalisation.
        return normalize_log(log_gamma_rsample(log_of(hyper.beta) + log_pi, generator), mask)

    def statistics(self, log_p, log_pi, valid, hyper):
        k, beta = hyper.shape_k, hyper.beta
        log_scale = self.log_scale(log_p, k)
        log_alpha = math.log(beta) + log_pi
        kl = kl_weibull_gamma(log_scale, k, log_alpha.exp().clamp_min(1e-38), beta)
        return CellStatistics(
            kl,
            posterior={"shape_k": torch.full_like(log_p, k), "scale": log_scale.exp()},
            prior={"alpha": log_alpha.exp().expand_as(log_p), "beta": torch.full_like(log_p, beta)},
        )

    def kl_terms(self, log_p, log_pi, valid):
        """The KL summed over cells, separated into what depends on k and on beta. With alpha = beta pi,
        lambda Gamma(1 + 1/k) = p and c_k = log Gamma(1 + 1/k), each cell's KL (`kl_weibull_gamma`) is

            beta [ (gamma/k + c_k) pi - pi log p + p - pi log beta ] + log k - gamma - 1 + log Gamma(beta pi),

        so four sums over the cells, and one sum of log Gamma(beta pi_j) per beta, serve every (k, beta):
        the function returned computes those once (the last for each beta when first asked) and every
        (k, beta) from them. A live grid asked for a column of 33 values of beta per frame; as a loop
        over them it cost 3 ms of the server's CPU a frame (docs/performance.md). In float64: the
        beta-terms nearly cancel."""
        lp = log_p.double()
        pi = log_pi.double().exp().expand_as(lp)
        v = valid.expand_as(lp)
        zero = torch.zeros((), dtype=lp.dtype)

        def total(x):
            return torch.where(v, x, zero).sum((-1, -2))

        A, B, C, N = total(pi), total(pi * lp), total(lp.exp()), total(torch.ones_like(lp))
        # pi is one row over the keys, shared by every query: log Gamma(beta pi_j) once per key,
        # weighted by the number of valid queries that key has.
        pi_row = log_pi.double().exp()[..., 0, :]                                  # (..., Tk)
        per_key = v.sum(-2).double()                                               # (..., Tk)
        by_beta: dict[float, torch.Tensor] = {}                                    # beta -> its sum of log Gammas
        at = (-1,) + (1,) * A.dim()

        def sums(hypers):
            new = sorted({h.beta for h in hypers} - by_beta.keys())
            if new:
                betas = torch.tensor(new, dtype=torch.float64).view((-1,) + (1,) * pi_row.dim())
                D = (per_key * torch.lgamma((betas * pi_row).clamp_min(1e-38))).sum(-1)
                by_beta.update(zip(new, D, strict=True))
            D = torch.stack([by_beta[h.beta] for h in hypers])
            k = torch.tensor([h.shape_k for h in hypers], dtype=torch.float64).view(at)
            beta = torch.tensor([h.beta for h in hypers], dtype=torch.float64).view(at)
            c_k = torch.lgamma(1 + 1 / k)
            return (beta * ((EULER_GAMMA / k + c_k) * A - B + C - A * beta.log())
                    + N * (k.log() - EULER_GAMMA - 1) + D)

        return sums

    def kl_sums(self, log_p, log_pi, valid, hypers):
        return self.kl_terms(log_p, log_pi, valid)(hypers)

    def posterior(self, scores, hyper, mask=None):
        scale = torch.exp(self.log_scale(masked_log_softmax(scores, mask), hyper.shape_k))
        return Weibull(scale.clamp_min(torch.finfo(scale.dtype).tiny), torch.full_like(scale, hyper.shape_k))

    def prior(self, prior_logits, hyper, mask=None):
        log_pi = masked_log_softmax(prior_logits, mask)
        alpha = (hyper.beta * log_pi.exp()).clamp_min(torch.finfo(log_pi.dtype).tiny)
        return Gamma(alpha, torch.full_like(alpha, hyper.beta))

    def cell_distributions(self, posterior, prior):
        return Weibull(posterior["scale"], posterior["shape_k"]), Gamma(prior["alpha"], prior["beta"])

    def key_marginals(self, posterior_row, prior_row, key):
        from scipy import stats

        q = Marginal(stats.weibull_min, c=float(posterior_row["shape_k"][key]),
                     scale=float(posterior_row["scale"][key]))
        p = Marginal(stats.gamma, a=float(prior_row["alpha"][key]), scale=1 / float(prior_row["beta"][key]))
        return q, p
