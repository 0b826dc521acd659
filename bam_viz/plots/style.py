"""The explorer's panel constants, one home for both renderers: the Plotly figures read them here,
and the live component's JavaScript receives them in its payload.

Colours, colour scales, fixed colour ranges and text widths. A colour means the same quantity
everywhere: the prior grey, the posterior blue, E[f(z)] green, f(E[w]) red, f(softmax) purple.
"""

from __future__ import annotations

import plotly.colors

from bam_viz.core.labels import LABELS

PRIOR_COLOUR = "#9e9e9e"
PI_COLOUR = "#555555"                # the prior's pi, marked on its bars
POSTERIOR_COLOUR = "#1f77b4"
MEAN_ATTENTION_COLOUR = "#d62728"    # f(E[w]), the pass at the samples' mean weights (as the page draws it)
SOFTMAX_COLOUR = "#7b1fa2"           # f(softmax) and softmax(psi): the deterministic pass
MC_COLOUR = "#2ca02c"
PREDICTION_MC = f"{LABELS['mc']}: average over samples"
DETERMINISTIC_COLOUR = "#e0e0e0"
MAX_TICK_TOKENS = 40          # above this many tokens, the bars and maps show a window of them
TOKEN_WINDOW = 24            # a sentence of more tokens than MAX_TICK_TOKENS shows this many: ~10 px a label
CONFIDENT_SHARE = 0.1       # predictive entropy under a tenth of its maximum ln K (`entropy_bound`): "sure"
CLASS_BARS = 10              # the predictive distribution's bars: the top classes and the target, the rest summed
ZERO_WIDTH = "\u200b"        # appended to axis labels to tell small multiples apart; display_token escapes it
# Colour scales spelled out: plotly.js knows "Viridis" but not "Oranges", and its own "Blues" differs
# from plotly.py's, and without validation nothing would expand the names.
WEIGHT_SCALE = plotly.colors.get_colorscale("Blues")
STD_SCALE = plotly.colors.get_colorscale("Oranges")
VALUE_SCALE = plotly.colors.get_colorscale("Viridis")
# Fixed colour ranges, one per quantity, so that a colour means the same value on every sentence and
# at every slider setting; `relative=True` stretches each over the values shown instead.
WEIGHT_RANGE = (0.0, 1.0)    # an attention weight
STD_RANGE = (0.0, 0.5)       # a weight's std, and the spread (its mean): a value in [0, 1] has std at most 1/2
KL_DECADES = 6               # KL is coloured by log10(1 + KL) over [0, 6]: 0 to 10^6 nats, more clips to the top
MESSAGE_CHARS = 34           # a message figure's line fits a narrow column (~250 px at 13 px)
AXIS_TITLE_CHARS = 20        # an axis title's line fits the plot area of a narrow column (~150 px at 14 px)

# ---- the live page --------------------------------------------------------------------------------
# The explorer's JavaScript (views/live/) keeps no constants of its own: `bam_viz.live.grid.page_style`
# sends these in every payload's header, with the colour scales and fixed ranges above.
MI_COLOUR = "#ff8a65"                    # the mutual information: epistemic uncertainty
ALEATORIC_COLOUR = "#8c9eff"             # the expected entropy: aleatoric uncertainty
MC_BAND_FILL = "rgba(44,160,44,0.18)"    # E[f(z)]'s 95% interval: MC_COLOUR, translucent
PRIOR_FILL = "rgba(158,158,158,0.2)"     # under the prior's density: PRIOR_COLOUR, translucent
POSTERIOR_FILL = "rgba(31,119,180,0.2)"  # under the posterior's density: POSTERIOR_COLOUR, translucent
MARKER_COLOUR = "#555555"                # the current and the trained value, marked on the sweep
SELECTED_COLOUR = "#d62728"              # the square around the selected head on the layer x head grids
THRESHOLD_COLOUR = "#9e9e9e"             # chance, 1/K, on the histogram of one class's probability
CLASS_FILL = "rgba(44,160,44,0.45)"      # E[f(z)] of a class other than the one shown: MC_COLOUR, translucent
REST_COLOUR = "#bdbdbd"                  # the classes not drawn one by one, summed in one bar
BAR_TICK_TOKENS = 48                     # the page's bars label their keys up to this many (maps: MAX_TICK_TOKENS)
# Each colour by the role it plays on the page.
PAGE_COLOURS = {
    "prior": PRIOR_COLOUR, "posterior": POSTERIOR_COLOUR, "pi": PI_COLOUR, "softmax": SOFTMAX_COLOUR,
    "mc": MC_COLOUR, "mc_band": MC_BAND_FILL, "mean_attention": MEAN_ATTENTION_COLOUR, "mi": MI_COLOUR,
    "aleatoric": ALEATORIC_COLOUR, "deterministic": DETERMINISTIC_COLOUR, "prior_fill": PRIOR_FILL,
    "posterior_fill": POSTERIOR_FILL, "marker": MARKER_COLOUR, "selected": SELECTED_COLOUR,
    "threshold": THRESHOLD_COLOUR, "class_fill": CLASS_FILL, "rest": REST_COLOUR,
}
