"""BAM's distributions for one attention score (Fan et al. 2020, "Bayesian Attention Modules"): the
posterior and prior densities, the closed-form KL against Monte Carlo, the reparameterisation, and
what normalisation does to the spread (`score_pair`, `kl_check`, `normalised_spread`).

Each pair is a registered family's: its `cell_distributions` build q and p from their parameters,
`kl_divergence` gives the closed form the model trains with, `key_marginals` the SciPy quantiles,
and `sample` the normalised weights. `PAIRS` says only how the panel shows each family: the
distributions' names, the parameters' symbols and sliders.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import torch
from torch.distributions import Distribution, kl_divergence

from bam_viz import families, zoo
from bam_viz.core.grids import nearest_index
from bam_viz.core.inputs import check_seed
from bam_viz.core.metrics import interval_multiplier
from bam_viz.families import LognormalFamily, WeibullFamily
from bam_viz.plots.kit import figure
from bam_viz.plots.style import POSTERIOR_COLOUR, PRIOR_COLOUR
from bam_viz.theory.common import Control, axis, finite, layout, log_grid, positive, step_grid


def _trained(family: str, name: str) -> float:
    """The value of hyperparameter `name` that the zoo's model of `family` is trained with."""
    return next(config.attention.hyper[name] for config in zoo.RECIPES.values() if config.family == family)


@dataclass(frozen=True)
class Parameter:
    """One parameter of a score's posterior or prior: its name in the family's `CellStatistics`
    parameters, the symbol the captions use, and its slider."""

    name: str
    symbol: str
    control: Control
    positive: bool = True


@dataclass(frozen=True)
class ScorePanel:
    """How the panel shows one family's pair: q's and p's names and parameters, and where the
    closed-form KL comes from."""

    family: str
    title: str
    posterior_name: str
    prior_name: str
    posterior: tuple[Parameter, ...]
    prior: tuple[Parameter, ...]
    kl_source: str

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        return (*self.posterior, *self.prior)

    @property
    def controls(self) -> tuple[Control, ...]:
        return tuple(p.control for p in self.parameters)

    @property
    def shape(self) -> Parameter:
        """q's parameter that is the family's own posterior hyperparameter (Weibull k, Lognormal σ):
        the one the spread varies."""
        (name,) = (s.name for s in families.get(self.family).hyper_specs if not s.prior_only)
        return next(p for p in self.posterior if p.name == name)


# The shape sliders default to the zoo's trained values, so they offer them; the spread is computed
# at exactly the shape slider's values, so the slider's value is always a point of the curves.
_W, _L = WeibullFamily.name, LognormalFamily.name
PAIRS = {panel.family: panel for panel in (
    ScorePanel(_W, "Weibull ‖ Gamma (BAM-W)", "Weibull", "Gamma", (
        Parameter("shape_k", "k", Control("w_k", "Weibull shape k", log_grid(0.2, 50), _trained(_W, "shape_k"))),
        Parameter("scale", "λ", Control("w_scale", "Weibull scale λ", log_grid(0.01, 5), 0.3)),
    ), (
        Parameter("alpha", "α", Control("g_alpha", "Gamma shape α", log_grid(0.05, 20), 0.5)),
        Parameter("beta", "β", Control("g_beta", "Gamma rate β", log_grid(0.1, 20), 1.0)),
    ), "Fan et al. eq. 9"),
    ScorePanel(_L, "Lognormal ‖ Lognormal (BAM-L)", "Lognormal", "Lognormal", (
        Parameter("loc", "μ", Control("ln_loc", "posterior μ (log-location)", step_grid(-4, 2, 0.1), -1.0),
                  positive=False),
        Parameter("sigma", "σ", Control("ln_sigma", "posterior σ", log_grid(0.05, 3), _trained(_L, "sigma"))),
    ), (
        Parameter("loc", "μ", Control("ln_prior_loc", "prior μ", step_grid(-4, 2, 0.1), -1.5), positive=False),
        Parameter("sigma", "σ", Control("ln_prior_sigma", "prior σ", log_grid(0.05, 3), 1.0)),
    ), "the Gaussians of log S"),
)}
CONTROLS = tuple(c for panel in PAIRS.values() for c in panel.controls)


def _panel(family: str) -> ScorePanel:
    if family not in PAIRS:
        raise ValueError(f"family is {' or '.join(map(repr, PAIRS))}, not {family!r}")
    return PAIRS[family]


def _tensors(values: tuple[tuple[str, float], ...]) -> dict[str, torch.Tensor]:
    return {name: torch.tensor([v], dtype=torch.float64) for name, v in values}


@dataclass(frozen=True)
class ScorePair:
    """One attention score's posterior q and prior p, as the family builds them from their parameters."""

    family: str
    posterior_values: tuple[tuple[str, float], ...]
    prior_values: tuple[tuple[str, float], ...]
    posterior: Distribution = field(repr=False, compare=False)
    prior: Distribution = field(repr=False, compare=False)

    def kl(self) -> float:
        """KL(q || p) in closed form: for Weibull || Gamma the one bam_viz.families.kl registers
        (Fan et al. eq. 9), for Lognormal || Lognormal torch's own (the Gaussians of log S)."""
        return float(kl_divergence(self.posterior, self.prior))

    def marginals(self):
        """q and p as SciPy distributions with their parameters (`AttentionFamily.key_marginals`)."""
        return families.get(self.family).key_marginals(_tensors(self.posterior_values), _tensors(self.prior_values), 0)

    def describe(self) -> str:
        panel = PAIRS[self.family]

        def law(name, parameters, values):
            return f"{name}({', '.join(f'{p.symbol} = {v:.3g}' for p, (_, v) in zip(parameters, values, strict=True))})"

        return (f"q = {law(panel.posterior_name, panel.posterior, self.posterior_values)}, "
                f"p = {law(panel.prior_name, panel.prior, self.prior_values)}")


def score_pair(family: str, *values: float) -> ScorePair:
    """q and p of one score of `family` ('weibull': k, λ, α, β; 'lognormal': μ, σ, μ_p, σ_p: the
    order of `PAIRS[family].parameters`)."""
    panel = _panel(family)
    if len(values) != len(panel.parameters):
        raise ValueError(f"{family} takes {len(panel.parameters)} values "
                         f"({', '.join(p.symbol for p in panel.parameters)}), got {len(values)}")
    n_q = len(panel.posterior)
    sides = ["posterior"] * n_q + ["prior"] * len(panel.prior)
    checked = [(positive if p.positive else finite)(v, f"{side} {p.name}")
               for side, p, v in zip(sides, panel.parameters, values, strict=True)]
    q_values = tuple((p.name, v) for p, v in zip(panel.posterior, checked[:n_q], strict=True))
    p_values = tuple((p.name, v) for p, v in zip(panel.prior, checked[n_q:], strict=True))
    scalars = [{name: torch.tensor(v, dtype=torch.float64) for name, v in part} for part in (q_values, p_values)]
    q, p = families.get(family).cell_distributions(*scalars)
    return ScorePair(family, q_values, p_values, q, p)


def reparameterise(pair: ScorePair, u: torch.Tensor) -> torch.Tensor:
    """S = F_q^{-1}(u): uniform draws pushed through q's inverse CDF. For the Weibull this is
    lambda (-log(1 - u))^(1/k), the sampler of BAM-W (bam_viz.families.sampling.log_weibull_rsample)."""
    return pair.posterior.icdf(u)


@dataclass(frozen=True)
class KLCheck:
    closed_form: float
    monte_carlo: float
    se: float
    n: int

    @property
    def half_width(self) -> float:
        """The Monte Carlo estimate's 95% interval: ± t SE, t at its n draws."""
        return interval_multiplier(self.n) * self.se


def kl_check(pair: ScorePair, n: int = 20_000, seed: int = 0) -> KLCheck:
    """The closed-form KL against E_q[log q(S) - log p(S)] over n reparameterised draws."""
    g = torch.Generator().manual_seed(check_seed(seed))
    u = torch.rand(n, generator=g, dtype=torch.float64).clamp(1e-12, 1 - 1e-12)
    s = reparameterise(pair, u)
    log_ratio = pair.posterior.log_prob(s) - pair.prior.log_prob(s)
    return KLCheck(pair.kl(), float(log_ratio.mean()), float(log_ratio.std() / math.sqrt(n)), n)


def _plot_range(pair: ScorePair, prior: bool = True) -> float:
    """Up to q's 99.5% quantile, or on to the prior's 95% when `prior`, but never past 4 times q's: a
    Gamma prior of small alpha has a tail that would squeeze q into the first pixels. The prior's
    quantile comes from SciPy: torch's Gamma has no inverse CDF."""
    q_hi = float(pair.posterior.icdf(torch.tensor(0.995, dtype=torch.float64)))
    if not prior:
        return q_hi
    p_hi = float(pair.marginals()[1].ppf(0.95))
    return min(max(q_hi, p_hi), 4 * q_hi)


def density_figure(pair: ScorePair, check: KLCheck) -> go.Figure:
    panel = PAIRS[pair.family]
    hi = _plot_range(pair)
    s = torch.linspace(hi / 2000, hi, 400, dtype=torch.float64)
    q, p = pair.posterior.log_prob(s).exp().numpy(), pair.prior.log_prob(s).exp().numpy()
    top = 1.15 * float(q.max())           # a Gamma with alpha < 1 is infinite at 0: the posterior sets the scale
    return figure([
        {"type": "scatter", "x": s.numpy(), "y": q, "mode": "lines", "name": f"{panel.posterior_name} posterior q",
         "fill": "tozeroy", "line": {"color": POSTERIOR_COLOUR, "width": 3}},
        {"type": "scatter", "x": s.numpy(), "y": p, "mode": "lines", "name": f"{panel.prior_name} prior p",
         "line": {"color": PRIOR_COLOUR, "width": 3, "dash": "dash"}},
    ], layout(f"KL(q‖p): {check.closed_form:.3f} exact, {check.monte_carlo:.3f} ± {check.half_width:.3f} MC", 460,
              xaxis=axis("unnormalised score S", range=[0, hi]), yaxis=axis("density", range=[0, top])))


def reparam_figure(pair: ScorePair, n_draws: int = 24, seed: int = 0) -> go.Figure:
    """Evenly spread uniform draws u (left axis) pushed through q's inverse CDF to scores S (bottom)."""
    g = torch.Generator().manual_seed(check_seed(seed))
    u = torch.rand(n_draws, generator=g, dtype=torch.float64).clamp(1e-6, 1 - 1e-6)
    s = reparameterise(pair, u).numpy()
    u = u.numpy()
    hi = 1.1 * _plot_range(pair, prior=False)
    grid = torch.linspace(hi / 2000, hi, 300, dtype=torch.float64)
    paths_x, paths_y = [], []
    for ui, si in zip(u, s, strict=True):
        paths_x += [0, si, si, None]
        paths_y += [ui, ui, 0, None]
    return figure([
        {"type": "scatter", "x": grid.numpy(), "y": pair.posterior.cdf(grid).numpy(), "mode": "lines",
         "name": "CDF of q", "line": {"color": POSTERIOR_COLOUR, "width": 3}},
        {"type": "scatter", "x": paths_x, "y": paths_y, "mode": "lines", "name": "u → S = F⁻¹(u)",
         "line": {"color": "#ff7f0e", "width": 1}},
        {"type": "scatter", "x": np.zeros_like(u), "y": u, "mode": "markers", "name": "u ~ Uniform(0, 1)",
         "marker": {"size": 9, "color": "#ff7f0e"}},
        {"type": "scatter", "x": s, "y": np.zeros_like(s), "mode": "markers", "name": "scores S ~ q",
         "marker": {"size": 9, "color": POSTERIOR_COLOUR, "symbol": "triangle-up"}},
    ], layout("Reparameterisation: S = F⁻¹(u)", 460,
              xaxis=axis("score S", range=[-0.01 * hi, hi]), yaxis=axis("u = F(S)", range=[-0.03, 1.03])))


def score_caption(pair: ScorePair, check: KLCheck) -> str:
    return (f"For {pair.describe()}, KL(q ‖ p) = {check.closed_form:.4f} nats in closed form "
            f"({PAIRS[pair.family].kl_source}) and {check.monte_carlo:.4f} ± {check.half_width:.4f} by Monte Carlo "
            f"over {check.n:,} reparameterised draws: the formula the model trains with is the divergence the draws "
            "measure.")


# ---- normalisation -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Spread:
    """How much a normalised weight w_1 varies over draws, against the family's shape, at N keys of
    equal mean weight 1/N: CV(w_1) = N std(w_1) (its mean is exactly 1/N by symmetry)."""

    family: str
    shape_name: str                   # the family's posterior hyperparameter: "shape_k", "sigma"
    shapes: np.ndarray                # (M,)
    n_keys: tuple[int, ...]
    cv: np.ndarray                    # (len(n_keys), M)
    score_cv: np.ndarray              # (M,) CV of one unnormalised score: the N -> oo limit
    n_draws: int

    @property
    def symbol(self) -> str:
        return PAIRS[self.family].shape.symbol


def score_cv(family: str, shapes: Sequence[float]) -> np.ndarray:
    """Coefficient of variation of one score of q at each shape, from the family's posterior's closed-form
    mean and variance: sqrt(Gamma(1+2/k)/Gamma(1+1/k)^2 - 1) for a Weibull, sqrt(e^{sigma^2} - 1) for a
    Lognormal; the scale cancels."""
    attention, name = families.get(family), _panel(family).shape.name
    one_key = torch.zeros(1, dtype=torch.float64)
    qs = [attention.posterior(one_key, attention.hyper({name: float(s)})) for s in shapes]
    return np.array([float(q.stddev / q.mean) for q in qs])


SPREAD_KEYS = (2, 5, 20, 100)


def normalised_spread(family: str, shapes: Sequence[float] | None = None, n_keys: Sequence[int] = SPREAD_KEYS,
                      n_draws: int = 1000, seed: int = 0) -> Spread:
    """Draws through the attention family's own sampler (`AttentionFamily.sample`: scores with mean
    softmax weight, normalised over the keys), so this is the spread the model's attention has; by
    default at every value of the shape's slider."""
    shape = _panel(family).shape
    attention = families.get(family)
    shapes = np.asarray(shape.control.options if shapes is None else shapes, dtype=float)
    g = torch.Generator().manual_seed(check_seed(seed))
    cv = np.empty((len(n_keys), len(shapes)))
    for a, n in enumerate(n_keys):
        log_p = torch.full((n_draws, n), -math.log(n), dtype=torch.float64)           # equal means 1/N
        for b, value in enumerate(shapes):
            w = attention.sample(log_p, attention.hyper({shape.name: float(value)}), None, g)   # (draws, N)
            cv[a, b] = n * float(w[:, 0].std())
    return Spread(family, shape.name, shapes, tuple(n_keys), cv, score_cv(family, shapes), n_draws)


def spread_figure(sp: Spread, current: float | None = None) -> go.Figure:
    data = [{"type": "scatter", "x": sp.shapes, "y": sp.cv[a], "mode": "lines+markers", "name": f"N = {n} keys",
             "line": {"width": 3}} for a, n in enumerate(sp.n_keys)]
    data.append({"type": "scatter", "x": sp.shapes, "y": sp.score_cv, "mode": "lines",
                 "name": "one score's own CV (N → ∞)", "line": {"color": "#333333", "dash": "dash", "width": 3}})
    shapes = []
    if current is not None:
        shapes.append({"type": "line", "x0": current, "x1": current, "y0": 0, "y1": 1, "yref": "paper",
                       "line": {"color": "#d62728", "width": 2, "dash": "dot"}})
    return figure(data, layout("Spread of a normalised weight w₁ at equal means 1/N", 460, shapes=shapes,
                               xaxis=axis(f"{sp.symbol} (log)", type="log"),
                               yaxis=axis("CV of w₁ = N · std(w₁)", type="log")))


def spread_caption(sp: Spread, current: float) -> str:
    j = nearest_index(sp.shapes, current, log=True)
    # Which way of the shape calms attention: where one score's own CV is smaller, over the slider's range.
    options = PAIRS[sp.family].shape.control.options
    low_cv, high_cv = score_cv(sp.family, (options[0], options[-1]))
    calmer = "larger" if high_cv < low_cv else "smaller"
    return (f"At {sp.symbol} = {sp.shapes[j]:.3g} a weight shared by N = {sp.n_keys[0]} keys varies by "
            f"{sp.cv[0, j]:.2f} of its mean, and by {sp.cv[-1, j]:.2f} with N = {sp.n_keys[-1]}, approaching one "
            f"score's own {sp.score_cv[j]:.2f}: normalisation damps the noise only when few keys share the mass, "
            f"and {calmer} {sp.symbol} makes attention less random at every N.")
