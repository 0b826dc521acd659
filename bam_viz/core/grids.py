"""Value grids and the nearest value on them: every slider, sweep and theory control uses these.

A log grid has `per_decade` values per factor of ten, a linear one `linear_points` evenly spaced
values; both are rounded to 3 significant digits and keep their two ends exactly. "Nearest" is in
log distance on a log grid, so that 0.1 and 10 are equally far from 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def value_grid(lo: float, hi: float, scale: str = "log", per_decade: int = 16, linear_points: int = 100) -> list[float]:
    """Values from `lo` to `hi`, both included, rounded to 3 significant digits, sorted and distinct."""
    if scale == "log":
        n = max(2, round(per_decade * math.log10(hi / lo)) + 1)
        values = [10 ** (math.log10(lo) + i * (math.log10(hi) - math.log10(lo)) / (n - 1)) for i in range(n)]
    elif scale == "linear":
        n = max(2, linear_points)
        values = [lo + i * (hi - lo) / (n - 1) for i in range(n)]
    else:
        raise ValueError(f"scale must be 'log' or 'linear', not {scale!r}")
    values = [float(f"{v:.3g}") for v in values]
    values[0], values[-1] = lo, hi
    return sorted(set(values))


def with_value(values: Sequence[float], value: float | None, lo: float, hi: float) -> list[float]:
    """`values` plus `value` (a model's trained setting) when it lies in [lo, hi]; sorted, distinct."""
    out = {float(v) for v in values}
    if value is not None and lo <= value <= hi:
        out.add(float(value))
    return sorted(out)


def nearest_index(values: Sequence[float], value: float, log: bool) -> int:
    """Index of the value nearest to `value`: in log distance when `log` and every number is positive,
    else in plain distance. Ties go to the first."""
    if log and value > 0 and all(v > 0 for v in values):
        target = math.log(value)
        return min(range(len(values)), key=lambda i: abs(math.log(values[i]) - target))
    return min(range(len(values)), key=lambda i: abs(values[i] - value))
