"""The one object that stands between the library and the pages: what `explain()` returns.

Every chart in the app is a pure function of an `ExplainResult`; nothing here imports Streamlit.
Shapes: S samples, L layers, H heads, T tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np
import torch

from bam_viz import families, metrics


@dataclass(frozen=True)
class MonteCarloErrors:
    """Standard errors of the Monte Carlo estimates in an `ExplainResult`, over its S attention samples.

    `p_positive`: E[f(z)], the mean of S values f(z_s)[positive]: sample sd / sqrt(S).
    `gap`: E[f(z)] - f(E[z]). f(E[z]) is one deterministic pass, so the gap is the mean of the
    paired differences d_s = f(z_s) - f(E[z]) and its SE is sd(d_s) / sqrt(S): the estimator of
    the paired difference, numerically equal to the SE of E[f(z)] since f(E[z]) is a constant.
    `mutual_information`: the jackknife (leave one sample out), `metrics.mutual_information_jackknife_se`.

    None means "not estimable": a spread needs two samples of a stochastic model (three for the
    jackknife, whose one-sample replicates always have MI 0). 0 means exact: a deterministic model
    (no Monte Carlo at all) or S identical samples (their sample sd is 0). Never NaN.
    """
    ESTIMATORS: ClassVar[dict[str, str]] = {
        "p_positive": "sample sd of the S per-sample P(positive) / √S",
        "gap": "sd of the S paired differences f(z_s) − f(E[z]) / √S",
        "mutual_information": "jackknife, leaving out one attention sample at a time",
    }

    p_positive: float | None
    gap: float | None
    mutual_information: float | None
    n_samples: int
    estimator: str = "; ".join(f"{k}: {v}" for k, v in ESTIMATORS.items())


def monte_carlo_errors(samples: np.ndarray, mean_field: float, positive: int, stochastic: bool) -> MonteCarloErrors:
    """`MonteCarloErrors` of S per-sample predictive distributions `samples` (S, C), with f(E[z])'s
    P(positive) `mean_field`; `stochastic` False for a model with no random layer (every error 0)."""
    samples = np.asarray(samples, dtype=np.float64)
    S = samples.shape[0]
    if not stochastic or (S >= 2 and (samples == samples[0]).all()):
        return MonteCarloErrors(0.0, 0.0, 0.0, S)
    if S < 2:
        return MonteCarloErrors(None, None, None, S)
    p = samples[:, positive]                                                     # (S,)
    differences = p - mean_field                                                 # (S,) d_s
    mi = float(metrics.mutual_information_jackknife_se(samples[None])[0]) if S >= 3 else None
    return MonteCarloErrors(
        p_positive=float(p.std(ddof=1) / np.sqrt(S)),
        gap=float(differences.std(ddof=1) / np.sqrt(S)),
        mutual_information=mi,
        n_samples=S,
    )


@dataclass
class ExplainResult:
    text: str                          # the text actually encoded (after any truncation)
    tokens: list[str]                  # WordPiece tokens, [CLS] first and [SEP] last
    classes: list[str]                 # ["negative", "positive"]
    model_name: str
    family: str                        # attention family of the stochastic layers
    stochastic_layers: list[int]       # layers whose attention is random (the rest repeat over S)
    hyper: dict[str, float]            # hyperparameters in effect (trained values unless overridden)
    n_samples: int
    seed: int
    truncated: bool                    # True when the input was cut to the model's maximum length
    sample_weights: torch.Tensor       # (S, L, H, T, T) sampled attention weights
    mean_weights: torch.Tensor         # (L, H, T, T) posterior-mean attention (softmax of the scores)
    prior_weights: torch.Tensor        # (L, H, T, T) prior mean attention (equal to mean_weights where no prior)
    kl: torch.Tensor                   # (L, H) KL(q || prior), summed over queries and keys
    sample_probs: torch.Tensor         # (S, C) predictive probabilities, one row per attention sample
    mc_probs: torch.Tensor             # (C,) E[f(z)]: mean of sample_probs
    mean_field_probs: torch.Tensor     # (C,) f(E[z]): one pass with every stochastic layer at its mean
    # (S, L, H, T, T) attention drawn from the prior. Give either the tensor or `prior_sampler`,
    # a function (layer, head) -> (S, T, T) that draws one head on demand (explain() does): then
    # `prior_draws` draws only the heads a chart shows, and this attribute is assembled from every
    # head the first time it is read.
    prior_sample_weights: torch.Tensor | None = field(default_factory=lambda: None)
    prior_sampler: Callable[[int, int], torch.Tensor] | None = field(default=None, repr=False, compare=False)
    # Parameters of the unnormalised posterior q(S_ij) and of the prior p(S_ij), per layer, each
    # (L, H, T, T) (prior ones broadcast over queries). Keys by family:
    #   weibull:   posterior {"shape_k", "scale"}, prior {"alpha", "beta"} (Gamma concentration, rate)
    #   lognormal: posterior {"loc", "sigma"},     prior {"loc", "sigma"}
    #   dirichlet: posterior {"concentration"},    prior {"concentration"}  (marginals are Beta)
    #   categorical / softmax: empty dicts
    posterior_params: dict[str, torch.Tensor] = field(default_factory=dict)
    prior_params: dict[str, torch.Tensor] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # plain-language notices (truncation, clipping)

    def __post_init__(self):
        if self.prior_sample_weights is None:
            if self.prior_sampler is None:
                raise ValueError("give prior_sample_weights or a prior_sampler")
            del self.prior_sample_weights             # drawn on first read (__getattr__)
        self._prior_heads: dict[tuple[int, int], torch.Tensor] = {}

    def __getattr__(self, name):
        # Only reached for attributes not set: the prior draws of a result made with a sampler.
        if name == "prior_sample_weights" and self.__dict__.get("prior_sampler") is not None:
            L, H = self.kl.shape
            full = torch.stack([torch.stack([self.prior_draws(layer, h) for h in range(H)], 1)
                                for layer in range(L)], 1)                     # (S, L, H, T, T)
            self.__dict__["prior_sample_weights"] = full
            return full
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def prior_draws(self, layer: int, head: int) -> torch.Tensor:
        """(S, T, T) attention drawn from the prior in one layer and head (what the charts read)."""
        if "prior_sample_weights" in self.__dict__:
            return self.prior_sample_weights[:, layer, head]
        key = (layer, head)
        if key not in self._prior_heads:
            self._prior_heads[key] = self.prior_sampler(layer, head)
        return self._prior_heads[key]

    # ---- summaries of the predictive distribution ------------------------------------------------
    @property
    def positive_index(self) -> int:
        return self.classes.index("positive") if "positive" in self.classes else len(self.classes) - 1

    def _samples(self) -> np.ndarray:
        return self.sample_probs.detach().cpu().double().numpy()[None]          # (1, S, C)

    @property
    def predictive_entropy(self) -> float:
        """H[E_z p(y|x,z)]: total uncertainty of the Monte Carlo predictive."""
        return float(metrics.predictive_entropy(self._samples())[0])

    @property
    def expected_entropy(self) -> float:
        """E_z H[p(y|x,z)]: the aleatoric part (Depeweg et al. 2018, eq. 5)."""
        return float(metrics.expected_entropy(self._samples())[0])

    @property
    def mutual_information(self) -> float:
        """I[y; z | x] = total - expected entropy: the epistemic part, due to attention uncertainty."""
        return float(metrics.mutual_information(self._samples())[0])

    @property
    def gap(self) -> float:
        """E[f(z)] - f(E[z]) for P(positive): what averaging over attention samples changes."""
        i = self.positive_index
        return float(self.mc_probs[i] - self.mean_field_probs[i])

    @cached_property
    def se(self) -> MonteCarloErrors:
        """Standard errors of E[f(z)], the gap and the mutual information (see `MonteCarloErrors`).

        Cached: results are read-only."""
        return monte_carlo_errors(self.sample_probs.detach().cpu().double().numpy(),
                                  float(self.mean_field_probs[self.positive_index]), self.positive_index,
                                  bool(self.stochastic_layers))

    @property
    def gap_distinguishable(self) -> bool | None:
        """|gap| > 2 SE of the paired difference: the gap's sign is not Monte Carlo noise.

        None where the SE is not estimable (one sample of a stochastic model). For an exact gap
        (SE 0) it is whether the gap is nonzero at all."""
        se = self.se.gap
        return None if se is None else abs(self.gap) > 2 * se

    @cached_property
    def spread(self) -> torch.Tensor:
        """(L, H) mean over queries and keys of the standard deviation of sampled weights.

        Cached: a std over every sampled weight that the heatmap and its caption both read on each
        rerun; results are read-only, so it cannot go stale."""
        w = self.sample_weights
        if w.shape[0] < 2:
            return torch.zeros(self.kl.shape)
        # The two-pass formula, written out: torch's std(0) takes ~7x longer on this shape.
        var = (w - w.mean(0)).square_().sum(0) / (w.shape[0] - 1)
        return var.sqrt_().mean((-1, -2))

    def key_densities(self, layer: int, head: int, query: int, key: int, n_points: int = 200):
        """Densities of log10 S_ij under q and under the prior, for one query and key.

        On a log axis because the two can sit decades apart: a Gamma prior with small alpha puts
        most of its mass far below the posterior's, and on a linear axis one curve would be a
        spike and the other invisible. With u = log10 s the density is p_U(u) = p_S(s) s ln 10.
        For Dirichlet the variable is the weight itself, whose marginal is Beta(a_j, a_0 - a_j).

        Returns a dict with `x` (log10 values), `posterior`, `prior` (densities of x, numpy) and
        `label`, or None where there is no continuous density (softmax, categorical, or a
        deterministic layer).
        """
        family = families.get(self.family)
        if not self.posterior_params or layer not in self.stochastic_layers or not family.has_density:
            return None
        q, p = family.key_marginals(
            {k: v[layer, head, query] for k, v in self.posterior_params.items()},
            {k: v[layer, head, query] for k, v in self.prior_params.items()},
            key,
        )
        q_lo, q_hi = log10_range(q)
        p_lo, p_hi = log10_range(p)
        if not (np.isfinite(q_lo) and np.isfinite(q_hi)) or q_hi <= q_lo:
            q_lo, q_hi = -3.0, 0.0
        # The prior may reach hundreds of decades lower: show at most 8 decades below q.
        lo = min(q_lo, max(p_lo if np.isfinite(p_lo) else -np.inf, q_lo - 8.0)) - 0.1
        hi = max(q_hi, min(p_hi if np.isfinite(p_hi) else q_hi, q_hi + 8.0)) + 0.1
        x = np.linspace(lo, hi, n_points)
        return {
            "x": x,
            "posterior": log10_density(q, x),
            "prior": log10_density(p, x),
            "label": f"log10 {family.density_variable}",
        }


def log10_range(d) -> tuple[float, float]:
    """log10 of the 0.1% and 99.9% quantiles of a frozen SciPy distribution on (0, inf); NaNs
    where SciPy cannot say (extreme parameters)."""
    import warnings

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return tuple(float(v) for v in np.log10(d.ppf([0.001, 0.999]).astype(float)))
        except (OverflowError, ValueError, FloatingPointError):
            return (float("nan"), float("nan"))


def log10_density(d, x: np.ndarray) -> np.ndarray:
    """Density of u = log10 s at `x` for a frozen SciPy distribution of s: p_U(u) = p_S(s) s ln 10.
    Zeros where it overflows, never NaN."""
    import warnings

    s = 10.0 ** np.asarray(x, dtype=float)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            out = np.exp(d.logpdf(s) + np.log(s) + np.log(np.log(10.0)))
        except (OverflowError, ValueError, FloatingPointError):
            return np.zeros_like(s)
    return np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0)
