"""Dirichlet attention weights, implicitly reparameterised.

Cinquin et al. 2021, "Pathologies in priors and inference for Bayesian transformers";
Figurnov et al. 2018, "Implicit reparameterization gradients".

  q:      w_i ~ Dirichlet(a0 softmax(psi_i)),   E_q[w_i] = softmax(psi_i)
  prior:  w_i ~ Dirichlet(alpha_p pi),          E_p[w_i] = pi
"""

from __future__ import annotations

import math

import torch
from torch.distributions import Dirichlet

from bam_viz.families.base import AttentionFamily, CellStatistics, HyperSpec, Marginal
from bam_viz.families.kl import kl_dirichlet
from bam_viz.families.sampling import dirichlet_rsample, log_of, masked_log_softmax


class DirichletFamily(AttentionFamily):
    name = "dirichlet"
    label = "Dirichlet"
    short_label = "Dirichlet"
    source = "Cinquin et al. 2021"
    learned_prior = True
    has_density = True
    # Gamma rejection sampling takes a variable count of random numbers per cell: not row-sliceable.
    hyper_specs = (
        HyperSpec("concentration", 50.0, 0.05, 1e4, "log", "concentration · Dirichlet α₀ (log scale)",
                  "Dirichlet concentration: larger values keep samples close to the mean."),
        HyperSpec("prior_concentration", 10.0, 0.05, 1e4, "log", "prior_concentration · prior Dirichlet α_p",
                  "Total concentration of the Dirichlet prior.", prior_only=True, slider=False),
    )
    density_variable = "weight w_ij"

    def sample(self, log_p, hyper, mask, generator, drawn_rows=None):
        if drawn_rows is not None:
            raise ValueError("dirichlet draws cannot be sliced by query row: pass every query")
        return dirichlet_rsample(log_of(hyper.concentration) + log_p, mask, generator)

    def sample_prior(self, log_pi, hyper, mask, generator):
        return dirichlet_rsample(log_of(hyper.prior_concentration) + log_pi, mask, generator)

    def statistics(self, log_p, log_pi, valid, hyper):
        """The KL is float64 whatever log_p's dtype: with a posterior weight far below the prior's,
        b_j / a_j leaves float32's range long before log a_j stops being finite (`kl_dirichlet`)."""
        log_a = math.log(hyper.concentration) + log_p
        log_b = (math.log(hyper.prior_concentration) + log_pi).expand_as(log_p)
        # Summed in float64: rounded to float32, a log a_j far below zero would be off by float32's
        # step there, and exp(log b_j - log a_j), the term that dominates the KL at such a key, by
        # as much relatively.
        kl_rows = kl_dirichlet(math.log(hyper.concentration) + log_p.double(),
                               (math.log(hyper.prior_concentration) + log_pi.double()).expand_as(log_p),
                               valid)                                         # (..., Tq)
        kl = kl_rows.unsqueeze(-1) / valid.sum(-1, keepdim=True)              # spread over the keys
        return CellStatistics(kl, posterior={"concentration": log_a.exp()}, prior={"concentration": log_b.exp()})

    def posterior(self, scores, hyper, mask=None):
        log_p = masked_log_softmax(scores, mask)
        return Dirichlet((hyper.concentration * log_p.exp()).clamp_min(torch.finfo(log_p.dtype).tiny))

    def prior(self, prior_logits, hyper, mask=None):
        log_pi = masked_log_softmax(prior_logits, mask)
        return Dirichlet((hyper.prior_concentration * log_pi.exp()).clamp_min(torch.finfo(log_pi.dtype).tiny))

    def key_marginals(self, posterior_row, prior_row, key):
        """A Dirichlet weight's marginal is Beta(a_j, a_0 - a_j)."""
        from scipy import stats

        a, b = posterior_row["concentration"], prior_row["concentration"]
        aj, bj = float(a[key]), float(b[key])
        return (Marginal(stats.beta, a=aj, b=max(float(a.sum()) - aj, 1e-12)),
                Marginal(stats.beta, a=bj, b=max(float(b.sum()) - bj, 1e-12)))
