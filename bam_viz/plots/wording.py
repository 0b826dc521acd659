"""What a panel may say about a result's model, worded in one place: singular and plural, the
models without a stochastic layer, a density or a prior, how the mutual information was estimated,
and the split of the predictive entropy the panels draw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from bam_viz import families
from bam_viz.core.labels import LABELS
from bam_viz.inference.result import ExplainResult, MonteCarloErrors
from bam_viz.plots.format import with_se

__all__ = ["EntropyParts", "Facts", "count", "entropy_mi_note", "entropy_parts", "headline_mi", "is_stochastic",
           "mi_estimator", "mi_how"]


def count(n: int, noun: str) -> str:
    """"1 sample", "16 samples"."""
    return f"{n} {noun if n == 1 else noun + 's'}"


def is_stochastic(result: ExplainResult, layer: int) -> bool:
    return layer in result.stochastic_layers


@dataclass(frozen=True)
class Facts:
    """What captions and messages may say about a result's model. Family facts come from the
    registry; a softmax-family model with stochastic layers (mc-dropout) is random through dropout,
    and has neither a density nor a prior."""

    stochastic_layers: tuple[int, ...]
    n_layers: int
    n_samples: int
    dropout: bool             # random through dropout kept on at inference, not a family's posterior
    has_density: bool
    # "learned" (a prior network, trained through the KL), "alignment" (a hard alignment samples from
    # its prior p(z|x) itself), "fixed" (a uniform prior, not learned) or "none"
    prior: str
    family_label: str
    family: families.AttentionFamily
    # p of the dropout on the sampled weights (`ExplainResult.attention_dropout`): 0 where every draw
    # is a point of the simplex, each row summing to 1 and every weight in [0, 1]
    attention_dropout: float = 0.0

    @classmethod
    def of(cls, result: ExplainResult) -> Facts:
        family = families.get(result.family)
        layers = tuple(result.stochastic_layers)
        dropout = bool(layers) and not family.stochastic
        return cls(layers, int(result.kl.shape[0]), int(result.n_samples), dropout,
                   family.has_density and bool(layers) and not dropout,
                   "learned" if family.learned_prior else "alignment" if family.hard_alignment
                   else "fixed" if family.stochastic else "none",
                   family.label, family, float(result.attention_dropout) if layers else 0.0)

    @property
    def weight_max(self) -> float:
        """The most a sampled weight can be: 1 on the simplex, 1/(1 - p) where dropout on the weights
        scales a kept one by 1/(1 - p)."""
        return 1 / (1 - self.attention_dropout)

    def samples(self) -> str:
        return count(self.n_samples, "attention sample")

    def layers(self) -> str:
        """The stochastic layers: "layer 5", "layers 3, 4 and 5"."""
        ls = [str(i) for i in self.stochastic_layers]
        return f"layer {ls[0]}" if len(ls) == 1 else f"layers {', '.join(ls[:-1])} and {ls[-1]}"

    def which_stochastic(self) -> str:
        """Which layers are random, and why (for a model with at least one)."""
        how = " through dropout kept on at inference" if self.dropout else ""
        if len(self.stochastic_layers) == self.n_layers:
            return f"Every layer is stochastic{how}."
        verb = "is" if len(self.stochastic_layers) == 1 else "are"
        return (f"Only {self.layers()} {verb} stochastic{how}; grey rows are ordinary, "
                "deterministic attention.")

    def deterministic(self, layer: int) -> str | None:
        """Why `layer` has no randomness to show, or None when it has some."""
        if layer in self.stochastic_layers:
            return None
        others = (f"pick {self.layers()} to see uncertainty" if self.stochastic_layers
                  else "this model has no stochastic layer")
        return f"Layer {layer} is deterministic: ordinary softmax attention, every sample alike ({others})."

    def no_density(self, layer: int) -> str | None:
        """Why there is no density to draw for `layer`, or None when there is one."""
        if (reason := self.deterministic(layer)) is not None:
            return reason
        if self.dropout:
            return ("Dropout makes this model's attention random, with no density over the weights: "
                    "the bars and maps show its samples instead.")
        if not self.has_density:
            return (f"{self.family_label.capitalize()} attention has no continuous density: its samples "
                    "are shown in the bars and maps instead.")
        return None

    def no_prior(self) -> str | None:
        """Why there is no KL from a prior, or None when the model learns its prior."""
        if self.prior == "learned":
            return None
        if not self.stochastic_layers:
            return "This model's attention is deterministic: it has no prior, so there is no KL."
        if self.prior == "alignment":
            return ("This model learns no separate prior: it draws its alignment from the prior p(z|x) "
                    "itself, so no KL is computed.")
        if self.prior == "fixed":
            return "This model learns no prior (its prior is uniform over the keys), so no KL is computed."
        return "This model has no prior: its attention is random through dropout, so there is no KL."


def mi_estimator(n_samples: int) -> str:
    """How `ExplainResult.mutual_information` is estimated at `n_samples`: bias-corrected by the
    jackknife from 3 samples, the plug-in below (`metrics.mutual_information_jackknife`)."""
    return LABELS["mi_estimator"] if n_samples >= 3 else "plug-in"


def mi_how(n_samples: int) -> str:
    """`mi_estimator` in a sentence."""
    return "bias-corrected by the jackknife" if n_samples >= 3 else "the plug-in: its jackknife needs 3 samples"


class EntropyParts(NamedTuple):
    """The predictive entropy and its split, as every entropy panel draws and says it (the Plotly
    figure, the captions and, through the frame's stats, the live page).

    H[E p] = E[H p] + I_plug-in (Depeweg et al. 2018, eq. 7; exact but for the plug-in's float noise
    under `metrics.MI_ROUNDING`, which is 0): the bar stacks the expected entropy and the plug-in
    mutual information, and ends at the total, never above ln K. The headline's bias-corrected
    (jackknife) estimate is a different number, usually larger at few samples, and can exceed the
    room left under ln K: stacked, it would push the total past its bound (0.698 nats over ln 2 =
    0.693 on the lesson "Attention as a random variable" at k = 0.2). It is said beside the bar,
    under its own name (`entropy_mi_note`)."""

    total: float                # H[E_z p]: `predictive_entropy`
    aleatoric: float            # E_z H[p]: `expected_entropy`
    epistemic: float            # total - aleatoric: `mutual_information_plugin`
    mutual_information: float   # the headline's bias-corrected estimate: `mutual_information`


def entropy_parts(result: ExplainResult) -> EntropyParts:
    """`EntropyParts` of a result (0 where a number is NaN)."""
    return EntropyParts(*(float(np.nan_to_num(x)) for x in (
        result.predictive_entropy, result.expected_entropy, result.mutual_information_plugin,
        result.mutual_information)))


def entropy_mi_note(result: ExplainResult) -> str | None:
    """The headline's bias-corrected mutual information, said beside the entropy bar under its own
    name (`LABELS["entropy_mi"]`) and written as the headline writes it (`headline_mi`); None where
    it is the bar's plug-in part itself: a deterministic model, or fewer samples than its jackknife needs."""
    if not result.stochastic_layers or result.n_samples < MonteCarloErrors.SAMPLES_NEEDED["mutual_information"]:
        return None
    return LABELS["entropy_mi"].format(mi=headline_mi(result))


def headline_mi(result: ExplainResult) -> str:
    """The headline's mutual information as its metric writes it, to the decimals of its SE."""
    return with_se(result, "mutual_information", entropy_parts(result).mutual_information)[0]
