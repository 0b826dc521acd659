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

from bam_viz import families
from bam_viz.core import metrics
from bam_viz.core.task import resolve_target
from bam_viz.inference import rows


@dataclass(frozen=True)
class MonteCarloErrors:
    """Standard errors of the Monte Carlo estimates in an `ExplainResult` for its target class t, over
    its S attention samples (the estimators are defined in `bam_viz.inference.gaps` and docs/design.md,
    "The gap").

    `p_target`: E[f(z)]_t, the mean of S values f(z_s)_t: sample sd / sqrt(S) (`metrics.mean_se`).
    `gap`: E[f(z)]_t - f(E[w])_t, Deng et al.'s gap. f(E[w]) is a function of the same S samples, so
    the SE is the leave-one-out jackknife's, from f at each mean of the weights without one sample
    (`metrics.jackknife_gap_se`).
    `gap_softmax`: E[f(z)]_t - f(softmax)_t. f(softmax) is one deterministic pass, so the gap is the
    mean of the paired differences d_s = f(z_s)_t - f(softmax)_t and its SE is sd(d_s) / sqrt(S)
    (`metrics.paired_gap_se`).
    `mutual_information`: the jackknife SE of the bias-corrected estimate
    (`metrics.mutual_information_jackknife`); it is the same for every class.

    None means "not estimable": a spread needs two samples of a stochastic model (three for the
    mutual information, whose one-sample replicates always have MI 0). 0 means exact: a
    deterministic model (no Monte Carlo at all) or S identical samples. Never NaN.
    """
    ESTIMATORS: ClassVar[dict[str, str]] = {
        "p_target": "sample sd of the S per-sample probabilities of the class / √S",
        "gap": "jackknife, leaving out one attention sample at a time from E[f(z)] and from E[w]",
        "gap_softmax": "sd of the S paired differences f(z_s) − f(softmax) / √S",
        "mutual_information": "jackknife, leaving out one attention sample at a time",
    }
    # The samples each error needs: a spread needs two; a jackknife three (at S = 2 each leave-one-out
    # mean of the weights is the other sample, so f there is that sample's f and every replicate is 0).
    SAMPLES_NEEDED: ClassVar[dict[str, int]] = {"p_target": 2, "gap": 3, "gap_softmax": 2, "mutual_information": 3}
    # The rows of `class_standard_errors`: the errors that are one per class.
    PER_CLASS: ClassVar[tuple[str, ...]] = ("p_target", "gap", "gap_softmax")

    p_target: float | None
    gap: float | None
    gap_softmax: float | None
    mutual_information: float | None
    n_samples: int
    estimator: str = "; ".join(f"{k}: {v}" for k, v in ESTIMATORS.items())


def _exact(samples: np.ndarray, stochastic: bool) -> bool:
    """No Monte Carlo error at all: a model with no random layer, or S identical samples."""
    return not stochastic or (samples.shape[0] >= 2 and bool((samples == samples[0]).all()))


def class_standard_errors(samples: np.ndarray, softmax_probs: np.ndarray, loo_probs: np.ndarray | None,
                          stochastic: bool) -> np.ndarray:
    """(3, C) the Monte Carlo standard errors of `MonteCarloErrors.PER_CLASS` (E[f(z)]_c, Deng's gap
    and the gap to the deterministic pass) for every class c, from S per-sample predictive
    distributions `samples` (S, C), f(softmax) `softmax_probs` (C,) and f at each leave-one-out
    mean of the weights (S, C) (`ExplainResult.mean_attention_loo_probs`; None where f(E[w]) is the
    deterministic pass: then both gaps are one). NaN where not estimable (S < 2), 0 where exact (see
    `MonteCarloErrors`). Each formula is a `bam_viz.core.metrics` function, which the corpus scorer's
    `gap_softmax_se` calls too."""
    samples = np.asarray(samples, dtype=np.float64)
    S, C = samples.shape
    if _exact(samples, stochastic):
        return np.zeros((3, C))
    if S < MonteCarloErrors.SAMPLES_NEEDED["p_target"]:
        return np.full((3, C), np.nan)
    out = np.empty((3, C))
    for c in range(C):
        p = samples[:, c]                                                         # (S,)
        paired = metrics.paired_gap_se(p, float(softmax_probs[c]))
        if S < MonteCarloErrors.SAMPLES_NEEDED["gap"]:
            deng = np.nan
        else:
            deng = paired if loo_probs is None else metrics.jackknife_gap_se(p, np.asarray(loo_probs)[:, c])
        out[:, c] = (metrics.mean_se(p), deng, paired)
    return out


def _mi_error(samples: np.ndarray, stochastic: bool, jackknife: Callable[[], float]) -> float | None:
    """The mutual information's SE (`MonteCarloErrors`): 0 where exact, None under 3 samples, else
    `jackknife()` (the result's cached jackknife, computed once for every class)."""
    if _exact(samples, stochastic):
        return 0.0
    return float(jackknife()) if samples.shape[0] >= MonteCarloErrors.SAMPLES_NEEDED["mutual_information"] else None


def _errors_of(per_class: np.ndarray, mi: float | None, n_samples: int) -> MonteCarloErrors:
    """`MonteCarloErrors` from one class's column of `class_standard_errors` (NaN: None) and the MI's error."""
    p, gap, gap_softmax = (None if np.isnan(v) else float(v) for v in per_class)
    return MonteCarloErrors(p_target=p, gap=gap, gap_softmax=gap_softmax, mutual_information=mi, n_samples=n_samples)


def _shared(fn):
    """A property computed once per result and kept in its `_cache`, which every view of the result
    for another class (`ExplainResult.for_target`) shares: what does not depend on the class shown is
    computed once, whichever view asks first. Results are read-only, so it cannot go stale."""
    name = fn.__name__

    def get(self):
        cache = self._cache
        if name not in cache:
            cache[name] = fn(self)
        return cache[name]

    def put(self, value):                        # a caller who knows better (a test's constant spread)
        self._cache[name] = value

    get.__doc__ = fn.__doc__
    return property(get, put)


class Note(str):
    """A plain-language notice on a result; it reads as its text. `warning` is True where the result
    is not what was asked for (the text was cut to the model's length), False for a remark (the model
    has no prior)."""

    warning: bool

    def __new__(cls, text: str, warning: bool = False):
        note = super().__new__(cls, text)
        note.warning = bool(warning)
        return note


@dataclass
class ExplainResult:
    """What `explain()` gives for one sentence. Every (.., C) probability is in the order of `classes`
    (the model's); the one-class numbers (`gap`, `gap_softmax`, `se`, and the panels that plot one
    class) are for `target`, an index into `classes`: give a class name, an index or None (the
    predicted class, the argmax of E[f(z)]), and it is resolved when the result is made
    (`bam_viz.core.task.resolve_target`). `for_target` gives the same result for another class,
    without a copy of its tensors."""

    text: str                          # the text actually encoded (after any truncation)
    tokens: list[str]                  # WordPiece tokens, [CLS] first and [SEP] last
    classes: list[str]                 # the model's classes, e.g. ["negative", "positive"]
    model_name: str
    family: str                        # attention family of the stochastic layers
    stochastic_layers: list[int]       # layers whose attention is random (the rest repeat over S)
    hyper: dict[str, float]            # hyperparameters in effect (trained values unless overridden)
    n_samples: int
    seed: int
    truncated: bool                    # True when the input was cut to the model's maximum length
    sample_weights: torch.Tensor       # (S, L, H, T, T) sampled attention weights w_s
    # (L, H, T, T) softmax(psi) in the deterministic pass: the mean of the unnormalised scores S_ij,
    # not of the weights (see `posterior_mean_weights`)
    softmax_weights: torch.Tensor
    # (L, H, T, T) pi, the prior's normalised mean scores (softmax of the prior logits); softmax_weights
    # where there is no prior. The mean of its normalised draws for a Gamma (common rate) or Dirichlet
    # prior; for a Lognormal prior that mean differs (`prior_draws` are what to average).
    prior_weights: torch.Tensor
    kl: torch.Tensor                   # (L, H) KL(q || prior), summed over queries and keys
    sample_probs: torch.Tensor         # (S, C) predictive probabilities f(z_s), one row per attention sample
    mc_probs: torch.Tensor             # (C,) E[f(z)]: mean of sample_probs
    softmax_probs: torch.Tensor        # (C,) f(softmax): the deterministic pass
    mean_attention_probs: torch.Tensor  # (C,) f(E[w]): every stochastic layer at posterior_mean_weights
    # (S, L, H, T, T) attention drawn from the prior. Give either the tensor or `prior_sampler`,
    # a function (layer, head) -> (S, T, T) that draws one head on demand (explain() does): then
    # `prior_draws` draws only the heads a chart shows, and this attribute is assembled from every
    # head the first time it is read.
    prior_sample_weights: torch.Tensor | None = field(default_factory=lambda: None)
    prior_sampler: Callable[[int, int], torch.Tensor] | None = field(default=None, repr=False, compare=False)
    # (S, C) f at E[w]_(-s) = (S E[w] - w_s) / (S - 1), each stochastic layer's mean weights without
    # sample s: the leave-one-out values of f(E[w]) whose jackknife is the gap's SE
    # (`bam_viz.inference.gaps`); None where f(E[w]) is the deterministic pass (no attention is drawn) or S < 2.
    mean_attention_loo_probs: torch.Tensor | None = None
    # Parameters of the unnormalised posterior q(S_ij) and of the prior p(S_ij), per layer, each
    # (L, H, T, T) (prior ones broadcast over queries). Keys by family:
    #   weibull:   posterior {"shape_k", "scale"}, prior {"alpha", "beta"} (Gamma concentration, rate)
    #   lognormal: posterior {"loc", "sigma"},     prior {"loc", "sigma"}
    #   dirichlet: posterior {"concentration"},    prior {"concentration"}  (marginals are Beta)
    #   categorical / softmax: empty dicts
    posterior_params: dict[str, torch.Tensor] = field(default_factory=dict)
    prior_params: dict[str, torch.Tensor] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)  # plain-language notices (truncation, no prior)
    target: int | str | None = None    # the class the one-class numbers are for: an index once made
    # p of the dropout on the stochastic layers' sampled weights (`BamClassifier.attention_dropout`);
    # 0 where each row of `sample_weights` is a family's draw, a point of the simplex
    attention_dropout: float = 0.0

    def __post_init__(self):
        self.notes = [n if isinstance(n, Note) else Note(n) for n in self.notes]
        self.classes = list(self.classes)
        self.target = resolve_target(self.classes, self.target, self.mc_probs.tolist())
        self._cache: dict[str, object] = {}          # `_shared` properties, shared by `for_target` views
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

    def prior_mean_weights(self, layer: int, head: int) -> torch.Tensor:
        """(T, T) the Monte Carlo mean of the prior's normalised draws in one layer and head (what the
        prior's bars show); `prior_weights` is its pi."""
        return self.prior_draws(layer, head).double().mean(0).float()

    # ---- the class shown ---------------------------------------------------------------------------
    def for_target(self, target: int | str | None) -> ExplainResult:
        """This result with `target` (a class name, an index, or None / "predicted") as the class its
        one-class numbers are for. The tensors, the prior's draws and what `_shared` computes are
        shared, not copied: a class picked on the page costs nothing to show."""
        index = resolve_target(self.classes, target, self.mc_probs.tolist())
        if index == self.target:
            return self
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)          # every tensor and `_cache` itself, by reference
        view.__dict__.pop("se", None)                # the one cached value that depends on the class
        view.target = index
        return view

    @property
    def target_name(self) -> str:
        return self.classes[self.target]

    @property
    def predicted(self) -> int:
        """The index of the predicted class: the argmax of E[f(z)]."""
        return resolve_target(self.classes, None, self.mc_probs.tolist())

    # ---- summaries of the predictive distribution ------------------------------------------------

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

    @_shared
    def _mutual_information(self) -> tuple[float, float]:
        est, se = metrics.mutual_information_jackknife(self._samples())
        return float(est[0]), float(se[0])

    @property
    def mutual_information(self) -> float:
        """I[y; z | x], the epistemic part (total - expected entropy), estimated from the S samples
        with the jackknife's bias correction (`metrics.mutual_information_jackknife`): the plug-in
        H[mean p] - mean H[p] is biased low. Unclipped, so it can dip below 0 where the MI is ~0."""
        return self._mutual_information[0]

    @_shared
    def mutual_information_interval(self) -> tuple[float, float] | None:
        """The interval the page shows around `mutual_information`: estimate x exp(-/+ t SE of its
        log), t with S - 1 df (`metrics.mutual_information_interval`); (0, 0) where exact, None where S < 3."""
        if not self.stochastic_layers:
            return (0.0, 0.0)
        lo, hi = metrics.mutual_information_interval(self._samples())[0]
        return None if not (np.isfinite(lo) and np.isfinite(hi)) else (float(lo), float(hi))

    @property
    def mutual_information_plugin(self) -> float:
        """The plug-in estimate H[mean_s p_s] - mean_s H[p_s] (>= 0, biased low at small S)."""
        return float(metrics.mutual_information(self._samples())[0])

    @property
    def gap(self) -> float:
        """E[f(z)] - f(E[w]) for the target class: Deng et al.'s gap, with E[w] the Monte Carlo mean of
        each stochastic layer's weights (`bam_viz.inference.gaps`); the explorer's headline."""
        t = self.target
        return float(self.mc_probs[t] - self.mean_attention_probs[t])

    @property
    def gap_softmax(self) -> float:
        """E[f(z)] - f(softmax) for the target class: against the deterministic pass a BAM model predicts with."""
        t = self.target
        return float(self.mc_probs[t] - self.softmax_probs[t])

    @_shared
    def class_errors(self) -> np.ndarray:
        """(3, C) the Monte Carlo standard errors of E[f(z)] and both gaps for every class
        (`class_standard_errors`, rows `MonteCarloErrors.PER_CLASS`; NaN where not estimable)."""
        loo = None if self.mean_attention_loo_probs is None else self.mean_attention_loo_probs.double().numpy()
        return class_standard_errors(self._samples()[0], self.softmax_probs.detach().cpu().double().numpy(),
                                     loo, bool(self.stochastic_layers))

    @cached_property
    def se(self) -> MonteCarloErrors:
        """Standard errors of E[f(z)] and both gaps for the target class, and of the mutual
        information (see `MonteCarloErrors`). Cached: results are read-only."""
        samples = self._samples()[0]                                              # (S, C)
        mi = _mi_error(samples, bool(self.stochastic_layers), lambda: self._mutual_information[1])
        return _errors_of(self.class_errors[:, self.target], mi, samples.shape[0])

    @property
    def gap_distinguishable(self) -> bool | None:
        """|gap| > t SE, its 95% interval excludes 0: the gap's sign is not Monte Carlo noise. t is
        `metrics.interval_multiplier` at the result's S (S - 1 df), not 2, which is a large-S number
        (docs/estimates.md, "Intervals at the samples drawn", has both measured).

        None where the SE is not estimable (one sample of a stochastic model). For an exact gap
        (SE 0) it is whether the gap is nonzero at all."""
        se = self.se
        if se.gap is None:
            return None
        return abs(self.gap) > (metrics.interval_multiplier(se.n_samples) * se.gap if se.gap > 0 else 0.0)

    @_shared
    def posterior_mean_weights(self) -> torch.Tensor:
        """(L, H, T, T) E[w]: the Monte Carlo mean of the S sampled normalised weights, what f(E[w])
        is evaluated at. For Weibull and Lognormal scores it is not softmax(psi) (`softmax_weights`):
        normalising pulls it towards uniform, the more the smaller k or the larger sigma."""
        return self.sample_weights.double().mean(0).float()

    @_shared
    def posterior_mean_se(self) -> torch.Tensor:
        """(L, H, T, T) the Monte Carlo standard error of each cell of `posterior_mean_weights`,
        sample sd / sqrt(S); 0 in deterministic layers, NaN in a stochastic one drawn once."""
        w = self.sample_weights.double()
        S = w.shape[0]
        if S < 2:
            out = torch.zeros(w.shape[1:], dtype=torch.float64)
            out[self.stochastic_layers] = float("nan")
            return out.float()
        return (w.std(0, correction=1) / S**0.5).float()

    @_shared
    def spread(self) -> torch.Tensor:
        """(L, H) mean over queries and keys of the standard deviation of sampled weights.

        Cached: a std over every sampled weight that the heatmap and its caption both read on each
        rerun; results are read-only, so it cannot go stale."""
        w = self.sample_weights
        if w.shape[0] < 2:
            return torch.zeros(self.kl.shape)
        # The two-pass formula, written out: torch's std(0) is slower on this shape (docs/performance.md).
        var = (w - w.mean(0)).square_().sum(0) / (w.shape[0] - 1)
        return var.sqrt_().mean((-1, -2))

    def row_summary(self, layer: int, idx: list[int]) -> rows.RowSummary:
        """What the bars' caption reads of `layer`, for every head and query, with `idx` the keys shown
        (`bam_viz.inference.rows.RowSummary`): E[w]'s largest key, its SE and draws' 5-95% there."""
        return rows.row_summary(self._layer_mean(layer), self.sample_weights[:, layer], idx)

    def map_summary(self, layer: int, idx: list[int]) -> rows.MapSummary:
        """What the maps' caption reads of `layer` over the tokens `idx` (`bam_viz.inference.rows.MapSummary`)."""
        return rows.map_summary(self._layer_mean(layer), self.sample_weights[:, layer], idx)

    def _layer_mean(self, layer: int) -> torch.Tensor:
        """`posterior_mean_weights[layer]`, from what the result holds, else from this layer alone (a frame's)."""
        if "posterior_mean_weights" in self._cache:
            return self.posterior_mean_weights[layer]
        return self.sample_weights[:, layer].double().mean(0).float()

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
    """log10 of the 0.1% and 99.9% quantiles of a SciPy distribution on (0, inf) (frozen, or a
    `families.base.Marginal`); NaNs where SciPy cannot say (extreme parameters)."""
    lo, hi = log10_ranges(d)
    return float(lo), float(hi)


def log10_ranges(d) -> np.ndarray:
    """`log10_range` of a distribution whose parameters are arrays (a stacked `Marginal`, n rows):
    (..., 2), NaN in a row SciPy cannot say."""
    import warnings

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return np.log10(np.asarray(d.ppf([0.001, 0.999]), dtype=float))
        except (OverflowError, ValueError, FloatingPointError):
            return np.full(np.broadcast_shapes(*(np.shape(v) for v in getattr(d, "params", {}).values()), (2,)),
                           np.nan)


def log10_density(d, x: np.ndarray) -> np.ndarray:
    """Density of u = log10 s at `x` for a SciPy distribution of s (as `log10_range`'s): p_U(u) = p_S(s) s ln 10.
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
