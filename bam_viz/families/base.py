"""What every attention family is: its hyperparameters, and the contract a family class fulfils.

Notation follows Fan et al. (2020), "Bayesian Attention Modules" (BAM), NeurIPS:
  scores  psi_ij = q_i . k_j / sqrt(d)     the usual attention logits (masked)
  S_ij              unnormalised attention scores, random, with E_q[S_ij] = softmax_j(psi_ij)
  weights w_ij = S_ij / sum_l S_il           samples normalised onto the simplex over ALL keys l
  pi_j              the prior's mean weights over keys, softmax of the prior logits

A family receives log softmax_j(psi_ij) (`log_p`) and log pi_j (`log_pi`), never raw scores, and
works in log space: its draws are normalised with a softmax over valid keys, the same draws as
S / sum S but finite at extreme slider values where S itself under- or overflows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch.distributions import Distribution

from bam_viz.core.grids import value_grid
from bam_viz.core.inputs import shown


@dataclass(frozen=True)
class HyperSpec:
    """One hyperparameter of a family: what the explorer's slider and the validation read."""

    name: str             # the keyword everywhere: predict(..., shape_k=2.0), ?shape_k=2 in the URL
    default: float        # the value of a new AttentionConfig
    low: float            # slider range (inclusive)
    high: float
    scale: str            # "log" or "linear": how the slider spaces its grid
    label: str            # slider label
    help: str             # one line: what moving it does
    prior_only: bool = False   # read by the prior alone: the posterior's draws do not depend on it
    slider: bool = True        # shown in the explorer (the prior's own spreads are not)

    def __post_init__(self):
        if self.scale not in ("log", "linear"):
            raise ValueError(f"{self.name}: scale must be 'log' or 'linear', not {self.scale!r}")
        if not 0 < self.low <= self.default <= self.high or not (self.low < self.high):
            raise ValueError(f"{self.name}: need 0 < low <= default <= high, got "
                             f"{self.low}, {self.default}, {self.high}")

    def grid(self, per_decade: int = 16, linear_points: int = 100) -> list[float]:
        """Values from low to high, both included, rounded to 3 significant digits: `per_decade`
        per factor of ten on a log slider, `linear_points` evenly spaced on a linear one."""
        return value_grid(self.low, self.high, self.scale, per_decade, linear_points)

    @property
    def middle(self) -> float:
        """The middle of the slider (geometric for a log slider)."""
        return math.sqrt(self.low * self.high) if self.scale == "log" else (self.low + self.high) / 2


class Hyper(Mapping[str, float]):
    """The hyperparameter values of one family: immutable, hashable, validated on construction.

    Built by `AttentionFamily.hyper`; read as a mapping (`dict(h)`) or by attribute (`h.shape_k`).
    """

    __slots__ = ("_family", "_values")

    def __init__(self, family: AttentionFamily, values: Mapping[str, float]):
        object.__setattr__(self, "_family", family)
        object.__setattr__(self, "_values", tuple(sorted((k, float(v)) for k, v in values.items())))

    @property
    def family(self) -> str:
        """The name of the family these values belong to."""
        return self._family.name

    def __setattr__(self, name, value):
        raise AttributeError("Hyper is immutable: use .replace(...)")

    def __getitem__(self, name: str) -> float:
        for k, v in self._values:
            if k == name:
                return v
        raise KeyError(name)

    def __getattr__(self, name: str) -> float:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{self.family} attention has no hyperparameter {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash((self.family, self._values))

    def __eq__(self, other) -> bool:
        if isinstance(other, Hyper):
            return (self.family, self._values) == (other.family, other._values)
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v:g}" for k, v in self._values)
        return f"Hyper({self.family}: {inner})"

    def __reduce__(self):
        return (Hyper, (self._family, dict(self._values)))

    def replace(self, **overrides: float | None) -> Hyper:
        """These values with `overrides` applied (None keeps), validated by the family."""
        return self._family.hyper(self, **overrides)

    def posterior_part(self) -> tuple[tuple[str, float], ...]:
        """The values the posterior reads (prior-only ones left out): a cache key for its draws."""
        prior_only = {s.name for s in self._family.hyper_specs if s.prior_only}
        return tuple((k, v) for k, v in self._values if k not in prior_only)


@dataclass
class CellStatistics:
    """What a stochastic layer reports per attention cell: KL(q || prior) per cell (summed by the
    layer over valid cells) and the distributions' parameters, each (..., Tq, Tk)."""

    kl: torch.Tensor
    posterior: dict[str, torch.Tensor]
    prior: dict[str, torch.Tensor]


class AttentionFamily:
    """One attention family. Subclass, set the class attributes, implement the methods that apply,
    and `bam_viz.families.register` an instance (see docs/design.md, "Adding a family").

    Tensors: `log_p` is log softmax_j(psi_ij), (..., Tq, Tk); `log_pi` the prior's log pi_j,
    broadcastable to it; `mask` None (every key real) or a boolean key mask broadcastable to it.
    Every random draw comes from the `generator` given.
    """

    name: ClassVar[str]
    label: ClassVar[str]                     # for people: "Weibull (BAM-W)"
    source: ClassVar[str]                    # the paper and section the family implements
    hyper_specs: ClassVar[tuple[HyperSpec, ...]] = ()
    stochastic: ClassVar[bool] = True        # False: the weights are the mean, every sample alike
    learned_prior: ClassVar[bool] = False    # a contextual prior network is trained through its KL
    has_density: ClassVar[bool] = False      # key_marginals gives continuous densities per cell
    # A fixed count of random numbers per attention cell, so that a pass on the first query rows
    # alone can draw the full pass's numbers and keep its rows (see sampling.first_rows).
    row_sliceable: ClassVar[bool] = False
    # One key per query shared by every head, enumerated exactly by the model (Deng et al. 2018)
    # rather than sampled head by head in the attention core.
    hard_alignment: ClassVar[bool] = False

    # ---- hyperparameters ------------------------------------------------------------------------
    def spec(self, name: str) -> HyperSpec:
        for s in self.hyper_specs:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def hyper_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.hyper_specs)

    @property
    def slider_specs(self) -> tuple[HyperSpec, ...]:
        return tuple(s for s in self.hyper_specs if s.slider)

    def hyper(self, base: Mapping[str, float] | None = None, **overrides: float | None) -> Hyper:
        """Validated values: the specs' defaults, then `base`, then `overrides` (None keeps).

        Raises ValueError naming the family's hyperparameters for an unknown name, and for a value
        that is not a positive finite number (a bool is not one; an int too large for a float is
        not finite) or lies outside the spec's [low, high]: beyond it float32 samplers and closed
        forms under- or overflow (shape_k = 1e-38 gives NaN weights), and nothing there is tested."""
        values = {s.name: s.default for s in self.hyper_specs}
        specs = {s.name: s for s in self.hyper_specs}
        given = {**dict(base or {}), **{k: v for k, v in overrides.items() if v is not None}}
        unknown = sorted(set(given) - set(values))
        if unknown:
            known = ", ".join(self.hyper_names) or "none"
            raise ValueError(f"unknown hyperparameters {unknown} for {self.name} attention; known: {known}")
        for k, v in given.items():
            try:
                x = float(v) if not isinstance(v, bool) else math.nan
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f"{k} must be a positive finite number, got {shown(v)}") from None
            if not (math.isfinite(x) and x > 0):
                raise ValueError(f"{k} must be a positive finite number, got {shown(v)}")
            spec = specs[k]
            if not spec.low <= x <= spec.high:
                raise ValueError(f"{k} must be between {spec.low:g} and {spec.high:g} for {self.name} attention "
                                 f"(the range its sampler, density and KL are checked over), got {shown(v)}")
            values[k] = x
        return Hyper(self, values)

    # ---- the layer's work -----------------------------------------------------------------------
    def sample(self, log_p: torch.Tensor, hyper: Hyper, mask: torch.Tensor | None,
               generator: torch.Generator | None, drawn_rows: int | None = None) -> torch.Tensor:
        """Attention weights drawn from q, normalised over the valid keys (..., Tq, Tk).

        `drawn_rows` (row-sliceable families only): draw as if dimension -2 had that many rows and
        keep the first Tq, so that the generator moves on exactly as in the full pass."""
        raise NotImplementedError(f"{self.name} attention cannot be sampled")

    def sample_prior(self, log_pi: torch.Tensor, hyper: Hyper, mask: torch.Tensor | None,
                     generator: torch.Generator | None) -> torch.Tensor:
        """Attention weights drawn from the prior, one normalised draw per row of `log_pi`."""
        return log_pi.exp()

    def statistics(self, log_p: torch.Tensor, log_pi: torch.Tensor, valid: torch.Tensor,
                   hyper: Hyper) -> CellStatistics:
        """KL(q || prior) per cell and the parameters of both, for the trace and the training loss.
        `valid` is the key mask expanded to log_p's shape; invalid cells may hold anything."""
        return CellStatistics(torch.zeros_like(log_p), {}, {})

    def kl_sums(self, log_p: torch.Tensor, log_pi: torch.Tensor, valid: torch.Tensor,
                hypers: Sequence[Hyper]) -> torch.Tensor:
        """KL(q || prior) summed over queries and valid keys, (N, *log_p.shape[:-2]) float64, at each
        of N `hypers`: what `statistics` gives, summed. The live explorer asks for a whole slider grid
        at once; a family may override this with a faster form that agrees with `statistics`."""
        return torch.stack([self.statistics(log_p, log_pi, valid, h).kl.masked_fill(~valid, 0.0)
                            .sum((-1, -2)).double() for h in hypers])

    def kl_terms(self, log_p: torch.Tensor, log_pi: torch.Tensor,
                 valid: torch.Tensor) -> Callable[[Sequence[Hyper]], torch.Tensor]:
        """`kl_sums` of these cells as a function of the hyperparameters alone, for one sentence asked
        again and again (a live grid asks for a column of its slider grid per frame): a family with a
        separable form computes what no hyperparameter moves once; here, everything at each call."""
        return lambda hypers: self.kl_sums(log_p, log_pi, valid, hypers)

    # ---- the same distributions as torch.distributions objects (the tests' oracle) -------------
    def posterior(self, scores: torch.Tensor, hyper: Hyper, mask: torch.Tensor | None = None) -> Distribution:
        """q over the unnormalised scores S (or the weights, or the chosen key), from raw scores;
        its mean is softmax(scores, -1). Padded keys get zero mean."""
        raise ValueError(f"{self.name} attention is deterministic: it has no posterior distribution")

    def prior(self, prior_logits: torch.Tensor, hyper: Hyper, mask: torch.Tensor | None = None) -> Distribution:
        """The prior from prior logits over keys (pi = softmax(prior_logits)); its mean score is pi."""
        raise ValueError(f"{self.name} attention has no prior distribution")

    def cell_distributions(self, posterior: Mapping[str, torch.Tensor],
                           prior: Mapping[str, torch.Tensor]) -> tuple[Distribution, Distribution]:
        """q and the prior of attention cells from their parameters as `statistics` reports them
        (`CellStatistics.posterior`, `.prior`), in any values: `kl_divergence` of the two is the
        cell's KL. For a family whose cells have a score distribution each."""
        raise ValueError(f"{self.name} attention has no distribution per attention cell")

    # ---- per-key marginals for the density panel ------------------------------------------------
    def key_marginals(self, posterior_row: Mapping[str, torch.Tensor], prior_row: Mapping[str, torch.Tensor],
                      key: int):
        """SciPy distributions (q, prior) of the variable of one cell, as `Marginal`s: for one query row,
        `posterior_row` / `prior_row` hold the parameters over all keys (as `statistics` gives
        them). None where the family has no continuous density."""
        return None

    # What `key_marginals`' variable is, for the density axis.
    density_variable: ClassVar[str] = "unnormalised score S_ij"

    # ---- what a caption says of the draws -------------------------------------------------------
    # Every draw is normalised over the valid keys (`sample`): a point of the simplex. Its mean E_q[w]
    # is softmax(psi) where q's mean is set on the weights themselves (a Dirichlet's, a categorical's,
    # softmax's own); where q is set on unnormalised scores, E_q[S] = softmax(psi) but normalising pulls
    # E_q[w] towards uniform, and `mean_pull` says, in a caption's words, what pulls it the more
    # ("k shrinks"); None where E_q[w] = softmax(psi). `short_label` names the family in a sentence.
    short_label: ClassVar[str]
    mean_pull: ClassVar[str | None] = None

    def __repr__(self) -> str:
        return f"<{self.name} attention family>"


class Marginal:
    """A SciPy distribution with its parameters bound: `Marginal(stats.weibull_min, c=k, scale=s).ppf(q)`
    is `stats.weibull_min(c=k, scale=s).ppf(q)`, and so for every method (`mean`, `var`, `logpdf`, ...).
    Not a frozen distribution: SciPy builds one as a new instance, its docstrings formatted again
    (about 0.6 ms), and the live explorer's density panel wants two per slider value of each sentence."""

    __slots__ = ("dist", "params")

    def __init__(self, dist, **params: float):
        self.dist, self.params = dist, params

    def __getattr__(self, name: str):
        return functools.partial(getattr(self.dist, name), **self.params)

    def __repr__(self) -> str:
        return f"Marginal({self.dist.name}, {self.params})"

    @classmethod
    def stack(cls, marginals) -> Marginal | None:
        """One `Marginal` whose parameters are columns (n, 1), row i `marginals[i]`'s: SciPy evaluates
        all n at once (`ppf` of (2,) gives (n, 2)). None unless all are of one distribution, with the
        same parameters' names."""
        first = marginals[0] if marginals else None
        alike = (isinstance(m, cls) and m.dist is first.dist and m.params.keys() == first.params.keys()
                 for m in marginals)
        if not isinstance(first, cls) or not all(alike):
            return None
        return cls(first.dist, **{k: np.array([[m.params[k]] for m in marginals], dtype=float) for k in first.params})
