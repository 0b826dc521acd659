"""The "Why this prediction" pictures: token attributions with their bands, attention attribution
maps, and the attention the model would pay if told the label. Pure functions of the library's
results (`bam_viz.inference.attribution.Attribution`, `bam_viz.inference.posterior.LabelPosterior`), tested without a
browser.

Tokens reach the page only through `html.escape` (the strip) or `tokens.axis_labels` (figures):
Captum's own `visualize_text` inserts tokens unescaped, so a review containing
`<img src=x onerror=...>` would run its script. Class names come from a user's data as freely as
sentences do, and are escaped the same way wherever they appear (plotly reads tags in titles,
legend names and hover text; a hover template also reads `%{...}`, so a name enters one only as
data, never as part of the template).

The colour scale is fixed (`ATTRIBUTION_SCALE` of probability at full colour) rather than fitted to
each sentence, so that a pale token means a small effect in every sentence and under every slider
value; values beyond it are drawn at full colour and their numbers are in the tooltip.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from bam_viz.core.text import display_token
from bam_viz.inference.posterior import NOISE_SES
from bam_viz.plots import kit
from bam_viz.plots.style import POSTERIOR_COLOUR, PRIOR_COLOUR, STD_SCALE, WEIGHT_SCALE
from bam_viz.plots.tokens import axis_labels

ATTRIBUTION_SCALE = 0.5           # |attribution| (a share of P(target)) drawn at full colour
# Diverging, zero-centred, readable by the colour-blind (ColorBrewer RdBu): red lowers P(target),
# blue raises it, white is no effect.
DIVERGING = plotly.colors.get_colorscale("RdBu")
NEGATIVE_RGB, POSITIVE_RGB = (178, 24, 43), (33, 102, 172)
LABEL_COLOURS = {"negative": "#d6604d", "positive": "#4393c3"}
# Up to this many labels the posterior figure draws every label's row: two straddle the prior (their
# p(y | x)-weighted mean is the prior) and read as a pair. With more, a key's bars would crowd each
# other, and the figure draws the prior and the label shown (`LabelPosterior.target`) alone.
EVERY_LABEL_UP_TO = 2


def _rgb(value: float, scale: float) -> tuple[int, int, int]:
    """White at 0, the scale's end colour at |value| >= scale (linear in between)."""
    t = float(np.clip(abs(value) / scale, 0.0, 1.0)) if np.isfinite(value) else 0.0
    end = POSITIVE_RGB if value > 0 else NEGATIVE_RGB
    return tuple(round(255 + (c - 255) * t) for c in end)


def colour(value: float, scale: float = ATTRIBUTION_SCALE) -> str:
    return "#{:02x}{:02x}{:02x}".format(*_rgb(value, scale))


def _ink(value: float, scale: float) -> str:
    """Text colour that stays readable on the chip."""
    return "#ffffff" if np.isfinite(value) and abs(value) / scale > 0.6 else "#111111"


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "\u2212")


STRIP_CSS = """
<style>
.bv-why { display: flex; flex-wrap: wrap; gap: 6px 4px; align-items: flex-start; font-size: 1.05rem;
          line-height: 1.2; margin: 0.25rem 0 0.5rem; }
.bv-tok { display: inline-flex; flex-direction: column; align-items: center; min-width: 60px; }
.bv-chip { padding: 2px 5px; border-radius: 4px; border: 1px solid #d0d0d0; text-align: center;
           white-space: pre; font-family: inherit; }
.bv-band { position: relative; height: 10px; width: 60px; margin-top: 3px; background: #f4f4f4;
           border-radius: 2px; }
.bv-band > div { position: absolute; }
.bv-zero { left: 50%; top: 0; width: 1px; height: 10px; background: #bbbbbb; }
.bv-range { top: 4px; height: 2px; background: #333333; }
.bv-softmax { top: 1px; width: 2px; height: 8px; margin-left: -1px; background: #7b1fa2; }
.bv-dot { top: 2.5px; width: 5px; height: 5px; margin-left: -2.5px; border-radius: 50%; background: #111111; }
.bv-legend { display: flex; align-items: center; gap: 8px; font-size: 0.85rem; color: #444;
             margin: 0.2rem 0 0.6rem; flex-wrap: wrap; }
.bv-ramp { width: 220px; height: 12px; border: 1px solid #ccc; border-radius: 2px;
           background: linear-gradient(to right, rgb(178,24,43), #ffffff, rgb(33,102,172)); }
</style>
"""


def token_strip_html(tokens: list[str], mean: np.ndarray, low: np.ndarray, high: np.ndarray,
                     softmax: np.ndarray, target: str, scale: float = ATTRIBUTION_SCALE) -> str:
    """The sentence as coloured chips: each token's colour is its attribution averaged over the
    attention samples; under it, its 5-95% band over samples (a line), the mean (a dot) and the
    attribution at the deterministic pass f(softmax), every stochastic layer at softmax(psi) (a
    tick; `Attribution.softmax`), on the fixed scale [-scale, +scale] with zero in the middle, in a
    track of the same width under every token. Every token is HTML-escaped; numbers are in the tooltip."""
    values = [np.asarray(a, dtype=np.float64) for a in (mean, low, high, softmax)]
    if any(v.shape != (len(tokens),) for v in values):
        raise ValueError(f"{len(tokens)} tokens but arrays of shapes {[v.shape for v in values]}")
    mean, low, high, softmax = (np.nan_to_num(v, nan=0.0, posinf=scale, neginf=-scale) for v in values)

    def x(v: float) -> float:                     # a position across the token's box, in % (zero at 50)
        return 50.0 + 50.0 * float(np.clip(v / scale, -1.0, 1.0))

    chips = []
    for i, token in enumerate(tokens):
        shown = html.escape(display_token(token), quote=False)
        tip = html.escape(f"{display_token(token)} (token {i}): {_signed(mean[i])} on average over samples, "
                          f"5-95% {_signed(low[i])} to {_signed(high[i])}; {_signed(softmax[i])} at the "
                          f"deterministic pass f(softmax). Effect on P({target}).", quote=True)
        lo, hi = sorted((x(low[i]), x(high[i])))
        # Plain positioned boxes, no SVG, which HTML sanitisers may drop.
        band = (f'<div class="bv-band" aria-hidden="true"><div class="bv-zero"></div>'
                f'<div class="bv-range" style="left:{lo:.1f}%;width:{max(hi - lo, 0.8):.1f}%"></div>'
                f'<div class="bv-softmax" style="left:{x(softmax[i]):.1f}%"></div>'
                f'<div class="bv-dot" style="left:{x(mean[i]):.1f}%"></div></div>')
        chips.append(f'<div class="bv-tok" title="{tip}"><span class="bv-chip" style="background:'
                     f'{colour(mean[i], scale)};color:{_ink(mean[i], scale)}">{shown}</span>{band}</div>')
    return STRIP_CSS + f'<div class="bv-why" role="figure" aria-label="Token attributions">{"".join(chips)}</div>'


def legend_html(target: str, scale: float = ATTRIBUTION_SCALE) -> str:
    t = html.escape(target, quote=False)
    return (f'<div class="bv-legend"><span>lowers P({t})</span><span class="bv-ramp"></span>'
            f'<span>raises P({t})</span><span>· full colour at {_signed(-scale)} and {_signed(scale)}'
            f' · under each token: <b>—</b> 5-95% over attention samples, <b>●</b> their mean, '
            f'<span style="color:#7b1fa2"><b>|</b></span> at the deterministic pass f(softmax)</span></div>')


# ---- figures ------------------------------------------------------------------------------------
def shown_labels(lp) -> list[int]:
    """The labels the posterior figure draws (indices of `lp.labels`): every one up to
    `EVERY_LABEL_UP_TO`, else the label shown, `lp.target`."""
    return list(range(len(lp.labels))) if len(lp.labels) <= EVERY_LABEL_UP_TO else [lp.target]


def label_posterior_figure(lp) -> go.Figure:
    """Where the [CLS] query looks: p(z | x) (the prior, grey) and p(z | x, y) for each label drawn
    (`shown_labels`). An importance estimate's posterior bars carry whiskers of `NOISE_SES`
    standard errors of the shift (`lp.shift_se`): where the grey bar's top lies within them, the
    shift is not told apart from Monte Carlo noise (the test `describe()` makes)."""
    labels = axis_labels(list(lp.tokens))
    data = [{"type": "bar", "name": "p(z | x): not told", "x": labels, "y": kit.finite(lp.prior).tolist(),
             "marker": {"color": PRIOR_COLOUR}}]
    drawn = shown_labels(lp)
    estimated = lp.method == "importance"
    for k in drawn:
        label = lp.labels[k]
        name = html.escape(label, quote=False)
        log_lik = kit.finite(lp.log_lik[k]).tolist()
        bar = {"type": "bar", "name": f"p(z | x, y = {name})", "x": labels, "y": kit.finite(lp.posterior[k]).tolist(),
               "marker": {"color": LABEL_COLOURS.get(label, POSTERIOR_COLOUR)},
               "customdata": [[v, name] for v in log_lik],
               "hovertemplate": "%{x}: %{y:.3f}<br>log p(y | x, z) = %{customdata[0]:.3f}"
                                "<extra>%{customdata[1]}</extra>"}
        if estimated:
            shift, se = kit.finite(lp.posterior[k] - lp.prior), kit.finite(lp.shift_se[k])
            bar["customdata"] = [[v, name, d, e] for v, d, e in zip(log_lik, shift.tolist(), se.tolist(), strict=True)]
            bar["hovertemplate"] = ("%{x}: %{y:.3f}<br>log p(y | x, z) = %{customdata[0]:.3f}<br>shift from not "
                                    "told %{customdata[2]:+.3f}, s.e. %{customdata[3]:.3f}<extra>%{customdata[1]}"
                                    "</extra>")
            bar["error_y"] = {"type": "data", "array": (NOISE_SES * se).tolist(), "thickness": 1, "width": 3}
        data.append(bar)
    told = "" if len(drawn) > 1 else f" y = {html.escape(lp.labels[drawn[0]], quote=False)}"
    title = (f"Attention given the label{told} (exact)" if lp.method == "exact" else
             f"Attention given the label{told} (importance-weighted)" if lp.method == "importance" else
             f"Attention given the label{told} (deterministic: nothing to update)")
    layout = kit.layout(title, 320, barmode="group",
                        xaxis=kit.axis(tickangle=-45, type="category"),
                        yaxis=kit.axis(title={"text": "weight of the key"}, rangemode="tozero"))
    return kit.figure(data, kit.margin(layout, b=kit.label_px(labels) + 10, l=60))


def attention_attribution_figure(tokens: list[str], attention: np.ndarray, attribution: np.ndarray,
                                 band: np.ndarray | None, layer: int, head: int,
                                 target: str | None = None) -> go.Figure:
    """Beside the attention map (query rows, key columns), its attribution (Hao et al. 2021: IG of
    P(target) with respect to the weights, scaled from zero): diverging and zero-centred; and where
    the layer is stochastic, the width of its 5-95% band over samples. `target`, the class
    attributed, is named in the title."""
    labels = axis_labels(list(tokens))
    attention, attribution = kit.finite(attention), np.nan_to_num(np.asarray(attribution, dtype=np.float64))
    reach = float(np.abs(attribution).max()) or 1e-6
    panels = [("attention", attention, WEIGHT_SCALE, 0.0, 1.0),
              ("attribution", attribution, DIVERGING, -reach, reach)]
    if band is not None:
        panels.append(("band width", np.nan_to_num(np.asarray(band, dtype=np.float64)), STD_SCALE, 0.0,
                       float(np.nanmax(band)) or 1e-6))
    n = len(panels)
    data, layout_axes = [], {}
    gap = 0.06
    width = (1.0 - gap * (n - 1)) / n
    for k, (name, z, scale, lo, hi) in enumerate(panels):
        suffix = "" if k == 0 else str(k + 1)
        x0 = k * (width + gap)
        data.append({"type": "heatmap", "z": z.tolist(), "x": labels, "y": labels, "colorscale": scale,
                     "zmin": lo, "zmax": hi, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}",
                     "colorbar": {"len": 0.8, "thickness": 10, "x": x0 + width + 0.005, "xpad": 2},
                     "hovertemplate": f"query %{{y}} → key %{{x}}: %{{z:.4f}}<extra>{name}</extra>"})
        layout_axes[f"xaxis{suffix}"] = kit.axis(domain=[x0, x0 + width - 0.02], type="category", tickangle=-45,
                                                 title={"text": name})
        layout_axes[f"yaxis{suffix}"] = kit.axis(type="category", autorange="reversed",
                                                 showticklabels=k == 0, anchor=f"x{suffix}")
    of = "" if target is None else f" for P({html.escape(target, quote=False)})"
    layout = kit.layout(f"Layer {layer}, head {head}: attention and its attribution{of}", 420, legend=False,
                        **layout_axes)
    px = kit.label_px(labels)
    return kit.figure(data, kit.margin(layout, b=px + 40, l=px + 10))
