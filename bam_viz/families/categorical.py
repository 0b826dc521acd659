"""Latent categorical alignment (Deng et al. 2018, "Latent alignment and variational attention").

One key z per query, z ~ Cat(softmax(psi)); the model marginalises it exactly by enumeration:
  log p(y|x)   = log sum_z p(z|x) p(y|x,z)                     (eq. 1)
  p(z|x,y)     = p(z|x) p(y|x,z) / p(y|x)                      (Bayes' rule)
  ELBO(q)      = E_q[log p(y|x,z)] - KL(q(z) || p(z|x))        (eq. 2)
and log p(y|x) - ELBO(q) = KL(q || p(z|x,y)) >= 0, with equality at the exact posterior.
"""

from __future__ import annotations

import torch
from torch.distributions import Categorical

from bam_viz.families.base import AttentionFamily
from bam_viz.families.sampling import categorical_sample, masked_log_softmax


class CategoricalFamily(AttentionFamily):
    name = "categorical"
    label = "latent categorical alignment"
    short_label = "categorical"
    source = "Deng et al. 2018"
    hard_alignment = True

    def sample(self, log_p, hyper, mask, generator, drawn_rows=None):
        if drawn_rows is not None:
            raise ValueError("categorical draws cannot be sliced by query row: pass every query")
        return categorical_sample(log_p, generator)

    def sample_prior(self, log_pi, hyper, mask, generator):
        return categorical_sample(log_pi, generator)

    def posterior(self, scores, hyper, mask=None):
        return Categorical(logits=masked_log_softmax(scores, mask))

    def prior(self, prior_logits, hyper, mask=None):
        return Categorical(logits=masked_log_softmax(prior_logits, mask))

    # ---- exact enumeration ----------------------------------------------------------------------
    @staticmethod
    def exact_log_marginal(log_prior: torch.Tensor, log_lik: torch.Tensor) -> torch.Tensor:
        """log p(y|x) = log sum_z p(z|x) p(y|x,z), by enumeration over the last axis (eq. 1)."""
        return torch.logsumexp(log_prior + log_lik, -1)

    @staticmethod
    def exact_posterior(log_prior: torch.Tensor, log_lik: torch.Tensor) -> torch.Tensor:
        """log p(z|x,y) = log p(z|x) + log p(y|x,z) - log p(y|x) (Bayes' rule)."""
        return (log_prior + log_lik).log_softmax(-1)

    @staticmethod
    def elbo(log_q: torch.Tensor, log_prior: torch.Tensor, log_lik: torch.Tensor) -> torch.Tensor:
        """ELBO(q) = E_q[log p(y|x,z)] - KL(q(z) || p(z|x)) (eq. 2), exactly enumerated."""
        q = log_q.exp()
        return (q * log_lik).sum(-1) - (q * (log_q - log_prior)).nan_to_num(0.0).sum(-1)
