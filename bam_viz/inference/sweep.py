"""A sweep: one sentence's prediction and its uncertainty over a hyperparameter's whole range.

For each value v of one hyperparameter (the others fixed), `explain()` with S attention samples at
one seed gives (each defined in `bam_viz.inference.gaps`), for one target class t,
  E[f(z)]      P(t) averaged over the samples, with its Monte Carlo standard error;
  f(E[w])      P(t) with every stochastic layer at the samples' mean weights;
  f(softmax)   P(t) of the deterministic pass;
  I[y; z]      the mutual information of the samples (Depeweg et al. 2018), bias-corrected, with its SE
               (the same for every class).
It shows at a glance where on the slider the uncertainty appears. Every value reuses the sentence's
cached lower layers (bam_viz.inference.explain). The class is one for the whole sweep, so that its
curves are of one probability; by default the class predicted at the trained value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bam_viz.core.grids import nearest_index, with_value
from bam_viz.core.inputs import check_n_samples, check_seed, check_text
from bam_viz.core.task import CLASSES, POSITIVE, resolve_target


@dataclass(frozen=True)
class Sweep:
    name: str                     # the hyperparameter swept
    values: np.ndarray            # (V,) its values, increasing
    p_mc: np.ndarray              # (V,) E[f(z)] for the target class
    p_mc_se: np.ndarray           # (V,) its Monte Carlo standard error, sd over samples / sqrt(S)
    p_mean_attention: np.ndarray  # (V,) f(E[w]) for the target class
    p_softmax: np.ndarray         # (V,) f(softmax) for the target class
    mutual_information: np.ndarray  # (V,) nats, bias-corrected (`ExplainResult.mutual_information`)
    trained: float | None         # the model's trained value of `name`
    scale: str                    # "log" or "linear": how to draw the axis
    n_samples: int
    seed: int
    classes: tuple[str, ...] = CLASSES   # the model's classes
    target: int = POSITIVE        # the index in `classes` of the class the curves are for

    @property
    def target_name(self) -> str:
        return self.classes[self.target]

    def nearest(self, value: float) -> int:
        """Index of the swept value nearest to `value` (in log distance on a log scale)."""
        return nearest_index(self.values.tolist(), value, self.scale == "log")


def sweep_values(model, name: str, per_decade: int = 4, linear_points: int = 16) -> list[float]:
    """A coarse grid over the slider's range, plus the trained value."""
    spec = model.attention_family.spec(name)
    return with_value(spec.grid(per_decade, linear_points), model.trained_hyper.get(name), spec.low, spec.high)


def sweep(model, text: str, name: str, values: list[float] | None = None, n_samples: int = 32, seed: int = 0,
          target: int | str | None = None, **hyper: float) -> Sweep:
    """`model` on `text` at each of `values` of the hyperparameter `name` (default: a coarse grid
    over its slider range), the other hyperparameters at `hyper` or their trained values. Each
    value draws its S samples from a generator seeded with `seed`, exactly as `explain` would.
    `target`: the class of the curves, a name or an index of `model.classes`; None (or "predicted")
    is the class predicted at the swept value nearest the trained one (the middle value where the
    model has no trained value of `name`)."""
    check_text(text)
    n_samples, seed = check_n_samples(n_samples), check_seed(seed)
    if target is not None and target != "predicted":
        resolve_target(model.classes, target)
    if n_samples < 2:
        raise ValueError("a sweep needs at least 2 samples for its standard errors")
    family = model.attention_family
    if name not in family.hyper_names:
        raise ValueError(f"{family.name} attention has no hyperparameter {name!r} to sweep; "
                         f"it has: {', '.join(family.hyper_names) or 'none'}")
    spec = family.spec(name)
    if name in hyper:
        raise ValueError(f"{name} is the swept hyperparameter: give the others only")
    values = sorted(float(v) for v in (values if values is not None else sweep_values(model, name)))
    probs, errors, mi = [], [], []
    for v in values:       # one result alive at a time: each holds S x L x H x T x T weights
        r = model.explain(text, n_samples=n_samples, seed=seed, cache=False, **{**hyper, name: v})
        probs.append(np.stack([p.double().numpy() for p in (r.mc_probs, r.mean_attention_probs, r.softmax_probs)]))
        errors.append(r.class_errors[0])                                          # (C,) SE of E[f(z)]
        mi.append(r.mutual_information)
    probs, errors = np.stack(probs), np.stack(errors)                             # (V, 3, C), (V, C)
    trained = model.trained_hyper.get(name)
    at = len(values) // 2 if trained is None else nearest_index(values, trained, spec.scale == "log")
    t = resolve_target(model.classes, target, probs[at, 0])
    return Sweep(
        name=name, values=np.asarray(values), p_mc=probs[:, 0, t], p_mc_se=errors[:, t],
        p_mean_attention=probs[:, 1, t], p_softmax=probs[:, 2, t], mutual_information=np.array(mi, dtype=float),
        trained=trained, scale=spec.scale, n_samples=n_samples, seed=seed, classes=tuple(model.classes), target=t,
    )
