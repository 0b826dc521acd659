"""The Theory lab: each paper's central result as a small computation, a figure and a one-sentence caption.

Nothing here imports Streamlit; `views/theory.py` lays the panels out and `bam_viz.bench.theory` times
them. Five sections, each a result object that its figures and caption are pure functions of:

1. Jensen's gap, f(E[z]) != E[f(z)] (Deng et al. 2018, sec. 2): a toy distribution and function, then
   the same gap on a zoo model, one stochastic layer at a time, against f(E[w]) (the weights' Monte
   Carlo mean) and against f(softmax) (the deterministic pass), as `bam_viz.inference.gaps` defines them
   (`jensen_gap`, `layer_gaps`).
2. Exact marginal, posterior and ELBO of a latent alignment (Deng et al. 2018, eqs. 1-2), on the
   `categorical` model (`alignment`).
3. Attention as posterior inference whose error shrinks with the number of tokens (Zhang et al.,
   "An Analysis of Attention via the Lens of Exchangeability and Latent Variable Models"), on an
   exchangeable toy whose exact answer is known (`ExchangeableToy`, `toy_sweep`).
4. BAM's Weibull / Gamma and Lognormal pairs: densities, closed-form KL against Monte Carlo, the
   reparameterisation, and what normalisation does to the spread (Fan et al. 2020) (`score_pair`).
5. Weight-space against attention-space uncertainty on our data (Cinquin et al. 2021), from the
   models' cards (`uncertainty_table`).

Randomness comes only from an explicit numpy or torch generator built from a `seed` argument.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import torch
from scipy import special, stats
from torch.distributions import Distribution, Gamma, LogNormal, Weibull, kl_divergence

from bam_viz import families
from bam_viz.core import metrics
from bam_viz.core.inputs import check_seed, check_text
from bam_viz.core.task import CLASSES
from bam_viz.families import CategoricalFamily
from bam_viz.families.kl import kl_lognormal
from bam_viz.inference import gaps
from bam_viz.inference.explain import lower_states
from bam_viz.nn.attention import Mode, Trace
from bam_viz.plots.charts import (
    MC_COLOUR,
    MEAN_ATTENTION_COLOUR,
    POSTERIOR_COLOUR,
    PRIOR_COLOUR,
    SOFTMAX_COLOUR,
    _figure,
    axis_labels,
)

POSITIVE = CLASSES.index("positive")
FONT_PX = 16                 # figures are read from the back of a classroom
TITLE_PX = 20
Z95 = stats.norm.ppf(0.975)


# ---- shared figure look --------------------------------------------------------------------------
def _layout(title: str, height: int = 460, **props) -> dict:
    """Large type, a title, the legend above the plot, white background."""
    return {
        "height": height, "font": {"size": FONT_PX},
        "title": {"text": title, "font": {"size": TITLE_PX}, "x": 0, "xanchor": "left", "y": 0.97,
                  "yanchor": "top", "yref": "container"},
        # The legend goes under the plot, where plotly.js grows the margin to fit however many rows a
        # narrow column wraps it into; above, it would climb into the title.
        "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
        "legend": {"orientation": "h", "x": 0, "y": -0.2, "xanchor": "left", "yanchor": "top"},
        "paper_bgcolor": "white", "plot_bgcolor": "white", **props,
    }


def _axis(title: str, **props) -> dict:
    return {"title": {"text": title}, "gridcolor": "#eeeeee", "zerolinecolor": "#cccccc", **props}


@dataclass(frozen=True)
class Control:
    """One slider of the page: its URL name, label, the values it offers and its default."""

    name: str
    label: str
    options: tuple[float, ...]
    default: float
    help: str = ""

    def __post_init__(self):
        # The default is always offered, so that a fresh page shows exactly it.
        object.__setattr__(self, "options", tuple(sorted({float(o) for o in self.options} | {float(self.default)})))

    def snap(self, value: float) -> float:
        """The option nearest to `value` (log distance when every option is positive)."""
        if all(o > 0 for o in self.options) and value > 0:
            return min(self.options, key=lambda o: abs(math.log(o) - math.log(value)))
        return min(self.options, key=lambda o: abs(o - value))


def log_options(lo: float, hi: float, per_decade: int = 12) -> tuple[float, ...]:
    """Values from lo to hi, `per_decade` per factor of ten, rounded to 3 significant digits."""
    n = max(2, round(per_decade * math.log10(hi / lo)) + 1)
    values = {float(f"{lo * (hi / lo) ** (i / (n - 1)):.3g}") for i in range(n)}
    return tuple(sorted(values | {lo, hi}))


def linear_options(lo: float, hi: float, step: float) -> tuple[float, ...]:
    n = round((hi - lo) / step)
    return tuple(round(lo + i * step, 10) for i in range(n + 1))


# ==================================================================================================
# 1. f(E[z]) is not E[f(z)] (Deng et al. 2018, sec. 2)
# ==================================================================================================
FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "sigmoid": (special.expit, "σ(z) = 1 / (1 + e⁻ᶻ)"),
    "square": (np.square, "z²"),
    "tanh": (np.tanh, "tanh(z)"),
    "softplus": (lambda z: np.logaddexp(0.0, z), "log(1 + eᶻ)"),
}
GAUSS_HERMITE_NODES = 64      # exact for polynomials of degree < 128; sigmoid and tanh to ~1e-12


def _function(name: str) -> Callable[[np.ndarray], np.ndarray]:
    if name not in FUNCTIONS:
        raise ValueError(f"unknown function {name!r}: choose one of {', '.join(FUNCTIONS)}")
    return FUNCTIONS[name][0]


def _finite(value, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x}")
    return x


@dataclass(frozen=True)
class TwoPoint:
    """z = high with probability p_high, else low: Deng et al.'s examples."""

    low: float
    high: float
    p_high: float

    def __post_init__(self):
        for name in ("low", "high"):
            _finite(getattr(self, name), name)
        if not 0.0 <= _finite(self.p_high, "p_high") <= 1.0:
            raise ValueError(f"p_high is a probability: it must lie in [0, 1], got {self.p_high}")

    @property
    def mean(self) -> float:
        return (1 - self.p_high) * self.low + self.p_high * self.high

    def atoms(self) -> tuple[np.ndarray, np.ndarray]:
        """The support points and their probabilities: E[f(z)] = sum_i w_i f(z_i), exactly."""
        return np.array([self.low, self.high]), np.array([1 - self.p_high, self.p_high])

    def describe(self) -> str:
        return f"z ∈ {{{self.low:g}, {self.high:g}}} with P(z = {self.high:g}) = {self.p_high:g}"


@dataclass(frozen=True)
class Gaussian:
    """z ~ N(mean, sd^2)."""

    mean: float
    sd: float

    def __post_init__(self):
        _finite(self.mean, "mean")
        if _finite(self.sd, "sd") <= 0:
            raise ValueError(f"sd must be positive, got {self.sd}")

    def atoms(self, n: int = GAUSS_HERMITE_NODES) -> tuple[np.ndarray, np.ndarray]:
        """Gauss-Hermite nodes and weights for N(mean, sd^2): E[f(z)] ~ sum_i w_i f(mean + sqrt(2) sd x_i),
        with sum_i w_i = 1 (the weights of exp(-x^2) divided by sqrt(pi))."""
        x, w = np.polynomial.hermite.hermgauss(n)
        return self.mean + math.sqrt(2.0) * self.sd * x, w / math.sqrt(math.pi)

    def describe(self) -> str:
        return f"z ~ N({self.mean:g}, {self.sd:g}²)"


@dataclass(frozen=True)
class JensenGap:
    """f(E[z]) and E[f(z)] for one distribution and one function; `atoms` are what E[f(z)] sums."""

    function: str
    distribution: TwoPoint | Gaussian
    f_of_mean: float
    mean_of_f: float
    atoms: tuple[np.ndarray, np.ndarray] = field(repr=False)

    @property
    def mean(self) -> float:
        return self.distribution.mean

    @property
    def gap(self) -> float:
        return self.mean_of_f - self.f_of_mean


def jensen_gap(function: str, distribution: TwoPoint | Gaussian) -> JensenGap:
    """f(E[z]) and E[f(z)]: exactly for a two-point z, by Gauss-Hermite quadrature for a Gaussian."""
    f = _function(function)
    points, weights = distribution.atoms()
    return JensenGap(function, distribution, float(f(np.array(distribution.mean))),
                     float(weights @ f(points)), (points, weights))


def monte_carlo_mean(function: str, distribution: TwoPoint | Gaussian, n: int = 100_000,
                     seed: int = 0) -> tuple[float, float]:
    """E[f(z)] by Monte Carlo, with its standard error: the check on the quadrature."""
    f, rng = _function(function), np.random.default_rng(check_seed(seed))
    if isinstance(distribution, Gaussian):
        z = distribution.mean + distribution.sd * rng.standard_normal(n)
    else:
        z = np.where(rng.random(n) < distribution.p_high, distribution.high, distribution.low)
    values = f(z)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(n))


def jensen_figure(g: JensenGap) -> go.Figure:
    """f, the distribution of z (right axis), f(E[z]) and E[f(z)] at E[z], and what E[f(z)] averages:
    the chord between the two points of a two-point z, the quadrature nodes of a Gaussian."""
    f = _function(g.function)
    points, weights = g.atoms
    d = g.distribution
    if isinstance(d, Gaussian):
        lo, hi = d.mean - 4 * d.sd, d.mean + 4 * d.sd
    else:
        span = max(abs(d.high - d.low), 1.0)
        lo, hi = min(d.low, d.high) - 0.3 * span, max(d.low, d.high) + 0.3 * span
    z = np.linspace(lo, hi, 241)
    data = [{"type": "scatter", "x": z, "y": f(z), "mode": "lines", "name": f"f(z) = {FUNCTIONS[g.function][1]}",
             "line": {"color": "#333333", "width": 3}}]
    if isinstance(d, Gaussian):
        data.append({"type": "scatter", "x": z, "y": stats.norm.pdf(z, d.mean, d.sd), "yaxis": "y2",
                     "mode": "lines", "fill": "tozeroy", "name": "density of z (right axis)",
                     "line": {"color": PRIOR_COLOUR}, "opacity": 0.4})
        shown = (weights > 1e-4) & (points >= lo) & (points <= hi)
        data.append({"type": "scatter", "x": points[shown], "y": f(points[shown]), "mode": "markers",
                     "name": "quadrature nodes (size: weight); E[f(z)] is their centre of mass",
                     "marker": {"size": 6 + 60 * np.sqrt(weights[shown]), "color": MC_COLOUR, "opacity": 0.35}})
    else:
        data.append({"type": "bar", "x": points, "y": weights, "yaxis": "y2", "width": 0.04 * (hi - lo),
                     "name": "P(z) (right axis)", "marker": {"color": PRIOR_COLOUR}, "opacity": 0.5})
        data.append({"type": "scatter", "x": points, "y": f(points), "mode": "lines+markers",
                     "name": "chord: E[f(z)] lies on it", "line": {"color": MC_COLOUR, "dash": "dash", "width": 2},
                     "marker": {"size": 10, "color": MC_COLOUR}})
    data += [
        {"type": "scatter", "x": [g.mean, g.mean], "y": [g.f_of_mean, g.mean_of_f], "mode": "lines",
         "name": f"gap {g.gap:+.3f}", "line": {"color": "#ff7f0e", "width": 5}},
        {"type": "scatter", "x": [g.mean], "y": [g.f_of_mean], "mode": "markers",
         "name": f"f(E[z]) = {g.f_of_mean:.3f}",
         "marker": {"size": 16, "color": MEAN_ATTENTION_COLOUR, "symbol": "diamond"}},
        {"type": "scatter", "x": [g.mean], "y": [g.mean_of_f], "mode": "markers",
         "name": f"E[f(z)] = {g.mean_of_f:.3f}", "marker": {"size": 16, "color": MC_COLOUR, "symbol": "circle"}},
    ]
    return _figure(data, _layout(
        f"{html.escape(d.describe())}, f = {g.function}", 520, margin={"l": 70, "r": 90, "t": 60, "b": 60},
        xaxis=_axis("z", range=[lo, hi]), yaxis=_axis("f(z)"),
        yaxis2={"title": {"text": "P(z) / density"}, "overlaying": "y", "side": "right", "showgrid": False,
                "range": [0, 1.05 * (float(weights.max()) if isinstance(d, TwoPoint)
                                     else 1 / (d.sd * math.sqrt(2 * math.pi)))]},
        shapes=[{"type": "line", "x0": g.mean, "x1": g.mean, "y0": 0, "y1": 1, "yref": "paper",
                 "line": {"color": "#999999", "dash": "dot", "width": 1}}],
        annotations=[{"x": g.mean, "y": 0, "yref": "paper", "text": "E[z]", "showarrow": False, "yanchor": "bottom",
                      "xanchor": "left"}]))


def jensen_caption(g: JensenGap) -> str:
    if isinstance(g.distribution, TwoPoint):
        how, where = "exactly", "the chord between the two points"
    else:
        how, where = "by Gauss-Hermite quadrature", "the quadrature nodes' centre of mass"
    return (f"With {g.distribution.describe()} and f = {g.function}, f(E[z]) = {g.f_of_mean:.3f} but E[f(z)] = "
            f"{g.mean_of_f:.3f} ({how}): predicting once from the average input is not averaging the predictions, "
            f"and the gap ({g.gap:+.3f}) is the height from the curve to {where}.")


# ---- the same gap on a zoo model, one stochastic layer at a time ---------------------------------
@dataclass(frozen=True)
class GapCase:
    """P(positive) of one sentence when the layers `sampling` draw (the others at softmax(psi)): the
    Monte Carlo mean E[f(z)] over the S samples, f(E[w]) with the sampled layers' weights at their
    Monte Carlo mean, and the two gaps with their standard errors (definitions: `bam_viz.inference.gaps`)."""

    name: str                         # "layer 3" or "all together"
    sampling: tuple[int, ...]         # the layers that draw
    mc: float                         # E[f(z)]: the mean of the S samples' P(positive)
    mc_se: float                      # its standard error, sd / sqrt(S)
    mean_attention: float             # f(E[w]): the sampled attention layers at their Monte Carlo mean weights
    softmax: float                    # f(softmax): the deterministic pass, every stochastic layer at softmax(psi)
    gap_se: float                     # delta-method SE of E[f(z)] - f(E[w]) (bam_viz.inference.gaps)
    gap_softmax_se: float             # SE of the S paired differences f(z_s) - f(softmax)

    @property
    def gap(self) -> float:
        """Deng et al.'s gap E[f(z)] - f(E[w])."""
        return self.mc - self.mean_attention

    @property
    def gap_softmax(self) -> float:
        """E[f(z)] - f(softmax): against the deterministic pass."""
        return self.mc - self.softmax


@dataclass(frozen=True)
class LayerGaps:
    """Both gaps of one sentence when only `layers[i]` samples (every other stochastic layer at
    softmax(psi)), for each stochastic layer, and when all do (`together`: the model's own answer,
    `explain()`'s numbers). With S samples and `seed`; `noise` is what samples: "attention" (the
    weights are drawn) or "dropout" (MC dropout, whose f(E[z]) is the deterministic pass: E[w] is
    softmax(psi) and both gaps are one)."""

    model: str
    softmax: float                    # f(softmax): P(positive) of the deterministic pass
    layers: tuple[int, ...]
    cases: tuple[GapCase, ...]        # one per layer of `layers`, that layer alone sampling
    together: GapCase                 # every stochastic layer sampling
    n_samples: int
    seed: int
    noise: str

    @property
    def gaps(self) -> tuple[float, ...]:
        """Deng's gap E[f(z)] - f(E[w]) per layer alone."""
        return tuple(c.gap for c in self.cases)

    @property
    def gaps_softmax(self) -> tuple[float, ...]:
        """E[f(z)] - f(softmax) per layer alone."""
        return tuple(c.gap_softmax for c in self.cases)


def _p_positive(model, cls_logits: torch.Tensor) -> torch.Tensor:
    return model.head(cls_logits).softmax(-1)[:, POSITIVE]


def _compose(model, x, mask, sampled: int, n_samples: int, generator, hyper):
    """The layers from the first stochastic one up, each through its own `forward` as
    `BamClassifier.upper` calls them, with only layer `sampled` drawing (Mode.SAMPLE, n_samples draws)
    and every other one at softmax(psi); returns the [CLS] states (n_samples, C) and the weights
    layer `sampled` used, (n_samples, H, T, T), recorded as `explain()` records them."""
    top = model.n_layers - 1
    stochastic = set(model.config.stochastic_layers)
    weights = None
    for i in range(model.first_stochastic, model.n_layers):
        mode = Mode.SAMPLE if i == sampled else Mode.MEAN
        # The model's own rule for dropout at inference: on only where mc-dropout samples.
        x, mask, t = model.bert.layers[i](
            x, mask, n_samples=n_samples if i == sampled else 1, generator=generator, mode=mode,
            hyper=hyper if i in stochastic else None, p=model._dropout_p(i, mode), cls_only=i == top,
            trace=Trace.SAMPLES if i == sampled else Trace.NONE)
        if i == sampled:
            weights = t.weights
    return x[:, 0], weights                                                             # (S, C)


def _case(name, sampling, p: torch.Tensor, softmax: float, drawn: dict, model, x, mask, hyper) -> GapCase:
    """A `GapCase` from the S samples' P(positive) `p` and the weights the attention-random layers
    drew (`drawn`, empty where only dropout samples: then f(E[w]) is the deterministic pass)."""
    p = p.double().cpu().numpy()
    S = p.shape[0]
    paired = float(np.std(p - softmax, ddof=1) / math.sqrt(S))
    if drawn:
        mean_probs, slopes = gaps.mean_attention_probs(model, x, mask, drawn, hyper)
        mean_attention = float(mean_probs[POSITIVE])
        gap_se = metrics.delta_gap_se(p, slopes[:, POSITIVE].cpu().numpy())
    else:
        mean_attention, gap_se = softmax, paired
    return GapCase(name, tuple(sampling), float(p.mean()), float(np.std(p, ddof=1) / math.sqrt(S)), mean_attention,
                   softmax, gap_se, paired)


def layer_gaps(model, text: str, n_samples: int = 256, seed: int = 0) -> LayerGaps:
    """Deng's gap E[f(z)] - f(E[w]) and the gap to the deterministic pass E[f(z)] - f(softmax), in
    P(positive) for `text`, when only one stochastic layer samples, for each such layer, and when all
    do (`explain(model, text, n_samples, seed)`'s pass and numbers). Each case's draws start from the
    same seed; E[w] is the Monte Carlo mean of the S weights the sampled layers drew."""
    text, seed = check_text(text), check_seed(seed)
    if not model.stochastic:
        raise ValueError(f"{model.name} is deterministic: every sample would be its mean. Pick a stochastic model")
    if not 2 <= n_samples <= 4096:
        raise ValueError(f"n_samples must lie in [2, 4096] for a standard error, got {n_samples}")
    model.eval()
    lower = lower_states(model, text)
    x, mask = lower.x, lower.mask
    hyper = model.hyper()
    layers = tuple(sorted(model.config.stochastic_layers))
    random_attention = set(gaps.attention_random_layers(model))
    with torch.inference_mode():
        logits, _, _ = model.upper(x, mask, mode=Mode.MEAN, hyper=hyper)
        softmax = float(logits.softmax(-1)[0, POSITIVE])
        cases = []
        for layer in layers:
            g = torch.Generator(device=model.device).manual_seed(seed)
            cls, w = _compose(model, x, mask, layer, n_samples, g, hyper)
            drawn = {layer: w} if layer in random_attention else {}
            cases.append(_case(f"layer {layer}", (layer,), _p_positive(model, cls), softmax, drawn,
                               model, x, mask, hyper))
        # The model's own pass, exactly as explain() makes it (the same generator, the same trace).
        g = torch.Generator(device=model.device).manual_seed(seed)
        logits, traces, _ = model.upper(x, mask, n_samples=n_samples, generator=g, hyper=hyper, trace=Trace.SAMPLES)
        first = model.n_layers - len(traces)
        drawn = {i: traces[i - first].weights for i in sorted(random_attention)}
        together = _case("all together", layers, logits.softmax(-1)[:, POSITIVE], softmax, drawn,
                         model, x, mask, hyper)
    noise = "dropout" if model.config.mc_dropout and not model.attention_family.stochastic else "attention"
    return LayerGaps(model.name, softmax, layers, tuple(cases), together, n_samples, seed, noise)


DENG_GAP = "E[f(z)] − f(E[w])"
SOFTMAX_GAP = "E[f(z)] − f(softmax)"


def layer_gap_figure(g: LayerGaps) -> go.Figure:
    """Per case (each layer alone, then all together), Deng's gap and the gap to the deterministic
    pass as grouped bars with 95% Monte Carlo error bars."""
    cases = (*g.cases, g.together)
    names = [c.name for c in cases]

    def bars(name, colour, values, errors, hover):
        return {"type": "bar", "x": names, "y": values, "name": name, "marker": {"color": colour},
                "error_y": {"type": "data", "array": [Z95 * e for e in errors], "visible": True,
                            "thickness": 2, "width": 6},
                "hovertemplate": f"%{{x}}: {hover} = %{{y:+.4f}}<extra></extra>"}

    if g.noise == "dropout":   # E[z] keeps every unit: f(E[z]) is the deterministic pass, one gap
        data = [bars(f"{SOFTMAX_GAP} = E[f(z)] − f(E[z]): f(E[z]) is the deterministic pass (dropout off)",
                     MC_COLOUR, [c.gap for c in cases], [c.gap_se for c in cases], SOFTMAX_GAP)]
    else:
        data = [
            bars(f"Deng's gap {DENG_GAP}, E[w] the Monte Carlo mean of the sampled weights", MEAN_ATTENTION_COLOUR,
                 [c.gap for c in cases], [c.gap_se for c in cases], DENG_GAP),
            bars(f"{SOFTMAX_GAP}, f(softmax) the deterministic pass", SOFTMAX_COLOUR,
                 [c.gap_softmax for c in cases], [c.gap_softmax_se for c in cases], SOFTMAX_GAP),
        ]
    # A dotted line sets "all together" (the model's own answer) apart from the layers alone.
    split = {"type": "line", "x0": len(g.cases) - 0.5, "x1": len(g.cases) - 0.5, "y0": 0, "y1": 1, "yref": "paper",
             "line": {"color": "#999999", "dash": "dot", "width": 1}}
    return _figure(data, _layout(
        f"{g.model}: {'the gap' if g.noise == 'dropout' else 'both gaps'}, one layer's {g.noise} sampling at a "
        f"time, then all ({g.n_samples} samples)",
        460, barmode="group", shapes=[split], xaxis=_axis("which layers sample (the others at softmax(ψ))"),
        yaxis=_axis("gap in P(positive)", zeroline=True, zerolinewidth=2)))


def _pm(value: float, se: float) -> str:
    return f"{value:+.4f} ± {Z95 * se:.4f}"


def layer_gap_caption(g: LayerGaps) -> str:
    t = g.together
    if g.noise == "dropout":
        sampling = "dropout on in every stochastic layer"
    else:
        sampling = f"{'its one' if len(g.layers) == 1 else 'every'} stochastic layer sampling"
    head = f"On this sentence {g.model} gives E[f(z)] = {t.mc:.3f}, the mean over {g.n_samples} samples with {sampling}"
    largest = max(range(len(g.layers)), key=lambda i: abs(g.gaps[i]))
    c, which = g.cases[largest], "" if g.noise == "dropout" else "Deng "
    alone = ("" if len(g.layers) == 1 else
             f" Alone, layer {g.layers[largest]} has the largest {which}gap, {_pm(c.gap, c.gap_se)}, and "
             f"{sum(abs(k.gap) > Z95 * k.gap_se for k in g.cases)} of {len(g.layers)} layers alone have one "
             f"beyond their 95% interval.")
    if g.noise == "dropout":
        return (f"{head}, and P(positive) = {g.softmax:.3f} with dropout off: f(softmax), the "
                f"deterministic pass, which is also f(E[z]) (the mean of a dropout mask keeps every unit), so Deng's "
                f"gap E[f(z)] − f(E[z]) and E[f(z)] − f(softmax) are one, {_pm(t.gap, t.gap_se)} (95% Monte Carlo "
                f"interval, seed {g.seed}).{alone}")
    return (f"{head}, f(E[w]) = {t.mean_attention:.3f} and f(softmax) = {g.softmax:.3f}: Deng's gap "
            f"{_pm(t.gap, t.gap_se)}, the gap to the deterministic pass {_pm(t.gap_softmax, t.gap_softmax_se)}."
            f"{alone} Green: Deng's gap E[f(z)] − f(E[w]), with E[w] the Monte Carlo mean, over the "
            f"{g.n_samples} samples, of each sampled layer's weights (the layers above fed by the f(E[w]) pass "
            f"itself); red: E[f(z)] − f(softmax), against the deterministic pass with every stochastic layer at "
            f"softmax(ψ). Error bars: 95% Monte Carlo intervals, seed {g.seed}.")


# ==================================================================================================
# 2. Exact marginal, posterior and ELBO of a latent alignment (Deng et al. 2018)
# ==================================================================================================
@dataclass(frozen=True)
class Alignment:
    """The `categorical` model's top-layer alignment for one sentence: z is the one key the [CLS]
    query aligns to, shared by every head (p(z|x) averages the heads' softmax attention of [CLS]); p(y|x, z)
    is the classifier's answer if [CLS] read key z alone. In float64 from the model's float32."""

    model: str
    tokens: tuple[str, ...]
    log_prior: np.ndarray = field(repr=False)       # (T,) log p(z|x)
    log_lik: np.ndarray = field(repr=False)         # (T, 2) log p(y|x, z)
    n_heads: int = 12

    def _t(self, label: int):
        return torch.from_numpy(self.log_prior), torch.from_numpy(self.log_lik[:, label])

    def log_marginal(self, label: int) -> float:
        """log p(y|x) = log sum_z p(z|x) p(y|x,z) (eq. 1)."""
        return float(CategoricalFamily.exact_log_marginal(*self._t(label)))

    def log_posterior(self, label: int) -> np.ndarray:
        """log p(z|x,y) (T,), by Bayes' rule."""
        return CategoricalFamily.exact_posterior(*self._t(label)).numpy()

    def log_q(self, label: int, t: float) -> np.ndarray:
        """The variational q_t ∝ p(z|x)^(1-t) p(z|x,y)^t (T,): a geometric path from the prior (t = 0)
        to the posterior (t = 1). As the posterior is ∝ p(z|x) p(y|x,z), q_t ∝ p(z|x) p(y|x,z)^t:
        the prior tilted by the likelihood raised to t."""
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"t runs from the prior (0) to the posterior (1), got {t}")
        return torch.from_numpy(self.log_prior + t * self.log_lik[:, label]).log_softmax(-1).numpy()

    def elbo(self, label: int, log_q: np.ndarray) -> float:
        """ELBO(q) = E_q[log p(y|x,z)] - KL(q || p(z|x)) (eq. 2), enumerated exactly."""
        return float(CategoricalFamily.elbo(torch.from_numpy(np.asarray(log_q, dtype=np.float64)), *self._t(label)))

    def kl_to_posterior(self, label: int, log_q: np.ndarray) -> float:
        """KL(q || p(z|x,y)): what the ELBO falls short of log p(y|x) by."""
        q = np.exp(log_q)
        return float(np.sum(np.where(q > 0, q * (log_q - self.log_posterior(label)), 0.0)))


def alignment(model, text: str) -> Alignment:
    """p(z|x) and p(y|x,z) for every key of `text` from a hard-alignment model (`categorical`), via
    `BamClassifier.exact_log_marginal`."""
    text = check_text(text)
    if not model.attention_family.hard_alignment:
        raise ValueError(f"{model.name} has no latent alignment to enumerate: use the categorical model")
    model.eval()
    ids, mask = model.tokenizer.batch([text])
    with torch.inference_mode():
        x, _ = model.lower(ids.to(model.device), mask.to(model.device))
        _, log_pz, log_lik = model.exact_log_marginal(x, mask.to(model.device))
    log_prior = log_pz[0].double().cpu()
    # float32 log p(z|x) sums to one only to ~1e-7: renormalised, the identities below hold to 1e-12.
    return Alignment(model.name, tuple(model.tokenize(text)), log_prior.log_softmax(-1).numpy(),
                     log_lik[0].double().cpu().log_softmax(-1).numpy(), model.n_heads)


@dataclass(frozen=True)
class ElboPath:
    """ELBO(q_t) along the path from the prior to the posterior, and the point at the chosen t."""

    label: int
    t: float
    ts: np.ndarray = field(repr=False)
    elbos: np.ndarray = field(repr=False)
    log_marginal: float
    elbo: float
    kl: float
    log_q: np.ndarray = field(repr=False)


def elbo_path(al: Alignment, label: int, t: float, n_points: int = 101) -> ElboPath:
    if label not in (0, 1):
        raise ValueError(f"label is 0 ({CLASSES[0]}) or 1 ({CLASSES[1]}), got {label!r}")
    ts = np.linspace(0.0, 1.0, n_points)
    log_q = al.log_q(label, t)
    return ElboPath(label, t, ts, np.array([al.elbo(label, al.log_q(label, s)) for s in ts]),
                    al.log_marginal(label), al.elbo(label, log_q), al.kl_to_posterior(label, log_q), log_q)


def alignment_figure(al: Alignment, path: ElboPath) -> go.Figure:
    """Per key: p(y|x,z) (top), and the prior p(z|x), q_t and the posterior p(z|x,y) (bottom)."""
    labels = axis_labels(list(al.tokens))
    y = CLASSES[path.label]
    return _figure([
        {"type": "scatter", "x": labels, "y": np.exp(al.log_lik[:, path.label]), "mode": "lines+markers",
         "name": f"p(y = {y} | x, z)", "yaxis": "y2", "line": {"color": "#ff7f0e", "width": 3},
         "marker": {"size": 10}},
        {"type": "bar", "x": labels, "y": np.exp(al.log_prior), "name": "prior p(z | x)",
         "marker": {"color": PRIOR_COLOUR}},
        {"type": "bar", "x": labels, "y": np.exp(path.log_q), "name": f"q (t = {path.t:.2f})",
         "marker": {"color": MC_COLOUR}},
        {"type": "bar", "x": labels, "y": np.exp(al.log_posterior(path.label)), "name": f"posterior p(z | x, y = {y})",
         "marker": {"color": POSTERIOR_COLOUR}},
    ], _layout(f"Which key z does [CLS] align to? y = {y}", 600, barmode="group",
               xaxis=_axis("key z", type="category", tickangle=-45 if len(labels) > 12 else 0),
               yaxis=_axis("probability of z", domain=[0.0, 0.58], range=[0, 1]),
               yaxis2=_axis(f"p({y} | x, z)", domain=[0.68, 1.0], range=[0, 1.05])))


def elbo_figure(path: ElboPath) -> go.Figure:
    y = CLASSES[path.label]
    lo = min(float(path.elbos.min()), path.log_marginal)
    pad = 0.08 * max(path.log_marginal - lo, 1e-3)
    return _figure([
        {"type": "scatter", "x": path.ts, "y": path.elbos, "mode": "lines", "name": "ELBO(q_t)",
         "line": {"color": MC_COLOUR, "width": 3}},
        {"type": "scatter", "x": [0, 1], "y": [path.log_marginal] * 2, "mode": "lines",
         "name": f"log p(y = {y} | x) = {path.log_marginal:.4f}", "line": {"color": POSTERIOR_COLOUR, "dash": "dash",
                                                                          "width": 3}},
        {"type": "scatter", "x": [path.t, path.t], "y": [path.elbo, path.log_marginal], "mode": "lines",
         "name": f"KL(q ‖ posterior) = {path.kl:.4f}", "line": {"color": "#ff7f0e", "width": 5}},
        {"type": "scatter", "x": [path.t], "y": [path.elbo], "mode": "markers", "name": f"ELBO = {path.elbo:.4f}",
         "marker": {"size": 16, "color": MC_COLOUR}},
    ], _layout("ELBO(q) against log p(y|x)", 600,
               xaxis=_axis("t (0: prior, 1: posterior)", range=[-0.02, 1.02]),
               yaxis=_axis("nats", range=[lo - pad, path.log_marginal + pad])))


def alignment_caption(al: Alignment, path: ElboPath) -> str:
    return (f"z is the one key that the top layer's [CLS] query aligns to, shared by its {al.n_heads} heads "
            f"(p(z | x) averages their softmax attention), so "
            f"log p(y = {CLASSES[path.label]} | x) = {path.log_marginal:.4f} "
            f"is an exact sum over {len(al.tokens)} keys; at t = {path.t:.2f} the ELBO ({path.elbo:.4f}) falls short "
            f"of it by exactly KL(q ‖ p(z | x, y)) = {path.kl:.4f} nats, and only the exact posterior (t = 1) "
            "closes the gap.")


# ==================================================================================================
# 3. Attention as posterior inference, its error shrinking with input size (Zhang et al.)
# ==================================================================================================
MAX_TOY_TOKENS = 10_000_000        # tokens in one draw() call: ~0.5 GB of float64 keys and indices


@dataclass(frozen=True)
class ExchangeableToy:
    """An exchangeable latent-variable model with a known answer.

    A sequence's latent class z ~ Uniform{1..K}. Given z, N tokens are i.i.d. (so exchangeable): a
    component c_i ~ Cat(A_z) with A_z[z] = own_share and the rest shared equally, a key
    k_i ~ N(mu_{c_i}, noise^2 I_2) with the centres mu_c on a circle of `radius`, and the value v_i the
    one-hot of c_i. The query q is one more key drawn the same way.

    The exact answer is the conditional mean of the value given the key, by Bayes' rule:
        E[v | k = q, z]_j = A_z[j] N(q; mu_j, s^2) / sum_l A_z[l] N(q; mu_l, s^2)
                          = softmax_j(log A_z[j] + <q, mu_j> / s^2)      (every |mu_j| equal).
    Softmax attention with query q and temperature tau, sum_i softmax_i(<q, k_i> / tau) v_i, tends as
    N -> oo to E[e^{<q,k>/tau} v] / E[e^{<q,k>/tau}] = softmax_j(log A_z[j] + <q, mu_j> / tau) (the key
    noise adds a factor e^{s^2 |q|^2 / 2 tau^2} common to every j): the exact answer iff tau = s^2.
    At the matched temperature attention is a self-normalised importance sampler of that answer,
    consistent with error O(N^{-1/2}); at any other it converges to the wrong limit.
    """

    noise: float = 1.0
    n_classes: int = 3
    radius: float = 1.5
    own_share: float = 0.6

    def __post_init__(self):
        if not 0.05 <= _finite(self.noise, "noise") <= 20:
            raise ValueError(f"noise is the keys' standard deviation: it must lie in [0.05, 20], got {self.noise}")
        if not 1 / self.n_classes < self.own_share < 1:
            raise ValueError(f"own_share must lie in (1/{self.n_classes}, 1), got {self.own_share}")

    @property
    def means(self) -> np.ndarray:
        angles = 2 * np.pi * np.arange(self.n_classes) / self.n_classes
        return self.radius * np.stack([np.cos(angles), np.sin(angles)], 1)            # (K, 2)

    @property
    def mixing(self) -> np.ndarray:
        K = self.n_classes
        A = np.full((K, K), (1 - self.own_share) / (K - 1))
        np.fill_diagonal(A, self.own_share)
        return A                                                                         # (K, K): A[z, c]

    @property
    def matched_temperature(self) -> float:
        return self.noise**2

    def draw(self, n_tokens: int, n_draws: int, rng: np.random.Generator) -> ToyDraw:
        """`n_draws` independent sequences of `n_tokens` tokens and a query each."""
        if n_tokens < 1 or n_draws < 1 or n_tokens * n_draws > MAX_TOY_TOKENS:
            raise ValueError(f"n_tokens ({n_tokens}) and n_draws ({n_draws}) must be at least 1 and their product "
                             f"at most {MAX_TOY_TOKENS:,}: draw fewer")
        K, own = self.n_classes, self.own_share
        z = rng.integers(K, size=n_draws)                                                # (R,)
        # One uniform per token picks its component: below own_share it is z, above it one of the
        # other K - 1 classes, equally likely (the rows of `mixing`).
        u = rng.random((n_draws, n_tokens + 1))
        shift = 1 + np.minimum(((u - own) / (1 - own) * (K - 1)).astype(np.int64), K - 2)
        c = np.where(u < own, z[:, None], (z[:, None] + shift) % K)                     # (R, N + 1)
        keys = self.means[c]
        keys += self.noise * rng.standard_normal((n_draws, n_tokens + 1, 2))            # (R, N + 1, 2)
        return ToyDraw(z, c[:, 1:], keys[:, 1:], keys[:, 0], c[:, 0])

    def _softmax_over_components(self, z, query, temperature) -> np.ndarray:
        logits = np.log(self.mixing[z]) + query @ self.means.T / temperature            # (R, K)
        return special.softmax(logits, axis=-1)

    def exact(self, d: ToyDraw) -> np.ndarray:
        """E[v | k = q, z] (R, K) by Bayes' rule, z known."""
        return self._softmax_over_components(d.z, d.query, self.matched_temperature)

    def limit(self, d: ToyDraw, temperature: float) -> np.ndarray:
        """Where attention at `temperature` converges as N -> oo (R, K)."""
        return self._softmax_over_components(d.z, d.query, temperature)

    def weights(self, d: ToyDraw, temperature: float) -> np.ndarray:
        """softmax_i(<q, k_i> / tau) (R, N): the attention of the query over the tokens."""
        logits = (d.keys[..., 0] * d.query[:, :1] + d.keys[..., 1] * d.query[:, 1:]) / temperature   # (R, N)
        return special.softmax(logits, axis=-1)

    def attention(self, d: ToyDraw, temperature: float) -> np.ndarray:
        """sum_i softmax_i(<q, k_i> / tau) onehot(c_i) (R, K), summed per component without a one-hot."""
        R, N = d.components.shape
        flat = (np.arange(R)[:, None] * self.n_classes + d.components).ravel()
        return np.bincount(flat, self.weights(d, temperature).ravel(), R * self.n_classes).reshape(R, self.n_classes)

    def bayes(self, d: ToyDraw) -> np.ndarray:
        """The best answer from the tokens when z is unknown: sum_z p(z | c_1..N) E[v | k = q, z] (R, K)."""
        K = self.n_classes
        counts = np.stack([(d.components == c).sum(1) for c in range(K)], 1)          # (R, K)
        log_post_z = special.log_softmax(counts @ np.log(self.mixing).T, axis=-1)       # (R, K): uniform prior on z
        answers = np.stack([self._softmax_over_components(np.full(len(d.z), zz), d.query, self.matched_temperature)
                            for zz in range(K)], 1)                                      # (R, K_z, K)
        return np.einsum("rz,rzk->rk", np.exp(log_post_z), answers)


@dataclass(frozen=True)
class ToyDraw:
    z: np.ndarray                        # (R,) latent class of each sequence
    components: np.ndarray               # (R, N) each token's component (its value is the one-hot)
    keys: np.ndarray                     # (R, N, 2)
    query: np.ndarray                    # (R, 2)
    query_component: np.ndarray          # (R,)


def total_variation(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return 0.5 * np.abs(p - q).sum(-1)


@dataclass(frozen=True)
class ToyExample:
    """One sequence: its tokens, the attention weights and three answers for the query."""

    toy: ExchangeableToy
    temperature: float
    draw: ToyDraw = field(repr=False)
    weights: np.ndarray = field(repr=False)       # (N,)
    attention: np.ndarray                         # (K,)
    exact: np.ndarray                             # (K,)
    bayes: np.ndarray                             # (K,)

    @property
    def error(self) -> float:
        return float(total_variation(self.attention, self.exact))


def toy_example(toy: ExchangeableToy, n_tokens: int, temperature_ratio: float = 1.0, seed: int = 0) -> ToyExample:
    rng = np.random.default_rng(check_seed(seed))
    d = toy.draw(n_tokens, 1, rng)
    tau = temperature_ratio * toy.matched_temperature
    return ToyExample(toy, tau, d, toy.weights(d, tau)[0], toy.attention(d, tau)[0], toy.exact(d)[0],
                      toy.bayes(d)[0])


@dataclass(frozen=True)
class LogLogFit:
    """OLS of log(error) on log(N): error ~ e^intercept N^slope, with a t interval for the slope."""

    slope: float
    intercept: float
    low: float
    high: float
    level: float = 0.95


def loglog_fit(n: Sequence[float], errors: Sequence[float], level: float = 0.95) -> LogLogFit:
    x, y = np.log(np.asarray(n, dtype=float)), np.log(np.asarray(errors, dtype=float))
    if len(x) < 3 or not np.all(np.isfinite(y)):
        raise ValueError("a log-log fit needs at least 3 positive errors")
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.5 + level / 2, len(x) - 2) * fit.stderr
    return LogLogFit(float(fit.slope), float(fit.intercept), float(fit.slope - half), float(fit.slope + half), level)


TOY_N = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOY_TEMPERATURE_RATIOS = tuple(float(f"{2 ** (i / 2):.3g}") for i in range(-6, 7))   # 1/8 .. 8, by sqrt(2)


@dataclass(frozen=True)
class ToySweep:
    """Mean error of attention against the exact answer over `n_draws` sequences at each N."""

    toy: ExchangeableToy
    temperature_ratio: float
    n_tokens: tuple[int, ...]
    mean_error: np.ndarray                # (len(N),)
    se_error: np.ndarray                  # (len(N),)
    limit_error: float                    # mean error of the N -> oo limit: 0 at the matched temperature
    fit: LogLogFit
    n_draws: int
    seed: int


def toy_sweep(toy: ExchangeableToy, temperature_ratio: float = 1.0, n_tokens: Sequence[int] = TOY_N,
              n_draws: int = 200, seed: int = 0) -> ToySweep:
    """Fresh, independent sequences at every N (so the fit's errors are independent)."""
    if not 0.01 <= _finite(temperature_ratio, "temperature_ratio") <= 100:
        raise ValueError(f"temperature_ratio must lie in [0.01, 100], got {temperature_ratio}")
    rng = np.random.default_rng(check_seed(seed))
    tau = temperature_ratio * toy.matched_temperature
    means, ses, limits = [], [], []
    for n in n_tokens:
        d = toy.draw(n, n_draws, rng)
        exact = toy.exact(d)
        err = total_variation(toy.attention(d, tau), exact)
        means.append(err.mean())
        ses.append(err.std(ddof=1) / math.sqrt(n_draws))
        limits.append(total_variation(toy.limit(d, tau), exact).mean())
    means = np.array(means)
    return ToySweep(toy, temperature_ratio, tuple(n_tokens), means, np.array(ses), float(np.mean(limits)),
                    loglog_fit(n_tokens, means), n_draws, seed)


COMPONENT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def toy_keys_figure(ex: ToyExample) -> go.Figure:
    """The tokens' keys coloured by component, sized by the query's attention to them."""
    d, K = ex.draw, ex.toy.n_classes
    keys, comp = d.keys[0], d.components[0]
    size = 5 + 40 * np.sqrt(ex.weights / ex.weights.max())
    data = [{"type": "scatter", "x": keys[comp == c, 0], "y": keys[comp == c, 1], "mode": "markers",
             "name": f"component {c + 1}", "marker": {"size": size[comp == c], "color": COMPONENT_COLOURS[c],
                                                      "opacity": 0.6, "line": {"width": 0}}}
            for c in range(K)]
    mu = ex.toy.means
    data.append({"type": "scatter", "x": mu[:, 0], "y": mu[:, 1], "mode": "markers", "name": "centres μ_c",
                 "marker": {"size": 14, "symbol": "x", "color": "#333333"}})
    data.append({"type": "scatter", "x": d.query[:, 0], "y": d.query[:, 1], "mode": "markers", "name": "query q",
                 "marker": {"size": 24, "symbol": "star", "color": "#d62728", "line": {"width": 1, "color": "black"}}})
    reach = ex.toy.radius + 3.5 * ex.toy.noise
    return _figure(data, _layout(f"N = {comp.size} tokens; size = attention",
                                 520, xaxis=_axis("key, 1st coordinate", range=[-reach, reach]),
                                 yaxis=_axis("key, 2nd coordinate", range=[-reach, reach], scaleanchor="x")))


def toy_estimate_figure(ex: ToyExample) -> go.Figure:
    comps = [f"component {c + 1}" for c in range(ex.toy.n_classes)]
    ratio = ex.temperature / ex.toy.matched_temperature
    return _figure([
        {"type": "bar", "x": comps, "y": ex.exact, "name": "exact E[v | k = q, z] (Bayes' rule)",
         "marker": {"color": POSTERIOR_COLOUR}},
        {"type": "bar", "x": comps, "y": ex.attention, "name": f"softmax attention (τ = {ratio:.3g} × s²)",
         "marker": {"color": MC_COLOUR}},
        {"type": "bar", "x": comps, "y": ex.bayes, "name": "Bayes from the tokens, z unknown",
         "marker": {"color": PRIOR_COLOUR}},
    ], _layout(f"Answer for q: error {ex.error:.3f}", 520,
               barmode="group", xaxis=_axis(""), yaxis=_axis("probability", range=[0, 1])))


def toy_error_figure(sw: ToySweep, current_n: int | None = None) -> go.Figure:
    n = np.array(sw.n_tokens, dtype=float)
    fitted = np.exp(sw.fit.intercept) * n**sw.fit.slope
    half = np.exp(sw.fit.intercept + np.log(n[0]) * sw.fit.slope) * (n / n[0]) ** -0.5
    data = [
        {"type": "scatter", "x": n, "y": sw.mean_error, "mode": "markers", "name": f"mean error ({sw.n_draws} draws)",
         "marker": {"size": 12, "color": MC_COLOUR},
         "error_y": {"type": "data", "array": Z95 * sw.se_error, "visible": True, "thickness": 2}},
        {"type": "scatter", "x": n, "y": fitted, "mode": "lines",
         "name": f"fit: slope {sw.fit.slope:.2f} [{sw.fit.low:.2f}, {sw.fit.high:.2f}]",
         "line": {"color": MC_COLOUR, "width": 3}},
        {"type": "scatter", "x": n, "y": half, "mode": "lines", "name": "slope −1/2", "line": {"color": "#999999",
                                                                                             "dash": "dot"}},
    ]
    if sw.limit_error > 1e-9:
        data.append({"type": "scatter", "x": [n[0], n[-1]], "y": [sw.limit_error] * 2, "mode": "lines",
                     "name": f"error of the N → ∞ limit ({sw.limit_error:.3f})",
                     "line": {"color": MEAN_ATTENTION_COLOUR, "dash": "dash", "width": 3}})
    shapes = []
    if current_n is not None:
        shapes.append({"type": "line", "x0": current_n, "x1": current_n, "y0": 0, "y1": 1, "yref": "paper",
                       "line": {"color": "#999999", "width": 1, "dash": "dot"}})
    return _figure(data, _layout(f"Mean error against N (τ = {sw.temperature_ratio:.3g} × s²)", 520,
                                 xaxis=_axis("N tokens (log)", type="log"),
                                 yaxis=_axis("mean total-variation error (log)", type="log"), shapes=shapes))


def toy_caption(sw: ToySweep) -> str:
    f = sw.fit
    interval = f"95% interval [{f.low:.2f}, {f.high:.2f}]"
    if abs(math.log(sw.temperature_ratio)) < 1e-9:
        return (f"At the matched temperature τ = s² = {sw.toy.matched_temperature:.3g}, attention's answer converges "
                f"to the exact posterior by Bayes' rule: its mean error falls like N^{f.slope:.2f} ({interval}; "
                "theory −1/2), with no knowledge of z, only the tokens.")
    return (f"At τ = {sw.temperature_ratio:.3g} × s² the attention converges to the wrong limit: the mean error "
            f"(slope {f.slope:.2f}, {interval}) cannot fall below that limit's {sw.limit_error:.3f}, however many "
            "tokens it reads.")


# ==================================================================================================
# 4. BAM's distributions (Fan et al. 2020)
# ==================================================================================================
WEIBULL, LOGNORMAL = "weibull", "lognormal"


@dataclass(frozen=True)
class ScorePair:
    """One attention score's posterior q and prior p: Weibull || Gamma or Lognormal || Lognormal."""

    family: str
    params: tuple[tuple[str, float], ...]
    posterior: Distribution = field(repr=False, compare=False)
    prior: Distribution = field(repr=False, compare=False)

    @property
    def parameters(self) -> dict[str, float]:
        return dict(self.params)

    def kl(self) -> float:
        """KL(q || p) in closed form: Weibull || Gamma as registered by bam_viz.families.kl (Fan et al. eq. 9),
        Lognormal || Lognormal as bam_viz.families.kl.kl_lognormal."""
        if self.family == WEIBULL:
            return float(kl_divergence(self.posterior, self.prior))
        p = self.parameters
        return float(kl_lognormal(torch.tensor(p["loc"], dtype=torch.float64), p["sigma"],
                                  torch.tensor(p["prior_loc"], dtype=torch.float64), p["prior_sigma"]))

    def describe(self) -> str:
        p = self.parameters
        if self.family == WEIBULL:
            return (f"q = Weibull(k = {p['shape_k']:.3g}, λ = {p['scale']:.3g}), "
                    f"p = Gamma(α = {p['alpha']:.3g}, β = {p['beta']:.3g})")
        return (f"q = Lognormal(μ = {p['loc']:.3g}, σ = {p['sigma']:.3g}), "
                f"p = Lognormal(μ = {p['prior_loc']:.3g}, σ = {p['prior_sigma']:.3g})")


def _positive(value, name: str) -> float:
    x = _finite(value, name)
    if x <= 0:
        raise ValueError(f"{name} must be positive, got {x}")
    return x


def weibull_gamma(shape_k: float, scale: float, alpha: float, beta: float) -> ScorePair:
    """q = Weibull(k, lambda), p = Gamma(alpha, rate beta): BAM-W's pair for one score (sec. 3.2-3.3)."""
    k, lam, a, b = (_positive(v, n) for v, n in ((shape_k, "shape_k"), (scale, "scale"), (alpha, "alpha"),
                                                  (beta, "beta")))
    t = torch.tensor
    return ScorePair(WEIBULL, (("shape_k", k), ("scale", lam), ("alpha", a), ("beta", b)),
                     Weibull(t(lam, dtype=torch.float64), t(k, dtype=torch.float64)),
                     Gamma(t(a, dtype=torch.float64), t(b, dtype=torch.float64)))


def lognormal_pair(loc: float, sigma: float, prior_loc: float, prior_sigma: float) -> ScorePair:
    """q = Lognormal(mu, sigma), p = Lognormal(mu_p, sigma_p): BAM-L's pair for one score."""
    mu, mu_p = _finite(loc, "loc"), _finite(prior_loc, "prior_loc")
    s, s_p = _positive(sigma, "sigma"), _positive(prior_sigma, "prior_sigma")
    t = torch.tensor
    return ScorePair(LOGNORMAL, (("loc", mu), ("sigma", s), ("prior_loc", mu_p), ("prior_sigma", s_p)),
                     LogNormal(t(mu, dtype=torch.float64), t(s, dtype=torch.float64)),
                     LogNormal(t(mu_p, dtype=torch.float64), t(s_p, dtype=torch.float64)))


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


def kl_check(pair: ScorePair, n: int = 20_000, seed: int = 0) -> KLCheck:
    """The closed-form KL against E_q[log q(S) - log p(S)] over n reparameterised draws."""
    g = torch.Generator().manual_seed(check_seed(seed))
    u = torch.rand(n, generator=g, dtype=torch.float64).clamp(1e-12, 1 - 1e-12)
    s = reparameterise(pair, u)
    log_ratio = pair.posterior.log_prob(s) - pair.prior.log_prob(s)
    return KLCheck(pair.kl(), float(log_ratio.mean()), float(log_ratio.std() / math.sqrt(n)), n)


def _plot_range(pair: ScorePair, prior: bool = True) -> float:
    """Up to q's 99.5% quantile, or on to the prior's 95% when `prior`, but never past 4 times q's: a
    Gamma prior of small alpha has a tail that would squeeze q into the first pixels."""
    q_hi = float(pair.posterior.icdf(torch.tensor(0.995, dtype=torch.float64)))
    if not prior:
        return q_hi
    p = pair.parameters
    if pair.family == WEIBULL:
        p_hi = float(stats.gamma.ppf(0.95, p["alpha"], scale=1 / p["beta"]))
    else:
        p_hi = float(pair.prior.icdf(torch.tensor(0.95, dtype=torch.float64)))
    return min(max(q_hi, p_hi), 4 * q_hi)


def density_figure(pair: ScorePair, check: KLCheck) -> go.Figure:
    hi = _plot_range(pair)
    s = torch.linspace(hi / 2000, hi, 400, dtype=torch.float64)
    q, p = pair.posterior.log_prob(s).exp().numpy(), pair.prior.log_prob(s).exp().numpy()
    top = 1.15 * float(q.max())           # a Gamma with alpha < 1 is infinite at 0: the posterior sets the scale
    names = ("Weibull posterior q", "Gamma prior p") if pair.family == WEIBULL else ("Lognormal posterior q",
                                                                                     "Lognormal prior p")
    return _figure([
        {"type": "scatter", "x": s.numpy(), "y": q, "mode": "lines", "name": names[0], "fill": "tozeroy",
         "line": {"color": POSTERIOR_COLOUR, "width": 3}},
        {"type": "scatter", "x": s.numpy(), "y": p, "mode": "lines", "name": names[1],
         "line": {"color": PRIOR_COLOUR, "width": 3, "dash": "dash"}},
    ], _layout(f"KL(q‖p): {check.closed_form:.3f} exact, {check.monte_carlo:.3f} ± {Z95 * check.se:.3f} MC", 460,
               xaxis=_axis("unnormalised score S", range=[0, hi]), yaxis=_axis("density", range=[0, top])))


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
    return _figure([
        {"type": "scatter", "x": grid.numpy(), "y": pair.posterior.cdf(grid).numpy(), "mode": "lines",
         "name": "CDF of q", "line": {"color": POSTERIOR_COLOUR, "width": 3}},
        {"type": "scatter", "x": paths_x, "y": paths_y, "mode": "lines", "name": "u → S = F⁻¹(u)",
         "line": {"color": "#ff7f0e", "width": 1}},
        {"type": "scatter", "x": np.zeros_like(u), "y": u, "mode": "markers", "name": "u ~ Uniform(0, 1)",
         "marker": {"size": 9, "color": "#ff7f0e"}},
        {"type": "scatter", "x": s, "y": np.zeros_like(s), "mode": "markers", "name": "scores S ~ q",
         "marker": {"size": 9, "color": POSTERIOR_COLOUR, "symbol": "triangle-up"}},
    ], _layout("Reparameterisation: S = F⁻¹(u)", 460,
               xaxis=_axis("score S", range=[-0.01 * hi, hi]), yaxis=_axis("u = F(S)", range=[-0.03, 1.03])))


def score_caption(pair: ScorePair, check: KLCheck) -> str:
    source = "Fan et al. eq. 9" if pair.family == WEIBULL else "the Gaussians of log S"
    return (f"For {pair.describe()}, KL(q ‖ p) = {check.closed_form:.4f} nats in closed form ({source}) and "
            f"{check.monte_carlo:.4f} ± {Z95 * check.se:.4f} by Monte Carlo over {check.n:,} reparameterised "
            "draws: the formula the model trains with is the divergence the draws measure.")


@dataclass(frozen=True)
class Spread:
    """How much a normalised weight w_1 varies over draws, against the family's shape, at N keys of
    equal mean weight 1/N: CV(w_1) = N std(w_1) (its mean is exactly 1/N by symmetry)."""

    family: str
    shape_name: str                   # "shape_k" or "sigma"
    shapes: np.ndarray                # (M,)
    n_keys: tuple[int, ...]
    cv: np.ndarray                    # (len(n_keys), M)
    score_cv: np.ndarray              # (M,) CV of one unnormalised score: the N -> oo limit
    n_draws: int


def score_cv(family: str, shapes: np.ndarray) -> np.ndarray:
    """Coefficient of variation of one score: sqrt(Gamma(1+2/k)/Gamma(1+1/k)^2 - 1) for a Weibull,
    sqrt(e^{sigma^2} - 1) for a Lognormal; the scale cancels."""
    shapes = np.asarray(shapes, dtype=float)
    if family == WEIBULL:
        return np.sqrt(np.exp(special.gammaln(1 + 2 / shapes) - 2 * special.gammaln(1 + 1 / shapes)) - 1)
    return np.sqrt(np.expm1(shapes**2))


SPREAD_KEYS = (2, 5, 20, 100)
# The shapes the Theory lab's sliders offer, each trained default among them: the spread is computed
# at exactly these, so the slider's value is always a point of the curves.
WEIBULL_SHAPES = tuple(sorted(set(log_options(0.2, 50)) | {3.0}))
LOGNORMAL_SIGMAS = tuple(sorted(set(log_options(0.05, 3)) | {0.3}))


def normalised_spread(family: str, shapes: Sequence[float] | None = None, n_keys: Sequence[int] = SPREAD_KEYS,
                      n_draws: int = 1000, seed: int = 0) -> Spread:
    """Draws through the attention family's own sampler (`AttentionFamily.sample`: scores with mean
    softmax weight, normalised over the keys), so this is the spread the model's attention has."""
    if family not in (WEIBULL, LOGNORMAL):
        raise ValueError(f"family is {WEIBULL!r} or {LOGNORMAL!r}, not {family!r}")
    attention = families.get(family)
    shape_name = "shape_k" if family == WEIBULL else "sigma"
    if shapes is None:
        shapes = WEIBULL_SHAPES if family == WEIBULL else LOGNORMAL_SIGMAS
    shapes = np.asarray(shapes, dtype=float)
    g = torch.Generator().manual_seed(check_seed(seed))
    cv = np.empty((len(n_keys), len(shapes)))
    for a, n in enumerate(n_keys):
        log_p = torch.full((n_draws, n), -math.log(n), dtype=torch.float64)           # equal means 1/N
        for b, shape in enumerate(shapes):
            w = attention.sample(log_p, attention.hyper({shape_name: float(shape)}), None, g)   # (draws, N)
            cv[a, b] = n * float(w[:, 0].std())
    return Spread(family, shape_name, shapes, tuple(n_keys), cv, score_cv(family, shapes), n_draws)


def spread_figure(sp: Spread, current: float | None = None) -> go.Figure:
    symbol = "k" if sp.family == WEIBULL else "σ"
    data = [{"type": "scatter", "x": sp.shapes, "y": sp.cv[a], "mode": "lines+markers", "name": f"N = {n} keys",
             "line": {"width": 3}} for a, n in enumerate(sp.n_keys)]
    data.append({"type": "scatter", "x": sp.shapes, "y": sp.score_cv, "mode": "lines",
                 "name": "one score's own CV (N → ∞)", "line": {"color": "#333333", "dash": "dash", "width": 3}})
    shapes = []
    if current is not None:
        shapes.append({"type": "line", "x0": current, "x1": current, "y0": 0, "y1": 1, "yref": "paper",
                       "line": {"color": "#d62728", "width": 2, "dash": "dot"}})
    return _figure(data, _layout("Spread of a normalised weight w₁ at equal means 1/N", 460, shapes=shapes,
                                 xaxis=_axis(f"{symbol} (log)", type="log"),
                                 yaxis=_axis("CV of w₁ = N · std(w₁)", type="log")))


def spread_caption(sp: Spread, current: float) -> str:
    symbol = "k" if sp.family == WEIBULL else "σ"
    j = int(np.argmin(np.abs(np.log(sp.shapes) - math.log(current))))
    direction = "larger k" if sp.family == WEIBULL else "smaller σ"
    return (f"At {symbol} = {sp.shapes[j]:.3g} a weight shared by N = {sp.n_keys[0]} keys varies by "
            f"{sp.cv[0, j]:.2f} of its mean, and by {sp.cv[-1, j]:.2f} with N = {sp.n_keys[-1]}, approaching one "
            f"score's own {sp.score_cv[j]:.2f}: normalisation damps the noise only when few keys share the mass, "
            f"and {direction} makes attention less random at every N.")


# ==================================================================================================
# 5. Weight-space against attention-space uncertainty (Cinquin et al. 2021)
# ==================================================================================================
SPACES = {"softmax": "none (deterministic)", "mc-dropout": "weight space", "bam-wc": "attention space",
          "bam-lc": "attention space", "dirichlet": "attention space", "categorical": "attention space"}
OOD_CORPORA = ("tweets", "amazon", "nyt")
# (key, label, better): read from each card's metrics["movies_test"], except the OOD mean.
MEASURES = (
    ("nll", "NLL, movies test", "lower"),
    ("ece", "ECE, movies test", "lower"),
    ("auroc_ambiguous_mi", "AUROC ambiguous vs clear (MI)", "higher"),
    ("auroc_ood_mi", "AUROC out-of-domain (MI), 3 corpora", "higher"),
)
# The spread between training seeds measured in docs/results.md ("Spread over training seeds": softmax
# and bam-wc, three seeds each, movies test): the larger of the two standard deviations.
SEED_SD = {"nll": 0.012, "ece": 0.008}


@dataclass(frozen=True)
class UncertaintyRow:
    model: str
    space: str
    nll: float
    ece: float
    auroc_ambiguous_mi: float
    auroc_ood_mi: float               # mean over OOD_CORPORA
    ood_by_corpus: tuple[tuple[str, float], ...]

    def as_dict(self) -> dict:
        return {"model": self.model, "noise in": self.space, "NLL": self.nll, "ECE": self.ece,
                "AUROC ambiguous (MI)": self.auroc_ambiguous_mi, "AUROC OOD (MI)": self.auroc_ood_mi,
                **{f"OOD {c}": v for c, v in self.ood_by_corpus}}


def uncertainty_table(names: Sequence[str] | None = None, root=None) -> list[UncertaintyRow]:
    """One row per model from its card's stored evaluation (`python -m bam_viz evaluate
    --update-card`); a model whose card lacks a measure is left out, with no row half filled."""
    from bam_viz import zoo

    root = zoo.PRETRAINED if root is None else root
    names = [n for n in SPACES if n in zoo.available_models()] if names is None else list(names)
    rows = []
    for name in names:
        metrics = (zoo.read_card(name, root).get("metrics") or {})
        movies = metrics.get("movies_test") or {}
        ood = [(c, (metrics.get(f"{c}_test") or {}).get("auroc_ood_mi")) for c in OOD_CORPORA]
        values = [movies.get(k) for k in ("nll", "ece", "auroc_ambiguous_mi")] + [v for _, v in ood]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            continue
        rows.append(UncertaintyRow(name, SPACES.get(name, "attention space"), float(movies["nll"]),
                                   float(movies["ece"]), float(movies["auroc_ambiguous_mi"]),
                                   float(np.mean([v for _, v in ood])), tuple((c, float(v)) for c, v in ood)))
    return rows


SPACE_COLOURS = {"weight space": "#d62728", "attention space": POSTERIOR_COLOUR, "none (deterministic)": PRIOR_COLOUR}


def uncertainty_figure(rows: Sequence[UncertaintyRow]) -> go.Figure:
    """One small panel per measure (a 2 x 2 grid), models down the side, coloured by where their noise lives."""
    x_domains, y_domains = ([0.0, 0.42], [0.58, 1.0]), ([0.62, 1.0], [0.0, 0.36])
    data, layout = [], _layout("Where the noise lives: weight space against attention space", 700)
    names = [r.model for r in rows][::-1]
    seen = set()
    for i, (key, label, better) in enumerate(MEASURES):
        axis = "" if i == 0 else str(i + 1)
        for space, colour in SPACE_COLOURS.items():
            chosen = [r for r in rows if r.space == space]
            if not chosen:
                continue
            data.append({"type": "scatter", "x": [getattr(r, key) for r in chosen], "y": [r.model for r in chosen],
                         "mode": "markers", "name": space, "legendgroup": space, "showlegend": space not in seen,
                         "xaxis": f"x{axis}", "yaxis": f"y{axis}", "marker": {"size": 16, "color": colour},
                         "hovertemplate": "%{y}: %{x:.3f}<extra></extra>"})
            seen.add(space)
        layout[f"xaxis{axis}"] = {**_axis(f"{label}<br>({better} is better)"), "domain": x_domains[i % 2],
                                  "anchor": f"y{axis}", "nticks": 6}
        layout[f"yaxis{axis}"] = {"type": "category", "categoryorder": "array", "categoryarray": names,
                                  "anchor": f"x{axis}", "domain": y_domains[i // 2], "gridcolor": "#eeeeee"}
    # One row of legend over the grid, so that it meets no axis title.
    layout["margin"] = {**layout["margin"], "l": 120, "t": 110, "b": 110}
    layout["legend"] = {**layout["legend"], "y": 1.02, "yanchor": "bottom"}
    return _figure(data, layout)


def uncertainty_caption(rows: Sequence[UncertaintyRow]) -> str:
    """What the stored numbers show, and what one seed of a small model cannot."""
    weight = [r for r in rows if r.space == "weight space"]
    attention = [r for r in rows if r.space == "attention space"]
    if not weight or not attention:
        return "The comparison needs the mc-dropout model and at least one attention-space model with stored metrics."
    w = weight[0]
    parts, weight_wins, attention_wins = [], [], []
    for key, label, better in MEASURES:
        short = label.split(",")[0]
        best = (min if better == "lower" else max)(attention, key=lambda r: getattr(r, key))
        diff = getattr(best, key) - getattr(w, key)
        (attention_wins if (diff < 0) == (better == "lower") else weight_wins).append(short)
        sd = SEED_SD.get(key)
        spread = "" if sd is None else ("; within the spread between training seeds" if abs(diff) <= sd
                                        else "; beyond the spread between training seeds")
        parts.append(f"{short} {getattr(w, key):.3f} against {getattr(best, key):.3f} ({best.model}{spread})")
    verdict = (f"{w.model} is better on {' and '.join(weight_wins) or 'nothing'}, attention-space noise on "
               f"{' and '.join(attention_wins) or 'nothing'}")
    return (f"Weight-space {w.model} against the best attention-space model: " + ", ".join(parts) + f"; so {verdict}. "
            "Each model is one training seed of a small LoRA-tuned MiniLM, and our weight-space model is dropout, "
            "not the weight-space variational inference Cinquin et al. found wanting: the numbers show attention-"
            "space noise is competitive here, not that weight-space inference fails.")


__all__ = [
    "FUNCTIONS", "TwoPoint", "Gaussian", "JensenGap", "jensen_gap", "monte_carlo_mean", "GapCase", "LayerGaps",
    "layer_gaps",
    "Alignment", "alignment", "ElboPath", "elbo_path", "ExchangeableToy", "ToyDraw", "toy_example", "toy_sweep",
    "loglog_fit", "ScorePair", "weibull_gamma", "lognormal_pair", "kl_check", "normalised_spread",
    "uncertainty_table",
]
