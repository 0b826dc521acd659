"""The Corpus page's Altair charts: the reliability diagram, the confusion matrix, uncertainty against
the raters' disagreement, uncertainty by corpus, and two models against each other.

Each builder is a pure function of the frames `bam_viz.evaluation.corpus` makes (its bins, rows and
pairs) and of the words and corpora the caller passes, and returns an `altair` chart; a brushable
chart carries an interval selection named by one of the `*_BRUSH` constants. Altair is imported by
the builders alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["DOMAIN_BRUSH", "OUTCOME_COLOURS", "RELIABILITY_BRUSH", "SCATTER_BRUSH", "TOOLTIP_CHARS",
           "confusion_chart", "domain_chart", "measure_scale", "paired_chart", "reliability_chart",
           "uncertainty_scatter"]

SCATTER_BRUSH = "scatter_brush"
RELIABILITY_BRUSH = "reliability_brush"
DOMAIN_BRUSH = "domain_brush"
# A chart's tooltip shows this much of a sentence; a chart's data travels with it, so it carries no
# more text than the tooltip reads.
TOOLTIP_CHARS = 140
OUTCOME_COLOURS = {"correct": "#4c78a8", "wrong": "#e45756", "ambiguous": "#b0b0b0", "unlabelled": "#72b7b2"}
IN_DOMAIN_COLOUR, OUT_OF_DOMAIN_COLOUR = "#4c78a8", "#f58518"
TEXT_CLASSES = 30         # up to this many classes a confusion matrix writes its counts in the cells


def _short(text: pd.Series) -> pd.Series:
    s = text.astype(str)
    return s.where(s.str.len() <= TOOLTIP_CHARS, s.str.slice(0, TOOLTIP_CHARS - 1) + "…")


def measure_scale(top: float | None):
    """The scale of an uncertainty axis: from 0 to `top` (ln K for an entropy, whose largest value
    it is: `bam_viz.core.task.entropy_bound`), or Altair's own where `top` is None."""
    import altair as alt

    return alt.Undefined if top is None else alt.Scale(domain=[0.0, float(top)], nice=False)


def reliability_chart(bins: pd.DataFrame, *, n_classes: int = 2, height: int = 320):
    """Reliability diagram of `bins` (`bam_viz.evaluation.corpus.reliability`): accuracy against
    mean confidence per bin (a point's area its count), the diagonal of perfect calibration, and the
    bin counts as pale bars on a second axis (right); a colour per model, its ECE in the legend. An
    x interval brush (`RELIABILITY_BRUSH`) over the confidence, the predicted class's probability,
    which lies in [1/K, 1] for `n_classes` K. One layered chart, so that it stretches to its column."""
    import altair as alt

    data = bins.assign(legend=[f"{m} (ECE {e:.3f})" for m, e in zip(bins["model"], bins["ece"], strict=True)])
    low = 1.0 / n_classes
    title = "confidence max(p, 1 − p)" if n_classes == 2 else "confidence: the predicted class's probability"
    x = alt.X("confidence:Q", scale=alt.Scale(domain=[low, 1.0]), title=title)
    y = alt.Y("accuracy:Q", scale=alt.Scale(domain=[0.0, 1.0]), title="accuracy")
    colour = alt.Color("legend:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=300))
    brush = alt.selection_interval(name=RELIABILITY_BRUSH, encodings=["x"])
    tooltip = [alt.Tooltip("model:N"), alt.Tooltip("count:Q", title="sentences"),
               alt.Tooltip("confidence:Q", format=".3f", title="mean confidence"),
               alt.Tooltip("accuracy:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f", title="bin from"),
               alt.Tooltip("high:Q", format=".3f", title="bin to")]
    base = alt.Chart(data)
    counts = base.mark_bar(opacity=0.18).encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[low, 1.0])), x2="high:Q",
        y=alt.Y("count:Q", stack=None, scale=alt.Scale(zero=True), title="sentences per bin",
                axis=alt.Axis(orient="right", grid=False)),
        color=colour, tooltip=tooltip)
    diagonal = alt.Chart(pd.DataFrame({"confidence": [low, 1.0], "accuracy": [low, 1.0]})).mark_line(
        strokeDash=[4, 4], color="#888").encode(x=x, y=y)
    line = base.mark_line(opacity=0.6).encode(x=x, y=y, color=colour)
    points = base.mark_circle(opacity=0.9).encode(
        x=x, y=y, color=colour, size=alt.Size("count:Q", legend=None, scale=alt.Scale(range=[20, 400])),
        tooltip=tooltip,
    ).add_params(brush)
    return (alt.layer(counts, alt.layer(diagonal, line, points))
            .resolve_scale(y="independent")
            .properties(height=height, title="Reliability (clear sentences)"))


def confusion_chart(matrix, classes, *, title: str = "Confusion matrix (clear sentences)", height: int | None = None):
    """The (K, K) `matrix` (`bam_viz.evaluation.corpus.confusion`: rows the label, columns the
    prediction) as a heatmap, the class names on both axes in the order of `classes`, each cell's
    count written in it (where K <= TEXT_CLASSES; beyond, in its tooltip only) and its share of the
    label's sentences in the tooltip."""
    import altair as alt

    matrix = np.asarray(matrix)
    classes = [str(c) for c in classes]
    K = len(classes)
    if matrix.shape != (K, K):
        raise ValueError(f"a confusion matrix of {K} classes is ({K}, {K}), not {matrix.shape}")
    support = matrix.sum(axis=1, keepdims=True)
    share = np.divide(matrix, support, out=np.full(matrix.shape, np.nan), where=support > 0)
    data = pd.DataFrame({"label": np.repeat(classes, K), "predicted": np.tile(classes, K),
                         "count": matrix.ravel().astype(int), "share": share.ravel()})
    # The darker half of the scale gets white text, so that every count stays legible.
    data["dark"] = data["count"] > matrix.max() / 2 if matrix.max() else False
    side = height or int(min(720, max(200, 26 * K + 80)))
    x = alt.X("predicted:N", sort=classes, title="predicted", axis=alt.Axis(labelAngle=-45 if K > 4 else 0,
                                                                             labelLimit=140))
    y = alt.Y("label:N", sort=classes, title="label", axis=alt.Axis(labelLimit=140))
    tooltip = [alt.Tooltip("label:N"), alt.Tooltip("predicted:N"), alt.Tooltip("count:Q", title="sentences"),
               alt.Tooltip("share:Q", format=".1%", title="share of the label's sentences")]
    cells = alt.Chart(data).mark_rect().encode(
        x=x, y=y, color=alt.Color("count:Q", scale=alt.Scale(scheme="blues"), title="sentences"), tooltip=tooltip)
    layers = [cells]
    if K <= TEXT_CLASSES:
        layers.append(alt.Chart(data).mark_text(fontSize=11 if K <= 12 else 8).encode(
            x=x, y=y, text=alt.Text("count:Q"), tooltip=tooltip,
            color=alt.condition("datum.dark", alt.value("white"), alt.value("black"))))
    return alt.layer(*layers).properties(height=side, title=title)


def uncertainty_scatter(rows: pd.DataFrame, measure: str, *, measure_title: str, measure_top: float | None = None,
                        height: int = 320):
    """The reference model's `measure` (x, titled `measure_title`, up to `measure_top`: `measure_scale`)
    against the raters' std (y), a point per sentence coloured by outcome; an interval brush
    (`SCATTER_BRUSH`) over both axes."""
    import altair as alt

    data = rows.loc[rows["raters_std"].notna(), ["sentence", "text", "corpus", measure, "raters_std", "outcome",
                                                 "predicted", "human_mean"]]
    data = data.assign(text=_short(data["text"]))
    brush = alt.selection_interval(name=SCATTER_BRUSH)
    domain = [o for o in OUTCOME_COLOURS if o in set(data["outcome"])] or list(OUTCOME_COLOURS)
    return alt.Chart(data).mark_circle(size=18, opacity=0.55).encode(
        x=alt.X(f"{measure}:Q", title=measure_title, scale=measure_scale(measure_top)),
        y=alt.Y("raters_std:Q", title="raters' standard deviation"),
        color=alt.Color("outcome:N", scale=alt.Scale(domain=domain, range=[OUTCOME_COLOURS[o] for o in domain]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("text:N", title="sentence"), "corpus:N", "outcome:N", "predicted:N",
                 alt.Tooltip(f"{measure}:Q", format=".4f"), alt.Tooltip("raters_std:Q", format=".2f"),
                 alt.Tooltip("human_mean:Q", format=".2f", title="raters' mean")],
    ).add_params(brush).properties(height=height, title="Uncertainty against human disagreement")


def domain_chart(rows: pd.DataFrame, measure: str, *, measure_title: str, corpora: list[str], in_domain: str,
                 measure_top: float | None = None, height: int = 240):
    """The reference model's `measure` per corpus (up to `measure_top`: `measure_scale`), the corpora
    present in the order of `corpora` (`in_domain`, the models' training domain, in blue; the rest
    orange): a tick per sentence over a box plot; an x interval brush (`DOMAIN_BRUSH`)."""
    import altair as alt

    data = rows.loc[rows["corpus"].notna(), ["sentence", "text", "corpus", measure, "outcome"]]
    data = data.assign(text=_short(data["text"]))
    order = [c for c in corpora if c in set(data["corpus"])]
    x = alt.X(f"{measure}:Q", title=measure_title, scale=measure_scale(measure_top))
    y = alt.Y("corpus:N", sort=order, title=None)
    colours = [IN_DOMAIN_COLOUR if c == in_domain else OUT_OF_DOMAIN_COLOUR for c in order]
    colour = alt.Color("corpus:N", scale=alt.Scale(domain=order, range=colours), legend=None)
    brush = alt.selection_interval(name=DOMAIN_BRUSH, encodings=["x"])
    ticks = alt.Chart(data).mark_tick(opacity=0.35, thickness=1).encode(
        x=x, y=y, color=colour, tooltip=[alt.Tooltip("text:N", title="sentence"), "corpus:N", "outcome:N",
                                         alt.Tooltip(f"{measure}:Q", format=".4f")],
    ).add_params(brush)
    box = alt.Chart(data).mark_boxplot(extent="min-max", opacity=0.5, size=14, ticks=False).encode(
        x=x, y=y, color=colour)
    return alt.layer(ticks, box).properties(height=height, title="Uncertainty by corpus")


def paired_chart(pairs: pd.DataFrame, a: str, b: str, measure: str, *, measure_title: str,
                 measure_top: float | None = None, height: int = 300):
    """Model `a`'s `measure` (x) against `b`'s (y), each axis titled by the model and `measure_title`
    (both up to `measure_top`: `measure_scale`), a point per sentence of `pairs`
    (`bam_viz.evaluation.corpus.paired`), the sentences where their labels differ in red; above the
    diagonal `b` is the more uncertain."""
    import altair as alt

    data = pairs[["text", f"{measure}_a", f"{measure}_b", "predicted_a", "predicted_b", "disagree"]]
    data = data.assign(text=_short(data["text"]), agreement=np.where(data["disagree"], "labels differ",
                                                                     "same label"))
    top = float(max(data[f"{measure}_a"].max(), data[f"{measure}_b"].max(), 1e-6)) if len(data) else 1.0
    top = top if measure_top is None else float(measure_top)
    diagonal = alt.Chart(pd.DataFrame({"x": [0.0, top], "y": [0.0, top]})).mark_line(
        strokeDash=[4, 4], color="#888").encode(x="x:Q", y="y:Q")
    points = alt.Chart(data).mark_circle(size=18).encode(
        x=alt.X(f"{measure}_a:Q", title=f"{a}: {measure_title}", scale=measure_scale(measure_top)),
        y=alt.Y(f"{measure}_b:Q", title=f"{b}: {measure_title}", scale=measure_scale(measure_top)),
        color=alt.Color("agreement:N", scale=alt.Scale(domain=["same label", "labels differ"],
                                                       range=[OUTCOME_COLOURS["ambiguous"], OUTCOME_COLOURS["wrong"]]),
                        legend=alt.Legend(orient="bottom", title=None)),
        opacity=alt.condition("datum.disagree", alt.value(0.9), alt.value(0.35)),
        tooltip=[alt.Tooltip("text:N", title="sentence"), alt.Tooltip("predicted_a:N", title=a),
                 alt.Tooltip("predicted_b:N", title=b), alt.Tooltip(f"{measure}_a:Q", format=".4f", title=f"{a}"),
                 alt.Tooltip(f"{measure}_b:Q", format=".4f", title=f"{b}")],
    )
    return alt.layer(diagonal, points).properties(height=height, title=f"{a} against {b}")
