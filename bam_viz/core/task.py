"""The classes a model predicts, and which one a panel shows.

The shipped zoo solves binary sentiment (`CLASSES`, the default of every config); a model trained on
a user's data carries its own class names (`BamClassifier.classes`, from its card). Every (.., K)
array of probabilities in the library, the evaluation and the app is in the order of the model's
classes. A panel that plots one class's probability shows `target`: a class name, an index, or None
for the predicted class (the argmax of the predictive mean E[f(z)]).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CLASSES: tuple[str, ...] = ("negative", "positive")
NEGATIVE, POSITIVE = 0, 1   # column indices of CLASSES, the binary sentiment zoo's order
MAX_CLASSES = 256           # a label column with more distinct values is refused (ids, not classes)


def resolve_target(classes: Sequence[str], target: int | str | None, probs: Sequence[float] | None = None) -> int:
    """The column index of `target` among `classes`: a class name, an index (negative counts from
    the end, as in Python), or None / "predicted" for the argmax of `probs` (ties: the first)."""
    K = len(classes)
    if target is None or (isinstance(target, str) and target == "predicted"):
        if probs is None:
            raise ValueError("the predicted class needs the probabilities")
        values = [float(p) for p in probs]
        if len(values) != K:
            raise ValueError(f"{len(values)} probabilities for {K} classes")
        return max(range(K), key=lambda i: (values[i] if not math.isnan(values[i]) else -math.inf, -i))
    if isinstance(target, bool):
        raise ValueError(f"target must be a class name, an index or None, not {target!r}")
    if isinstance(target, str):
        if target in classes:
            return list(classes).index(target)
        raise ValueError(f"no class {target!r}: the classes are {', '.join(map(repr, classes))}")
    try:
        index = int(target)
    except (TypeError, ValueError):
        raise ValueError(f"target must be a class name, an index or None, not {target!r}") from None
    if index != target or not -K <= index < K:
        raise ValueError(f"target {target!r} is no class index: there are {K} classes (0 to {K - 1})")
    return index % K


def entropy_bound(n_classes: int) -> float:
    """ln K: the largest predictive entropy (nats) over K classes, the top of every entropy axis."""
    return math.log(n_classes)
