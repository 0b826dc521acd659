"""The explorer's "Why this prediction" section: token attributions with their uncertainty bands,
the attention attribution of one layer and head, and where the model would look if told the label.

Off until asked for (attribution is heavier than a slider move: a second or two for 8 samples and
32 steps on a short sentence), then computed once per (model, text, hyperparameters, samples,
seed, steps, target, layer) and shared by every session (`state.get_attribution`). It sits inside
the explorer's slider fragment, so a released slider reruns it: moving k draws other attention
samples, and so other bands. Its own controls rerun it alone, and go to the URL (`why=1`, ...).

One class selector (`why_target`) chooses the class whose attribution and label posterior are
drawn: by default the predicted one, the argmax of the explorer's own E[f(z)] (the prediction the
page above shows), passed down as an index so that every panel shows that same class. Class names
come from a user's data: they reach Markdown through `md_escape` and HTML through the builders.
"""

from __future__ import annotations

import streamlit as st

from bam_viz.core.task import resolve_target
from bam_viz.core.text import display_token
from bam_viz.inference.posterior import NOISE_SES, describe
from bam_viz.plots import why
from bam_viz.plots.format import signed
from bam_viz.plots.wording import count
from views import state
from views.text import md_escape

ss = st.session_state
# The selector's value for "the predicted class": no class is named "" (ModelConfig refuses it), so
# no class name can stand for it, whatever a user's data calls its classes. The URL says "predicted".
PREDICTED = ""


@st.fragment
@state.foreground
def why_section(view: state.View, model) -> None:
    st.subheader("Why this prediction")
    ss.setdefault("why", False)
    on = st.toggle("Explain the prediction (why)", key="why", persist_state="session",
                   help="Integrated Gradients for each attention sample: which words pushed the prediction, "
                        "and how sure that explanation is. Computed on demand.")
    if not on:
        state.write_query_params(state.WHY_KEYS, {})
        st.caption("Which words drove the prediction, with a band over attention samples: every sample is its own "
                   "network, so the explanation has a distribution too. Turn it on to compute it "
                   "(about a second on a short sentence).")
        return
    result = view.result(model)
    tokens = list(result.tokens)
    classes = tuple(model.classes)
    predicted = resolve_target(classes, None, result.mc_probs.tolist())
    # The URL's "predicted", or a class of another model: the predicted class.
    if ss.get("why_target") not in classes:
        ss["why_target"] = PREDICTED
    ss.setdefault("why_samples", 8)
    ss.setdefault("why_steps", 32)
    c = st.columns(3)
    choice = c[0].selectbox("Class (why_target)", (PREDICTED, *classes), key="why_target",
                            format_func=lambda t: f"predicted ({classes[predicted]})" if t == PREDICTED else t,
                            persist_state="session",
                            help="The class whose probability is attributed, and whose label the attention "
                                 "below is told: by default the one predicted above (the average over samples).")
    target = predicted if choice == PREDICTED else classes.index(choice)
    samples = c[1].select_slider("Attribution samples (why_samples)", state.WHY_SAMPLES, key="why_samples",
                                 disabled=not model.stochastic, persist_state="session",
                                 help="Attention samples, each attributed as its own network; the band is "
                                      "their 5-95% range.")
    steps = c[2].select_slider("Integration steps (why_steps)", state.WHY_STEPS, key="why_steps",
                               persist_state="session",
                               help="Gauss-Legendre points along the path from the baseline to the sentence. "
                                    "The completeness check below says whether they were enough.")
    default_layer = result.stochastic_layers[-1] if result.stochastic_layers else model.n_layers - 1
    ss.setdefault("why_layer", default_layer)
    ss.setdefault("why_head", 0)
    if ss["why_layer"] not in range(model.n_layers):
        ss["why_layer"] = default_layer
    if ss["why_head"] not in range(model.n_heads):
        ss["why_head"] = 0
    c = st.columns(3)
    layer = c[0].selectbox("Layer for the attention attribution", range(model.n_layers), key="why_layer",
                           format_func=lambda i: f"{i} (stochastic)" if i in result.stochastic_layers else str(i))
    head = c[1].selectbox("Head", range(model.n_heads), key="why_head")
    state.write_query_params(state.WHY_KEYS, {"why": 1, "why_target": choice or "predicted",
                                              "why_samples": samples, "why_steps": steps})
    n = samples if model.stochastic else 1
    try:
        with st.spinner(f"Integrating gradients: {count(n, 'attention sample')} and the deterministic "
                        f"pass, {steps} steps each…", show_time=True):
            attr = state.get_attribution(model, view.name, view.text, view.hyper, n, view.seed, steps, target, layer)
    except ValueError as err:
        st.info(md_escape(str(err)))
        return

    mean, band = attr.mean.numpy(), attr.band.numpy()
    st.markdown(f"**Which words moved P({md_escape(attr.target)})** — {_sentence(attr.tokens, mean)}")
    # The strip's bands are plain positioned boxes, not SVG: st.html passes its HTML through
    # DOMPurify, which drops <svg>.
    st.html(why.token_strip_html(tokens, mean, band[0], band[1], attr.softmax.numpy(), attr.target)
            + why.legend_html(attr.target))
    st.caption(_completeness(attr))

    if attr.attention is not None:
        a = attr.attention
        S = a.samples.shape[0]
        stochastic = layer in result.stochastic_layers and S > 1
        if stochastic:                      # each sample's own weights: their mean, and the band's width
            attribution, width = a.mean[head].numpy(), (a.band[1, head] - a.band[0, head]).numpy()
            weights = a.weights[:-1, head].mean(0).numpy()
        else:
            attribution, width, weights = a.softmax[head].numpy(), None, a.weights[-1, head].numpy()
        figure = why.attention_attribution_figure(tokens, weights, attribution, width, layer, head, attr.target)
        st.plotly_chart(figure, key="why_attention_map")
        st.caption(f"Attention attribution (Hao et al., AAAI 2021): Integrated Gradients of "
                   f"P({md_escape(attr.target)}) with "
                   f"respect to layer {layer}'s attention weights, scaled from zero to their value"
                   + (f", averaged over {count(S, 'sample')} (each sample's own weights); the third map is "
                      "the width of its 5-95% band." if stochastic else " (this layer's attention is deterministic).")
                   + (" In the top layer only [CLS]'s row reaches the prediction: the other rows are not computed."
                      if layer == model.n_layers - 1 else ""))

    _label_posterior(view, model, layer, target)


def _sentence(tokens: list[str], mean) -> str:
    """One line of what the strip shows: the strongest push each way, averaged over samples."""
    inner = list(range(1, len(tokens) - 1)) or list(range(len(tokens)))
    up = max(inner, key=lambda i: float(mean[i]))
    down = min(inner, key=lambda i: float(mean[i]))
    word = lambda i: md_escape(display_token(tokens[i]))  # noqa: E731
    parts = []
    if float(mean[up]) > 0:
        parts.append(f"“{word(up)}” raised it most ({signed(float(mean[up]))})")
    if float(mean[down]) < 0:
        parts.append(f"“{word(down)}” lowered it most ({signed(float(mean[down]))})")
    return "; ".join(parts) + "." if parts else "no token moved it."


def _completeness(attr) -> str:
    """The completeness check (Sundararajan et al. 2017): attributions add up to f(x) - f(baseline)."""
    delta = attr.delta.double().abs()
    worst = float(delta.max())
    verdict = "enough steps" if worst < 0.01 else "too few steps: raise them"
    return (f"Baseline: {attr.baseline}. Completeness: the attributions add up to f(x) − f(baseline) within "
            f"{worst:.2g} for every sample and the deterministic pass ({verdict}; {attr.steps} steps). "
            f"P({md_escape(attr.target)}) at the deterministic pass f(softmax) {float(attr.probs[-1]):.3f}, "
            f"averaged over samples "
            f"{float(attr.probs[:-1].double().mean()):.3f}.")


def _label_posterior(view: state.View, model, layer: int, target: int) -> None:
    """Deng et al. 2018: p(z | x, y). Exact for the categorical model's alignment; an importance
    estimate from the explorer's own samples otherwise, with its effective sample size. Every label
    is computed once (and cached); `target` picks the one drawn when not all are (`why.shown_labels`)."""
    st.markdown("**Where it would look if told the answer**")
    if model.attention_family.hard_alignment:
        layer = None                                    # the alignment is the top layer's, exact
    elif layer not in (model.config.stochastic_layers if model.stochastic else ()):
        layer = None                                    # the top stochastic layer, where samples differ
    try:
        lp = state.get_label_posterior(model, view.name, view.text, view.hyper, view.n_samples, view.seed, layer)
    except ValueError as err:
        st.info(md_escape(str(err)))
        return
    lp = lp.with_target(target)
    drawn = why.shown_labels(lp)
    st.plotly_chart(why.label_posterior_figure(lp), key="why_label_posterior")
    for k in drawn:
        st.markdown("- " + md_escape(describe(lp, lp.labels[k])))
    if lp.method == "importance":
        ess = ", ".join(f"{md_escape(lp.labels[k])} {lp.ess[k]:.1f}" for k in drawn)
        if len(drawn) < len(lp.labels):
            least = int(lp.ess.argmin())
            ess += f" (the least of the {len(lp.labels)} labels: {md_escape(lp.labels[least])} {lp.ess[least]:.1f})"
        reliable = all(lp.reliable[k] for k in drawn)
        line = (f"Layer {lp.layer}'s [CLS] row, head mean. Importance-weighted from the explorer's "
                f"{count(lp.n_samples, 'attention sample')} (weights p(y | x, z)); "
                f"effective sample size: {ess}. Whiskers: {NOISE_SES:g} Monte Carlo standard errors of each "
                "key's shift from the grey bar; a grey bar whose top lies within them is not told apart from "
                "noise, and the sentences name no such word.")
        (st.caption if reliable else st.warning)(
            line if reliable else line + " Too few effective samples to trust this: draw more samples.")
    elif lp.method == "exact":
        st.caption("Exact: the categorical model's alignment of the top layer's [CLS] query is enumerated over every "
                   "key (Deng et al. 2018), p(z | x, y) = p(z | x) p(y | x, z) / p(y | x).")
