"""The predictive distribution over a model's K classes: which classes a chart draws one by one (the
most probable and the class shown, the others summed in one bar, so that fifty classes stay legible),
and its figure. The page's JavaScript applies the same rule (views/live/classes.js, checked against
`shown_classes` by tests/js/).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bam_viz.core.labels import LABELS
from bam_viz.core.text import display_token
from bam_viz.inference.result import ExplainResult
from bam_viz.plots import kit
from bam_viz.plots.style import CLASS_BARS, CLASS_FILL, MC_COLOUR, REST_COLOUR, SOFTMAX_COLOUR

__all__ = ["class_figure", "class_label", "rest_label", "shown_classes"]


def shown_classes(probs: Sequence[float], target: int, most: int = CLASS_BARS) -> tuple[list[int], list[int]]:
    """The classes drawn one by one, most probable first, and those summed in one bar: every class
    where there are at most `most`; else the `most` - 1 most probable, with `target` in place of the
    last of them where it is not among them, and the rest. Ties go to the lower index; NaN is least."""
    values = [float(p) for p in probs]
    order = sorted(range(len(values)), key=lambda c: (-values[c] if not math.isnan(values[c]) else math.inf, c))
    if len(order) <= most:
        return order, []
    top = order[: most - 1]
    if target not in top:
        top = top[:-1] + [target]
    return top, [c for c in order if c not in top]


def class_label(name: str) -> str:
    """A class name as a figure shows it: invisible characters made visible, HTML escaped."""
    return html.escape(display_token(name), quote=False)


def rest_label(n: int) -> str:
    """The summed bar's name: "the other 41 classes"."""
    return LABELS["class_rest"].format(n=n)


def class_figure(result: ExplainResult, most: int = CLASS_BARS) -> go.Figure:
    """E[f(z)] of every class as horizontal bars, most probable on top, with the 5-95% range of the
    samples' probabilities as whiskers and f(softmax) (the deterministic pass) marked; the class the
    other panels show (`result.target`) in full colour. Past `most` classes the least probable are one
    bar, their E[f(z)] summed (`shown_classes`)."""
    mc = kit.finite(result.mc_probs)                                              # (C,)
    samples = kit.finite(result.sample_probs)                                     # (S, C)
    softmax = kit.finite(result.softmax_probs)                                    # (C,)
    top, rest = shown_classes(mc, result.target, most)
    lo, hi = np.quantile(samples, [0.05, 0.95], axis=0)                           # (C,), (C,)
    names = [class_label(result.classes[c]) for c in top]
    data = [{
        "type": "bar", "orientation": "h", "name": LABELS["classes"], "y": names, "x": mc[top],
        "marker": {"color": [MC_COLOUR if c == result.target else CLASS_FILL for c in top]},
        "error_x": {"type": "data", "symmetric": False, "array": np.maximum(hi[top] - mc[top], 0.0),
                    "arrayminus": np.maximum(mc[top] - lo[top], 0.0), "thickness": 1.5},
        "customdata": np.stack([lo[top], hi[top]], -1),
        "hovertemplate": "%{y}: E[f(z)] %{x:.3f}<br>5–95% of the samples: %{customdata[0]:.3f}–"
                         "%{customdata[1]:.3f}<extra></extra>",
    }, {
        "type": "scatter", "mode": "markers", "name": LABELS["softmax"], "y": names, "x": softmax[top],
        "marker": {"symbol": "diamond", "size": 9, "color": SOFTMAX_COLOUR},
        "hovertemplate": "%{y}: f(softmax) %{x:.3f}<extra></extra>",
    }]
    if rest:
        label = rest_label(len(rest))
        data.append({"type": "bar", "orientation": "h", "name": label, "y": [label], "x": [float(mc[rest].sum())],
                     "marker": {"color": REST_COLOUR}, "showlegend": False,
                     "hovertemplate": f"{label}: E[f(z)] summed %{{x:.3f}}<extra></extra>"})
    rows = len(top) + bool(rest)
    category = [*names, *([rest_label(len(rest))] if rest else [])]
    return kit.figure(data, kit.margin(kit.layout(
        f"Predictive distribution over {len(result.classes)} classes", 110 + 26 * rows, bargap=0.25,
        xaxis=kit.axis(title={"text": LABELS["mc"]}, range=[0, 1.02]),
        yaxis=kit.axis(type="category", categoryorder="array", categoryarray=category, autorange="reversed"),
    ), l=min(kit.label_px(category), 220) + 10, t=90, b=50))
