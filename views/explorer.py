"""The explorer: type a sentence, pick a model, move the sliders, watch attention uncertainty.

No math here: `bam_viz` computes, `bam_viz.charts` draws, this page lays out and wires controls.
"""

from __future__ import annotations

import json
import random
import re
import time

import streamlit as st

import bam_viz
from bam_viz import charts, export
from views import state

ss = st.session_state
PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
_rng = random.Random()
# Views for bench/latency_floor.py alone, chosen by the URL parameter `bench`: the page without its
# panels (sliders, explain() and the footer), and the same with explain() answered from the cache.
BENCH_VARIANTS = ("no-panels", "no-explain")
# Static CSS only, never user text. A metric's label wraps in a narrow column instead of ending in "…".
PAGE_CSS = """
[data-testid="stMetricLabel"] :is([data-testid="stMarkdownContainer"], p) {white-space: normal; overflow: visible}
"""
# Presentation mode, for a projector: larger type, and captions (Streamlit's are 0.875rem at 60%
# opacity, a pale grey on a projector) nearly as dark as the text around them.
PRESENTATION_CSS = """
[data-testid="stMarkdown"] [data-testid="stMarkdownContainer"] :is(p, li) {font-size: 1.25rem}
[data-testid="stCaptionContainer"] {font-size: 1.1rem; opacity: 0.85}
[data-testid="stCaptionContainer"] p {font-size: 1.1rem}
:is([data-testid="stWidgetLabel"], [data-testid="stMetricLabel"], [data-testid="stExpander"] summary) p {
    font-size: 1.1rem}
[data-testid="stHeading"] h3 {font-size: 2rem}
"""


def _set(key: str, value) -> None:
    ss[key] = value


def _random_sentence() -> None:
    sentences = state.test_sentences()
    if sentences:
        ss["text"] = _rng.choice(sentences)


def _as_index(value) -> int | None:
    """An index from Session State. After the options change (new text, new model) the browser can
    hand back the old option's label, e.g. "3: film", instead of the index."""
    if isinstance(value, int) or value is None:
        return value
    found = re.search(r"-?\d+", str(value))               # "3: film", "layer 5 (deterministic)"
    return int(found.group()) if found else None


def _plot(fig, key: str) -> None:
    st.plotly_chart(fig, key=key, config=PLOT_CONFIG, theme=None)


def explanation(text: str) -> None:
    """A panel's prose: a caption under its chart, or, in presentation mode, folded under "What this
    shows", so that a projected page is charts and numbers with the teacher doing the talking."""
    if ss.get("presentation"):
        with st.expander("What this shows"):
            st.caption(text)
    else:
        st.caption(text)


def page_style(presentation: bool) -> None:
    # st.html with only a style goes to the event container, where it takes no space.
    st.html(f"<style>{PAGE_CSS}{PRESENTATION_CSS if presentation else ''}</style>")


# ---- controls -----------------------------------------------------------------------------------
def sentence_controls(corpus: bool) -> None:
    ss.setdefault("text", state.DEFAULT_TEXT)
    st.text_area("Sentence (text)", key="text", height=68, persist_state="session",
                 placeholder="Type a sentence, e.g. a one-line movie review")
    # A row that wraps, of buttons as wide as their words: a narrow screen never cuts one short.
    with st.container(horizontal=True, vertical_alignment="center", key="examples"):
        st.markdown("Examples:", width="content")
        for label, sentence in state.EXAMPLES.items():
            st.button(label, key=f"example_{label}", on_click=_set, args=("text", sentence),
                      help=state.EXAMPLE_HELP[label])
        if corpus:
            st.button("Random review", key="random_sentence", on_click=_random_sentence,
                      icon=":material/casino:", help="A random review from the movies test split")


def presentation_toggle() -> None:
    ss.setdefault("presentation", False)
    st.toggle("Presentation mode", key="presentation", persist_state="session",
              help="For a projector: larger type, and each chart's explanation folded under "
                   "“What this shows”. In the URL as presentation=1.")


def model_controls(models: list[str]) -> None:
    if ss.get("model") not in models:
        ss["model"] = state.DEFAULT_MODEL if state.DEFAULT_MODEL in models else models[0]
    st.selectbox("Model (model)", models, key="model", persist_state="session")


def model_summary(model) -> None:
    st.caption(model.description)
    metrics = ((getattr(model, "card", None) or {}).get("metrics") or {}).get("movies_test") or {}
    shown = [f"{label} {metrics[k]:.3f}" for k, label in
             (("accuracy", "accuracy"), ("nll", "NLL"), ("ece", "ECE")) if isinstance(metrics.get(k), float)]
    st.caption("Movies test set: " + " · ".join(shown) if shown
               else "No test-set metrics in this model's card yet.")


def sync_hyper_to_model(model) -> None:
    """Start from the trained values whenever the model changes (URL values win on the first run)."""
    if ss.get("_hyper_model") == model.name:
        return
    first = "_hyper_model" not in ss
    from_url = ss.get("_hyper_from_url", set()) if first else set()
    for name in state.SLIDERS:
        if name not in from_url or name not in ss:
            ss[name] = state.default_hyper(name, model)
    ss["_hyper_model"] = model.name


def hyper_controls(model) -> None:
    applies = [h for h in state.SLIDERS if h in model.hyper_names]
    others = [h for h in state.SLIDERS if h not in model.hyper_names]
    if applies:
        st.markdown("**Attention hyperparameters**")
    else:
        st.caption(f"{model.name} uses {model.family} attention: no attention hyperparameter to move.")
    for name in applies:
        hyper_slider(name, model, enabled=True)
    if others:
        with st.expander("Sliders other families use", expanded=False):
            for name in others:
                hyper_slider(name, model, enabled=False)


def hyper_slider(name: str, model, enabled: bool) -> None:
    trained = model.trained_hyper.get(name)
    options = state.hyper_options(name, trained)
    if ss.get(name) not in options:
        ss[name] = state.snap(float(ss.get(name, state.default_hyper(name, model))), options)
    reason = None if enabled else f"Not used by {model.name} ({model.family} attention)."
    slider_col, reset_col = st.columns([5, 1], vertical_alignment="bottom")
    slider_col.select_slider(
        state.SLIDERS[name].label, options=options, key=name, format_func=state.format_value,
        disabled=not enabled, help=reason or state.SLIDERS[name].help, persist_state="session",
    )
    reset_col.button("", key=f"reset_{name}", on_click=_set, icon=":material/restart_alt:",
                     args=(name, state.snap(float(trained), options) if trained is not None else None),
                     disabled=not enabled or trained is None,
                     help=f"Back to the trained value {state.format_value(trained)}" if trained else None)
    if enabled:
        caption = (f"trained value: {state.format_value(trained)}" if trained is not None
                   else "no trained value")
        chosen = state.dev_calibrated(model, name)
        if chosen is not None:
            caption += f" · best calibrated on dev (lowest NLL) at {state.format_value(chosen)}"
        st.caption(caption)
    else:
        st.caption(reason)


def sampling_controls(model) -> None:
    reason = None if model.stochastic else (
        f"{model.name} is deterministic: every sample would be the same.")
    ss.setdefault("n_samples", state.DEFAULT_N_SAMPLES)
    ss.setdefault("seed", 0)
    st.slider("n_samples · attention samples", *state.N_SAMPLES_RANGE, key="n_samples", step=1,
              disabled=not model.stochastic, help=reason or "More samples: smoother histograms, slower.",
              persist_state="session")
    st.number_input("seed", *state.SEED_RANGE, key="seed", step=1, disabled=not model.stochastic,
                    help=reason or "Same seed, same samples: a classroom can reproduce a picture.",
                    persist_state="session")
    if reason:
        st.caption(reason)


# ---- panels -------------------------------------------------------------------------------------
def headline(result) -> None:
    i = result.positive_index
    # Bottom-aligned, every metric with a line under its value: a label that wraps to more lines
    # than its neighbours' pushes nothing out of line.
    cols = st.columns(4, vertical_alignment="bottom")

    def estimate(col, label: str, quantity: str, value: float, help: str, sign: bool = False) -> None:
        number, error = charts.with_se(result, quantity, value, sign)
        col.metric(label, number, delta=error, delta_color="off", delta_arrow="off",
                   help=f"{help} {charts.se_help(result, quantity)}")

    estimate(cols[0], "P(positive) = E[f(z)]", "p_positive", float(result.mc_probs[i]),
             "The model's answer: average of the predictions of every attention sample.")
    cols[1].metric("f(E[z]), mean attention", f"{float(result.mean_field_probs[i]):.3f}", delta="one pass",
                   delta_color="off", delta_arrow="off",
                   help="One prediction, with every stochastic layer at its mean attention: no sampling, "
                        "so no Monte Carlo error.")
    estimate(cols[2], "Gap E[f(z)] − f(E[z])", "gap", result.gap,
             "What averaging over attention samples changes in P(positive).", sign=True)
    estimate(cols[3], "Epistemic (mutual information), nats", "mutual_information", result.mutual_information,
             "The part of the predictive entropy due to attention samples disagreeing, in nats.")
    explanation(charts.monte_carlo_caption(result))


def sweep_panel(model, name: str, text: str, hyper: dict, n_samples: int, seed: int) -> None:
    """The prediction and the mutual information over the whole range of one slider."""
    swept = state.swept_hyper(model)
    if swept is None:
        return
    st.subheader(f"Across the whole {swept} range")
    if n_samples < 2:
        st.info("The sweep needs at least 2 attention samples: raise n_samples.")
        return
    prior_only = {s.name for s in model.slider_specs if s.prior_only}
    others = tuple((h, v) for h, v in hyper.items() if h != swept and h not in prior_only)
    result = state.get_sweep(model, name, text, swept, others, n_samples, seed)
    _plot(charts.sweep_figure(result, current=hyper.get(swept)), "sweep")
    explanation(charts.sweep_caption(result, current=hyper.get(swept)))


def prediction_panel(result) -> None:
    st.subheader("The prediction")
    left, right = st.columns([3, 2])
    with left:
        _plot(charts.prediction_figure(result), "prediction")
    with right:
        _plot(charts.entropy_figure(result), "entropy")
        explanation(charts.prediction_caption(result))


def picture_controls(result, model) -> tuple[int, int, int, int, bool]:
    T, L, H = len(result.tokens), model.n_layers, model.n_heads
    default_layer = result.stochastic_layers[-1] if result.stochastic_layers else L - 1
    for key, n, default in (("layer", L, default_layer), ("head", H, 0), ("query_token", T, 0),
                            ("key_token", T, min(1, T - 1))):
        index = _as_index(ss.get(key))
        ss[key] = default if index is None else min(max(index, 0), n - 1)

    def layer_name(i: int) -> str:
        return f"layer {i}" + ("" if i in result.stochastic_layers else " (deterministic)")

    c = st.columns(4)
    c[0].selectbox("Layer (layer)", range(L), key="layer", format_func=layer_name, persist_state="session")
    c[1].selectbox("Head (head)", range(H), key="head", format_func=lambda h: f"head {h}",
                   persist_state="session")
    options = list(range(T))
    c[2].selectbox("Query token (query_token)", options, key="query_token", persist_state="session",
                   format_func=lambda i: charts.token_option(result.tokens, i),
                   help="Whose attention to inspect: [CLS] is what the classifier reads.")
    c[3].selectbox("Key token for the density (key_token)", options, key="key_token",
                   persist_state="session", format_func=lambda i: charts.token_option(result.tokens, i))
    window_control(result)
    ss.setdefault("relative_colour", False)
    st.toggle("Relative colour scales", key="relative_colour", persist_state="session",
              help="Off: every colour scale is fixed (weights 0 to 1, std and spread 0 to 0.5, KL on a log "
                   "scale), so a colour means the same value everywhere. On: each scale stretches over the "
                   "values shown, for contrast; a bright cell is then high only compared with the others.")
    picture = {k: ss.get(k) for k in state.PICTURE_KEYS}
    state.write_query_params(state.PICTURE_KEYS, picture)
    return ss["layer"], ss["head"], ss["query_token"], ss["key_token"], ss["relative_colour"]


def window_control(result) -> None:
    """On a sentence too long for readable maps, where their window of tokens starts: around the
    query token at first, moved to it when a newly chosen query falls outside, else where it is put."""
    T, query = len(result.tokens), ss["query_token"]
    starts = charts.window_starts(T)
    if not starts:
        ss["window_start"] = None                      # every token fits: no window, none in the URL
        return
    start = _as_index(ss.get("window_start"))
    query_moved = ss.get("_window_query", query) != query
    if start is None or (query_moved and query not in charts.token_window(T, start)):
        start = charts.window_around(T, query)
    ss["window_start"] = min(max(start, starts[0]), starts[-1])
    ss["_window_query"] = query
    st.select_slider(
        "Tokens shown in the bars and maps (window_start)", options=starts, key="window_start",
        format_func=lambda s: charts.window_label(T, s), persist_state="session",
        help=f"The sentence has {T} tokens, too many to read in a map: the maps show [CLS], "
             f"{charts.TOKEN_WINDOW - 2} tokens in a row from here, and [SEP]. Choosing a query token "
             "outside them moves them to it.")


@st.fragment
def inspection(result, model) -> None:
    """Everything that depends on layer, head and tokens: reruns alone, never re-runs the model."""
    st.subheader("Inside the attention")
    layer, head, query, key, relative = picture_controls(result, model)

    # One token window for the bars and the maps (every token when few): it follows the query.
    shown = charts.token_window(len(result.tokens), ss.get("window_start") or 1)
    st.markdown("**1 · Prior vs posterior** for the selected query")
    left, right = st.columns([3, 2])
    with left:
        _plot(charts.prior_posterior_figure(result, layer, head, query, shown=shown), "prior_posterior")
        explanation(charts.prior_posterior_caption(result, layer, head, query, shown=shown))
    with right:
        _plot(charts.key_density_figure(result, layer, head, query, key), "density")
        explanation(charts.key_density_caption(result, layer, head, query, key))

    st.markdown(f"**2 · Sampled attention maps**, layer {layer} head {head}")
    _plot(charts.sampled_maps_figure(result, layer, head, relative=relative, shown=shown), "maps")
    explanation(charts.sampled_maps_caption(result, layer, head, relative=relative, shown=shown))

    st.markdown("**3 · Where the uncertainty lives**, every layer and head")
    left, right = st.columns(2)
    with left:
        _plot(charts.layer_head_figure(result, "spread", selected=(layer, head), relative=relative), "spread")
    with right:
        _plot(charts.layer_head_figure(result, "kl", selected=(layer, head), relative=relative), "kl")
    explanation(charts.layer_head_caption(result, relative=relative))
    st.divider()
    downloads(result, layer, head)       # here, so that they follow the selected layer and head


def downloads(result, layer: int, head: int) -> None:
    """What the page shows for the selected layer and head, with the settings in a header and in
    the file name; `bam_viz.export.full_json` has every layer and head, from the library."""
    c = st.columns(2)
    # Deferred to the click: the page's reruns need not serialise anything.
    c[0].download_button(f"Download layer {layer} head {head} (JSON)",
                         data=lambda: json.dumps(export.view_json(result, layer, head), ensure_ascii=False),
                         file_name=export.file_name(result, layer, head, "json"), mime="application/json",
                         on_click="ignore", key="download_json")
    c[1].download_button(f"Download layer {layer} head {head} (CSV)",
                         data=lambda: export.view_csv(result, layer, head),
                         file_name=export.file_name(result, layer, head, "csv"), mime="text/csv",
                         on_click="ignore", key="download_csv")


def render_marker(values: dict, started: float, n_samples: int) -> None:
    """A footer that names the view and the server's time on it: its run counter is what the latency
    benchmarks and the browser tests wait for, and the time lets them split server from browser.
    It is always written, and shown only with the URL parameter debug=1: otherwise a style hides it,
    and it stays in the page for the benchmarks to read (`innerText` of a hidden element is its text)."""
    ss["_runs"] = ss.get("_runs", 0) + 1
    hyper = " · ".join(f"{k}={state.format_value(values[k])}" for k in state.SLIDERS if k in values)
    server_ms = 1000 * (time.perf_counter() - started)
    if st.query_params.get("debug") != "1":
        # Style only: Streamlit puts it in the event container, where it takes no space.
        st.html("<style>.st-key-render_marker {display: none}</style>")
    with st.container(key="render_marker"):
        st.caption(f"view {ss['_runs']} · model {values['model']} · {hyper or 'no hyperparameters'} · "
                   f"{charts.count(n_samples, 'sample')} · seed {values['seed']} · server {server_ms:.0f} ms")


# ---- the page -----------------------------------------------------------------------------------
def main() -> None:
    st.title("Seeing attention uncertainty")
    st.caption("Bayesian Attention Modules (Fan et al., NeurIPS 2020) make attention weights random. "
               "Type a sentence, pick a model, move the sliders, and watch what the model is unsure about.")
    models = bam_viz.available_models()
    if not models:
        st.error("No pretrained models found in pretrained/: the lead's training has not shipped any yet.")
        return
    state.load_query_params(models)
    with st.sidebar:
        presentation_toggle()
    page_style(ss["presentation"])
    sentence_controls(state.corpus_available())
    with st.sidebar:
        model_controls(models)
    name = ss["model"]
    try:
        model = state.get_model(name)
    except Exception as err:  # a corrupt or missing checkpoint: say so, keep the app alive
        st.error(f"Could not load the model “{name}”: {err}")
        state.write_query_params(state.MAIN_KEYS, {"text": ss.get("text"), "model": name,
                                                   "presentation": 1 if ss["presentation"] else None})
        return
    sync_hyper_to_model(model)
    with st.sidebar:
        model_summary(model)
    live_view(model, name)


@st.fragment
def live_view(model, name: str) -> None:
    """The sliders and everything they change. A slider move reruns this fragment alone: the title,
    the sentence box and the model picker are neither re-run on the server nor redrawn in the
    browser. A new sentence or model reruns the whole page, and this with it."""
    started = time.perf_counter()
    with st.sidebar:
        hyper_controls(model)
        st.markdown("**Sampling**")
        sampling_controls(model)

    text = ss.get("text", "")
    values = {"text": text, "model": name, "n_samples": ss["n_samples"], "seed": ss["seed"],
              "presentation": 1 if ss["presentation"] else None,
              **{h: float(ss[h]) for h in model.hyper_names}}
    state.write_query_params(state.MAIN_KEYS, values)
    if not text.strip():
        st.info("Type a sentence above, or pick an example, to see how the model reads it.")
        return
    hyper = tuple((h, float(ss[h])) for h in model.hyper_names)
    variant = st.query_params.get("bench")
    if variant == "no-explain":   # the sliders still move; explain() answers from its cache
        hyper = tuple((h, float(model.trained_hyper[h])) for h in model.hyper_names)
    n_samples, seed = (ss["n_samples"], ss["seed"]) if model.stochastic else (1, 0)
    try:
        result = state.get_result(model, name, text, hyper, n_samples, seed)
    except ValueError as err:
        st.info(f"{err}")
        return
    if variant in BENCH_VARIANTS:
        render_marker(values, started, result.n_samples)
        return
    for note in result.notes:
        (st.warning if result.truncated and "longer" in note else st.info)(note)

    headline(result)
    # The sweep sits at the top but is computed last (a new sentence costs one S-sample pass per
    # swept value): the panels below it reach the browser first.
    sweep_slot = st.container()
    prediction_panel(result)
    inspection(result, model)
    with sweep_slot:
        sweep_panel(model, name, text, dict(hyper), n_samples, seed)
    render_marker(values, started, result.n_samples)

main()
