"""Figures: the explorer's panels as Plotly figures with their captions, the Why view's pictures,
and the Corpus page's Altair charts. Nothing here imports Streamlit.

  style     the panels' constants (colours, colour scales and ranges, text widths), shared with the
            page's JavaScript
  kit       the figure kit: one look for every figure, plain-dict builders, colour-bar ticks, messages
  tokens    token labels on figure axes, and the window of tokens a long sentence shows
  wording   what a panel may say about a model (`Facts`), counts, the mutual information's estimator
  format    numbers: signed values, the decimals of a value and its standard error, value ± SE
  explorer  the explorer's panels as figures
  classes   the predictive distribution over K classes: which classes a chart draws, and its figure
  captions  the panels' captions, and whether the gap can be told from zero
  why       the Why view: the token strip, attention attribution, attention given the label
  corpus    the Corpus page's Altair charts (Altair is imported by the builders alone)
"""

from bam_viz.plots.captions import (
    key_density_caption,
    layer_head_caption,
    monte_carlo_caption,
    prediction_caption,
    prior_posterior_caption,
    sampled_maps_caption,
    sweep_caption,
)
from bam_viz.plots.classes import class_figure, shown_classes
from bam_viz.plots.corpus import domain_chart, paired_chart, reliability_chart, uncertainty_scatter
from bam_viz.plots.explorer import (
    entropy_figure,
    key_density_figure,
    layer_head_figure,
    prediction_figure,
    prior_posterior_figure,
    sampled_maps_figure,
    sweep_figure,
)
from bam_viz.plots.why import attention_attribution_figure, label_posterior_figure, token_strip_html

__all__ = [
    "attention_attribution_figure", "class_figure", "domain_chart", "entropy_figure", "key_density_caption",
    "key_density_figure", "label_posterior_figure", "layer_head_caption", "layer_head_figure", "monte_carlo_caption",
    "paired_chart", "prediction_caption", "prediction_figure", "prior_posterior_caption", "prior_posterior_figure",
    "reliability_chart", "sampled_maps_caption", "sampled_maps_figure", "shown_classes", "sweep_caption",
    "sweep_figure", "token_strip_html", "uncertainty_scatter",
]
