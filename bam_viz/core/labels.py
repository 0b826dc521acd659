"""What the explorer calls each quantity it shows: one home for the names, read by the Plotly figures
(`bam_viz.plots`) and sent to the page's JavaScript in every payload (`bam_viz.live.grid`).

The quantities are defined in `bam_viz.inference.gaps`: E[w] is the Monte Carlo mean of the sampled normalised
weights; softmax(psi) is the deterministic pass's, the mean of the unnormalised scores.
"""

from __future__ import annotations

LABELS = {
    # the prediction
    "mc": "E[f(z)]",
    "p_mc": "P(positive) = E[f(z)]",
    "mean_attention": "f(E[w]), at the mean attention",
    "softmax": "f(softmax), the deterministic pass",
    "gap": "Gap E[f(z)] − f(E[w])",
    "gap_softmax": "Gap E[f(z)] − f(softmax)",
    "mi": "Epistemic (mutual information), nats",
    "mi_estimator": "bias-corrected (jackknife)",
    "mi_interval": "bias-corrected; ±2 SE on the log scale:",
    "mc_band": "E[f(z)] ± 2 SE",
    # the attention
    "posterior_mean": "posterior mean E[w], over the samples",
    "softmax_weights": "softmax(ψ), the deterministic pass",
    "prior_mean": "prior mean, over its draws",
    "prior_pi": "π, the prior's softmax",
    "whiskers": "5–95% of the samples",
    "std": "std over the samples",
}
