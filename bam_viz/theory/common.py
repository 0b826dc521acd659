"""What every panel of the Theory lab shares: its sliders as data, input checks, where a model's
noise lives, and the figures' large type.

A `Control` is one slider of the page, described without Streamlit: its URL name, label, the values
it offers (a grid of `bam_viz.core.grids`) and its default; `views/theory.py` draws it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bam_viz import families
from bam_viz.core.grids import nearest_index, value_grid, with_value
from bam_viz.plots import kit

PER_DECADE = 12              # a lab slider's log grid: coarser than the explorer's, each step visible
FONT_PX = 16                 # figures are read from the back of a classroom
TITLE_PX = 20
NO_NOISE, WEIGHT_SPACE, ATTENTION_SPACE = "none (deterministic)", "weight space", "attention space"


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
        object.__setattr__(self, "options", tuple(with_value(self.options, self.default, -math.inf, math.inf)))

    def snap(self, value: float) -> float:
        """The option nearest to `value` (log distance when every option is positive)."""
        return self.options[nearest_index(self.options, value, log=True)]


def log_grid(lo: float, hi: float) -> list[float]:
    """A lab slider's values from lo to hi, PER_DECADE per factor of ten."""
    return value_grid(lo, hi, "log", per_decade=PER_DECADE)


def step_grid(lo: float, hi: float, step: float) -> list[float]:
    """A lab slider's values from lo to hi in steps of `step`."""
    return value_grid(lo, hi, "linear", linear_points=round((hi - lo) / step) + 1)


def finite(value, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x}")
    return x


def positive(value, name: str) -> float:
    x = finite(value, name)
    if x <= 0:
        raise ValueError(f"{name} must be positive, got {x}")
    return x


def noise_space(config) -> str:
    """Where the randomness of a model config (a zoo recipe, `model.config`) lives, in Cinquin et al.
    2021's terms: on the attention weights, on every weight's path (MC dropout alone), or nowhere."""
    if families.get(config.family).stochastic:
        return ATTENTION_SPACE
    return WEIGHT_SPACE if config.mc_dropout else NO_NOISE


def layout(title: str, height: int = 460, **props) -> dict:
    """The kit's layout in large type, the title on the left, and the legend under the plot, where
    plotly.js grows the margin to fit however many rows a narrow column wraps it into; above, it
    would climb into the title."""
    base = kit.layout(title, height)
    return {**base, "font": {"size": FONT_PX},
            "title": {**base["title"], "font": {"size": TITLE_PX}, "x": 0, "xanchor": "left", "y": 0.97},
            "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
            "legend": {**base["legend"], "y": -0.2, "yanchor": "top"}, **props}


def axis(title: str, **props) -> dict:
    """The kit's axis with a title."""
    return kit.axis(title={"text": title}, **props)
