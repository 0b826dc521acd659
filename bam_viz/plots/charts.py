"""Chart builders and panel captions: each a pure function of an `ExplainResult`.

Nothing here imports Streamlit. Figures are plotly `Figure`s built from plain dicts (see `_figure`);
captions are short plain-language Markdown strings for classroom use. Token text never reaches
plotly or Markdown unescaped: plotly renders a subset of HTML in labels, and Streamlit's Markdown
renders emphasis, links and LaTeX.
"""

from __future__ import annotations

import html
import math
import textwrap
import warnings
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from bam_viz import families
from bam_viz.core.labels import LABELS
from bam_viz.core.text import display_token
from bam_viz.inference.result import ExplainResult
from bam_viz.plots.style import (
    AXIS_TITLE_CHARS,
    CONFIDENT_NATS,
    DETERMINISTIC_COLOUR,
    KL_DECADES,
    LN2,
    MAX_TICK_TOKENS,
    MC_COLOUR,
    MEAN_ATTENTION_COLOUR,
    MESSAGE_CHARS,
    PI_COLOUR,
    POSTERIOR_COLOUR,
    PREDICTION_MC,
    PRIOR_COLOUR,
    SOFTMAX_COLOUR,
    STD_RANGE,
    STD_SCALE,
    TOKEN_WINDOW,
    VALUE_SCALE,
    WEIGHT_RANGE,
    WEIGHT_SCALE,
    ZERO_WIDTH,
)


# ---- token text ---------------------------------------------------------------------------------
def axis_labels(tokens: list[str]) -> list[str]:
    """Unique, HTML-escaped labels for plotly category axes: a repeated token becomes "3·the"."""
    seen: dict[str, int] = {}
    for t in tokens:
        seen[t] = seen.get(t, 0) + 1
    labels = []
    for i, t in enumerate(tokens):
        text = html.escape(display_token(t), quote=False)
        labels.append(f"{i}·{text}" if seen[t] > 1 else text)
    # Distinct tokens can still collide after escaping ("\u200b" typed literally vs the character).
    if len(set(labels)) < len(labels):
        labels = [f"{i}·{label}" for i, label in enumerate(labels)]
    return labels


_MD_SPECIAL = set("\\`*_{}[]()<>#+-.!|$:~=")


def md_escape(text: str) -> str:
    """Backslash-escape Markdown (and Streamlit's `$` LaTeX, `:colour[]`) so text shows as typed."""
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def token_option(tokens: list[str], i: int) -> str:
    """A token as a selectbox option: index and visible text (Streamlit shows options as text)."""
    return f"{i}: {display_token(tokens[i])}"


# ---- helpers ------------------------------------------------------------------------------------
def _np(t) -> np.ndarray:
    """Finite float64 array: slider extremes may produce inf/NaN, and plotly draws those as blanks."""
    a = np.asarray(t.detach().cpu().double() if hasattr(t, "detach") else t, dtype=np.float64)
    return np.nan_to_num(a, nan=0.0, posinf=np.finfo(np.float32).max, neginf=0.0)


def _figure(data: list[dict], layout: dict) -> go.Figure:
    """A Figure from plain dicts, skipping plotly's per-property validation.

    Validation is most of a builder's time (the maps: ~150 ms validated, ~10 ms not), paid on
    every slider move. tests/test_charts.py re-validates every builder's output instead, so
    properties are spelled out in full here: `{"title": {"text": ...}}`, `{"marker": {"color": ...}}`.
    """
    return go.Figure({"data": data, "layout": layout}, _validate=False)


def _axis(**props) -> dict:
    """An axis with the shared look: a light grid, and no automargin. Growing margins to fit the
    labels makes plotly.js measure every label and lay the figure out again, on every slider move;
    the builders set margins that fit their labels instead (`_margin`)."""
    return {"automargin": False, "gridcolor": "#eeeeee", "zerolinecolor": "#cccccc", **props}


def _label_px(labels: list[str], font_px: float = 12.0) -> int:
    """Width in pixels of the longest label, about 0.55 em per character."""
    return int(0.55 * font_px * max((len(s) for s in labels), default=1)) + 8


def _margin(layout: dict, **sides: int) -> dict:
    """`layout` with some of its margins replaced."""
    return {**layout, "margin": {**layout["margin"], **sides}}


def _layout(title: str, height: int, legend: bool = True, **props) -> dict:
    """Shared layout: title at the top, legend under it, white background."""
    heading = {"text": title, "font": {"size": 14}, "y": 0.98, "yref": "container", "yanchor": "top"}
    if extra := title.count("<br>"):
        # plotly.js anchors a title of several lines by its first line and centres the rest on
        # it: anchored at the top, the block rises by half a line per extra line, out of the figure.
        heading["pad"] = {"t": 10 * extra}
    return {
        "height": height, "margin": {"l": 10, "r": 10, "t": 80 if legend else 50, "b": 10},
        "title": heading,
        "legend": {"orientation": "h", "y": 1.02, "x": 0, "xanchor": "left", "yanchor": "bottom"},
        "paper_bgcolor": "white", "plot_bgcolor": "white", **props,
    }


def _message_figure(message: str, height: int = 380) -> go.Figure:
    """A figure that says `message`, broken into short lines: plotly never wraps an annotation, and a
    long line centred in a narrow column is cut off on both sides."""
    lines = textwrap.wrap(message, MESSAGE_CHARS) or [""]
    most = max(1, (height - 60) // 20)                     # lines of 13 px text that fit the height
    if len(lines) > most:
        lines = [*lines[:most - 1], lines[most - 1][:MESSAGE_CHARS - 1] + "…"]
    return _figure([], {
        "height": height, "xaxis": {"visible": False}, "yaxis": {"visible": False},
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "annotations": [{"text": "<br>".join(html.escape(line, quote=False) for line in lines), "showarrow": False,
                         "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper", "font": {"size": 13}}],
    })


def _ticks(lo: float, hi: float, n: int = 5) -> dict:
    """Colour-bar ticks from lo to hi, with as many significant digits as it takes to tell them apart."""
    values = np.linspace(lo, hi, n)
    for digits in range(3, 16):
        text = [f"{v:.{digits}g}" for v in values]
        if len(set(text)) == n:
            break
    return {"tickvals": values, "ticktext": text}


def _all_equal(values: np.ndarray) -> bool:
    """Equal to float32 precision (~1e-7 relative; 1e-5 leaves room): one value, not a contrast."""
    if values.size == 0:
        return True
    lo, hi = float(values.min()), float(values.max())
    return hi - lo <= 1e-5 * max(abs(lo), abs(hi))


def _relative_range(values: np.ndarray) -> tuple[float, float]:
    """[min, max] of `values`, for a relative colour scale. Values all equal (`_all_equal`) get a
    range around them, so that all take the middle colour rather than rounding noise being drawn
    as yellow against purple."""
    lo, hi = float(values.min(initial=np.inf)), float(values.max(initial=-np.inf))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0, 1.0
    if _all_equal(values):
        mid = (lo + hi) / 2
        half = max(0.05 * abs(mid), 1e-6)
        return mid - half, mid + half
    return lo, hi


def _superscript(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))


def _runs(layers: list[int]) -> list[list[int]]:
    """Consecutive runs of layer indices: [0, 1, 3] -> [[0, 1], [3]]."""
    runs: list[list[int]] = []
    for layer in layers:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return runs


def is_stochastic(result: ExplainResult, layer: int) -> bool:
    return layer in result.stochastic_layers


# ---- what a panel may say about a model ---------------------------------------------------------
def count(n: int, noun: str) -> str:
    """"1 sample", "16 samples"."""
    return f"{n} {noun if n == 1 else noun + 's'}"


@dataclass(frozen=True)
class Facts:
    """What captions and messages may say about a result's model, worded in one place: singular and
    plural, and the models without a stochastic layer, a density or a prior. Family facts come from
    the registry; a softmax-family model with stochastic layers (mc-dropout) is random through
    dropout, and has neither a density nor a prior."""

    stochastic_layers: tuple[int, ...]
    n_layers: int
    n_samples: int
    dropout: bool             # random through dropout kept on at inference, not a family's posterior
    has_density: bool
    # "learned" (a prior network, trained through the KL), "alignment" (a hard alignment samples from
    # its prior p(z|x) itself), "fixed" (a uniform prior, not learned) or "none"
    prior: str
    family_label: str

    @classmethod
    def of(cls, result: ExplainResult) -> Facts:
        family = families.get(result.family)
        layers = tuple(result.stochastic_layers)
        dropout = bool(layers) and not family.stochastic
        return cls(layers, int(result.kl.shape[0]), int(result.n_samples), dropout,
                   family.has_density and bool(layers) and not dropout,
                   "learned" if family.learned_prior else "alignment" if family.hard_alignment
                   else "fixed" if family.stochastic else "none",
                   family.label)

    def samples(self) -> str:
        return count(self.n_samples, "attention sample")

    def layers(self) -> str:
        """The stochastic layers: "layer 5", "layers 3, 4 and 5"."""
        ls = [str(i) for i in self.stochastic_layers]
        return f"layer {ls[0]}" if len(ls) == 1 else f"layers {', '.join(ls[:-1])} and {ls[-1]}"

    def which_stochastic(self) -> str:
        """Which layers are random, and why (for a model with at least one)."""
        how = " through dropout kept on at inference" if self.dropout else ""
        if len(self.stochastic_layers) == self.n_layers:
            return f"Every layer is stochastic{how}."
        verb = "is" if len(self.stochastic_layers) == 1 else "are"
        return (f"Only {self.layers()} {verb} stochastic{how}; grey rows are ordinary, "
                "deterministic attention.")

    def deterministic(self, layer: int) -> str | None:
        """Why `layer` has no randomness to show, or None when it has some."""
        if layer in self.stochastic_layers:
            return None
        others = (f"pick {self.layers()} to see uncertainty" if self.stochastic_layers
                  else "this model has no stochastic layer")
        return f"Layer {layer} is deterministic: ordinary softmax attention, every sample alike ({others})."

    def no_density(self, layer: int) -> str | None:
        """Why there is no density to draw for `layer`, or None when there is one."""
        if (reason := self.deterministic(layer)) is not None:
            return reason
        if self.dropout:
            return ("Dropout makes this model's attention random, with no density over the weights: "
                    "the bars and maps show its samples instead.")
        if not self.has_density:
            return (f"{self.family_label.capitalize()} attention has no continuous density: its samples "
                    "are shown in the bars and maps instead.")
        return None

    def no_prior(self) -> str | None:
        """Why there is no KL from a prior, or None when the model learns its prior."""
        if self.prior == "learned":
            return None
        if not self.stochastic_layers:
            return "This model's attention is deterministic: it has no prior, so there is no KL."
        if self.prior == "alignment":
            return ("This model learns no separate prior: it draws its alignment from the prior p(z|x) "
                    "itself, so no KL is computed.")
        if self.prior == "fixed":
            return "This model learns no prior (its prior is uniform over the keys), so no KL is computed."
        return "This model has no prior: its attention is random through dropout, so there is no KL."


def _clip(i: int, n: int) -> int:
    return min(max(int(i), 0), n - 1)


# ---- long sentences: the tokens a panel shows ---------------------------------------------------
# Above MAX_TICK_TOKENS tokens (a tenth of the movies test reviews) the bars and maps show a window of
# TOKEN_WINDOW: three maps across leave ~10 px per token for 24 of them, and 9 px labels then stand
# apart (at 40 they overlap). The window is the first and last tokens ([CLS], which the classifier
# reads and which takes a quarter of the attention in the middle layers, and [SEP]) and a run of
# consecutive tokens between them. A run reads as a phrase of the sentence, and it does not depend on
# the weights: choosing the keys with the most attention would hide exactly the small weights, make
# every map look peaked, and change the tokens shown with every slider move. Rows and columns are the
# same tokens and every cell is the real weight, so a row shown adds up to less than 1 (the rest falls
# on keys outside the window); the captions say how much.
def window_starts(T: int) -> list[int]:
    """Where the window's run of consecutive tokens may start; none when every token is shown."""
    return list(range(1, T - TOKEN_WINDOW + 2)) if T > MAX_TICK_TOKENS else []


def window_around(T: int, query: int) -> int:
    """The start of the window with `query` in the middle of its run, as near as the ends allow."""
    return min(max(int(query) - (TOKEN_WINDOW - 2) // 2, 1), max(T - TOKEN_WINDOW + 1, 1))


def token_window(T: int, start: int) -> list[int]:
    """The indices shown of T tokens: all of them up to MAX_TICK_TOKENS, else the first, the
    `TOKEN_WINDOW - 2` consecutive ones from `start` (clamped) and the last."""
    if T <= MAX_TICK_TOKENS:
        return list(range(T))
    start = min(max(int(start), 1), T - TOKEN_WINDOW + 1)
    return [0, *range(start, start + TOKEN_WINDOW - 2), T - 1]


def window_label(T: int, start: int) -> str:
    """A window as its run of tokens, "41–62" (the first and last tokens are always shown)."""
    run = token_window(T, start)[1:-1]
    return f"{run[0]}–{run[-1]}"


def _shown(result: ExplainResult, shown: list[int] | None, query: int = 0) -> list[int]:
    """The token indices a panel shows: `shown` checked, or the window around `query`."""
    T = len(result.tokens)
    if shown is None:
        return token_window(T, window_around(T, query))
    idx = [int(i) for i in shown]
    if not idx or len(set(idx)) < len(idx) or not all(0 <= i < T for i in idx):
        raise ValueError(f"shown must be distinct token indices from 0 to {T - 1}, not {shown!r}")
    return idx


def _window_text(result: ExplainResult, idx: list[int], noun: str = "tokens") -> str:
    """"24 of 128 tokens (0, 41–62 and 127)", or "" when every token is shown."""
    T = len(result.tokens)
    if len(idx) == T and idx == list(range(T)):
        return ""
    runs = [f"{run[0]}–{run[-1]}" if len(run) > 1 else f"{run[0]}" for run in _runs(idx)]
    where = runs[0] if len(runs) == 1 else f"{', '.join(runs[:-1])} and {runs[-1]}"
    return f"{len(idx)} of {T} {noun} ({where})"


# ---- panel 1: prior vs posterior ---------------------------------------------------------------
def prior_posterior_figure(result: ExplainResult, layer: int, head: int, query: int,
                           shown: list[int] | None = None) -> go.Figure:
    """Per key: the prior's and the posterior's mean weight over their draws, each with the 5-95%
    band of those draws, and on each bar a marker at its softmax: pi_j on the prior's, softmax(psi)
    (the deterministic pass) on the posterior's.

    The bars are Monte Carlo means of normalised weights (`prior_mean_weights`,
    `posterior_mean_weights`): for Weibull and Lognormal scores they are not the softmax, and move
    towards uniform as k shrinks or sigma grows, inside their whiskers; the markers stay put.

    `shown`: the key indices drawn, in order; None is every key of a short sentence, and on a long
    one the window around `query` (`token_window`). Each bar is the real weight, so the bars shown
    add up to less than 1 when keys are left out.

    Markers sit on their bars through `offsetgroup` with `scattermode` "group" (plotly.js places
    grouped scatter points as it places grouped bars, with the same gap).
    """
    T = len(result.tokens)
    query = _clip(query, T)
    idx = _shown(result, shown, query)
    keys = axis_labels(result.tokens)
    x = [keys[j] for j in idx]
    prior_draws = _np(result.prior_draws(layer, head)[:, query])[:, idx]       # (S, K)
    post_draws = _np(result.sample_weights[:, layer, head, query])[:, idx]     # (S, K)
    prior_mean = _np(result.prior_mean_weights(layer, head)[query])[idx]       # (K,) MC mean of the draws
    post_mean = _np(result.posterior_mean_weights[layer, head, query])[idx]    # (K,) E[w]
    pi = _np(result.prior_weights[layer, head, query])[idx]                    # (K,)
    soft = _np(result.softmax_weights[layer, head, query])[idx]                # (K,) softmax(psi)
    bars, marks = [], []
    for group, name, mean, draws, colour, mark_name, mark, mark_colour, symbol in (
        ("prior", LABELS["prior_mean"], prior_mean, prior_draws, PRIOR_COLOUR, LABELS["prior_pi"], pi,
         PI_COLOUR, "diamond-open"),
        ("posterior", LABELS["posterior_mean"], post_mean, post_draws, POSTERIOR_COLOUR,
         LABELS["softmax_weights"], soft, SOFTMAX_COLOUR, "diamond"),
    ):
        lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)                       # (K,), (K,)
        bars.append({
            "type": "bar", "name": name, "x": x, "y": mean, "offsetgroup": group, "marker": {"color": colour},
            "error_y": {"type": "data", "symmetric": False, "array": np.maximum(hi - mean, 0.0),
                        "arrayminus": np.maximum(mean - lo, 0.0), "thickness": 1.5},
            "customdata": np.stack([lo, hi], -1),
            "hovertemplate": "key %{x}<br>mean %{y:.3f} over the draws<br>5–95%: %{customdata[0]:.3f}–"
                             f"%{{customdata[1]:.3f}}<extra>{name}</extra>",
        })
        marks.append({
            "type": "scatter", "mode": "markers", "name": mark_name, "x": x, "y": mark, "offsetgroup": group,
            "marker": {"symbol": symbol, "size": 9, "color": mark_colour, "line": {"width": 1.5, "color": mark_colour}},
            "hovertemplate": f"key %{{x}}<br>%{{y:.3f}}<extra>{mark_name}</extra>",
        })
    show = len(idx) <= 2 * MAX_TICK_TOKENS
    layout = _layout(
        f"Query {keys[query]}: attention to each key<br>layer {layer}, head {head}", 420, barmode="group",
        scattermode="group", bargap=0.2, scattergap=0.2,
        yaxis=_axis(title={"text": "attention weight"}, rangemode="tozero"),
        xaxis=_axis(type="category", tickangle=-45, showticklabels=show),
    )
    if window := _window_text(result, idx, "keys"):
        layout["title"]["text"] += f" · {window}"
    # x labels turned 45 degrees: about 0.71 of their length below the axis; t: two lines of title
    # over a legend of up to four rows in a narrow column.
    return _figure(bars + marks, _margin(layout, l=70, t=140, b=int(0.71 * _label_px(x)) + 12 if show else 20))


def key_density_figure(result: ExplainResult, layer: int, head: int, query: int, key: int) -> go.Figure:
    """Densities of log10 S_ij under q and under the prior p for one query-key pair.

    Each curve is scaled to its own peak: on the log axis the posterior can still be a hundred
    times taller than a prior spread over many decades, which would then read as a flat line.
    Hover shows the density itself.
    """
    T = len(result.tokens)
    query, key = _clip(query, T), _clip(key, T)
    if (reason := Facts.of(result).no_density(layer)) is not None:
        return _message_figure(reason)
    try:
        # Extreme parameters (tiny Dirichlet concentrations, k at the slider's ends) can overflow
        # SciPy's pdf; the plot then says so rather than taking the page down.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            densities = result.key_densities(layer, head, query, key)
    except (ArithmeticError, ValueError) as err:
        return _message_figure(f"The density cannot be drawn for these values ({err}).")
    if densities is None:
        return _message_figure("This layer's attention has no continuous density: its samples are shown "
                               "in the bars and maps instead.")
    labels = axis_labels(result.tokens)
    label = html.escape(str(densities["label"]), quote=False)
    x = _np(densities["x"])
    data = []
    for name, which, colour, fill, dash in (
        ("prior", "prior", PRIOR_COLOUR, "rgba(158,158,158,0.2)", "dash"),
        ("posterior q", "posterior", POSTERIOR_COLOUR, "rgba(31,119,180,0.2)", "solid"),
    ):
        density = np.maximum(_np(densities[which]), 0.0)                        # (n_points,)
        peak = float(density.max(initial=0.0))
        data.append({
            "type": "scatter", "mode": "lines", "name": name, "x": x,
            "y": density / peak if peak > 0 else density, "customdata": density,
            "line": {"color": colour, "dash": dash, "width": 2}, "fill": "tozeroy", "fillcolor": fill,
            "hovertemplate": f"{label} = %{{x:.2f}}<br>density %{{customdata:.3g}}<extra>{name}</extra>",
        })
    # The column is narrow: the variable's name goes on the axis, broken into lines that fit it,
    # and the legend can take two rows under the two lines of the title (t).
    axis_lines = textwrap.wrap(label, AXIS_TITLE_CHARS, break_long_words=False) or [label]
    return _figure(data, _margin(_layout(
        f"{labels[query]} → {labels[key]}<br>prior and posterior density", 380,
        xaxis=_axis(title={"text": "<br>".join(axis_lines)}),
        yaxis=_axis(title={"text": "density, each scaled to its peak"}, range=[0.0, 1.08]),
    ), l=60, t=100, b=32 + 18 * len(axis_lines)))


# ---- panel 2: sampled attention maps -----------------------------------------------------------
def sampled_maps_figure(result: ExplainResult, layer: int, head: int, n_show: int = 3,
                        relative: bool = False, shown: list[int] | None = None) -> go.Figure:
    """The posterior mean E[w] (the Monte Carlo mean of the sampled weights), softmax(psi) (the
    deterministic pass's weights, which E[w] is not for Weibull or Lognormal scores), the per-cell
    standard deviation, then `n_show` sampled maps (queries down), three across.

    Weights are coloured over [0, 1] and the std over [0, 0.5] (`WEIGHT_RANGE`, `STD_RANGE`), so a
    near-certain head reads pale; `relative` stretches each scale to the largest value shown.

    `shown`: the token indices drawn, in order, as queries and as keys alike; None is every token of
    a short sentence, and on a long one the window from [CLS] (`token_window`). The title says how
    many of the tokens are shown, and every cell is the real weight.

    Small multiples on ONE pair of category axes, not one subplot per map: plotly.js lays out,
    draws and measures every axis of every subplot on each update, which made this figure the
    slowest thing on the page. Map (row r, column c) uses the token labels with r (y) or c (x)
    zero-width spaces appended, so each block has categories of its own that read as the tokens,
    in hover too; a few blank categories make the gaps between blocks.
    """
    idx = _shown(result, shown)
    sw = _np(result.sample_weights[:, layer, head][:, idx][:, :, idx])         # (S, T, T)
    S, T = sw.shape[0], sw.shape[-1]                                            # T: the tokens shown
    n_show = max(0, min(n_show, S))
    mean = _np(result.posterior_mean_weights[layer, head][idx][:, idx])        # (T, T) E[w]
    soft = _np(result.softmax_weights[layer, head][idx][:, idx])               # (T, T) softmax(psi)
    # ddof=1 as in torch.std, so the map agrees with `result.spread`.
    std = sw.std(0, ddof=1) if S > 1 else np.zeros_like(mean)                   # (T, T)
    panels = [(LABELS["posterior_mean"], mean, "coloraxis"), (LABELS["softmax_weights"], soft, "coloraxis"),
              (f"std over {count(S, 'sample')}", std, "coloraxis2")]
    panels += [(f"sample {s + 1}", sw[s], "coloraxis") for s in range(n_show)]
    cols = min(3, len(panels))                    # three across: room for a label per token
    rows = math.ceil(len(panels) / cols)
    show = T <= MAX_TICK_TOKENS
    gap = max(1, round(0.15 * T))
    every_label = axis_labels(result.tokens)      # escaped, unique, never containing U+200B
    labels = [every_label[i] for i in idx]

    def block(i: int) -> list[str]:
        return [label + ZERO_WIDTH * i for label in labels]

    def axis_categories(n: int) -> list[str]:
        out = []
        for i in range(n):
            out += block(i) + ([" " * (i * gap + g + 1) for g in range(gap)] if i < n - 1 else [])
        return out

    xcats, ycats = axis_categories(cols), axis_categories(rows)
    data, titles = [], []
    for i, (title, z, coloraxis) in enumerate(panels):
        row, col = divmod(i, cols)
        data.append({
            "type": "heatmap", "z": z, "x": block(col), "y": block(row), "coloraxis": coloraxis, "name": title,
            "hovertemplate": "query %{y}<br>key %{x}<br>%{z:.3f}<extra>" + title + "</extra>",
        })
        # Titles over each block, in paper coordinates: block c spans its T of the axis's categories.
        x_mid = (col * (T + gap) + T / 2) / len(xcats)
        y_top = 1.0 - row * (T + gap) / len(ycats)
        titles.append({"text": title, "x": round(x_mid, 6), "y": round(y_top, 6), "xref": "paper", "yref": "paper",
                       "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 12}})
    # The gap categories exist even where no map is drawn (an empty last row, say).
    data.append({"type": "scatter", "mode": "markers", "x": xcats, "y": [ycats[0]] * len(xcats),
                 "marker": {"opacity": 0}, "hoverinfo": "skip", "showlegend": False, "name": "layout"})
    data.append({"type": "scatter", "mode": "markers", "x": [xcats[0]] * len(ycats), "y": ycats,
                 "marker": {"opacity": 0}, "hoverinfo": "skip", "showlegend": False, "name": "layout"})
    if relative:
        wmax = max(float(max(sw.max(initial=0.0), mean.max(initial=0.0), soft.max(initial=0.0))), 1e-6)
        smax = max(float(std.max(initial=0.0)), 1e-6)
        wtitle, stitle = "weight<br>relative", "std<br>relative"
    else:
        wmax, smax = WEIGHT_RANGE[1], STD_RANGE[1]
        wtitle, stitle = "weight<br>0 to 1", "std<br>0 to 0.5"
    # x labels stand upright (a label per ~9 px of width); 5.5 px per character at font size 9.
    label_px = _label_px(labels, font_px=10) if show else 8
    ticks = {"showticklabels": show, "tickfont": {"size": 9}, "showgrid": False, "zeroline": False,
             "type": "category", "categoryorder": "array", "ticks": ""}
    layout = _layout(f"Layer {layer}, head {head}: attention maps (rows: queries, columns: keys)",
                     300 * rows + 80 + label_px, legend=False)
    layout["margin"] = {"l": label_px + 10, "r": 90, "t": layout["margin"]["t"] + 10,
                        "b": label_px + 10}
    if window := _window_text(result, idx):
        layout["title"]["text"] += f" · {window}"
    return _figure(data, dict(
        layout, annotations=titles,
        # Every token labelled (plotly would thin crowded category labels); gaps unlabelled.
        xaxis=_axis(**ticks, categoryarray=xcats, tickangle=-90, tickmode="array",
                    tickvals=[c for c in xcats if c.strip()]),
        yaxis=_axis(**ticks, categoryarray=ycats, autorange="reversed", tickmode="array",
                    tickvals=[c for c in ycats if c.strip()]),
        coloraxis={"colorscale": WEIGHT_SCALE, "cmin": 0.0, "cmax": wmax,
                   "colorbar": {"title": {"text": wtitle}, "x": 1.0, "len": 0.45, "y": 0.77}},
        coloraxis2={"colorscale": STD_SCALE, "cmin": 0.0, "cmax": smax,
                    "colorbar": {"title": {"text": stitle}, "x": 1.0, "len": 0.45, "y": 0.23}},
    ))


# ---- panel 3: the prediction --------------------------------------------------------------------
def prediction_figure(result: ExplainResult, bins: int = 20) -> go.Figure:
    """Histogram of P(positive) over attention samples, with E[f(z)] (their average, the model's
    answer), f(E[w]) (one pass at the samples' mean weights: Deng et al.'s f(E[z])) and f(softmax)
    (the deterministic pass) marked, each in its own colour and dash (`bam_viz.inference.gaps`)."""
    i = result.positive_index
    p = np.clip(_np(result.sample_probs[:, i]), 0.0, 1.0)                     # (S,)
    counts, edges = np.histogram(p, bins=bins, range=(0.0, 1.0))
    centres = (edges[:-1] + edges[1:]) / 2
    top = max(int(counts.max(initial=0)), 1) * 1.15
    mc = float(_np(result.mc_probs)[i])
    mean_attention, softmax = float(_np(result.mean_attention_probs)[i]), float(_np(result.softmax_probs)[i])
    data = [
        {"type": "bar", "x": centres, "y": counts, "width": float(edges[1] - edges[0]),
         "name": "attention samples", "marker": {"color": POSTERIOR_COLOUR}, "opacity": 0.6,
         "hovertemplate": "P(positive) ≈ %{x:.2f}<br>%{y} samples<extra></extra>"},
        {"type": "scatter", "x": p, "y": np.full_like(p, -0.04 * top), "mode": "markers",
         "name": "each sample", "showlegend": False,
         "marker": {"symbol": "line-ns-open", "size": 10, "color": POSTERIOR_COLOUR},
         "hovertemplate": "%{x:.3f}<extra>sample</extra>"},
    ]
    for name, x, colour, dash in ((PREDICTION_MC, mc, MC_COLOUR, "solid"),
                                  (LABELS["mean_attention"], mean_attention, MEAN_ATTENTION_COLOUR, "dash"),
                                  (LABELS["softmax"], softmax, SOFTMAX_COLOUR, "dot")):
        data.append({"type": "scatter", "x": [x, x], "y": [0.0, top], "mode": "lines", "name": name,
                     "line": {"color": colour, "dash": dash, "width": 3},
                     "hovertemplate": f"{x:.3f}<extra>{name}</extra>"})
    chance = {"type": "line", "xref": "x", "yref": "y domain", "x0": 0.5, "x1": 0.5, "y0": 0, "y1": 1,
              "line": {"color": "#bbbbbb", "width": 1, "dash": "dot"}}
    # t: room for the legend's four rows in a narrow column, under the title.
    return _figure(data, _margin(_layout(
        f"P(positive) across {Facts.of(result).samples()}", 380, bargap=0.05, shapes=[chance],
        xaxis=_axis(title={"text": "P(positive)"}, range=[-0.02, 1.02]),
        yaxis=_axis(title={"text": "number of samples"}, range=[-0.08 * top, top]),
    ), l=60, b=50, t=120))


def mi_estimator(n_samples: int) -> str:
    """How `ExplainResult.mutual_information` is estimated at `n_samples`: bias-corrected by the
    jackknife from 3 samples, the plug-in below (`metrics.mutual_information_jackknife`)."""
    return LABELS["mi_estimator"] if n_samples >= 3 else "plug-in"


def _entropy_parts(result: ExplainResult) -> tuple[float, float, float]:
    """Aleatoric (the expected entropy), epistemic (the mutual information, which can dip just below
    0 once bias-corrected) and their total, the epistemic part counted from 0 as the page does."""
    aleatoric = float(np.nan_to_num(result.expected_entropy))
    epistemic = float(np.nan_to_num(result.mutual_information))
    return aleatoric, epistemic, aleatoric + max(epistemic, 0.0)


def entropy_figure(result: ExplainResult) -> go.Figure:
    """Total predictive entropy as one bar: expected entropy (aleatoric) + mutual information
    (epistemic, bias-corrected by the jackknife from 3 samples)."""
    aleatoric, epistemic, total = _entropy_parts(result)
    data = [
        {"type": "bar", "y": ["uncertainty"], "x": [max(value, 0.0)], "name": name, "orientation": "h",
         "marker": {"color": colour}, "text": [f"{value:.3f}"], "textposition": "inside",
         "hovertemplate": f"{name}: {value:.4f} nats<extra></extra>"}
        for name, value, colour in (("aleatoric: expected entropy", aleatoric, "#8c9eff"),
                                    (f"epistemic: mutual information, {mi_estimator(result.n_samples)}",
                                     epistemic, "#ff8a65"))
    ]
    # Two title lines and a legend of two rows in a narrow column: a taller top margin.
    return _figure(data, _margin(_layout(
        f"Predictive entropy {total:.3f} nats<br>(at most ln 2 = {LN2:.3f})", 220, barmode="stack",
        yaxis=_axis(visible=False), xaxis=_axis(range=[0, max(LN2, total) * 1.02]),
    ), t=110, b=30))


# ---- panel 4: where the uncertainty lives ------------------------------------------------------
def layer_head_figure(result: ExplainResult, which: str = "spread",
                      selected: tuple[int, int] | None = None, relative: bool = False) -> go.Figure:
    """Layers x heads heatmap of attention spread or of KL(q || prior); deterministic layers greyed.

    Colours are absolute: spread over `STD_RANGE`; KL by log10(1 + KL) over 0 to 10^KL_DECADES
    nats, since KL(Weibull || Gamma) carries a large part shared by every head (~1000 nats) and
    passes 10^5 at the sliders' ends. `relative` stretches the colour over [min, max] of the
    stochastic layers instead. Hover shows the value itself. KL is greyed too where the model has
    no learned prior (it is not computed there).

    Rows and columns sit on numeric axes labelled by tick text, one heatmap per run of consecutive
    layers: on a category axis plotly.js places a one-row heatmap by its raw label rather than by
    its category, away from its tick label and the selection square (a lone stochastic layer).
    """
    facts = Facts.of(result)
    if which == "spread":
        values, title = _np(result.spread), "Attention spread<br>std of sampled weights, averaged over cells"
        unit = "spread"
    elif which == "kl":
        values, title, unit = _np(result.kl), "KL(q ‖ prior)<br>summed over queries and keys", "KL, nats"
    else:
        raise ValueError(f"which must be 'spread' or 'kl', not {which!r}")
    L, H = values.shape
    # Numbers under an axis title, every third head: a half column on a 1024-px screen leaves the grid
    # about 60 px, where twelve labels run together (hover names every head).
    head_ticks = list(range(0, H, 3 if H > 6 else 1))
    row = [f"layer {layer}" if is_stochastic(result, layer) else f"layer {layer} (deterministic)"
           for layer in range(L)]
    stochastic = [layer for layer in range(L) if is_stochastic(result, layer)]
    unmeasured = stochastic if which == "kl" and facts.no_prior() is not None else []
    measured = [layer for layer in stochastic if layer not in unmeasured]
    if unmeasured:
        title = "KL(q ‖ prior): not shown<br>this model has no learned prior"
    data = []
    if measured:
        colour = values                                                         # (L, H)
        if relative:
            lo, hi = _relative_range(values[measured])
            bar = {"title": {"text": f"{unit}<br>relative"}, **_ticks(lo, hi)}
        elif which == "spread":
            lo, hi = STD_RANGE
            bar = {"title": {"text": "spread<br>0 to 0.5"}, **_ticks(lo, hi, 6)}
        else:
            colour = np.log10(1.0 + np.maximum(values, 0.0))
            nats = [0.0, *(10.0**d for d in range(1, KL_DECADES + 1))]
            tickvals = [math.log10(1.0 + x) for x in nats]
            lo, hi = 0.0, tickvals[-1]
            text = [f"{x:g}" if x < 1e4 else f"10{_superscript(round(math.log10(x)))}" for x in nats]
            bar = {"title": {"text": f"KL, nats<br>log scale<br>0 to {text[-1]}"},
                   "tickvals": tickvals, "ticktext": [*text[:-1], "≥" + text[-1]]}
        hover = "layer %{y}, head %{x}<br>%{customdata:.4g}" + (" nats" if which == "kl" else "")
        for i, run in enumerate(_runs(measured)):
            data.append({
                "type": "heatmap", "z": colour[run], "customdata": values[run], "x": list(range(H)), "y": run,
                "name": which, "zmin": lo, "zmax": hi, "colorscale": VALUE_SCALE, "showscale": i == 0,
                "colorbar": bar, "hovertemplate": hover + "<extra></extra>",
            })
    for layers, name, hover in ((unmeasured, "no prior", "layer %{y}: no learned prior, so no KL"),
                                ([i for i in range(L) if i not in stochastic], "deterministic",
                                 "layer %{y}: ordinary softmax attention, no randomness")):
        for run in _runs(layers):
            data.append({
                "type": "heatmap", "z": np.zeros((len(run), H)), "x": list(range(H)), "y": run, "name": name,
                "colorscale": [[0, DETERMINISTIC_COLOUR], [1, DETERMINISTIC_COLOUR]], "showscale": False,
                "hovertemplate": hover + "<extra></extra>",
            })
    if selected is not None and 0 <= selected[0] < L and 0 <= selected[1] < H:
        layer, head = selected
        data.append({"type": "scatter", "x": [head], "y": [layer], "mode": "markers",
                     "name": "selected", "showlegend": False, "hovertemplate": "selected<extra></extra>",
                     "marker": {"symbol": "square-open", "size": 22, "color": "#d62728", "line": {"width": 3}}})
    # Grey rows labelled "(deterministic)" say it once per row; a word in every grey cell cost a
    # text measurement per cell on every slider move.
    grid = {"tickmode": "array", "showgrid": False, "zeroline": False}
    return _figure(data, _margin(_layout(
        title, max(260, 34 * L + 130), legend=False,
        xaxis=_axis(**grid, tickvals=head_ticks, ticktext=[str(h) for h in head_ticks], range=[-0.5, H - 0.5],
                    tickangle=0,
                    title={"text": "head", "standoff": 4}),
        yaxis=_axis(**grid, tickvals=list(range(L)), ticktext=row, range=[L - 0.5, -0.5]),
    ), l=_label_px(row) + 4, b=50, t=70))                   # t: a title of two lines


# ---- captions -----------------------------------------------------------------------------------
def signed(x: float, digits: int = 3) -> str:
    """x with its sign, never "-0.000": a gap that rounds to zero reads "+0.000"."""
    return f"{round(x, digits) or 0.0:+.{digits}f}"


def _tok(result: ExplainResult, i: int) -> str:
    return "“" + md_escape(display_token(result.tokens[i])) + "”"


def _shown_share(result: ExplainResult, layer: int, head: int, rows: list[int], idx: list[int]) -> float:
    """How much of its mean attention E[w] (`posterior_mean_weights`) a row of `rows` puts on the
    keys `idx`, on average over the rows."""
    return float(_np(result.posterior_mean_weights[layer, head])[rows][:, idx].sum(-1).mean())


_SHRINKS = {"weibull": ("Weibull", "k shrinks"), "lognormal": ("Lognormal", "σ grows")}


def _off_softmax(result: ExplainResult) -> str:
    """Why E[w] is not softmax(psi), for the families where it is not; "" for the others."""
    if result.family not in _SHRINKS:
        return ""
    name, moves = _SHRINKS[result.family]
    return (f"For {name} scores the mean of the normalised weights is not softmax(ψ): normalising pulls "
            f"it towards uniform, the more as {moves}.")


def prior_posterior_caption(result: ExplainResult, layer: int, head: int, query: int,
                            shown: list[int] | None = None) -> str:
    facts = Facts.of(result)
    T = len(result.tokens)
    query = _clip(query, T)
    idx = _shown(result, shown, query)
    window = ""
    if keys := _window_text(result, idx, "keys"):
        window = (f" The bars show {keys}: they hold {_shown_share(result, layer, head, [query], idx):.2f} "
                  "of the query's mean attention E[w], and the rest falls on keys not shown.")
    if (reason := facts.deterministic(layer)) is not None:
        return f"{reason} Prior and posterior coincide.{window}"
    post = _np(result.posterior_mean_weights[layer, head, query])
    post_se = _np(result.posterior_mean_se[layer, head, query])
    soft = _np(result.softmax_weights[layer, head, query])
    prior = _np(result.prior_mean_weights(layer, head)[query])
    draws = _np(result.sample_weights[:, layer, head, query])
    top = int(post.argmax())
    if top not in idx:
        window = f" {_tok(result, top)} is not among the bars shown." + window
    lo, hi = np.quantile(draws[:, top], [0.05, 0.95])
    looks = f"blue bars: the **posterior** after the query {_tok(result, query)} looks at them"
    if facts.prior == "learned":
        bars = f"Grey bars: what the **prior** expects from the keys alone; {looks}."
    elif facts.prior == "alignment":
        bars = ("Grey bars: the **prior** p(z|x), which this model also samples from, so they match the "
                "blue bars up to sampling noise.")
    elif facts.prior == "fixed":
        bars = f"Grey bars: the **prior**, uniform over the keys (this model learns no prior); {looks}."
    else:
        bars = ("This model has no prior: its attention is random through dropout, so the grey bars "
                "repeat the blue ones.")
    bars += (" Each bar is the mean over its draws; the purple mark on each blue bar is softmax(ψ), the "
             + ("deterministic pass, and the dark one on each grey bar the prior's π." if facts.prior != "none"
                else "deterministic pass, dropout off."))
    against = f" (prior {prior[top]:.2f})" if facts.prior != "none" else ""
    soft_top = f"the deterministic pass gives it {soft[top]:.2f}"
    if facts.n_samples < 2:
        return (f"{bars} Here {_tok(result, query)} attends most to {_tok(result, top)}: "
                f"{post[top]:.2f} in the one draw{against}; {soft_top}. With {facts.samples()} the whiskers "
                f"have no width: draw at least 2 to see how much the weights vary.{window}")
    moved = ""
    if abs(post[top] - soft[top]) > max(2 * post_se[top], 0.005) and (why := _off_softmax(result)):
        moved = f" {why}"
    return (f"{bars} Whiskers span 5–95% of the sampled weights. Here {_tok(result, query)} attends most to "
            f"{_tok(result, top)}: {post[top]:.2f} on average{against}, between {lo:.2f} and {hi:.2f} "
            f"in 90% of samples; {soft_top}.{moved} Wide whiskers mean the model is unsure where to "
            f"look.{window}")


def key_density_caption(result: ExplainResult, layer: int, head: int, query: int, key: int) -> str:
    facts = Facts.of(result)
    T = len(result.tokens)
    query, key = _clip(query, T), _clip(key, T)
    if (reason := facts.no_density(layer)) is not None:
        return reason
    if not result.posterior_params:
        return "No density to draw for this choice; the bars show the weights."
    hyper = ", ".join(f"{k} = {v:.3g}" for k, v in result.hyper.items()) or "no hyperparameters"
    return (f"The dashed grey curve is the prior for {_tok(result, query)} → {_tok(result, key)}; "
            f"the blue curve is the posterior q the model actually samples from ({hyper}). The axis is "
            "log10, so one step is a factor of 10; each curve is scaled to its own peak so that both "
            "stay visible (hover for the density itself). A narrow blue curve means a confident, nearly "
            "fixed weight; moving the sliders reshapes both curves.")


def sampled_maps_caption(result: ExplainResult, layer: int, head: int, relative: bool = False,
                         shown: list[int] | None = None) -> str:
    facts = Facts.of(result)
    idx = _shown(result, shown)
    window = ""
    if tokens := _window_text(result, idx):
        window = (f" The maps show {tokens}, as queries and as keys: the cells shown in a row add up to less "
                  f"than 1, {_shown_share(result, layer, head, idx, idx):.2f} on average in the E[w] map, and "
                  "the rest falls on keys not shown.")
    grid = "Rows are queries, columns are keys." + window
    if (reason := facts.deterministic(layer)) is not None:
        return f"{reason} Head {head} gives the same map every time, so the std map is blank. {grid}"
    if facts.n_samples < 2:
        return (f"Only {facts.samples()} was drawn: the std map needs at least 2 to show where draws "
                f"disagree, so it is blank. {grid}")
    std = _np(result.sample_weights[:, layer, head][:, idx][:, :, idx]).std(0, ddof=1)   # (T, T) shown
    q, k = (idx[i] for i in np.unravel_index(int(std.argmax()), std.shape))
    sums = "each row sums to 1 over all its keys" if window else "each row sums to 1"
    scale = ("Colours are relative: each scale stretches to the largest value shown, so the orange map "
             "looks busy even where every std is tiny." if relative else
             "Colours are absolute, weights from 0 to 1 and std from 0 to 0.5 (the most a weight's std "
             "can be), so a pale orange map is a head that hardly varies.")
    off = _off_softmax(result)
    return (f"The first map is E[w], the mean of the {facts.samples()}; the second is softmax(ψ), the "
            f"deterministic pass.{' ' + off if off else ''} Each small map after them is one random draw of "
            f"the attention (rows: queries, columns: keys; {sums}). The orange map shows where draws "
            f"disagree: most at {_tok(result, q)} → {_tok(result, k)} (std {std.max():.3f}, mean over "
            f"cells {std.mean():.3f}). {scale}{window}")


def _mi_how(n_samples: int) -> str:
    """`mi_estimator` in a sentence."""
    return "bias-corrected by the jackknife" if n_samples >= 3 else "the plug-in: its jackknife needs 3 samples"


def prediction_caption(result: ExplainResult) -> str:
    facts = Facts.of(result)
    i = result.positive_index
    mc = float(result.mc_probs[i])
    mean_attention, softmax = float(result.mean_attention_probs[i]), float(result.softmax_probs[i])
    p = _np(result.sample_probs[:, i])
    lo, hi = (float(p.min()), float(p.max())) if p.size else (mc, mc)
    verdict = "positive" if mc >= 0.5 else "negative"
    if not facts.stochastic_layers:
        return (f"This model's attention is deterministic: one pass gives **P(positive) = {mc:.3f}** "
                f"({verdict}), so E[f(z)], f(E[w]) and f(softmax) coincide and all of the uncertainty, "
                f"{result.predictive_entropy:.3f} nats (at most ln 2 = {LN2:.3f}), is aleatoric. "
                f"{uncertainty_verdict(result)}")
    aleatoric, epistemic, total = _entropy_parts(result)
    entropy = (f"Of the total uncertainty {total:.3f} nats (at most ln 2 = {LN2:.3f}), {aleatoric:.3f} is "
               f"aleatoric, the doubt each attention sample keeps on its own, and {epistemic:.3f} is epistemic, "
               f"from the samples disagreeing (the mutual information, {_mi_how(facts.n_samples)}). "
               f"{uncertainty_verdict(result)}")
    softmax_says = f"**f(softmax) = {softmax:.3f}** (purple dots)"
    if facts.n_samples < 2:
        mean = "" if facts.dropout else (f"; at one sample E[w] is that sample's weights, so f(E[w]) = "
                                         f"{mean_attention:.3f} (red dashes)")
        return (f"Only {facts.samples()} was drawn: it gives **E[f(z)] = {mc:.3f}** (green, {verdict}); the "
                f"deterministic pass, every stochastic layer at softmax(ψ), gives {softmax_says}{mean}. The gap "
                f"to the deterministic pass, {signed(mc - softmax)}, rests on one draw, and one sample cannot "
                f"disagree with itself, so the epistemic part is 0 until n_samples is at least 2. {entropy}")
    gap = " ".join(with_se(result, "gap", result.gap, sign=True))
    spread = (f"Each of the {facts.samples()} gives its own P(positive), from {lo:.2f} to {hi:.2f}. Averaging "
              f"them gives **E[f(z)] = {mc:.3f}** (green, the model's answer: {verdict}).")
    if facts.dropout:      # the randomness is in the dropout masks, whose mean keeps every unit (inference.gaps)
        return (f"{spread} Dropout makes this model random, not drawn attention weights, so f(E[z]) is the "
                f"deterministic pass, dropout off: {softmax_says}, on the red dashes. The gap, {gap}, is what "
                f"averaging over dropout masks changes. {entropy}")
    gap_softmax = " ".join(with_se(result, "gap_softmax", result.gap_softmax, sign=True))
    return (f"{spread} One pass at their mean attention E[w] gives **f(E[w]) = {mean_attention:.3f}** (red "
            f"dashes: Deng et al.'s f(E[z])); BAM's deterministic pass, every stochastic layer at softmax(ψ), "
            f"gives {softmax_says}. The headline's gap E[f(z)] − f(E[w]) = {gap} is Jensen's gap at the mean "
            f"of the sampled attention; E[f(z)] − f(softmax) = {gap_softmax} is what predicting with the "
            f"deterministic pass gives up. The two differ by f(E[w]) − f(softmax) = "
            f"{signed(mean_attention - softmax)}, the shift of the weights' mean away from softmax(ψ). {entropy}")


def uncertainty_verdict(result: ExplainResult) -> str:
    """One plain sentence on how much uncertainty there is and where it comes from."""
    aleatoric, epistemic, total = _entropy_parts(result)
    if total < CONFIDENT_NATS:
        return "The model is sure of this sentence."
    if epistemic >= aleatoric:
        return "Most of the doubt comes from attention: the samples read the sentence differently."
    return "Most of the doubt is shared by every sample: the model finds the sentence itself mixed."


def layer_head_caption(result: ExplainResult, relative: bool = False) -> str:
    facts = Facts.of(result)
    if not facts.stochastic_layers:
        return ("Every layer of this model is deterministic (grey): its attention is a single "
                "softmax, so there is no spread and no KL to show.")
    spread, kl = _np(result.spread), _np(result.kl)
    sl = list(facts.stochastic_layers)
    parts = [facts.which_stochastic()]
    if facts.n_samples < 2:
        parts.append(f"With {facts.samples()} no head can vary, so every spread is 0: draw at least 2.")
    elif not _all_equal(spread[sl]):
        s_idx = np.unravel_index(int(spread[sl].argmax()), spread[sl].shape)
        parts.append(f"The most uncertain head is layer {sl[s_idx[0]]} head {s_idx[1]} "
                     f"(spread {spread[sl][s_idx]:.3f}).")
    else:                                  # one alignment shared by every head (categorical)
        parts.append(f"Every stochastic head varies alike (spread {spread[sl].max():.3f}).")
    no_prior = facts.no_prior()
    if no_prior is None:
        k_idx = np.unravel_index(int(kl[sl].argmax()), kl[sl].shape)
        parts.append(f"The head that moved furthest from its prior is layer {sl[k_idx[0]]} head {k_idx[1]} "
                     f"(KL {kl[sl][k_idx]:.3g} nats).")
    else:
        parts.append(f"{no_prior} Its grid is grey.")
    if relative:
        ticks = _ticks(*_relative_range(spread[sl]))["ticktext"]
        ranges = f"spread {ticks[0]} to {ticks[-1]}"
        if no_prior is None:
            ticks = _ticks(*_relative_range(kl[sl]))["ticktext"]
            ranges += f" and KL {ticks[0]} to {ticks[-1]} nats"
        parts.append(f"Colours are relative: they stretch over the stochastic heads' own range, {ranges}, "
                     "so a bright head is high compared with the others, not necessarily high in itself.")
    else:
        kl_scale = f" and KL on a log scale from 0 to 10{_superscript(KL_DECADES)} nats" if no_prior is None else ""
        parts.append(f"Colours are absolute: spread from 0 to 0.5 (the most a weight's std can be){kl_scale}, "
                     "so a dark head is a certain one; turn on relative colour scales for contrast.")
    parts.append("The red square marks the head shown above.")
    return " ".join(parts)


# ---- Monte Carlo errors -------------------------------------------------------------------------
def _se_digits(se: float | None, digits: int = 3) -> int:
    """More decimals for an error under one unit of the last digit, up to its first significant one
    (at most 6), so that "± 0.000" never hides a nonzero error."""
    if se is not None and 0 < se < 10.0**-digits:
        return min(-math.floor(math.log10(se)), 6)
    return digits


def _samples_needed(quantity: str) -> int:
    return 3 if quantity == "mutual_information" else 2       # a spread needs 2; the MI jackknife, 3


def with_se(result: ExplainResult, quantity: str, value: float, sign: bool = False) -> tuple[str, str]:
    """A Monte Carlo estimate and its error as two strings to the same decimals: ("0.812", "± 0.004")
    (one standard error, `result.se.<quantity>`); the error reads "exact" for a deterministic model
    and "needs ≥ 2 samples" where it is not estimable. Two strings because a metric's column is too
    narrow for both on one line: the value, then the error below it."""
    se = getattr(result.se, quantity)
    digits = _se_digits(se)
    number = signed(value, digits) if sign else f"{value:.{digits}f}"
    if not result.stochastic_layers:
        return number, "exact"
    if se is None:
        return number, f"needs ≥ {_samples_needed(quantity)} samples"
    return number, f"± {se:.{digits}f}"


def se_help(result: ExplainResult, quantity: str) -> str:
    """The metric help's sentence on its error: "± 1 SE" and the estimator of `quantity` (a field
    of `result.se`), or why there is none."""
    se = result.se
    if not result.stochastic_layers:
        return "Exact: this model's attention is deterministic, so there is no Monte Carlo error."
    if getattr(se, quantity) is None:
        return f"No ± SE: it needs at least {_samples_needed(quantity)} samples (n_samples = {se.n_samples})."
    return (f"Below the value: ± 1 standard error (SE) of the Monte Carlo estimate over the "
            f"{se.n_samples} attention samples; estimator: {se.ESTIMATORS[quantity]}.")


def monte_carlo_caption(result: ExplainResult) -> str:
    """Under the headline: whether Deng's gap E[f(z)] - f(E[w]) can be told from zero (|gap| against
    2 of its delta-method SE, `result.se.gap`), or why the errors are missing."""
    se = result.se
    if not result.stochastic_layers:
        return "Deterministic attention: every number above is exact, with no Monte Carlo error."
    if se.gap is None:
        return (f"± SE needs at least 2 samples (n_samples = {se.n_samples}): one attention sample "
                "has no spread to measure the Monte Carlo error by, so the gap may be noise. "
                "Raise n_samples.")
    two_se = f"{2 * se.gap:.{_se_digits(2 * se.gap)}f}"
    if result.gap_distinguishable:
        text = (f"Values are ± 1 SE. The gap E[f(z)] − f(E[w]) is distinguishable from zero "
                f"(|gap| > 2 SE = {two_se}).")
    else:
        text = (f"Values are ± 1 SE. The gap E[f(z)] − f(E[w]) is not distinguishable from zero "
                f"(|gap| ≤ 2 SE = {two_se}): its sign cannot be told from Monte Carlo noise; the SE shrinks "
                "as 1/√n_samples.")
    if se.mutual_information is None:
        text += " The mutual information's ± SE (a jackknife) needs at least 3 samples."
    return text


# ---- the sweep: prediction and doubt over a slider's whole range --------------------------------
def sweep_figure(sweep, current: float | None = None) -> go.Figure:  # sweep: a bam_viz.inference.sweep.Sweep
    """P(positive) by E[f(z)] (with a band of +/- 2 Monte Carlo standard errors), by f(E[w]) (at
    the samples' mean attention) and by f(softmax) (the deterministic pass), and the mutual
    information (bias-corrected by the jackknife from 3 samples), against the swept hyperparameter;
    the current and the trained values marked. Two rows sharing the x axis (log for a log slider)."""
    x = _np(sweep.values)
    mc, se = _np(sweep.p_mc), _np(sweep.p_mc_se)
    mean_attention, softmax = _np(sweep.p_mean_attention), _np(sweep.p_softmax)
    mi_value = _np(sweep.mutual_information)
    mi = np.clip(mi_value, 0.0, None)           # drawn from 0; the hover says the estimate itself
    lo, hi = np.clip(mc - 2 * se, 0.0, 1.0), np.clip(mc + 2 * se, 0.0, 1.0)
    name = html.escape(sweep.name)
    mi_name = f"mutual information (nats), {mi_estimator(sweep.n_samples)}"
    data = [
        {"type": "scatter", "x": np.concatenate([x, x[::-1]]), "y": np.concatenate([hi, lo[::-1]]),
         "fill": "toself", "fillcolor": "rgba(44,160,44,0.18)", "line": {"width": 0}, "hoverinfo": "skip",
         "name": LABELS["mc_band"], "xaxis": "x", "yaxis": "y"},
        {"type": "scatter", "x": x, "y": mc, "mode": "lines+markers", "name": PREDICTION_MC,
         "line": {"color": MC_COLOUR, "width": 3}, "marker": {"size": 5},
         "customdata": np.stack([se], -1),
         "hovertemplate": f"{name} = %{{x:.3g}}<br>E[f(z)] = %{{y:.3f}} ± %{{customdata[0]:.3f}}<extra></extra>"},
        {"type": "scatter", "x": x, "y": mean_attention, "mode": "lines", "name": LABELS["mean_attention"],
         "line": {"color": MEAN_ATTENTION_COLOUR, "width": 2, "dash": "dash"},
         "hovertemplate": f"{name} = %{{x:.3g}}<br>f(E[w]) = %{{y:.3f}}<extra></extra>"},
        {"type": "scatter", "x": x, "y": softmax, "mode": "lines", "name": LABELS["softmax"],
         "line": {"color": SOFTMAX_COLOUR, "width": 2, "dash": "dot"},
         "hovertemplate": f"{name} = %{{x:.3g}}<br>f(softmax) = %{{y:.3f}}<extra></extra>"},
        {"type": "scatter", "x": x, "y": mi, "mode": "lines+markers", "name": mi_name,
         "line": {"color": "#ff8a65", "width": 2}, "marker": {"size": 5}, "xaxis": "x", "yaxis": "y2",
         "customdata": np.stack([mi_value], -1),
         "hovertemplate": f"{name} = %{{x:.3g}}<br>I = %{{customdata[0]:.4f}} nats"
                          f"<extra>{mi_estimator(sweep.n_samples)}</extra>"},
    ]
    shapes, notes = [], []
    marks = [(sweep.trained, "trained", "dot"), (current, "now", "solid")]
    if current is not None and sweep.trained is not None and math.isclose(current, sweep.trained):
        marks = [(current, "now = trained", "solid")]
    for value, label, dash in marks:
        if value is None:
            continue
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": value, "x1": value, "y0": 0, "y1": 0.97,
                       "line": {"color": "#555555", "width": 1.5, "dash": dash}})
        # plotly places annotations on a log axis by log10 of the value (shapes by the value itself)
        notes.append({"x": math.log10(value) if sweep.scale == "log" else value, "xref": "x",
                      "y": 0.97, "yref": "paper", "yanchor": "bottom", "showarrow": False,
                      "xanchor": "left" if label == "now" else "right",
                      "text": f" {label} {value:.3g} ", "font": {"size": 12, "color": "#555555"}})
    xaxis = _axis(type="log" if sweep.scale == "log" else "linear", title={"text": name}, anchor="y2")
    top_mi = max(float(mi.max(initial=0.0)) * 1.15, 0.01)
    return _figure(data, _margin(_layout(
        f"P(positive) and the mutual information at every {name} ({sweep.n_samples} samples, seed {sweep.seed})",
        440, shapes=shapes, annotations=notes,
        xaxis=xaxis,
        yaxis=_axis(title={"text": "P(positive)"}, range=[-0.02, 1.02], domain=[0.42, 0.92]),
        yaxis2=_axis(title={"text": "MI (nats)"}, range=[0, top_mi], domain=[0.0, 0.3]),
    ), l=70, b=50, t=135))


def sweep_caption(sweep, current: float | None = None) -> str:
    """What the sweep shows, read off its numbers: where the samples start to disagree."""
    name = sweep.name
    mi = np.asarray(sweep.mutual_information)
    how = mi_estimator(sweep.n_samples)
    peak = int(np.argmax(mi))
    where = (f"The samples disagree most at {name} = {sweep.values[peak]:.3g} "
             f"(mutual information {mi[peak]:.3f} nats, {how})" if mi[peak] > 1e-3 else
             "The samples agree everywhere on this range (mutual information under 0.001 nats)")
    now = ""
    if current is not None:
        i = sweep.nearest(current)
        now = (f"; at {name} ≈ {sweep.values[i]:.3g}, E[f(z)] = {sweep.p_mc[i]:.3f} ± {sweep.p_mc_se[i]:.3f}, "
               f"f(E[w]) = {sweep.p_mean_attention[i]:.3f} and f(softmax) = {sweep.p_softmax[i]:.3f}")
    return (f"Green: E[f(z)], the average over {count(sweep.n_samples, 'attention sample')}, with a band of "
            f"± 2 Monte Carlo standard errors; red dashes: f(E[w]), one pass at the samples' mean attention; "
            f"purple dots: f(softmax), the deterministic pass; orange: the mutual information. "
            f"{where}{now}. Where the red line leaves the green band, averaging predictions is not predicting "
            f"at the mean attention; where the purple one does, the deterministic pass is not the model's answer.")
