"""Attention as posterior inference, its error shrinking with the number of tokens (Zhang et al. 2022,
"An Analysis of Attention via the Lens of Exchangeability and Latent Variable Models"), on an
exchangeable toy whose exact answer is known (`ExchangeableToy`, `toy_sweep`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
from scipy import special, stats

from bam_viz.core.inputs import check_seed
from bam_viz.core.metrics import interval_multiplier
from bam_viz.plots.kit import figure
from bam_viz.plots.style import MC_COLOUR, MEAN_ATTENTION_COLOUR, POSTERIOR_COLOUR, PRIOR_COLOUR
from bam_viz.theory.common import Control, axis, finite, layout, step_grid

MAX_TOY_TOKENS = 10_000_000        # tokens in one draw() call: ~0.5 GB of float64 keys and indices
TOY_N = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOY_TEMPERATURE_RATIOS = tuple(float(f"{2 ** (i / 2):.3g}") for i in range(-6, 7))   # 1/8 .. 8, by sqrt(2)
CONTROLS = (
    Control("toy_n", "N tokens", TOY_N, 64.0),
    Control("toy_noise", "noise s (sd of a key around its centre)", step_grid(0.5, 2.0, 0.25), 1.0),
    Control("toy_temp", "temperature τ, as a multiple of the matched s²", TOY_TEMPERATURE_RATIOS, 1.0),
)


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
        if not 0.05 <= finite(self.noise, "noise") <= 20:
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
    if not 0.01 <= finite(temperature_ratio, "temperature_ratio") <= 100:
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
    return figure(data, layout(f"N = {comp.size} tokens; size = attention",
                                 520, xaxis=axis("key, 1st coordinate", range=[-reach, reach]),
                                 yaxis=axis("key, 2nd coordinate", range=[-reach, reach], scaleanchor="x")))


def toy_estimate_figure(ex: ToyExample) -> go.Figure:
    comps = [f"component {c + 1}" for c in range(ex.toy.n_classes)]
    ratio = ex.temperature / ex.toy.matched_temperature
    return figure([
        {"type": "bar", "x": comps, "y": ex.exact, "name": "exact E[v | k = q, z] (Bayes' rule)",
         "marker": {"color": POSTERIOR_COLOUR}},
        {"type": "bar", "x": comps, "y": ex.attention, "name": f"softmax attention (τ = {ratio:.3g} × s²)",
         "marker": {"color": MC_COLOUR}},
        {"type": "bar", "x": comps, "y": ex.bayes, "name": "Bayes from the tokens, z unknown",
         "marker": {"color": PRIOR_COLOUR}},
    ], layout(f"Answer for q: error {ex.error:.3f}", 520,
               barmode="group", xaxis=axis(""), yaxis=axis("probability", range=[0, 1])))


def toy_error_figure(sw: ToySweep, current_n: int | None = None) -> go.Figure:
    n = np.array(sw.n_tokens, dtype=float)
    fitted = np.exp(sw.fit.intercept) * n**sw.fit.slope
    half = np.exp(sw.fit.intercept + np.log(n[0]) * sw.fit.slope) * (n / n[0]) ** -0.5
    data = [
        {"type": "scatter", "x": n, "y": sw.mean_error, "mode": "markers", "name": f"mean error ({sw.n_draws} draws)",
         "marker": {"size": 12, "color": MC_COLOUR},
         "error_y": {"type": "data", "array": interval_multiplier(sw.n_draws) * sw.se_error, "visible": True,
                     "thickness": 2}},
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
    return figure(data, layout(f"Mean error against N (τ = {sw.temperature_ratio:.3g} × s²)", 520,
                                 xaxis=axis("N tokens (log)", type="log"),
                                 yaxis=axis("mean total-variation error (log)", type="log"), shapes=shapes))


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

