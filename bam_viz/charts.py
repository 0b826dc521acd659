"""Chart builders and panel captions: each a pure function of an `ExplainResult`.

Nothing here imports Streamlit. Figures are plotly `Figure`s built from plain dicts (see `_figure`);
captions are short plain-language Markdown strings for classroom use. Token text never reaches
plotly or Markdown unescaped: plotly renders a subset of HTML in labels, and Streamlit's Markdown
renders emphasis, links and LaTeX.
"""

from __future__ import annotations

import html
import math
import unicodedata
import warnings

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from bam_viz.result import ExplainResult

PRIOR_COLOUR = "#9e9e9e"
POSTERIOR_COLOUR = "#1f77b4"
MEAN_FIELD_COLOUR = "#d62728"
MC_COLOUR = "#2ca02c"
DETERMINISTIC_COLOUR = "#e0e0e0"
MAX_TICK_TOKENS = 40          # above this many tokens, heatmap tick labels are hidden (hover keeps them)
LN2 = math.log(2.0)
CONFIDENT_NATS = 0.1 * LN2   # predictive entropy under a tenth of its two-class maximum: "sure"
ZERO_WIDTH = "\u200b"        # appended to axis labels to tell small multiples apart; display_token escapes it
# Colour scales spelled out: plotly.js knows "Viridis" but not "Oranges", and its own "Blues" differs
# from plotly.py's, and without validation nothing would expand the names.
WEIGHT_SCALE = plotly.colors.get_colorscale("Blues")
STD_SCALE = plotly.colors.get_colorscale("Oranges")
VALUE_SCALE = plotly.colors.get_colorscale("Viridis")


# ---- token text ---------------------------------------------------------------------------------
def display_token(token: str) -> str:
    """The token as visible text: control, format and separator characters become \\uXXXX.

    Zero-width spaces, bidi marks and control characters would otherwise be invisible or reorder
    their neighbours; an empty token would leave a blank label.
    """
    out = []
    for ch in token:
        if unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) or "\u2205"


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
    return {
        "height": height, "margin": {"l": 10, "r": 10, "t": 80 if legend else 50, "b": 10},
        "title": {"text": title, "font": {"size": 14}, "y": 0.98, "yref": "container", "yanchor": "top"},
        "legend": {"orientation": "h", "y": 1.02, "x": 0, "xanchor": "left", "yanchor": "bottom"},
        "paper_bgcolor": "white", "plot_bgcolor": "white", **props,
    }


def _message_figure(message: str, height: int = 380) -> go.Figure:
    return _figure([], {
        "height": height, "xaxis": {"visible": False}, "yaxis": {"visible": False},
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "annotations": [{"text": html.escape(message), "showarrow": False, "x": 0.5, "y": 0.5,
                         "xref": "paper", "yref": "paper", "font": {"size": 14}}],
    })


def is_stochastic(result: ExplainResult, layer: int) -> bool:
    return layer in result.stochastic_layers


def _clip(i: int, n: int) -> int:
    return min(max(int(i), 0), n - 1)


# ---- panel 1: prior vs posterior ---------------------------------------------------------------
def prior_posterior_figure(result: ExplainResult, layer: int, head: int, query: int) -> go.Figure:
    """Per key: prior mean pi_j and posterior mean, each with the 5-95% band of sampled weights."""
    T = len(result.tokens)
    query = _clip(query, T)
    keys = axis_labels(result.tokens)
    prior_mean = _np(result.prior_weights[layer, head, query])                 # (T,)
    post_mean = _np(result.mean_weights[layer, head, query])                   # (T,)
    prior_draws = _np(result.prior_draws(layer, head)[:, query])             # (S, T)
    post_draws = _np(result.sample_weights[:, layer, head, query])             # (S, T)
    data = []
    for name, mean, draws, colour in (
        ("prior mean π_j", prior_mean, prior_draws, PRIOR_COLOUR),
        ("posterior mean", post_mean, post_draws, POSTERIOR_COLOUR),
    ):
        lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)                       # (T,), (T,)
        data.append({
            "type": "bar", "name": name, "x": keys, "y": mean, "marker": {"color": colour},
            "error_y": {"type": "data", "symmetric": False, "array": np.maximum(hi - mean, 0.0),
                        "arrayminus": np.maximum(mean - lo, 0.0), "thickness": 1.5},
            "customdata": np.stack([lo, hi], -1),
            "hovertemplate": "key %{x}<br>mean %{y:.3f}<br>5–95%: %{customdata[0]:.3f}–%{customdata[1]:.3f}"
                             f"<extra>{name}</extra>",
        })
    show = T <= 2 * MAX_TICK_TOKENS
    layout = _layout(
        f"Query {keys[query]}: attention to each key (layer {layer}, head {head})", 380, barmode="group",
        yaxis=_axis(title={"text": "attention weight"}, rangemode="tozero"),
        xaxis=_axis(type="category", tickangle=-45, showticklabels=show),
    )
    # x labels turned 45 degrees: about 0.71 of their length below the axis.
    return _figure(data, _margin(layout, l=70, b=int(0.71 * _label_px(keys)) + 12 if show else 20))


def key_density_figure(result: ExplainResult, layer: int, head: int, query: int, key: int) -> go.Figure:
    """Densities of log10 S_ij under q and under the prior p for one query-key pair.

    Each curve is scaled to its own peak: on the log axis the posterior can still be a hundred
    times taller than a prior spread over many decades, which would then read as a flat line.
    Hover shows the density itself.
    """
    T = len(result.tokens)
    query, key = _clip(query, T), _clip(key, T)
    if not is_stochastic(result, layer):
        return _message_figure(f"Layer {layer} is deterministic: its attention has no distribution.")
    try:
        # Extreme parameters (tiny Dirichlet concentrations, k at the slider's ends) can overflow
        # SciPy's pdf; the plot then says so rather than taking the page down.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            densities = result.key_densities(layer, head, query, key)
    except (ArithmeticError, ValueError) as err:
        return _message_figure(f"The density cannot be drawn for these values ({err}).")
    if densities is None:
        return _message_figure(
            f"{result.family} attention has no continuous density: "
            "its samples are shown in the bars and maps instead.")
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
    return _figure(data, _margin(_layout(
        f"{labels[query]} → {labels[key]}: {label}", 380,
        xaxis=_axis(title={"text": label}),
        yaxis=_axis(title={"text": "density, each scaled to its peak"}, range=[0.0, 1.08]),
    ), l=60, b=50))


# ---- panel 2: sampled attention maps -----------------------------------------------------------
def sampled_maps_figure(result: ExplainResult, layer: int, head: int, n_show: int = 4) -> go.Figure:
    """The mean map, the per-cell standard deviation, then `n_show` sampled maps (queries down).

    Small multiples on ONE pair of category axes, not one subplot per map: plotly.js lays out,
    draws and measures every axis of every subplot on each update, which made this figure the
    slowest thing on the page. Map (row r, column c) uses the token labels with r (y) or c (x)
    zero-width spaces appended, so each block has categories of its own that read as the tokens,
    in hover too; a few blank categories make the gaps between blocks.
    """
    sw = _np(result.sample_weights[:, layer, head])                           # (S, T, T)
    S, T = sw.shape[0], sw.shape[-1]
    n_show = max(0, min(n_show, S))
    mean = _np(result.mean_weights[layer, head])                               # (T, T)
    # ddof=1 as in torch.std, so the map agrees with `result.spread`.
    std = sw.std(0, ddof=1) if S > 1 else np.zeros_like(mean)                   # (T, T)
    panels = [("mean (posterior)", mean, "coloraxis"), (f"std over {S} samples", std, "coloraxis2")]
    panels += [(f"sample {s + 1}", sw[s], "coloraxis") for s in range(n_show)]
    cols = min(3, len(panels))                    # three across: room for a label per token
    rows = math.ceil(len(panels) / cols)
    show = T <= MAX_TICK_TOKENS
    gap = max(1, round(0.15 * T))
    labels = axis_labels(result.tokens)           # escaped, unique, never containing U+200B

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
                       "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 14}})
    # The gap categories exist even where no map is drawn (an empty last row, say).
    data.append({"type": "scatter", "mode": "markers", "x": xcats, "y": [ycats[0]] * len(xcats),
                 "marker": {"opacity": 0}, "hoverinfo": "skip", "showlegend": False, "name": "layout"})
    data.append({"type": "scatter", "mode": "markers", "x": [xcats[0]] * len(ycats), "y": ycats,
                 "marker": {"opacity": 0}, "hoverinfo": "skip", "showlegend": False, "name": "layout"})
    wmax = max(float(max(sw.max(initial=0.0), mean.max(initial=0.0))), 1e-6)
    smax = max(float(std.max(initial=0.0)), 1e-6)
    # x labels stand upright (a label per ~9 px of width); 5.5 px per character at font size 9.
    label_px = _label_px(labels, font_px=10) if show else 8
    ticks = {"showticklabels": show, "tickfont": {"size": 9}, "showgrid": False, "zeroline": False,
             "type": "category", "categoryorder": "array", "ticks": ""}
    layout = _layout(f"Layer {layer}, head {head}: attention maps (rows: queries, columns: keys)",
                     300 * rows + 80 + label_px, legend=False)
    layout["margin"] = {"l": label_px + 10, "r": 90, "t": layout["margin"]["t"] + 10,
                        "b": label_px + 10}
    return _figure(data, dict(
        layout, annotations=titles,
        # Every token labelled (plotly would thin crowded category labels); gaps unlabelled.
        xaxis=_axis(**ticks, categoryarray=xcats, tickangle=-90, tickmode="array",
                    tickvals=[c for c in xcats if c.strip()]),
        yaxis=_axis(**ticks, categoryarray=ycats, autorange="reversed", tickmode="array",
                    tickvals=[c for c in ycats if c.strip()]),
        coloraxis={"colorscale": WEIGHT_SCALE, "cmin": 0.0, "cmax": wmax,
                   "colorbar": {"title": {"text": "weight"}, "x": 1.0, "len": 0.45, "y": 0.77}},
        coloraxis2={"colorscale": STD_SCALE, "cmin": 0.0, "cmax": smax,
                    "colorbar": {"title": {"text": "std"}, "x": 1.0, "len": 0.45, "y": 0.23}},
    ))


# ---- panel 3: the prediction --------------------------------------------------------------------
def prediction_figure(result: ExplainResult, bins: int = 20) -> go.Figure:
    """Histogram of P(positive) over attention samples, with f(E[z]) and E[f(z)] marked."""
    i = result.positive_index
    p = np.clip(_np(result.sample_probs[:, i]), 0.0, 1.0)                     # (S,)
    counts, edges = np.histogram(p, bins=bins, range=(0.0, 1.0))
    centres = (edges[:-1] + edges[1:]) / 2
    top = max(int(counts.max(initial=0)), 1) * 1.15
    mf, mc = float(_np(result.mean_field_probs)[i]), float(_np(result.mc_probs)[i])
    data = [
        {"type": "bar", "x": centres, "y": counts, "width": float(edges[1] - edges[0]),
         "name": "attention samples", "marker": {"color": POSTERIOR_COLOUR}, "opacity": 0.6,
         "hovertemplate": "P(positive) ≈ %{x:.2f}<br>%{y} samples<extra></extra>"},
        {"type": "scatter", "x": p, "y": np.full_like(p, -0.04 * top), "mode": "markers",
         "name": "each sample", "showlegend": False,
         "marker": {"symbol": "line-ns-open", "size": 10, "color": POSTERIOR_COLOUR},
         "hovertemplate": "%{x:.3f}<extra>sample</extra>"},
    ]
    for name, x, colour, dash in (("f(E[z]): mean attention", mf, MEAN_FIELD_COLOUR, "dash"),
                                  ("E[f(z)]: average over samples", mc, MC_COLOUR, "solid")):
        data.append({"type": "scatter", "x": [x, x], "y": [0.0, top], "mode": "lines", "name": name,
                     "line": {"color": colour, "dash": dash, "width": 3},
                     "hovertemplate": f"{x:.3f}<extra>{name}</extra>"})
    chance = {"type": "line", "xref": "x", "yref": "y domain", "x0": 0.5, "x1": 0.5, "y0": 0, "y1": 1,
              "line": {"color": "#bbbbbb", "width": 1, "dash": "dot"}}
    return _figure(data, _margin(_layout(
        f"P(positive) across {result.n_samples} attention samples", 340, bargap=0.05, shapes=[chance],
        xaxis=_axis(title={"text": "P(positive)"}, range=[-0.02, 1.02]),
        yaxis=_axis(title={"text": "number of samples"}, range=[-0.08 * top, top]),
    ), l=60, b=50))


def entropy_figure(result: ExplainResult) -> go.Figure:
    """Total predictive entropy as one bar: expected entropy (aleatoric) + mutual information."""
    aleatoric = float(np.nan_to_num(result.expected_entropy))
    epistemic = float(np.nan_to_num(result.mutual_information))
    data = [
        {"type": "bar", "y": ["uncertainty"], "x": [max(value, 0.0)], "name": name, "orientation": "h",
         "marker": {"color": colour}, "text": [f"{value:.3f}"], "textposition": "inside",
         "hovertemplate": f"{name}: {value:.4f} nats<extra></extra>"}
        for name, value, colour in (("aleatoric: expected entropy", aleatoric, "#8c9eff"),
                                    ("epistemic: mutual information", epistemic, "#ff8a65"))
    ]
    total = aleatoric + epistemic
    return _figure(data, _margin(_layout(
        f"Total predictive entropy {total:.3f} nats (at most ln 2 = {LN2:.3f})", 190, barmode="stack",
        yaxis=_axis(visible=False), xaxis=_axis(range=[0, max(LN2, total) * 1.02]),
    ), b=30))


# ---- panel 4: where the uncertainty lives ------------------------------------------------------
def _stochastic_range(values: np.ndarray) -> tuple[float, float]:
    """[min, max] of the stochastic layers' values, widened when they are all equal."""
    lo, hi = float(values.min(initial=np.inf)), float(values.max(initial=-np.inf))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0, 1e-6
    if hi <= lo:
        hi = lo + 1e-6 * max(1.0, abs(lo))
    return lo, hi


def layer_head_figure(result: ExplainResult, which: str = "spread",
                      selected: tuple[int, int] | None = None) -> go.Figure:
    """Layers x heads heatmap of attention spread or of KL(q || prior); deterministic layers greyed.

    The colour runs over [min, max] of the stochastic layers alone: KL(Weibull || Gamma) carries a
    large part shared by every head (~1000 nats), which saturates any scale starting at 0. Hover
    shows the value itself.
    """
    if which == "spread":
        values, title, unit = _np(result.spread), "attention spread (mean std of sampled weights)", "spread"
    elif which == "kl":
        values, title, unit = _np(result.kl), "KL(q ‖ prior), summed over queries and keys", "KL (nats)"
    else:
        raise ValueError(f"which must be 'spread' or 'kl', not {which!r}")
    L, H = values.shape
    heads = [f"head {h}" for h in range(H)]
    row = [f"layer {layer}" if is_stochastic(result, layer) else f"layer {layer} (deterministic)"
           for layer in range(L)]
    stochastic = [layer for layer in range(L) if is_stochastic(result, layer)]
    deterministic = [layer for layer in range(L) if not is_stochastic(result, layer)]
    data = []
    if stochastic:
        v = values[stochastic]                                                  # (Ls, H)
        lo, hi = _stochastic_range(v)
        ticks = np.linspace(lo, hi, 5)
        data.append({
            "type": "heatmap", "z": v, "x": heads, "y": [row[layer] for layer in stochastic], "name": which,
            "zmin": lo, "zmax": hi, "colorscale": VALUE_SCALE,
            "colorbar": {"title": {"text": unit}, "tickvals": ticks, "ticktext": [f"{t:.4g}" for t in ticks]},
            "hovertemplate": "%{y}, %{x}<br>%{z:.4g}<extra></extra>",
        })
    if deterministic:
        data.append({
            "type": "heatmap", "z": np.zeros((len(deterministic), H)), "x": heads,
            "y": [row[layer] for layer in deterministic], "name": "deterministic",
            "colorscale": [[0, DETERMINISTIC_COLOUR], [1, DETERMINISTIC_COLOUR]], "showscale": False,
            "hovertemplate": "%{y}: ordinary softmax attention, no randomness<extra></extra>",
        })
    if selected is not None and 0 <= selected[0] < L and 0 <= selected[1] < H:
        layer, head = selected
        data.append({"type": "scatter", "x": [heads[head]], "y": [row[layer]], "mode": "markers",
                     "name": "selected", "showlegend": False, "hovertemplate": "selected<extra></extra>",
                     "marker": {"symbol": "square-open", "size": 22, "color": "#d62728", "line": {"width": 3}}})
    # Grey rows labelled "(deterministic)" say it once per row; a word in every grey cell cost a
    # text measurement per cell on every slider move.
    return _figure(data, _margin(_layout(
        title, max(240, 34 * L + 110), legend=False,
        xaxis=_axis(type="category", categoryorder="array", categoryarray=heads, tickangle=-45),
        yaxis=_axis(type="category", categoryorder="array", categoryarray=row, autorange="reversed"),
    ), l=_label_px(row) + 4, b=50))


# ---- captions -----------------------------------------------------------------------------------
def signed(x: float, digits: int = 3) -> str:
    """x with its sign, never "-0.000": a gap that rounds to zero reads "+0.000"."""
    return f"{round(x, digits) or 0.0:+.{digits}f}"


def _tok(result: ExplainResult, i: int) -> str:
    return "“" + md_escape(display_token(result.tokens[i])) + "”"


def prior_posterior_caption(result: ExplainResult, layer: int, head: int, query: int) -> str:
    T = len(result.tokens)
    query = _clip(query, T)
    if not is_stochastic(result, layer):
        return (f"Layer {layer} is **deterministic**: ordinary softmax attention, so prior and "
                "posterior coincide and every sample is the same. Pick a stochastic layer "
                f"({', '.join(map(str, result.stochastic_layers)) or 'none in this model'}) to see "
                "uncertainty.")
    post = _np(result.mean_weights[layer, head, query])
    prior = _np(result.prior_weights[layer, head, query])
    draws = _np(result.sample_weights[:, layer, head, query])
    top = int(post.argmax())
    lo, hi = np.quantile(draws[:, top], [0.05, 0.95])
    return (f"Grey bars: what the **prior** expects from the keys alone; blue bars: the **posterior** "
            f"after the query {_tok(result, query)} looks at them. Whiskers span 5–95% of sampled "
            f"weights. Here {_tok(result, query)} attends most to {_tok(result, top)}: "
            f"{post[top]:.2f} on average (prior {prior[top]:.2f}), between {lo:.2f} and {hi:.2f} "
            "in 90% of samples. Wide whiskers mean the model is unsure where to look.")


def key_density_caption(result: ExplainResult, layer: int, head: int, query: int, key: int) -> str:
    T = len(result.tokens)
    query, key = _clip(query, T), _clip(key, T)
    if not is_stochastic(result, layer) or not result.posterior_params:
        return "No density to draw for this choice; the bars above show the weights."
    hyper = ", ".join(f"{k} = {v:.3g}" for k, v in result.hyper.items()) or "no hyperparameters"
    return (f"The dashed grey curve is the prior for {_tok(result, query)} → {_tok(result, key)}; "
            f"the blue curve is the posterior q the model actually samples from ({hyper}). The axis is "
            "log10, so one step is a factor of 10; each curve is scaled to its own peak so that both "
            "stay visible (hover for the density itself). A narrow blue curve means a confident, nearly "
            "fixed weight; moving the sliders reshapes both curves.")


def sampled_maps_caption(result: ExplainResult, layer: int, head: int) -> str:
    S = result.sample_weights.shape[0]
    if not is_stochastic(result, layer) or S < 2:
        return (f"Layer {layer} head {head} gives the same map every time (deterministic attention), "
                "so the standard-deviation map is blank. Rows are queries, columns are keys.")
    std = _np(result.sample_weights[:, layer, head]).std(0, ddof=1)
    q, k = np.unravel_index(int(std.argmax()), std.shape)
    return (f"Each small map is one random draw of the attention (rows: queries, columns: keys; "
            f"each row sums to 1). The orange map shows where draws disagree: most at "
            f"{_tok(result, q)} → {_tok(result, k)} (std {std[q, k]:.3f}, mean over cells "
            f"{std.mean():.3f}).")


def prediction_caption(result: ExplainResult) -> str:
    i = result.positive_index
    mf, mc = float(result.mean_field_probs[i]), float(result.mc_probs[i])
    p = _np(result.sample_probs[:, i])
    lo, hi = (float(p.min()), float(p.max())) if p.size else (mc, mc)
    verdict = "positive" if mc >= 0.5 else "negative"
    return (f"Each of the {result.n_samples} attention samples gives its own P(positive), from "
            f"{lo:.2f} to {hi:.2f}. Averaging them gives **E[f(z)] = {mc:.3f}** (green, the model's "
            f"answer: {verdict}); predicting once with the mean attention gives **f(E[z]) = {mf:.3f}** "
            f"(red dashed). The gap, {signed(mc - mf)}, is what averaging over attention changes. "
            f"Of the total uncertainty {result.predictive_entropy:.3f} nats (at most ln 2 = {LN2:.3f}), "
            f"{result.expected_entropy:.3f} is aleatoric, the doubt each attention sample keeps on "
            f"its own, and {result.mutual_information:.3f} is epistemic, from the samples "
            f"disagreeing. {uncertainty_verdict(result)}")


def uncertainty_verdict(result: ExplainResult) -> str:
    """One plain sentence on how much uncertainty there is and where it comes from."""
    total, epistemic = result.predictive_entropy, result.mutual_information
    if total < CONFIDENT_NATS:
        return "The model is sure of this sentence."
    if epistemic >= total - epistemic:
        return "Most of the doubt comes from attention: the samples read the sentence differently."
    return "Most of the doubt is shared by every sample: the model finds the sentence itself mixed."


def layer_head_caption(result: ExplainResult) -> str:
    if not result.stochastic_layers:
        return ("Every layer of this model is deterministic (grey): its attention is a single "
                "softmax, so there is no spread and no KL to show.")
    spread, kl = _np(result.spread), _np(result.kl)
    sl = result.stochastic_layers
    s_idx = np.unravel_index(int(spread[sl].argmax()), spread[sl].shape)
    k_idx = np.unravel_index(int(kl[sl].argmax()), kl[sl].shape)
    s_lo, s_hi = _stochastic_range(spread[sl])
    k_lo, k_hi = _stochastic_range(kl[sl])
    return (f"Only layers {', '.join(map(str, sl))} are stochastic; grey rows are ordinary, "
            f"deterministic attention. The most uncertain head is layer {sl[s_idx[0]]} head "
            f"{s_idx[1]} (spread {spread[sl][s_idx]:.3f}); the head that moved furthest from its "
            f"prior is layer {sl[k_idx[0]]} head {k_idx[1]} (KL {kl[sl][k_idx]:.3g} nats). "
            f"Colours are relative: they stretch over the stochastic heads' own range, spread "
            f"{s_lo:.3g} to {s_hi:.3g} and KL {k_lo:.4g} to {k_hi:.4g} nats, so a bright head is high "
            "compared with the others, not necessarily high in itself. The red square marks the head "
            "shown above.")
