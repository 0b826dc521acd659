"""Attention as a random variable: posterior and prior families, sampling, KL, and the layer module.

Notation follows Fan et al. (2020), "Bayesian Attention Modules" (BAM), NeurIPS:
  scores  psi_ij = q_i . k_j / sqrt(d)     the usual attention logits (masked)
  S_ij              unnormalised attention scores, random, with E_q[S_ij] = softmax_j(psi_ij)
  weights w_ij = S_ij / sum_l S_il           samples normalised onto the simplex over ALL keys l
                                             (BAM eq. 4; some write-ups print l != i, a typo)
Families:
  softmax      deterministic baseline (Vaswani et al. 2017)
  weibull      BAM-W: S_ij ~ Weibull(k, lambda_ij), lambda_ij = softmax_j(psi_ij) / Gamma(1 + 1/k)  (BAM sec. 3.2)
  lognormal    BAM-L: S_ij ~ LogNormal(mu_ij, sigma), mu_ij = log softmax_j(psi_ij) - sigma^2 / 2   (BAM sec. 3.2)
  dirichlet    w_i ~ Dirichlet(a0 * softmax(psi_i)), implicit reparameterisation
               (Cinquin et al. 2021, "Pathologies in priors and inference for Bayesian transformers";
                Figurnov et al. 2018, "Implicit reparameterization gradients")
  categorical  one key z_i ~ Cat(softmax(psi_i)) (Deng et al. 2018, "Latent alignment and
               variational attention"), marginalised exactly by enumeration.
Priors (BAM sec. 3.3): a contextual prior from keys only, pi_j = softmax_j(h^T act(W k_j + b)), or a
constant (uniform) one. Weibull pairs with Gamma(beta * pi_j, rate beta) (so E_p[S_j] = pi_j),
Lognormal with LogNormal(log pi_j - sigma_p^2 / 2, sigma_p), Dirichlet with Dirichlet(alpha_p * pi).

Sampling is done in log space (log S), normalised with a softmax over valid keys: the same draws
as S / sum S, but finite at extreme slider values where S itself under- or overflows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import (
    Categorical,
    Dirichlet,
    Distribution,
    Gamma,
    LogNormal,
    Normal,
    Weibull,
    kl_divergence,
)

from bam_viz.kl import kl_weibull_gamma

FAMILIES = ("softmax", "weibull", "lognormal", "dirichlet", "categorical")
STOCHASTIC_FAMILIES = ("weibull", "lognormal", "dirichlet", "categorical")
# Families whose draws take a fixed count of random numbers per attention cell, so that a pass on
# the first query rows alone can draw the full pass's numbers and keep its rows (Gamma rejection
# sampling, behind the Dirichlet, takes a variable count).
ROW_SLICEABLE = ("weibull", "lognormal")

# Slider ranges of the app; the property tests cover them end to end.
HYPER_RANGES = {
    "shape_k": (0.2, 1000.0, "log"),
    "sigma": (0.01, 3.0, "linear"),
    "beta": (1e-4, 1e4, "log"),
    "concentration": (0.05, 1e4, "log"),
}
# Hyperparameters only the prior reads: the posterior's samples, and so a sampled pass traced at
# level "samples", do not depend on them (explain() reuses that pass when only these move).
PRIOR_HYPER = ("beta", "prior_sigma", "prior_concentration")
# Which hyperparameters a family reads (the app hides the others).
FAMILY_HYPER = {
    "softmax": (),
    "weibull": ("shape_k", "beta"),
    "lognormal": ("sigma", "prior_sigma"),
    "dirichlet": ("concentration", "prior_concentration"),
    "categorical": (),
}


@dataclass(frozen=True)
class AttentionConfig:
    family: str = "softmax"
    prior: str = "contextual"         # "contextual" (BAM-*C) or "constant" (uniform pi)
    prior_hidden: int = 16            # hidden width of the contextual prior MLP (BAM code uses 10-20)
    shape_k: float = 10.0             # Weibull shape k of q
    sigma: float = 0.3                # Lognormal sigma of q
    beta: float = 1.0                 # Gamma prior rate
    prior_sigma: float = 1.0          # Lognormal prior sigma_p
    concentration: float = 50.0       # Dirichlet posterior total concentration a0
    prior_concentration: float = 10.0  # Dirichlet prior total concentration alpha_p

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"unknown attention family {self.family!r}; choose from {FAMILIES}")
        if self.prior not in ("contextual", "constant"):
            raise ValueError(f"unknown prior {self.prior!r}; choose 'contextual' or 'constant'")

    def with_hyper(self, **hyper) -> AttentionConfig:
        """Inference-time overrides (the app's sliders); None means keep the trained value."""
        names = {f.name for f in fields(self)} - {"family", "prior", "prior_hidden"}
        unknown = set(hyper) - names
        if unknown:
            raise ValueError(f"unknown hyperparameters {sorted(unknown)}; known: {sorted(names)}")
        given = {k: float(v) for k, v in hyper.items() if v is not None}
        for k, v in given.items():
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{k} must be a positive finite number, got {v}")
        return replace(self, **given)


def _masked_log_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.log_softmax(-1)


def _key_mask(mask: torch.Tensor | None, ndim: int) -> torch.Tensor | None:
    """(B, T) key mask -> broadcastable (B, 1, ..., 1, T) with `ndim` dimensions."""
    if mask is None:
        return None
    return mask.reshape(mask.shape[0], *([1] * (ndim - 2)), mask.shape[-1]).bool()


# ---- public distribution constructors -----------------------------------------------------------
def posterior(scores: torch.Tensor, family: str, mask: torch.Tensor | None = None, *,
              shape_k: float = 10.0, sigma: float = 0.3, concentration: float = 50.0) -> Distribution:
    """The approximate posterior q over unnormalised scores S (weibull, lognormal), over the weights
    (dirichlet) or over the selected key (categorical); its `.mean` is softmax(scores, -1).

    `mask` (broadcastable to scores, True = real key) gives padded keys zero mean. Masked entries
    carry a dummy positive parameter in the Dirichlet and must be ignored by the caller.
    """
    log_p = _masked_log_softmax(scores, mask)
    if family == "weibull":
        # BAM sec. 3.2: lambda = softmax / Gamma(1 + 1/k) makes E[S] = lambda Gamma(1 + 1/k) = softmax.
        scale = torch.exp(log_p - math.lgamma(1 + 1 / shape_k))
        return Weibull(scale.clamp_min(torch.finfo(scale.dtype).tiny),
                       torch.full_like(scale, shape_k))
    if family == "lognormal":
        # E[S] = exp(mu + sigma^2 / 2) = softmax.
        return LogNormal(log_p - sigma**2 / 2, torch.full_like(log_p, sigma))
    if family == "dirichlet":
        conc = (concentration * log_p.exp()).clamp_min(torch.finfo(log_p.dtype).tiny)
        return Dirichlet(conc)
    if family == "categorical":
        return Categorical(logits=log_p)
    if family == "softmax":
        raise ValueError("softmax attention is deterministic: it has no posterior distribution")
    raise ValueError(f"unknown attention family {family!r}; choose from {FAMILIES}")


def prior(prior_logits: torch.Tensor, family: str, mask: torch.Tensor | None = None, *,
          beta: float = 1.0, sigma: float = 1.0, concentration: float = 10.0) -> Distribution:
    """The prior matching `family`, from prior logits over keys (pi = softmax(prior_logits)).

    weibull -> Gamma(beta * pi, rate beta); lognormal -> LogNormal(log pi - sigma^2/2, sigma);
    dirichlet -> Dirichlet(concentration * pi); categorical -> Categorical(pi). In each the mean of the
    (unnormalised) score is pi_j (BAM sec. 3.3).
    """
    log_pi = _masked_log_softmax(prior_logits, mask)
    tiny = torch.finfo(log_pi.dtype).tiny
    if family == "weibull":
        alpha = (beta * log_pi.exp()).clamp_min(tiny)
        return Gamma(alpha, torch.full_like(alpha, beta))
    if family == "lognormal":
        return LogNormal(log_pi - sigma**2 / 2, torch.full_like(log_pi, sigma))
    if family == "dirichlet":
        return Dirichlet((concentration * log_pi.exp()).clamp_min(tiny))
    if family == "categorical":
        return Categorical(logits=log_pi)
    raise ValueError(f"family {family!r} has no prior; choose from {STOCHASTIC_FAMILIES}")


def normalize(samples: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Weights on the simplex along the last axis: w_ij = S_ij / sum_l S_il over valid keys l."""
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


# ---- reparameterised log-space samplers ---------------------------------------------------------
def _first_rows(draw, shape, like: torch.Tensor, generator, drawn_rows: int | None) -> torch.Tensor:
    """`draw(shape)`, or, with `drawn_rows`, a draw shaped as if dimension -2 had `drawn_rows` rows,
    of which the first shape[-2] are kept: a pass that needs only the first queries ([CLS]) then
    consumes the generator exactly as the full pass does, and gets the full pass's numbers."""
    full = shape if drawn_rows is None else (*shape[:-2], drawn_rows, shape[-1])
    out = draw(full, generator=generator, device=like.device, dtype=like.dtype)
    return out if drawn_rows is None else out[..., : shape[-2], :]


def _uniform(shape, like: torch.Tensor, generator: torch.Generator | None, drawn_rows: int | None = None):
    u = _first_rows(torch.rand, shape, like, generator, drawn_rows)
    tiny = torch.finfo(like.dtype).tiny
    return u.clamp(tiny, 1 - torch.finfo(like.dtype).eps / 2)


def log_weibull_rsample(log_scale, shape_k, generator=None, drawn_rows=None):
    """log S for S ~ Weibull(k, lambda): S = lambda * E^(1/k), E ~ Exp(1) (inverse CDF)."""
    u = _uniform(log_scale.shape, log_scale, generator, drawn_rows)
    return log_scale + torch.log(-torch.log(u)) / shape_k


def log_lognormal_rsample(loc, sigma, generator=None, drawn_rows=None):
    """log S for S ~ LogNormal(mu, sigma): mu + sigma * eps."""
    eps = _first_rows(torch.randn, loc.shape, loc, generator, drawn_rows)
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
    u = _uniform(alpha.shape, alpha, generator)
    return g.log() + u.log() * torch.exp(-log_alpha)


def dirichlet_rsample(log_concentration, mask=None, generator=None):
    """w ~ Dirichlet(a) as normalised Gamma(a_j, 1) draws, implicitly reparameterised."""
    if mask is not None:
        log_concentration = log_concentration.masked_fill(~mask, 0.0)  # dummy a = 1, masked after
    return normalize_log(log_gamma_rsample(log_concentration, generator), mask)


def categorical_sample(log_probs, generator=None):
    """One-hot z ~ Cat(p) by the Gumbel-max trick (Gumbel 1954; Maddison et al. 2014)."""
    u = _uniform(log_probs.shape, log_probs, generator)
    z = (log_probs - torch.log(-torch.log(u))).argmax(-1)
    return F.one_hot(z, log_probs.shape[-1]).to(log_probs.dtype)


# ---- KL in the parameterisation the layer keeps -------------------------------------------------
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


# ---- latent categorical alignment (Deng et al. 2018) --------------------------------------------
def exact_log_marginal(log_prior: torch.Tensor, log_lik: torch.Tensor) -> torch.Tensor:
    """log p(y|x) = log sum_z p(z|x) p(y|x,z), by enumeration over the last axis (Deng et al. eq. 1)."""
    return torch.logsumexp(log_prior + log_lik, -1)


def exact_posterior(log_prior: torch.Tensor, log_lik: torch.Tensor) -> torch.Tensor:
    """p(z|x,y) = p(z|x) p(y|x,z) / p(y|x) (Bayes' rule), as log probabilities."""
    return (log_prior + log_lik).log_softmax(-1)


def categorical_elbo(log_q: torch.Tensor, log_prior: torch.Tensor, log_lik: torch.Tensor) -> torch.Tensor:
    """ELBO(q) = E_q[log p(y|x,z)] - KL(q(z) || p(z|x)) (Deng et al. eq. 2), exactly enumerated.

    log p(y|x) - ELBO(q) = KL(q || p(z|x,y)) >= 0, with equality at q = exact_posterior.
    """
    q = log_q.exp()
    return (q * log_lik).sum(-1) - (q * (log_q - log_prior)).nan_to_num(0.0).sum(-1)


# ---- key marginals for the density panel --------------------------------------------------------
def key_marginals(family: str, posterior_row: dict, prior_row: dict, key: int):
    """SciPy frozen distributions of S_ij under q and under the prior, for one query row and key.

    `posterior_row` / `prior_row` hold the parameters of one query row over all keys (as kept in
    `ExplainResult.posterior_params`). Dirichlet weights have Beta(a_j, a_0 - a_j) marginals.
    """
    from scipy import stats

    def f(d, name):
        return float(d[name][key])

    if family == "weibull":
        q = stats.weibull_min(c=f(posterior_row, "shape_k"), scale=f(posterior_row, "scale"))
        p = stats.gamma(a=f(prior_row, "alpha"), scale=1 / f(prior_row, "beta"))
    elif family == "lognormal":
        q = stats.lognorm(s=f(posterior_row, "sigma"), scale=math.exp(f(posterior_row, "loc")))
        p = stats.lognorm(s=f(prior_row, "sigma"), scale=math.exp(f(prior_row, "loc")))
    elif family == "dirichlet":
        a, b = posterior_row["concentration"], prior_row["concentration"]
        aj, bj = float(a[key]), float(b[key])
        q = stats.beta(aj, max(float(a.sum()) - aj, 1e-12))
        p = stats.beta(bj, max(float(b.sum()) - bj, 1e-12))
    else:
        raise ValueError(f"family {family!r} has no continuous score density")
    return q, p


# ---- the layer ----------------------------------------------------------------------------------
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
    mean_weights: torch.Tensor            # (B', H, T, T) E_q[w] ~ softmax(psi)
    weights: torch.Tensor                 # (B'', H, T, T) the weights used (sampled or mean)
    prior_weights: torch.Tensor           # (B', H, T, T) prior mean pi (broadcast over queries)
    prior_sample_weights: torch.Tensor | None  # (B'', H, T, T) normalised draws from the prior
    kl: torch.Tensor                      # (B', H) KL(q || prior) summed over queries and valid keys
    posterior_params: dict = field(default_factory=dict)  # each (B', H, T, T)
    prior_params: dict = field(default_factory=dict)
    # trace="samples" leaves the prior draws to the caller and gives instead the prior's log pi for
    # every output row, (B'', H, 1, T): the keys, and so pi, differ between samples above the
    # first stochastic layer. Draw with `prior_weight_samples`.
    prior_log_probs: torch.Tensor | None = None


def _tile(x: torch.Tensor, reps: int) -> torch.Tensor:
    """(B, ...) -> (reps * B, ...), sample-major (row s * B + b)."""
    return x.repeat(reps, *([1] * (x.dim() - 1))) if reps > 1 else x


def dropout(x: torch.Tensor, p: float, generator: torch.Generator | None) -> torch.Tensor:
    """Inverted dropout whose mask comes from `generator` (F.dropout cannot take one)."""
    if p <= 0:
        return x
    keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype) >= p
    return x * keep / (1 - p)


class BayesianAttention(nn.Module):
    """Scaled dot-product attention whose weights are drawn from `config.family`.

    forward(q, k, v, mask) with q, k, v (B, H, T, d) and mask (B, T) (True = real token).
    `n_samples` > 1 draws that many weight samples per input row in one batched pass and returns
    (n_samples * B, H, T, d), sample-major (row s * B + b). mode="mean" uses E_q[w] = softmax (the
    f(E[z]) pass). `hyper` overrides the configured hyperparameters without touching the weights.
    `trace`: True records everything; "samples" only the sampled weights and the per-row prior
    probabilities, leaving the prior draws to the caller (the S-row pass of explain, which then
    consumes the generator exactly as an untraced pass does); "stats" everything but the prior
    draws (the mean pass).
    q may have fewer rows than k (only the first queries, e.g. [CLS] in a top layer whose other
    rows nothing reads): the families in `ROW_SLICEABLE` then draw the full pass's random numbers
    and keep those rows, so the generator moves on exactly as in the full pass.
    """

    def __init__(self, n_heads: int, d_head: int, config: AttentionConfig):
        super().__init__()
        self.n_heads, self.d_head, self.config = n_heads, d_head, config
        uses_prior_net = config.family in ("weibull", "lognormal", "dirichlet") and config.prior == "contextual"
        self.prior_net = ContextualPrior(n_heads, d_head, config.prior_hidden) if uses_prior_net else None

    def prior_logits(self, keys: torch.Tensor) -> torch.Tensor:
        if self.prior_net is None:
            return keys.new_zeros(keys.shape[0], keys.shape[1], 1, keys.shape[2])  # uniform pi
        return self.prior_net(keys)

    def forward(self, q, k, v, mask=None, *, n_samples: int = 1, generator=None, mode: str = "sample",
                hyper: dict | None = None, trace: bool | str = False, attn_dropout: float = 0.0):
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])         # (B, H, T, T)
        weights, log_p, kmask, reps, cfg = self.sample_weights(
            scores, mask, n_samples=n_samples, generator=generator, mode=mode, hyper=hyper,
            attn_dropout=attn_dropout)
        out = weights @ _tile(v, reps)                                    # (reps*B, H, T, d)

        need_kl = self.training and cfg.family in ("weibull", "lognormal", "dirichlet")
        if not (trace or need_kl):
            return out, None
        return out, self._trace(cfg, scores, log_p, weights, k, kmask, reps, generator, trace)

    def sample_weights(self, scores, mask=None, *, n_samples: int = 1, generator=None,
                       mode: str = "sample", hyper: dict | None = None, attn_dropout: float = 0.0):
        """The weights from the scores psi (B, H, Tq, Tk): drawn from q (or its mean, mode="mean"),
        (reps*B, H, Tq, Tk) with reps = n_samples for a stochastic family. Also returns log
        softmax(psi), the key mask, reps and the configuration with `hyper` applied."""
        cfg = self.config.with_hyper(**(hyper or {}))
        T, n_keys = scores.shape[-2:]
        drawn = None if T == n_keys else n_keys                          # query rows the full pass has
        # (B, 1, 1, T); None when no key is padded (one sentence): four masked fills a layer fewer.
        kmask = None if mask is None or bool(mask.all()) else _key_mask(mask, 4)
        log_p = _masked_log_softmax(scores, kmask)                        # log softmax_j(psi_ij)
        stochastic = cfg.family in STOCHASTIC_FAMILIES and mode == "sample"
        reps = n_samples if stochastic else 1
        lp, km = _tile(log_p, reps), (_tile(kmask, reps) if kmask is not None else None)
        fam = cfg.family
        if stochastic and drawn is not None and fam not in ROW_SLICEABLE:
            raise ValueError(f"{fam} draws cannot be sliced by query row: pass every query")
        if not stochastic:
            weights = log_p.exp()
        elif fam == "weibull":
            log_scale = lp - math.lgamma(1 + 1 / cfg.shape_k)            # BAM sec. 3.2
            weights = normalize_log(log_weibull_rsample(log_scale, cfg.shape_k, generator, drawn), km)
        elif fam == "lognormal":
            weights = normalize_log(log_lognormal_rsample(lp - cfg.sigma**2 / 2, cfg.sigma, generator, drawn), km)
        elif fam == "dirichlet":
            weights = dirichlet_rsample(math.log(cfg.concentration) + lp, km, generator)
        else:  # categorical: a hard alignment per query
            weights = categorical_sample(lp, generator)
        return dropout(weights, attn_dropout, generator), log_p, kmask, reps, cfg

    def _trace(self, cfg, scores, log_p, weights, keys, kmask, reps, generator, level):
        fam = cfg.family
        log_pi = _masked_log_softmax(self.prior_logits(keys), kmask)      # (B, H, 1, T)
        if level == "samples":
            return AttentionTrace(scores, log_p.exp(), weights, log_pi.exp().expand_as(log_p), None,
                                  kl=log_p.new_zeros(log_p.shape[:2]),
                                  prior_log_probs=log_pi.repeat(reps, 1, 1, 1) if reps > 1 else log_pi)
        valid = torch.ones_like(log_p, dtype=torch.bool) if kmask is None else kmask.expand_as(log_p)
        post, pri = {}, {}
        if fam == "weibull":
            log_scale = log_p - math.lgamma(1 + 1 / cfg.shape_k)
            log_alpha = math.log(cfg.beta) + log_pi
            kl = kl_weibull_gamma(log_scale, cfg.shape_k, log_alpha.exp().clamp_min(1e-38), cfg.beta)
            post = {"shape_k": torch.full_like(log_p, cfg.shape_k), "scale": log_scale.exp()}
            pri = {"alpha": log_alpha.exp().expand_as(log_p), "beta": torch.full_like(log_p, cfg.beta)}
        elif fam == "lognormal":
            loc_q, loc_p = log_p - cfg.sigma**2 / 2, log_pi - cfg.prior_sigma**2 / 2
            kl = kl_lognormal(loc_q.masked_fill(~valid, 0.0), cfg.sigma,
                              loc_p.expand_as(loc_q).masked_fill(~valid, 0.0), cfg.prior_sigma)
            # Padded keys have log-location -inf; they carry 0 as a placeholder (never drawn).
            post = {"loc": loc_q.masked_fill(~valid, 0.0), "sigma": torch.full_like(log_p, cfg.sigma)}
            pri = {"loc": loc_p.expand_as(log_p).masked_fill(~valid, 0.0),
                   "sigma": torch.full_like(log_p, cfg.prior_sigma)}
        elif fam == "dirichlet":
            log_a = math.log(cfg.concentration) + log_p
            log_b = (math.log(cfg.prior_concentration) + log_pi).expand_as(log_p)
            kl_rows = kl_dirichlet(log_a, log_b, valid)                   # (B, H, T)
            kl = kl_rows.unsqueeze(-1) / valid.sum(-1, keepdim=True)      # spread over keys for the sum below
            post, pri = {"concentration": log_a.exp()}, {"concentration": log_b.exp()}
        else:
            kl = torch.zeros_like(log_p)
        kl = kl.masked_fill(~valid, 0.0).sum((-1, -2))                    # (B, H)
        if level is False:  # training: only the KL is read
            return AttentionTrace(scores, log_p.exp(), weights, log_pi.exp(), weights, kl)
        prior_samples = (weights if level == "stats" else
                         self._prior_samples(cfg, log_pi.expand_as(log_p), kmask, reps, generator))
        return AttentionTrace(
            scores=scores, mean_weights=log_p.exp(), weights=weights,
            prior_weights=log_pi.exp().expand_as(log_p), prior_sample_weights=prior_samples, kl=kl,
            posterior_params=post, prior_params=pri,
        )

    @staticmethod
    def _prior_samples(cfg, log_pi, kmask, reps, generator):
        lp = log_pi.repeat(reps, 1, 1, 1) if reps > 1 else log_pi
        km = kmask.repeat(reps, 1, 1, 1) if (kmask is not None and reps > 1) else kmask
        return prior_weight_samples(cfg, lp, km, generator)


def prior_weight_samples(cfg: AttentionConfig, log_pi: torch.Tensor, kmask: torch.Tensor | None = None,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    """Attention weights drawn from the prior of `cfg.family`: one normalised draw per row of
    `log_pi` (..., T), the prior's log pi over keys (broadcast it over queries first)."""
    fam = cfg.family
    if fam == "weibull":   # S ~ Gamma(beta * pi, beta): the rate cancels in the normalisation
        return normalize_log(log_gamma_rsample(math.log(cfg.beta) + log_pi, generator), kmask)
    if fam == "lognormal":
        return normalize_log(log_lognormal_rsample(log_pi - cfg.prior_sigma**2 / 2, cfg.prior_sigma,
                                                   generator), kmask)
    if fam == "dirichlet":
        return dirichlet_rsample(math.log(cfg.prior_concentration) + log_pi, kmask, generator)
    if fam == "categorical":
        return categorical_sample(log_pi, generator)
    return log_pi.exp()
