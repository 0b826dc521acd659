"""BAM-L: Lognormal attention scores with a Lognormal prior (Fan et al. 2020, secs. 3.2-3.3).

  q:      S_ij ~ LogNormal(log softmax_j(psi_ij) - sigma^2 / 2, sigma),  E_q[S_ij] = softmax_j(psi_ij)
  prior:  S_ij ~ LogNormal(log pi_j - sigma_p^2 / 2, sigma_p),          E_p[S_ij] = pi_j
"""

from __future__ import annotations

import math

import torch
from torch.distributions import LogNormal

from bam_viz.families.base import AttentionFamily, CellStatistics, HyperSpec, Marginal
from bam_viz.families.kl import kl_lognormal
from bam_viz.families.sampling import log_lognormal_rsample, masked_log_softmax, normalize_log


class LognormalFamily(AttentionFamily):
    name = "lognormal"
    label = "Lognormal (BAM-L)"
    short_label = "Lognormal"
    mean_pull = "σ grows"
    source = "Fan et al. 2020, sec. 3"
    learned_prior = True
    has_density = True
    row_sliceable = True
    hyper_specs = (
        HyperSpec("sigma", 0.3, 0.01, 3.0, "linear", "sigma · Lognormal σ",
                  "Lognormal σ: larger σ gives more random attention."),
        HyperSpec("prior_sigma", 1.0, 0.01, 3.0, "linear", "prior_sigma · prior Lognormal σ_p",
                  "σ_p of the Lognormal prior.", prior_only=True, slider=False),
    )

    def sample(self, log_p, hyper, mask, generator, drawn_rows=None):
        s = hyper.sigma
        return normalize_log(log_lognormal_rsample(log_p - s**2 / 2, s, generator, drawn_rows), mask)

    def sample_prior(self, log_pi, hyper, mask, generator):
        s = hyper.prior_sigma
        return normalize_log(log_lognormal_rsample(log_pi - s**2 / 2, s, generator), mask)

    def statistics(self, log_p, log_pi, valid, hyper):
        loc_q, loc_p = log_p - hyper.sigma**2 / 2, log_pi - hyper.prior_sigma**2 / 2
        # Padded keys have log-location -inf; they carry 0 as a placeholder (never drawn).
        loc_q = loc_q.masked_fill(~valid, 0.0)
        loc_p = loc_p.expand_as(loc_q).masked_fill(~valid, 0.0)
        return CellStatistics(
            kl_lognormal(loc_q, hyper.sigma, loc_p, hyper.prior_sigma),
            posterior={"loc": loc_q, "sigma": torch.full_like(log_p, hyper.sigma)},
            prior={"loc": loc_p, "sigma": torch.full_like(log_p, hyper.prior_sigma)},
        )

    def posterior(self, scores, hyper, mask=None):
        log_p = masked_log_softmax(scores, mask)
        return LogNormal(log_p - hyper.sigma**2 / 2, torch.full_like(log_p, hyper.sigma))

    def prior(self, prior_logits, hyper, mask=None):
        log_pi = masked_log_softmax(prior_logits, mask)
        return LogNormal(log_pi - hyper.prior_sigma**2 / 2, torch.full_like(log_pi, hyper.prior_sigma))

    def cell_distributions(self, posterior, prior):
        return LogNormal(posterior["loc"], posterior["sigma"]), LogNormal(prior["loc"], prior["sigma"])

    def key_marginals(self, posterior_row, prior_row, key):
        from scipy import stats

        return tuple(Marginal(stats.lognorm, s=float(row["sigma"][key]), scale=math.exp(float(row["loc"][key])))
                     for row in (posterior_row, prior_row))
