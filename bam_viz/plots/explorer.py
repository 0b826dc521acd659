"""The explorer's panels as Plotly figures, each a pure function of an `ExplainResult` (the sweep's,
of a `Sweep`): the prior against the posterior, a key's densities, the sampled maps, the prediction,
the predictive entropy, the layers x heads grids, and the sweep over a slider's range.

The page draws these panels itself (`bam_viz.live`); these figures are the same panels for
notebooks, in the colours and ranges of `bam_viz.plots.style`. Token text reaches a figure only
through `axis_labels` (plotly renders a subset of HTML in labels).
"""

from __future__ import annotations

import html
import math
import textwrap
import warnings

import numpy as np
import plotly.graph_objects as go

from bam_viz.core.labels import LABELS, entropy_bound_label, probability
from bam_viz.core.metrics import interval_multiplier
from bam_viz.core.task import entropy_bound
from bam_viz.inference.result import ExplainResult
from bam_viz.plots import kit
from bam_viz.plots.classes import class_label
from bam_viz.plots.style import (
    ALEATORIC_COLOUR,
    AXIS_TITLE_CHARS,
    DETERMINISTIC_COLOUR,
    KL_DECADES,
    MARKER_COLOUR,
    MAX_TICK_TOKENS,
    MC_BAND_FILL,
    MC_COLOUR,
    MEAN_ATTENTION_COLOUR,
    MESSAGE_CHARS,
    MI_COLOUR,
    PI_COLOUR,
    POSTERIOR_COLOUR,
    POSTERIOR_FILL,
    PREDICTION_MC,
    PRIOR_COLOUR,
    PRIOR_FILL,
    SELECTED_COLOUR,
    SOFTMAX_COLOUR,
    STD_RANGE,
    STD_SCALE,
    THRESHOLD_COLOUR,
    VALUE_SCALE,
    WEIGHT_RANGE,
    WEIGHT_SCALE,
    ZERO_WIDTH,
)
from bam_viz.plots.tokens import axis_labels, clip, shown_indices, window_text
from bam_viz.plots.wording import Facts, count, entropy_mi_note, entropy_parts, is_stochastic, mi_estimator

__all__ = ["entropy_figure", "key_density_figure", "layer_head_figure", "prediction_figure",
           "prior_posterior_figure", "sampled_maps_figure", "sweep_figure"]


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
    query = clip(query, T)
    idx = shown_indices(T, shown, query)
    keys = axis_labels(result.tokens)
    x = [keys[j] for j in idx]
    prior_draws = kit.finite(result.prior_draws(layer, head)[:, query])[:, idx]     # (S, K)
    post_draws = kit.finite(result.sample_weights[:, layer, head, query])[:, idx]   # (S, K)
    prior_mean = kit.finite(result.prior_mean_weights(layer, head)[query])[idx]     # (K,) MC mean of the draws
    post_mean = kit.finite(result.posterior_mean_weights[layer, head, query])[idx]  # (K,) E[w]
    pi = kit.finite(result.prior_weights[layer, head, query])[idx]                  # (K,)
    soft = kit.finite(result.softmax_weights[layer, head, query])[idx]              # (K,) softmax(psi)
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
    layout = kit.layout(
        f"Query {keys[query]}: attention to each key<br>layer {layer}, head {head}", 420, barmode="group",
        scattermode="group", bargap=0.2, scattergap=0.2,
        yaxis=kit.axis(title={"text": "attention weight"}, rangemode="tozero"),
        xaxis=kit.axis(type="category", tickangle=-45, showticklabels=show),
    )
    if window := window_text(T, idx, "keys"):
        layout["title"]["text"] += f" · {window}"
    # x labels turned 45 degrees: about 0.71 of their length below the axis; t: two lines of title
    # over a legend of up to four rows in a narrow column.
    b = int(0.71 * kit.label_px(x)) + 12 if show else 20
    return kit.figure(bars + marks, kit.margin(layout, l=70, t=140, b=b))


def key_density_figure(result: ExplainResult, layer: int, head: int, query: int, key: int) -> go.Figure:
    """Densities of log10 S_ij under q and under the prior p for one query-key pair.

    Each curve is scaled to its own peak: on the log axis the posterior can still be a hundred
    times taller than a prior spread over many decades, which would then read as a flat line.
    Hover shows the density itself.
    """
    T = len(result.tokens)
    query, key = clip(query, T), clip(key, T)
    if (reason := Facts.of(result).no_density(layer)) is not None:
        return kit.message_figure(reason)
    try:
        # Extreme parameters (tiny Dirichlet concentrations, k at the slider's ends) can overflow
        # SciPy's pdf; the plot then says so rather than taking the page down.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            densities = result.key_densities(layer, head, query, key)
    except (ArithmeticError, ValueError) as err:
        return kit.message_figure(f"The density cannot be drawn for these values ({err}).")
    if densities is None:
        return kit.message_figure("This layer's attention has no continuous density: its samples are shown "
                                  "in the bars and maps instead.")
    labels = axis_labels(result.tokens)
    label = html.escape(str(densities["label"]), quote=False)
    x = kit.finite(densities["x"])
    data = []
    for name, which, colour, fill, dash in (
        ("prior", "prior", PRIOR_COLOUR, PRIOR_FILL, "dash"),
        ("posterior q", "posterior", POSTERIOR_COLOUR, POSTERIOR_FILL, "solid"),
    ):
        density = np.maximum(kit.finite(densities[which]), 0.0)                 # (n_points,)
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
    return kit.figure(data, kit.margin(kit.layout(
        f"{labels[query]} → {labels[key]}<br>prior and posterior density", 380,
        xaxis=kit.axis(title={"text": "<br>".join(axis_lines)}),
        yaxis=kit.axis(title={"text": "density, each scaled to its peak"}, range=[0.0, 1.08]),
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
    idx = shown_indices(len(result.tokens), shown)
    sw = kit.finite(result.sample_weights[:, layer, head][:, idx][:, :, idx])     # (S, T, T)
    S, T = sw.shape[0], sw.shape[-1]                                            # T: the tokens shown
    n_show = max(0, min(n_show, S))
    mean = kit.finite(result.posterior_mean_weights[layer, head][idx][:, idx])    # (T, T) E[w]
    soft = kit.finite(result.softmax_weights[layer, head][idx][:, idx])           # (T, T) softmax(psi)
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
    label_px = kit.label_px(labels, font_px=10) if show else 8
    ticks = {"showticklabels": show, "tickfont": {"size": 9}, "showgrid": False, "zeroline": False,
             "type": "category", "categoryorder": "array", "ticks": ""}
    layout = kit.layout(f"Layer {layer}, head {head}: attention maps (rows: queries, columns: keys)",
                        300 * rows + 80 + label_px, legend=False)
    layout["margin"] = {"l": label_px + 10, "r": 90, "t": layout["margin"]["t"] + 10,
                        "b": label_px + 10}
    if window := window_text(len(result.tokens), idx):
        layout["title"]["text"] += f" · {window}"
    return kit.figure(data, dict(
        layout, annotations=titles,
        # Every token labelled (plotly would thin crowded category labels); gaps unlabelled.
        xaxis=kit.axis(**ticks, categoryarray=xcats, tickangle=-90, tickmode="array",
                       tickvals=[c for c in xcats if c.strip()]),
        yaxis=kit.axis(**ticks, categoryarray=ycats, autorange="reversed", tickmode="array",
                       tickvals=[c for c in ycats if c.strip()]),
        coloraxis={"colorscale": WEIGHT_SCALE, "cmin": 0.0, "cmax": wmax,
                   "colorbar": {"title": {"text": wtitle}, "x": 1.0, "len": 0.45, "y": 0.77}},
        coloraxis2={"colorscale": STD_SCALE, "cmin": 0.0, "cmax": smax,
                    "colorbar": {"title": {"text": stitle}, "x": 1.0, "len": 0.45, "y": 0.23}},
    ))


# ---- panel 3: the prediction --------------------------------------------------------------------
def prediction_figure(result: ExplainResult, bins: int = 20) -> go.Figure:
    """Histogram of the target class's probability over attention samples, with E[f(z)] (their
    average, the model's answer), f(E[w]) (one pass at the samples' mean weights: Deng et al.'s
    f(E[z])) and f(softmax) (the deterministic pass) marked, each in its own colour and dash
    (`bam_viz.inference.gaps`), and chance, 1/K, dotted. `bam_viz.plots.classes.class_figure` shows
    every class."""
    i = result.target
    p_name = probability(class_label(result.target_name))
    p = np.clip(kit.finite(result.sample_probs[:, i]), 0.0, 1.0)                # (S,)
    counts, edges = np.histogram(p, bins=bins, range=(0.0, 1.0))
    centres = (edges[:-1] + edges[1:]) / 2
    top = max(int(counts.max(initial=0)), 1) * 1.15
    mc = float(kit.finite(result.mc_probs)[i])
    mean_attention = float(kit.finite(result.mean_attention_probs)[i])
    softmax = float(kit.finite(result.softmax_probs)[i])
    data = [
        {"type": "bar", "x": centres, "y": counts, "width": float(edges[1] - edges[0]),
         "name": "attention samples", "marker": {"color": POSTERIOR_COLOUR}, "opacity": 0.6,
         "hovertemplate": f"{p_name} ≈ %{{x:.2f}}<br>%{{y}} samples<extra></extra>"},
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
    chance = 1 / len(result.classes)
    chance = {"type": "line", "xref": "x", "yref": "y domain", "x0": chance, "x1": chance, "y0": 0, "y1": 1,
              "line": {"color": THRESHOLD_COLOUR, "width": 1, "dash": "dot"}}
    # t: room for the legend's four rows in a narrow column, under the title.
    return kit.figure(data, kit.margin(kit.layout(
        f"{p_name} across {Facts.of(result).samples()}", 380, bargap=0.05, shapes=[chance],
        xaxis=kit.axis(title={"text": p_name}, range=[-0.02, 1.02]),
        yaxis=kit.axis(title={"text": "number of samples"}, range=[-0.08 * top, top]),
    ), l=60, b=50, t=120))


def entropy_figure(result: ExplainResult) -> go.Figure:
    """The predictive entropy H[E p] as one bar, on an axis to its bound ln K: the expected entropy
    (aleatoric) stacked with the plug-in mutual information (epistemic), which add up to H[E p]
    (`entropy_parts`); the headline's bias-corrected estimate is written under the bar, by name."""
    parts = entropy_parts(result)
    bound = entropy_bound(len(result.classes))
    data = [
        {"type": "bar", "y": ["uncertainty"], "x": [value], "name": name, "orientation": "h",
         "marker": {"color": colour}, "text": [f"{value:.3f}"], "textposition": "inside",
         "hovertemplate": f"{name}: {value:.4f} nats<extra></extra>"}
        for name, value, colour in ((LABELS["aleatoric"], parts.aleatoric, ALEATORIC_COLOUR),
                                    (LABELS["epistemic"], parts.epistemic, MI_COLOUR))
    ]
    # plotly never wraps an annotation: the note's lines are broken here, and the bottom margin holds them.
    note = textwrap.wrap(entropy_mi_note(result) or "", MESSAGE_CHARS)
    under = {"annotations": [{
        "text": "<br>".join(html.escape(line, quote=False) for line in note), "showarrow": False, "align": "left",
        "x": 0, "xanchor": "left", "xref": "paper", "y": 0, "yanchor": "top", "yref": "paper", "yshift": -28,
        "font": {"size": 11}}]} if note else {}
    # Two title lines and a legend of two rows in a narrow column: a taller top margin.
    return kit.figure(data, kit.margin(kit.layout(
        f"{LABELS['entropy']} {parts.total:.3f} nats<br>(at most {entropy_bound_label(len(result.classes))})",
        220 + 15 * len(note), barmode="stack", yaxis=kit.axis(visible=False),
        xaxis=kit.axis(range=[0, max(bound, parts.total) * 1.02]), **under,
    ), t=110, b=30 + 15 * len(note)))


# ---- panel 4: where the uncertainty lives ------------------------------------------------------
def layer_head_figure(result: ExplainResult, which: str = "spread",
                      selected: tuple[int, int] | None = None, relative: bool = False) -> go.Figure:
    """Layers x heads heatmap of attention spread or of KL(q || prior); deterministic layers greyed.

    Colours are absolute: spread over `STD_RANGE`; KL by log10(1 + KL) over 0 to 10^KL_DECADES
    nats, since KL(Weibull || Gamma) carries a large part shared by every head and
    grows by orders of magnitude towards the sliders' ends. `relative` stretches the colour over [min, max] of the
    stochastic layers instead. Hover shows the value itself. KL is greyed too where the model has
    no learned prior (it is not computed there).

    Rows and columns sit on numeric axes labelled by tick text, one heatmap per run of consecutive
    layers: on a category axis plotly.js places a one-row heatmap by its raw label rather than by
    its category, away from its tick label and the selection square (a lone stochastic layer).
    """
    facts = Facts.of(result)
    if which == "spread":
        values, title = kit.finite(result.spread), "Attention spread<br>std of sampled weights, averaged over cells"
        unit = "spread"
    elif which == "kl":
        values, title, unit = kit.finite(result.kl), "KL(q ‖ prior)<br>summed over queries and keys", "KL, nats"
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
            lo, hi = kit.relative_range(values[measured])
            bar = {"title": {"text": f"{unit}<br>relative"}, **kit.ticks(lo, hi)}
        elif which == "spread":
            lo, hi = STD_RANGE
            bar = {"title": {"text": "spread<br>0 to 0.5"}, **kit.ticks(lo, hi, 6)}
        else:
            colour = np.log10(1.0 + np.maximum(values, 0.0))
            nats = [0.0, *(10.0**d for d in range(1, KL_DECADES + 1))]
            tickvals = [math.log10(1.0 + x) for x in nats]
            lo, hi = 0.0, tickvals[-1]
            text = [f"{x:g}" if x < 1e4 else f"10{kit.superscript(round(math.log10(x)))}" for x in nats]
            bar = {"title": {"text": f"KL, nats<br>log scale<br>0 to {text[-1]}"},
                   "tickvals": tickvals, "ticktext": [*text[:-1], "≥" + text[-1]]}
        hover = "layer %{y}, head %{x}<br>%{customdata:.4g}" + (" nats" if which == "kl" else "")
        for i, run in enumerate(kit.runs(measured)):
            data.append({
                "type": "heatmap", "z": colour[run], "customdata": values[run], "x": list(range(H)), "y": run,
                "name": which, "zmin": lo, "zmax": hi, "colorscale": VALUE_SCALE, "showscale": i == 0,
                "colorbar": bar, "hovertemplate": hover + "<extra></extra>",
            })
    for layers, name, hover in ((unmeasured, "no prior", "layer %{y}: no learned prior, so no KL"),
                                ([i for i in range(L) if i not in stochastic], "deterministic",
                                 "layer %{y}: ordinary softmax attention, no randomness")):
        for run in kit.runs(layers):
            data.append({
                "type": "heatmap", "z": np.zeros((len(run), H)), "x": list(range(H)), "y": run, "name": name,
                "colorscale": [[0, DETERMINISTIC_COLOUR], [1, DETERMINISTIC_COLOUR]], "showscale": False,
                "hovertemplate": hover + "<extra></extra>",
            })
    if selected is not None and 0 <= selected[0] < L and 0 <= selected[1] < H:
        layer, head = selected
        data.append({"type": "scatter", "x": [head], "y": [layer], "mode": "markers",
                     "name": "selected", "showlegend": False, "hovertemplate": "selected<extra></extra>",
                     "marker": {"symbol": "square-open", "size": 22, "color": SELECTED_COLOUR, "line": {"width": 3}}})
    # Grey rows labelled "(deterministic)" say it once per row; a word in every grey cell cost a
    # text measurement per cell on every slider move.
    grid = {"tickmode": "array", "showgrid": False, "zeroline": False}
    return kit.figure(data, kit.margin(kit.layout(
        title, max(260, 34 * L + 130), legend=False,
        xaxis=kit.axis(**grid, tickvals=head_ticks, ticktext=[str(h) for h in head_ticks], range=[-0.5, H - 0.5],
                       tickangle=0, title={"text": "head", "standoff": 4}),
        yaxis=kit.axis(**grid, tickvals=list(range(L)), ticktext=row, range=[L - 0.5, -0.5]),
    ), l=kit.label_px(row) + 4, b=50, t=70))                   # t: a title of two lines


# ---- the sweep: prediction and doubt over a slider's whole range --------------------------------
def sweep_figure(sweep, current: float | None = None) -> go.Figure:  # sweep: a bam_viz.inference.sweep.Sweep
    """P(target) by E[f(z)] (with its 95% interval as a band, t SE at S - 1 df), by f(E[w]) (at
    the samples' mean attention) and by f(softmax) (the deterministic pass), and the mutual
    information (bias-corrected by the jackknife from 3 samples), against the swept hyperparameter;
    the current and the trained values marked. Two rows sharing the x axis (log for a log slider)."""
    x = kit.finite(sweep.values)
    mc, se = kit.finite(sweep.p_mc), kit.finite(sweep.p_mc_se)
    mean_attention, softmax = kit.finite(sweep.p_mean_attention), kit.finite(sweep.p_softmax)
    mi_value = kit.finite(sweep.mutual_information)
    mi = np.clip(mi_value, 0.0, None)           # drawn from 0; the hover says the estimate itself
    half = interval_multiplier(sweep.n_samples) * se
    lo, hi = np.clip(mc - half, 0.0, 1.0), np.clip(mc + half, 0.0, 1.0)
    name = html.escape(sweep.name)
    p_name = probability(class_label(sweep.target_name))
    mi_name = f"mutual information (nats), {mi_estimator(sweep.n_samples)}"
    data = [
        {"type": "scatter", "x": np.concatenate([x, x[::-1]]), "y": np.concatenate([hi, lo[::-1]]),
         "fill": "toself", "fillcolor": MC_BAND_FILL, "line": {"width": 0}, "hoverinfo": "skip",
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
         "line": {"color": MI_COLOUR, "width": 2}, "marker": {"size": 5}, "xaxis": "x", "yaxis": "y2",
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
                       "line": {"color": MARKER_COLOUR, "width": 1.5, "dash": dash}})
        # plotly places annotations on a log axis by log10 of the value (shapes by the value itself)
        notes.append({"x": math.log10(value) if sweep.scale == "log" else value, "xref": "x",
                      "y": 0.97, "yref": "paper", "yanchor": "bottom", "showarrow": False,
                      "xanchor": "left" if label == "now" else "right",
                      "text": f" {label} {value:.3g} ", "font": {"size": 12, "color": MARKER_COLOUR}})
    xaxis = kit.axis(type="log" if sweep.scale == "log" else "linear", title={"text": name}, anchor="y2")
    top_mi = max(float(mi.max(initial=0.0)) * 1.15, 0.01)
    return kit.figure(data, kit.margin(kit.layout(
        f"{p_name} and the mutual information at every {name} ({sweep.n_samples} samples, seed {sweep.seed})",
        440, shapes=shapes, annotations=notes,
        xaxis=xaxis,
        yaxis=kit.axis(title={"text": p_name}, range=[-0.02, 1.02], domain=[0.42, 0.92]),
        yaxis2=kit.axis(title={"text": "MI (nats)"}, range=[0, top_mi], domain=[0.0, 0.3]),
    ), l=70, b=50, t=135))
