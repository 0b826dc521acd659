"""The attention families, one class each, in a registry.

The layer, the model, the result and the app read everything about a family from here: its
hyperparameters (range, scale, label, help), its sampling, KL, densities and torch.distributions
objects. Adding a family is one class and one `register` call (docs/design.md, "Adding a family").

    from bam_viz import families
    families.names()                        # ('softmax', 'weibull', 'lognormal', 'dirichlet', 'categorical')
    families.get("weibull").hyper(shape_k=2.0)
"""

from __future__ import annotations

from bam_viz.families.base import AttentionFamily, CellStatistics, Hyper, HyperSpec
from bam_viz.families.categorical import CategoricalFamily
from bam_viz.families.dirichlet import DirichletFamily
from bam_viz.families.lognormal import LognormalFamily
from bam_viz.families.softmax import Softmax
from bam_viz.families.weibull import WeibullFamily

_REGISTRY: dict[str, AttentionFamily] = {}


def register(family: AttentionFamily) -> AttentionFamily:
    """Add a family instance under `family.name`; a name can be registered once."""
    if not isinstance(family, AttentionFamily):
        raise TypeError(f"register an AttentionFamily instance, got {family!r}")
    if family.name in _REGISTRY:
        raise ValueError(f"an attention family called {family.name!r} is registered already")
    names = [s.name for s in family.hyper_specs]
    if len(set(names)) != len(names):
        raise ValueError(f"{family.name}: hyperparameter names repeat: {names}")
    _REGISTRY[family.name] = family
    return family


def unregister(name: str) -> None:
    """Remove a family (for tests that register a toy one)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> AttentionFamily:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown attention family {name!r}; choose from {names()}") from None


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def all_slider_specs() -> tuple[HyperSpec, ...]:
    """Every family's slider hyperparameters, each name once, in registration order."""
    seen: dict[str, HyperSpec] = {}
    for family in _REGISTRY.values():
        for spec in family.slider_specs:
            seen.setdefault(spec.name, spec)
    return tuple(seen.values())


for _family in (Softmax(), WeibullFamily(), LognormalFamily(), DirichletFamily(), CategoricalFamily()):
    register(_family)

__all__ = ["AttentionFamily", "CategoricalFamily", "CellStatistics", "DirichletFamily", "Hyper", "HyperSpec",
           "LognormalFamily", "Softmax", "WeibullFamily", "all_slider_specs", "get", "names", "register", "unregister"]
