"""The figure kit: one look for the library's Plotly figures, and the pieces every builder uses.

A figure is built from plain dicts (`figure`, `layout`, `axis`) and never validated by plotly on
the way: validation is most of a builder's time (docs/performance.md, "Plotly figures"), and the
tests re-validate every builder's output instead, so properties are spelled out in full here:
`{"title": {"text": ...}}`, `{"marker": {"color": ...}}`. Axes do not grow their margins to fit their
labels; a builder sets margins that fit them (`label_px`, `margin`).
"""

from __future__ import annotations

import html
import math
import textwrap

import numpy as np
import plotly.graph_objects as go

from bam_viz.inference.rows import finite  # noqa: F401  (read as kit.finite)
from bam_viz.plots.style import MESSAGE_CHARS

__all__ = ["all_equal", "axis", "figure", "finite", "label_px", "layout", "margin", "message_figure",
           "relative_range", "runs", "superscript", "ticks"]




def figure(data: list[dict], layout: dict) -> go.Figure:
    """A Figure from plain dicts, skipping plotly's per-property validation (see the module's docstring)."""
    return go.Figure({"data": data, "layout": layout}, _validate=False)


def axis(**props) -> dict:
    """An axis with the shared look: a light grid, and no automargin. Growing margins to fit the
    labels makes plotly.js measure every label and lay the figure out again on every update; the
    builders set margins that fit their labels instead (`margin`)."""
    return {"automargin": False, "gridcolor": "#eeeeee", "zerolinecolor": "#cccccc", **props}


def label_px(labels: list[str], font_px: float = 12.0) -> int:
    """Width in pixels of the longest label, about 0.55 em per character."""
    return int(0.55 * font_px * max((len(s) for s in labels), default=1)) + 8


def margin(layout: dict, **sides: int) -> dict:
    """`layout` with some of its margins replaced."""
    return {**layout, "margin": {**layout["margin"], **sides}}


def layout(title: str, height: int, legend: bool = True, **props) -> dict:
    """The shared layout: title at the top, legend under it, white background."""
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


def message_figure(message: str, height: int = 380) -> go.Figure:
    """A figure that says `message`, broken into short lines: plotly never wraps an annotation, and a
    long line centred in a narrow column is cut off on both sides."""
    lines = textwrap.wrap(message, MESSAGE_CHARS) or [""]
    most = max(1, (height - 60) // 20)                     # lines of 13 px text that fit the height
    if len(lines) > most:
        lines = [*lines[:most - 1], lines[most - 1][:MESSAGE_CHARS - 1] + "…"]
    return figure([], {
        "height": height, "xaxis": {"visible": False}, "yaxis": {"visible": False},
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "annotations": [{"text": "<br>".join(html.escape(line, quote=False) for line in lines), "showarrow": False,
                         "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper", "font": {"size": 13}}],
    })


def ticks(lo: float, hi: float, n: int = 5) -> dict:
    """Colour-bar ticks from lo to hi, with as many significant digits as it takes to tell them apart."""
    values = np.linspace(lo, hi, n)
    for digits in range(3, 16):
        text = [f"{v:.{digits}g}" for v in values]
        if len(set(text)) == n:
            break
    return {"tickvals": values, "ticktext": text}


def all_equal(values: np.ndarray) -> bool:
    """Equal to float32 precision (~1e-7 relative; 1e-5 leaves room): one value, not a contrast."""
    if values.size == 0:
        return True
    lo, hi = float(values.min()), float(values.max())
    return hi - lo <= 1e-5 * max(abs(lo), abs(hi))


def relative_range(values: np.ndarray) -> tuple[float, float]:
    """[min, max] of `values`, for a relative colour scale. Values all equal (`all_equal`) get a
    range around them, so that all take the middle colour rather than rounding noise being drawn
    as yellow against purple."""
    lo, hi = float(values.min(initial=np.inf)), float(values.max(initial=-np.inf))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0, 1.0
    if all_equal(values):
        mid = (lo + hi) / 2
        half = max(0.05 * abs(mid), 1e-6)
        return mid - half, mid + half
    return lo, hi


def superscript(n: int) -> str:
    """An integer in superscript digits, for powers of ten: 10⁶."""
    return str(n).translate(str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))


def runs(indices: list[int]) -> list[list[int]]:
    """Consecutive runs of indices (layers, tokens): [0, 1, 3] -> [[0, 1], [3]]."""
    out: list[list[int]] = []
    for i in indices:
        if out and i == out[-1][-1] + 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out
