"""What the explorer calls each quantity it shows: one home for the names, read by the Plotly figures
(`bam_viz.plots`) and sent to the page's JavaScript in every payload (`bam_viz.live.grid`).

The quantities are defined in `bam_viz.inference.gaps`: E[w] is the Monte Carlo mean of the sampled normalised
weights; softmax(psi) is the deterministic pass's, the mean of the unnormalised scores. A panel that
plots one class's probability names the class it shows (`probability`, `labels`).
"""

from __future__ import annotations

import math

from bam_viz.core.metrics import INTERVAL_LEVEL

# What every Monte Carlo interval on the page is: estimate ± t SE, t with S − 1 df at the samples it
# was drawn from (`bam_viz.core.metrics.interval_multiplier`).
INTERVAL = f"{INTERVAL_LEVEL:.0%} interval (t, S − 1 df)"

LABELS = {
    # the prediction
    "mc": "E[f(z)]",
    "mean_attention": "f(E[w]), at the mean attention",
    "softmax": "f(softmax), the deterministic pass",
    "gap": "Gap E[f(z)] − f(E[w])",
    "gap_softmax": "Gap E[f(z)] − f(softmax)",
    "mi": "Epistemic (mutual information), nats",
    "mi_estimator": "bias-corrected (jackknife)",
    "mi_interval": f"bias-corrected; {INTERVAL} on the log scale:",
    "mc_band": f"E[f(z)], {INTERVAL}",
    "interval": INTERVAL,
    "classes": "E[f(z)] of each class",
    "class_whiskers": "5–95% of the samples",
    "class_rest": "the other {n} classes",         # the bar that sums the classes not drawn one by one
    # the predictive entropy's bar (`bam_viz.plots.wording.entropy_parts`): H[E p] = E[H p] + the plug-in MI
    "entropy": "Predictive entropy H[E p]",
    "aleatoric": "aleatoric: expected entropy E[H p]",
    "epistemic": "epistemic: mutual information, plug-in",
    "entropy_mi": ("The headline's mutual information, {mi} nats, is bias-corrected (jackknife): "
                   "the bar's plug-in part is biased low at few samples."),
    # the attention
    "posterior_mean": "posterior mean E[w], over the samples",
    "softmax_weights": "softmax(ψ), the deterministic pass",
    "prior_mean": "prior mean, over its draws",
    "prior_pi": "π, the prior's softmax",
    "whiskers": "5–95% of the samples",
    "std": "std over the samples",
}


def probability(class_name: str) -> str:
    """The name of one class's probability: "P(positive)", "P(neutral)"."""
    return f"P({class_name})"


def entropy_bound_name(n_classes: int) -> str:
    """The top of every entropy axis over K classes (`bam_viz.core.task.entropy_bound`): "ln 2"."""
    return f"ln {n_classes}"


def entropy_bound_label(n_classes: int) -> str:
    """The same with its value: "ln 2 = 0.693"."""
    return f"{entropy_bound_name(n_classes)} = {math.log(n_classes):.3f}"


def labels(class_name: str, n_classes: int) -> dict[str, str]:
    """`LABELS` with the names that say which class a panel shows (`p`: "P(neutral)", `p_mc`:
    "P(neutral) = E[f(z)]") and the entropy's bound over the model's K classes (`entropy_bound`:
    "ln 3 = 1.099", `entropy_bound_name`: "ln 3")."""
    p = probability(class_name)
    return {**LABELS, "p": p, "p_mc": f"{p} = E[f(z)]", "entropy_bound": entropy_bound_label(n_classes),
            "entropy_bound_name": entropy_bound_name(n_classes)}
