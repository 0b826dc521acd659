"""The explorer's panel constants, one home for both renderers: the Plotly figures read them here,
and the live component's JavaScript receives them in its payload.

Colours, colour scales, fixed colour ranges and text widths. A colour means the same quantity
everywhere: the prior grey, the posterior blue, E[f(z)] green, f(E[w]) red, f(softmax) purple.
"""

from __future__ import annotations

import math

import plotly.colors

from bam_viz.core.labels import LABELS

PRIOR_COLOUR = "#9e9e9e"
PI_COLOUR = "#555555"                # the prior's pi, marked on its bars (live.js: COLOURS.now)
POSTERIOR_COLOUR = "#1f77b4"
MEAN_ATTENTION_COLOUR = "#d62728"    # f(E[w]), the pass at the samples' mean weights (as the page draws it)
SOFTMAX_COLOUR = "#7b1fa2"           # f(softmax) and softmax(psi): the deterministic pass
MC_COLOUR = "#2ca02c"
PREDICTION_MC = f"{LABELS['mc']}: average over samples"
DETERMINISTIC_COLOUR = "#e0e0e0"
MAX_TICK_TOKENS = 40          # above this many tokens, the bars and maps show a window of them
TOKEN_WINDOW = 24            # a sentence of more tokens than MAX_TICK_TOKENS shows this many: ~10 px a label
LN2 = math.log(2.0)
CONFIDENT_NATS = 0.1 * LN2   # predictive entropy under a tenth of its two-class maximum: "sure"
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
