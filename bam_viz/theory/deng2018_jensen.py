"""f(E[z]) is not E[f(z)] (Deng et al. 2018, "Latent Alignment and Variational Attention", sec. 2).

A toy distribution and function, then the same gap on a zoo model, one stochastic layer at a time,
against f(E[w]) (the weights' Monte Carlo mean) and against f(softmax) (the deterministic pass), as
`bam_viz.inference.gaps` defines them (`jensen_gap`, `layer_gaps`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import torch
from scipy import special, stats

from bam_viz import zoo
from bam_viz.core import metrics
from bam_viz.core.inputs import check_seed, check_text
from bam_viz.core.task import POSITIVE
from bam_viz.inference import gaps
from bam_viz.inference.explain import DEFAULT_RNG, lower_states, sample_generator
from bam_viz.nn.attention import Mode, Trace
from bam_viz.plots.kit import figure
from bam_viz.plots.style import MC_COLOUR, MEAN_ATTENTION_COLOUR, PRIOR_COLOUR, SOFTMAX_COLOUR
from bam_viz.theory.common import (
    NO_NOISE,
    WEIGHT_SPACE,
    Control,
    axis,
    finite,
    layout,
    log_grid,
    noise_space,
    step_grid,
)

FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "sigmoid": (special.expit, "σ(z) = 1 / (1 + e⁻ᶻ)"),
    "square": (np.square, "z²"),
    "tanh": (np.tanh, "tanh(z)"),
    "softplus": (lambda z: np.logaddexp(0.0, z), "log(1 + eᶻ)"),
}
GAUSS_HERMITE_NODES = 300     # exact for polynomials of degree < 600; tanh needs them at wide Gaussians
# The page's sliders for the toy.
CONTROLS = (
    Control("jensen_low", "first point z₁", step_grid(-6, 6, 0.5), 0.0),
    Control("jensen_high", "second point z₂", step_grid(-6, 6, 0.5), 4.0),
    Control("jensen_p", "P(z = z₂)", step_grid(0, 1, 0.05), 0.5),
    Control("jensen_mean", "mean of z", step_grid(-4, 4, 0.25), 0.0),
    Control("jensen_sd", "sd of z", log_grid(0.1, 4), 1.0),
)


def _function(name: str) -> Callable[[np.ndarray], np.ndarray]:
    if name not in FUNCTIONS:
        raise ValueError(f"unknown function {name!r}: choose one of {', '.join(FUNCTIONS)}")
    return FUNCTIONS[name][0]


@dataclass(frozen=True)
class TwoPoint:
    """z = high with probability p_high, else low: Deng et al.'s examples."""

    low: float
    high: float
    p_high: float

    def __post_init__(self):
        for name in ("low", "high"):
            finite(getattr(self, name), name)
        if not 0.0 <= finite(self.p_high, "p_high") <= 1.0:
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
        finite(self.mean, "mean")
        if finite(self.sd, "sd") <= 0:
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
    return figure(data, layout(
        f"{html.escape(d.describe())}, f = {g.function}", 520, margin={"l": 70, "r": 90, "t": 60, "b": 60},
        xaxis=axis("z", range=[lo, hi]), yaxis=axis("f(z)"),
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
# The zoo's stochastic models, attention-space noise first (the per-layer gap's model choice).
GAP_MODELS = tuple(sorted((name for name, config in zoo.RECIPES.items() if noise_space(config) != NO_NOISE),
                          key=lambda name: noise_space(zoo.RECIPES[name]) == WEIGHT_SPACE))


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
    gap_se: float                     # jackknife SE of E[f(z)] - f(E[w]) (bam_viz.inference.gaps)
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
        mean_probs, loo_probs = gaps.mean_attention_probs(model, x, mask, drawn, hyper)
        mean_attention = float(mean_probs[POSITIVE])
        gap_se = metrics.jackknife_gap_se(p, loo_probs[:, POSITIVE].double().cpu().numpy())
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
            g = sample_generator(DEFAULT_RNG, seed, model.device)
            cls, w = _compose(model, x, mask, layer, n_samples, g, hyper)
            drawn = {layer: w} if layer in random_attention else {}
            cases.append(_case(f"layer {layer}", (layer,), _p_positive(model, cls), softmax, drawn,
                               model, x, mask, hyper))
        # The model's own pass, exactly as explain() makes it (the same draws, the same trace).
        g = sample_generator(DEFAULT_RNG, seed, model.device)
        logits, traces, _ = model.upper(x, mask, n_samples=n_samples, generator=g, hyper=hyper, trace=Trace.SAMPLES)
        first = model.n_layers - len(traces)
        drawn = {i: traces[i - first].weights for i in sorted(random_attention)}
        together = _case("all together", layers, logits.softmax(-1)[:, POSITIVE], softmax, drawn,
                         model, x, mask, hyper)
    noise = "dropout" if noise_space(model.config) == WEIGHT_SPACE else "attention"
    return LayerGaps(model.name, softmax, layers, tuple(cases), together, n_samples, seed, noise)


DENG_GAP = "E[f(z)] − f(E[w])"
SOFTMAX_GAP = "E[f(z)] − f(softmax)"


def layer_gap_figure(g: LayerGaps) -> go.Figure:
    """Per case (each layer alone, then all together), Deng's gap and the gap to the deterministic
    pass as grouped bars with 95% Monte Carlo error bars."""
    cases = (*g.cases, g.together)
    names = [c.name for c in cases]
    z = metrics.interval_multiplier(g.n_samples)

    def bars(name, colour, values, errors, hover):
        return {"type": "bar", "x": names, "y": values, "name": name, "marker": {"color": colour},
                "error_y": {"type": "data", "array": [z * e for e in errors], "visible": True,
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
    return figure(data, layout(
        f"{g.model}: {'the gap' if g.noise == 'dropout' else 'both gaps'}, one layer's {g.noise} sampling at a "
        f"time, then all ({g.n_samples} samples)",
        460, barmode="group", shapes=[split], xaxis=axis("which layers sample (the others at softmax(ψ))"),
        yaxis=axis("gap in P(positive)", zeroline=True, zerolinewidth=2)))


def _pm(value: float, se: float, z: float) -> str:
    """value ± its 95% interval's half-width, z SE (`metrics.interval_multiplier` at the samples drawn)."""
    return f"{value:+.4f} ± {z * se:.4f}"


def layer_gap_caption(g: LayerGaps) -> str:
    t, z = g.together, metrics.interval_multiplier(g.n_samples)
    if g.noise == "dropout":
        sampling = "dropout on in every stochastic layer"
    else:
        sampling = f"{'its one' if len(g.layers) == 1 else 'every'} stochastic layer sampling"
    head = f"On this sentence {g.model} gives E[f(z)] = {t.mc:.3f}, the mean over {g.n_samples} samples with {sampling}"
    largest = max(range(len(g.layers)), key=lambda i: abs(g.gaps[i]))
    c, which = g.cases[largest], "" if g.noise == "dropout" else "Deng "
    alone = ("" if len(g.layers) == 1 else
             f" Alone, layer {g.layers[largest]} has the largest {which}gap, {_pm(c.gap, c.gap_se, z)}, and "
             f"{sum(abs(k.gap) > z * k.gap_se for k in g.cases)} of {len(g.layers)} layers alone have one "
             f"beyond their 95% interval.")
    if g.noise == "dropout":
        return (f"{head}, and P(positive) = {g.softmax:.3f} with dropout off: f(softmax), the "
                f"deterministic pass, which is also f(E[z]) (the mean of a dropout mask keeps every unit), so Deng's "
                f"gap E[f(z)] − f(E[z]) and E[f(z)] − f(softmax) are one, {_pm(t.gap, t.gap_se, z)} (95% Monte Carlo "
                f"interval, seed {g.seed}).{alone}")
    return (f"{head}, f(E[w]) = {t.mean_attention:.3f} and f(softmax) = {g.softmax:.3f}: Deng's gap "
            f"{_pm(t.gap, t.gap_se, z)}, the gap to the deterministic pass {_pm(t.gap_softmax, t.gap_softmax_se, z)}."
            f"{alone} Green: Deng's gap E[f(z)] − f(E[w]), with E[w] the Monte Carlo mean, over the "
            f"{g.n_samples} samples, of each sampled layer's weights (the layers above fed by the f(E[w]) pass "
            f"itself); red: E[f(z)] − f(softmax), against the deterministic pass with every stochastic layer at "
            f"softmax(ψ). Error bars: 95% Monte Carlo intervals, seed {g.seed}.")
