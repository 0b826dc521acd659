"""The task every model here solves: binary sentiment, and the order of its classes.

Every (.., 2) array of probabilities in the library, the evaluation and the app uses this order.
"""

from __future__ import annotations

CLASSES: tuple[str, ...] = ("negative", "positive")
NEGATIVE, POSITIVE = 0, 1   # column indices of CLASSES
