"""K-class models for the Why section's tests (`k_class_models.k_class_model`, their one home):
classes "a", "b", ... or "c00", "c01", ..., head weights N(0, scale^2) and zero biases."""

from __future__ import annotations

from k_class_models import k_class_model

from bam_viz.model import BamClassifier


def class_names(K: int) -> tuple[str, ...]:
    """("a", "b", "c") for K = 3; "c00", "c01", ... for more than ten."""
    return tuple("abcdefghij"[:K]) if K <= 10 else tuple(f"c{i:02d}" for i in range(K))


def random_head_model(classes: int | tuple[str, ...], family: str = "weibull", seed: int = 0,
                      scale: float = 0.1, name: str | None = None) -> BamClassifier:
    """A K-class model (`classes` a count or the names) in eval mode, with head weights
    N(0, scale^2) and zero biases: logits a few units apart on MiniLM's [CLS] state."""
    names = class_names(classes) if isinstance(classes, int) else tuple(classes)
    return k_class_model(names, name or f"k{len(names)}-{family}", family=family, seed=seed, weight_scale=scale)
