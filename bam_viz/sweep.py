"""A sweep: one sentence's prediction and its uncertainty over a hyperparameter's whole range.

For each value v of one hyperparameter (the others fixed), S attention samples at one seed give
  E[f(z)]   P(positive) averaged over the samples, with its Monte Carlo standard error sd / sqrt(S);
  f(E[z])   P(positive) with every stochastic layer at its mean attention;
  I[y; z]   the mutual information of the samples (Depeweg et al. 2018), the epistemic part.
It shows at a glance where on the slider the uncertainty appears. Every value reuses the sentence's
cached lower layers (bam_viz.explain), so a sweep costs one S-sample pass per value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bam_viz import metrics
from bam_viz.attention import Mode
from bam_viz.explain import lower_states
from bam_viz.inputs import check_n_samples, check_seed, check_text
from bam_viz.task import POSITIVE


@dataclass(frozen=True)
class Sweep:
    name: str                     # the hyperparameter swept
    values: np.ndarray            # (V,) its values, increasing
    p_mc: np.ndarray              # (V,) E[f(z)] for P(positive)
    p_mc_se: np.ndarray           # (V,) its Monte Carlo standard error, sd over samples / sqrt(S)
    p_mean_field: np.ndarray      # (V,) f(E[z]) for P(positive)
    mutual_information: np.ndarray  # (V,) nats
    trained: float | None         # the model's trained value of `name`
    scale: str                    # "log" or "linear": how to draw the axis
    n_samples: int
    seed: int

    def nearest(self, value: float) -> int:
        """Index of the swept value nearest to `value` (in log distance on a log scale)."""
        if self.scale == "log":
            return int(np.argmin(np.abs(np.log(self.values) - np.log(value))))
        return int(np.argmin(np.abs(self.values - value)))


def sweep_values(model, name: str, per_decade: int = 4, linear_points: int = 16) -> list[float]:
    """A coarse grid over the slider's range, plus the trained value."""
    spec = model.attention_family.spec(name)
    values = spec.grid(per_decade, linear_points)
    trained = model.trained_hyper.get(name)
    if trained is not None and spec.low <= trained <= spec.high:
        values.append(float(trained))
    return sorted(set(values))


@torch.inference_mode()
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
    base = model.hyper(**hyper)
    values = sorted(float(v) for v in (values if values is not None else sweep_values(model, name)))
    model.eval()
    lower = lower_states(model, text)
    mask, x = lower.mask, lower.x
    samples, mean_field = [], []
    for v in values:
        h = base.replace(**{name: v})
        g = torch.Generator(device=model.device).manual_seed(seed)
        logits, _, _ = model.upper(x, mask, n_samples=n_samples, generator=g, hyper=h)
        samples.append(logits.softmax(-1).double().cpu().numpy())                      # (S, 2)
        mf_logits, _, _ = model.upper(x, mask, mode=Mode.MEAN, hyper=h)
        mean_field.append(float(mf_logits.softmax(-1)[0, POSITIVE]))
    probs = np.stack(samples)                                                          # (V, S, 2)
    p = probs[:, :, POSITIVE]
    return Sweep(
        name=name, values=np.asarray(values), p_mc=p.mean(1), p_mc_se=p.std(1, ddof=1) / np.sqrt(n_samples),
        p_mean_field=np.asarray(mean_field), mutual_information=metrics.mutual_information(probs),
        trained=model.trained_hyper.get(name), scale=spec.scale, n_samples=n_samples, seed=seed,
    )
