"""Numbers as the panels write them: signed values, and a Monte Carlo estimate with its standard error.

One rule for the decimals of a value and its error (`se_digits`): three, and more for an error
under a unit of the third decimal, so that "± 0.000" never hides a nonzero error.
"""

from __future__ import annotations

import math

from bam_viz.inference.result import ExplainResult, MonteCarloErrors

__all__ = ["SE_DIGITS", "SE_MAX_DIGITS", "samples_needed", "se_digits", "signed", "with_se"]

SE_DIGITS = 3          # the decimals of an estimate and its error
SE_MAX_DIGITS = 6      # the most an error under a unit of the third decimal is given


def signed(x: float, digits: int = 3) -> str:
    """x with its sign, never "-0.000": a gap that rounds to zero reads "+0.000"."""
    return f"{round(x, digits) or 0.0:+.{digits}f}"


def se_digits(se: float | None, digits: int = SE_DIGITS) -> int:
    """The decimals of a value and of its standard error `se`: `digits`, or more for an error under
    one unit of the last digit, up to its first significant one (at most SE_MAX_DIGITS)."""
    if se is not None and 0 < se < 10.0**-digits:
        return min(-math.floor(math.log10(se)), SE_MAX_DIGITS)
    return digits


def samples_needed(quantity: str) -> int:
    """How many attention samples the standard error of `quantity` (a field of `result.se`) needs."""
    return MonteCarloErrors.SAMPLES_NEEDED[quantity]


def with_se(result: ExplainResult, quantity: str, value: float, sign: bool = False) -> tuple[str, str]:
    """A Monte Carlo estimate and its error as two strings to the same decimals: ("0.812", "± 0.004")
    (one standard error, `result.se.<quantity>`); the error reads "exact" for a deterministic model
    and "needs ≥ 2 samples" where it is not estimable. Two strings because a metric's column is too
    narrow for both on one line: the value, then the error below it."""
    se = getattr(result.se, quantity)
    digits = se_digits(se)
    number = signed(value, digits) if sign else f"{value:.{digits}f}"
    if not result.stochastic_layers:
        return number, "exact"
    if se is None:
        return number, f"needs ≥ {samples_needed(quantity)} samples"
    return number, f"± {se:.{digits}f}"
