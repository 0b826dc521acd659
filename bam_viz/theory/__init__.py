"""The Theory lab: each paper's central result as a small computation, a figure and a one-sentence caption.

Nothing here imports Streamlit; `views/theory.py` lays the panels out and `bam_viz.bench.theory` times
them. Five sections, each a result object that its figures and caption are pure functions of, one
module per paper:

  deng2018_jensen  1. Jensen's gap, f(E[z]) != E[f(z)] (Deng et al. 2018, sec. 2): a toy distribution and
                   function, then the same gap on a zoo model, one stochastic layer at a time
                   (`jensen_gap`, `layer_gaps`)
  deng2018_elbo    2. Exact marginal, posterior and ELBO of a latent alignment (Deng et al. 2018, eqs. 1-2),
                   on the zoo's hard-alignment model (`alignment`, `elbo_path`)
  zhang2022        3. Attention as posterior inference whose error shrinks with the number of tokens
                   (Zhang et al. 2022), on an exchangeable toy (`ExchangeableToy`, `toy_sweep`)
  fan2020          4. BAM's score distributions: densities, closed-form KL against Monte Carlo, the
                   reparameterisation, and what normalisation does to the spread (`score_pair`)
  cinquin2021      5. Weight-space against attention-space uncertainty on our data, from the models'
                   cards (`uncertainty_table`)
  common           the sliders as data (`Control`), input checks, where a model's noise lives, the
                   figures' large type

`CONTROLS` is every slider of the page, in the page's order. Randomness comes only from an explicit
numpy or torch generator built from a `seed` argument.
"""

from __future__ import annotations

from bam_viz.theory import cinquin2021, deng2018_elbo, deng2018_jensen, fan2020, zhang2022
from bam_viz.theory.cinquin2021 import (
    MEASURES,
    OOD_CORPORA,
    SPACES,
    UncertaintyRow,
    seed_spread,
    uncertainty_caption,
    uncertainty_figure,
    uncertainty_table,
)
from bam_viz.theory.common import Control
from bam_viz.theory.deng2018_elbo import (
    ALIGNMENT_MODEL,
    Alignment,
    ElboPath,
    alignment,
    alignment_caption,
    alignment_figure,
    elbo_figure,
    elbo_path,
)
from bam_viz.theory.deng2018_jensen import (
    FUNCTIONS,
    GAP_MODELS,
    GapCase,
    Gaussian,
    JensenGap,
    LayerGaps,
    TwoPoint,
    jensen_caption,
    jensen_figure,
    jensen_gap,
    layer_gap_caption,
    layer_gap_figure,
    layer_gaps,
    monte_carlo_mean,
)
from bam_viz.theory.fan2020 import (
    PAIRS,
    KLCheck,
    ScorePair,
    ScorePanel,
    Spread,
    density_figure,
    kl_check,
    normalised_spread,
    reparam_figure,
    reparameterise,
    score_caption,
    score_pair,
    spread_caption,
    spread_figure,
)
from bam_viz.theory.zhang2022 import (
    TOY_N,
    TOY_TEMPERATURE_RATIOS,
    ExchangeableToy,
    LogLogFit,
    ToyDraw,
    ToyExample,
    ToySweep,
    loglog_fit,
    toy_caption,
    toy_error_figure,
    toy_estimate_figure,
    toy_example,
    toy_keys_figure,
    toy_sweep,
)

CONTROLS = (*deng2018_jensen.CONTROLS, *deng2018_elbo.CONTROLS, *zhang2022.CONTROLS, *fan2020.CONTROLS)

__all__ = [
    "ALIGNMENT_MODEL", "CONTROLS", "FUNCTIONS", "GAP_MODELS", "MEASURES", "OOD_CORPORA", "PAIRS", "SPACES", "TOY_N",
    "TOY_TEMPERATURE_RATIOS", "Alignment", "Control", "ElboPath", "ExchangeableToy", "GapCase", "Gaussian",
    "JensenGap", "KLCheck", "LayerGaps", "LogLogFit", "ScorePair", "ScorePanel", "Spread", "ToyDraw", "ToyExample",
    "ToySweep", "TwoPoint", "UncertaintyRow", "alignment", "alignment_caption", "alignment_figure", "cinquin2021",
    "deng2018_elbo", "deng2018_jensen", "density_figure", "elbo_figure", "elbo_path", "fan2020", "jensen_caption",
    "jensen_figure", "jensen_gap", "kl_check", "layer_gap_caption", "layer_gap_figure", "layer_gaps", "loglog_fit",
    "monte_carlo_mean", "normalised_spread", "reparam_figure", "reparameterise", "score_caption", "score_pair",
    "seed_spread", "spread_caption", "spread_figure", "toy_caption", "toy_error_figure", "toy_estimate_figure",
    "toy_example", "toy_keys_figure", "toy_sweep", "uncertainty_caption", "uncertainty_figure", "uncertainty_table",
    "zhang2022",
]
