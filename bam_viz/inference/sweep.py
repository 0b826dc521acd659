"""A sweep: one sentence's prediction and its uncertainty over a hyperparameter's whole range.

For each value v of one hyperparameter (the others fixed), `explain()` with S attention samples at
one seed gives (each defined in `bam_viz.inference.gaps`)
  E[f(z)]      P(positive) averaged over the samples, with its Monte Carlo standard error;
  f(E[w])      P(positive) with every stochastic layer at the samples' mean weights;
  f(softmax)   P(positive) of the deterministic pass;
  I[y; z]      the mutual information of the samples (Depeweg et al. 2018), bias-corrected, with its SE.
It shows at a glance where on the slider the uncertainty appears. Every value reuses the sentence's
cached lower layers (bam_viz.inference.explain).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bam_viz.core.grids import nearest_index, with_value
from bam_viz.core.inputs import check_n_samples, check_seed, check_text


@dataclass(frozen=True)
class Sweep:
    name: str                     # the hyperparameter swept
    values: np.ndarray            # (V,) its values, increasing
    p_mc: np.ndarray              # (V,) E[f(z)] for P(positive)
    p_mc_se: np.ndarray           # (V,) its Monte Carlo standard error, sd over samples / sqrt(S)
    p_mean_attention: np.ndarray  # (V,) f(E[w]) for P(positive)
    p_softmax: np.ndarray         # (V,) f(softmax) for P(positive)
    mutual_information: np.ndarray  # (V,) nats, bias-corrected (`ExplainResult.mutual_information`)
    trained: float | None         # the model's trained value of `name`
    scale: str                    # "log" or "linear": how to draw the axis
    n_samples: int
    seed: int

    def nearest(self, value: float) -> int:
        """Index of the swept value nearest to `value` (in log distance on a log scale)."""
        return nearest_index(self.values.tolist(), value, self.scale == "log")


def sweep_values(model, name: str, per_decade: int = 4, linear_points: int = 16) -> list[float]:
    """A coarse grid over the slider's range, plus the trained value."""
    spec = model.attention_family.spec(name)
    return with_value(spec.grid(per_decade, linear_points), model.trained_hyper.get(name), spec.low, spec.high)


def sweep(model, text: str, name: str, values: list[float] | None = None, n_samples: int = 32, seed: int = 0,
          **hyper: float) -> Sweep:
    """`model` on `text` at each of `values` of the hyperparameter `name` (default: a coarse grid
    over its slider range), the other hyperparameters at `hyper` or their trained values. Each
    value draws its S samples from a generator seeded with `seed`, exactly as `explain` would."""
    check_text(text)
    n_samples, seed = check_n_samples(n_samples), check_seed(seed)
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
    rows = []
    for v in values:       # one result alive at a time: each holds S x L x H x T x T weights
        r = model.explain(text, n_samples=n_samples, seed=seed, cache=False, **{**hyper, name: v})
        pos = r.positive_index
        rows.append((float(r.mc_probs[pos]), r.se.p_positive, float(r.mean_attention_probs[pos]),
                     float(r.softmax_probs[pos]), r.mutual_information))
    p_mc, p_mc_se, p_mean_attention, p_softmax, mi = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    return Sweep(
        name=name, values=np.asarray(values), p_mc=p_mc, p_mc_se=p_mc_se, p_mean_attention=p_mean_attention,
        p_softmax=p_softmax, mutual_information=mi, trained=model.trained_hyper.get(name), scale=spec.scale,
        n_samples=n_samples, seed=seed,
    )
