"""Theory lab: each paper's central result as one live panel, for a classroom.

No math here: `bam_viz.theory` computes every number, figure and caption and describes every slider
(`theory.CONTROLS`); this page lays them out, draws the controls, caches what a real model computes once
per sentence, and mirrors every control into the URL (a copied link reproduces the view). Each section
is a fragment: a slider reruns only its own panel.
"""

from __future__ import annotations

import streamlit as st

import bam_viz
from bam_viz import theory
from bam_viz.core.task import CLASSES
from views import state
from views.text import md_escape

ss = st.session_state

SECTIONS = {
    "jensen": "1 · f(E[z]) is not E[f(z)]",
    "elbo": "2 · Exact marginal, posterior, ELBO",
    "inference": "3 · Attention as posterior inference",
    "bam": "4 · BAM's distributions",
    "space": "5 · Weight or attention space",
}
DISTRIBUTIONS = {"two-point": "two points", "gaussian": "Gaussian"}
PAIRS = {family: panel.title for family, panel in theory.PAIRS.items()}
IMAGE_FORMATS = ("svg", "png")
# Choices: URL name -> (options, default). Sliders: URL name -> theory.Control (values offered, default).
CHOICES = {
    "section": (tuple(SECTIONS), "jensen"),
    "image_format": (IMAGE_FORMATS, "svg"),
    "jensen_f": (tuple(theory.FUNCTIONS), "sigmoid"),
    "jensen_dist": (tuple(DISTRIBUTIONS), "two-point"),
    "gap_model": (theory.GAP_MODELS, theory.GAP_MODELS[0]),
    "label": (CLASSES, "positive"),
    "pair": (tuple(PAIRS), next(iter(PAIRS))),
}
SLIDERS = {c.name: c for c in theory.CONTROLS}
TEXT_KEY = "sentence"
SECTION_KEY = "theory_{}"              # a section's container: what a lesson outlines (views/lesson_files.py)
URL_KEYS = (TEXT_KEY, *CHOICES, *SLIDERS)
# Larger type for a projector: captions nearly as dark as the text, widget labels and prose larger.
PAGE_CSS = """
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p {font-size: 1.15rem; opacity: 0.9}
[data-testid="stMarkdown"] [data-testid="stMarkdownContainer"] :is(p, li) {font-size: 1.15rem}
[data-testid="stWidgetLabel"] p {font-size: 1.05rem}
"""


# ---- the URL round trip (views/state.py's style: validated before any widget sees a value) ----------
def load_query_params() -> None:
    if ss.get("_theory_query_loaded"):
        return
    ss["_theory_query_loaded"] = True
    qp = st.query_params
    if TEXT_KEY in qp:
        ss[TEXT_KEY] = qp[TEXT_KEY]
    for name, (options, _) in CHOICES.items():
        if qp.get(name) in options:
            ss[name] = qp[name]
    for name, control in SLIDERS.items():
        if name in qp and (x := state._float(qp[name], min(control.options), max(control.options))) is not None:
            ss[name] = control.snap(x)


def defaults() -> None:
    ss.setdefault(TEXT_KEY, state.DEFAULT_TEXT)
    for name, (options, default) in CHOICES.items():
        if ss.get(name) not in options:
            ss[name] = default
    for name, control in SLIDERS.items():
        if ss.get(name) not in control.options:
            ss[name] = control.default


def write_query_params() -> None:
    """Every control that differs from its default, and nothing else: a short link, the same view."""
    for name in URL_KEYS:
        default = state.DEFAULT_TEXT if name == TEXT_KEY else (
            CHOICES[name][1] if name in CHOICES else SLIDERS[name].default)
        value = ss.get(name)
        if value is None or value == default:
            if name in st.query_params:
                del st.query_params[name]
        else:
            st.query_params[name] = f"{value:.6g}" if isinstance(value, float) else str(value)


# ---- controls and figures -------------------------------------------------------------------------
def slider(name: str, container=st, help: str | None = None) -> float:
    control = SLIDERS[name]
    return container.select_slider(f"{control.label} ({name})", options=control.options, key=name,
                                   format_func=number, help=help or control.help or None, persist_state="session")


def number(x: float) -> str:
    return f"{x:g}"


def show(fig, name: str) -> None:
    """A figure with its modebar's camera button downloading it as SVG or PNG (chosen in the sidebar),
    drawn by the browser: no server-side image export."""
    fmt = ss.get("image_format", "svg")
    st.plotly_chart(fig, theme=None, config={
        "displaylogo": False,
        "toImageButtonOptions": {"format": fmt, "filename": f"bam-viz-{name}", "scale": 2 if fmt == "png" else 1},
    })


def caption(text: str) -> None:
    st.caption(md_escape(text))


def problem(err: Exception) -> None:
    st.info(md_escape(str(err)))


# ---- cached real-model work: once per (model, sentence), shared by every session ------------------
@st.cache_data(show_spinner="Sampling one layer at a time…", max_entries=64)
def layer_gaps(name: str, text: str) -> theory.LayerGaps:
    return theory.layer_gaps(state.get_model(name), text)


@st.cache_data(show_spinner="Enumerating the alignment…", max_entries=64)
def alignment(text: str) -> theory.Alignment:
    return theory.alignment(state.get_model(theory.ALIGNMENT_MODEL), text)


@st.cache_data(show_spinner=False, max_entries=64)
def toy_sweep(noise: float, temperature_ratio: float) -> theory.ToySweep:
    return theory.toy_sweep(theory.ExchangeableToy(noise=noise), temperature_ratio)


@st.cache_data(show_spinner="Drawing normalised weights…", max_entries=4)
def spread(family: str) -> theory.Spread:
    return theory.normalised_spread(family)


@st.cache_data(show_spinner=False, max_entries=1)
def uncertainty_rows() -> list[theory.UncertaintyRow]:
    return theory.uncertainty_table()


@st.cache_data(show_spinner=False, max_entries=1)
def seed_spread() -> dict[str, float]:
    return theory.seed_spread()


def model_available(name: str) -> bool:
    if name in bam_viz.available_models():
        return True
    st.warning(f"The {name} model is not in pretrained/: this part of the panel needs it.")
    return False


# ---- 1 --------------------------------------------------------------------------------------------
@st.fragment
def jensen_section() -> None:
    st.subheader("f(E[z]) is not E[f(z)] — Deng et al. 2018")
    st.markdown("A model with a random attention z predicts E[f(z)]; running it once at the mean attention "
                "gives f(E[z]). Pick a distribution and a function and watch the two part.")
    c = st.columns([1, 1, 2])
    c[0].radio("function f (jensen_f)", tuple(theory.FUNCTIONS), key="jensen_f", horizontal=True,
               persist_state="session")
    c[1].radio("distribution of z (jensen_dist)", tuple(DISTRIBUTIONS), key="jensen_dist",
               format_func=DISTRIBUTIONS.get, horizontal=True, persist_state="session")
    with c[2]:
        if ss["jensen_dist"] == "two-point":
            cols = st.columns(3)
            for col, name in zip(cols, ("jensen_low", "jensen_high", "jensen_p"), strict=True):
                slider(name, col)
            distribution = theory.TwoPoint(ss["jensen_low"], ss["jensen_high"], ss["jensen_p"])
        else:
            cols = st.columns(2)
            for col, name in zip(cols, ("jensen_mean", "jensen_sd"), strict=True):
                slider(name, col)
            distribution = theory.Gaussian(ss["jensen_mean"], ss["jensen_sd"])
    gap = theory.jensen_gap(ss["jensen_f"], distribution)
    show(theory.jensen_figure(gap), "jensen")
    caption(theory.jensen_caption(gap))
    write_query_params()

    st.subheader("The same gap inside a trained model")
    st.markdown("For the sentence in the sidebar: P(positive) averaged over samples, E[f(z)], when **only one** "
                "stochastic layer samples and every other one sits at softmax(ψ), and when all sample. Two "
                "references: **f(E[w])** (Deng et al.'s f(E[z])), one pass with the sampled layers' weights at "
                "their Monte Carlo mean E[w]; and **f(softmax)**, the deterministic pass. BAM's normalised "
                "weights do not average to softmax(ψ), so for BAM the two gaps differ; for mc-dropout they are one.")
    models = [m for m in theory.GAP_MODELS if m in bam_viz.available_models()]
    if not models:
        st.warning("No stochastic model is in pretrained/.")
        return
    if ss["gap_model"] not in models:
        ss["gap_model"] = models[0]
    st.selectbox("model (gap_model)", models, key="gap_model", persist_state="session")
    text = ss.get(TEXT_KEY, "")
    if not text.strip():
        st.info("Type a sentence in the sidebar to see the gap on the model.")
        return
    try:
        gaps = layer_gaps(ss["gap_model"], text)
    except ValueError as err:
        problem(err)
        return
    show(theory.layer_gap_figure(gaps), "layer-gaps")
    caption(theory.layer_gap_caption(gaps))


# ---- 2 --------------------------------------------------------------------------------------------
@st.fragment
def elbo_section() -> None:
    st.subheader("Exact marginal, posterior and the ELBO — Deng et al. 2018")
    st.markdown(f"The `{theory.ALIGNMENT_MODEL}` model aligns the [CLS] query of its top layer to **one** key z "
                "and sums over every key exactly. Slide q from the prior p(z | x) to the posterior p(z | x, y): "
                "the ELBO rises to log p(y | x) and the distance left is KL(q ‖ posterior). "
                "q_t ∝ p(z|x)^(1−t) p(z|x,y)^t, a geometric path.")
    if not model_available(theory.ALIGNMENT_MODEL):
        return
    c = st.columns([1, 3])
    c[0].radio("observed label y (label)", CLASSES, key="label", horizontal=True, persist_state="session")
    slider("q_t", c[1])
    write_query_params()
    text = ss.get(TEXT_KEY, "")
    if not text.strip():
        st.info("Type a sentence in the sidebar.")
        return
    try:
        al = alignment(text)
    except ValueError as err:
        problem(err)
        return
    path = theory.elbo_path(al, CLASSES.index(ss["label"]), ss["q_t"])
    left, right = st.columns([3, 2])
    with left:
        show(theory.alignment_figure(al, path), "alignment")
    with right:
        show(theory.elbo_figure(path), "elbo")
    caption(theory.alignment_caption(al, path))


# ---- 3 --------------------------------------------------------------------------------------------
@st.fragment
def inference_section() -> None:
    st.subheader("Attention as posterior inference — Zhang et al.")
    st.markdown("A sequence has a hidden class z; given z its tokens are exchangeable draws (a component c, a "
                "key around that component's centre, the one-hot of c as value). The exact answer for a query key q "
                "is E[v | k = q, z] by Bayes' rule. Softmax attention with temperature τ = s² estimates it from the "
                "tokens alone, and its error shrinks as N grows; a wrong temperature stops at a floor.")
    c = st.columns(3)
    for col, name in zip(c, ("toy_n", "toy_noise", "toy_temp"), strict=True):
        slider(name, col)
    write_query_params()
    toy = theory.ExchangeableToy(noise=ss["toy_noise"])
    example = theory.toy_example(toy, int(ss["toy_n"]), ss["toy_temp"])
    sweep = toy_sweep(ss["toy_noise"], ss["toy_temp"])
    left, right = st.columns(2)
    with left:
        show(theory.toy_keys_figure(example), "toy-keys")
    with right:
        show(theory.toy_estimate_figure(example), "toy-answer")
    show(theory.toy_error_figure(sweep, int(ss["toy_n"])), "toy-error")
    caption(theory.toy_caption(sweep))


# ---- 4 --------------------------------------------------------------------------------------------
@st.fragment
def bam_section() -> None:
    st.subheader("One attention score's posterior and prior — Fan et al. 2020")
    st.radio("pair (pair)", tuple(PAIRS), key="pair", format_func=PAIRS.get, horizontal=True,
             persist_state="session")
    panel = theory.PAIRS[ss["pair"]]
    names = [c.name for c in panel.controls]
    for col, name in zip(st.columns(len(names)), names, strict=True):
        slider(name, col)
    write_query_params()
    pair = theory.score_pair(panel.family, *(ss[n] for n in names))
    check = theory.kl_check(pair)
    left, right = st.columns(2)
    with left:
        show(theory.density_figure(pair, check), "densities")
    with right:
        show(theory.reparam_figure(pair), "reparameterisation")
    caption(theory.score_caption(pair, check))
    st.markdown("**Normalisation.** Attention divides each score by the sum over keys. How much does a "
                "normalised weight still vary, at equal mean weights 1/N?")
    sp = spread(panel.family)
    current = ss[panel.shape.control.name]
    show(theory.spread_figure(sp, current), "normalised-spread")
    caption(theory.spread_caption(sp, current))


# ---- 5 --------------------------------------------------------------------------------------------
def space_section() -> None:
    st.subheader("Weight-space against attention-space uncertainty — Cinquin et al. 2021")
    st.markdown("Cinquin et al. found weight-space inference in transformers works poorly and proposed "
                "putting the randomness on the attention weights instead. Our zoo has both kinds of noise on the "
                "same backbone and data: dropout on every weight's path (mc-dropout) and random attention.")
    rows = uncertainty_rows()
    if not rows:
        st.warning("No model card has stored metrics: run `python -m bam_viz evaluate --update-card`.")
        return
    show(theory.uncertainty_figure(rows), "weight-vs-attention")
    st.dataframe([r.as_dict() for r in rows], hide_index=True, column_config={
        k: st.column_config.NumberColumn(format="%.3f") for k in rows[0].as_dict() if k not in ("model", "noise in")})
    caption(theory.uncertainty_caption(rows, seed_spread()))


BODIES = {"jensen": jensen_section, "elbo": elbo_section, "inference": inference_section, "bam": bam_section,
          "space": space_section}


def main() -> None:
    st.html(f"<style>{PAGE_CSS}</style>")
    st.title("Theory lab")
    st.caption("Each paper's central result, live. Every control is in the page address: a copied link "
               "reproduces the view.")
    load_query_params()
    defaults()
    with st.sidebar:
        st.radio("Section (section)", tuple(SECTIONS), key="section", format_func=SECTIONS.get,
                 persist_state="session")
        st.text_area("Sentence for the model panels (sentence)", key=TEXT_KEY, height=80,
                     persist_state="session",
                     help="Used by the per-layer gap (section 1) and the alignment (section 2).")
        st.radio("Figure download format (image_format)", IMAGE_FORMATS, key="image_format", horizontal=True,
                 persist_state="session",
                 help="The camera button above each figure saves it in this format, drawn by your browser.")
    write_query_params()
    with st.container(key=SECTION_KEY.format(ss["section"])):
        BODIES[ss["section"]]()


if __name__ == "__main__":         # Streamlit runs a page as __main__; views/lessons.py imports it
    main()
