"""The explorer: type a sentence, pick a model, move the sliders, watch attention uncertainty.

No math here: `bam_viz` computes (`bam_viz.live.grid`: the sentence at every slider value), the browser
draws (`views/components.py`, `views/live/live.js`), `bam_viz.plots.captions` writes the captions, and this
page lays out and wires the controls.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import re
import time

import streamlit as st

import bam_viz
from bam_viz.core.text import display_token
from bam_viz.inference import export
from bam_viz.inference.explain import lower_states
from bam_viz.live import grid as live
from bam_viz.plots.style import TOKEN_WINDOW
from bam_viz.plots.tokens import token_window, window_around, window_label, window_starts
from bam_viz.plots.wording import count
from bam_viz.zoo import missing_user_folders, refused_models
from views import components, live_route, page_frames, panels, state, turns, why_view
from views.text import md_escape, model_error, refused_models_line, token_option

ss = st.session_state
_rng = random.Random()
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
    try:
        sentences = state.test_sentences()
    except Exception as err:     # a broken corpus folder: this button stops, the page goes on
        ss["_corpus_problem"] = state.corpus_problem(err)
        return
    if sentences:
        ss["text"] = _rng.choice(sentences)


def _as_index(value) -> int | None:
    """An index from Session State. After the options change (new text, new model) the browser can
    hand back the old option's label, e.g. "3: film", instead of the index."""
    if isinstance(value, int) or value is None:
        return value
    found = re.search(r"-?\d+", str(value))               # "3: film", "layer 5 (deterministic)"
    return int(found.group()) if found else None


def page_style(presentation: bool) -> None:
    """The page's CSS, written by the full run only: a style element rewritten by every fragment rerun
    makes the browser recompute the whole page's style. The footer (`render_marker`) is hidden
    unless the URL says debug=1."""
    hide_footer = "" if st.query_params.get("debug") == "1" else ".st-key-render_marker {display: none}"
    # st.html with only a style goes to the event container, where it takes no space.
    st.html(f"<style>{PAGE_CSS}{PRESENTATION_CSS if presentation else ''}{hide_footer}</style>")


# ---- controls -----------------------------------------------------------------------------------
def _open_example(example: dict) -> None:
    """An example of another model: its model, its class (resolved once the model's classes are
    known, as a link's is) and its sentence."""
    ss["model"], ss["text"], ss["_target_from_url"] = example["model"], example["text"], example["target"]


def sentence_controls(corpus: bool, models: list[str]) -> None:
    ss.setdefault("text", state.DEFAULT_TEXT)
    st.text_area("Sentence (text)", key="text", height=68, persist_state="session",
                 placeholder="Type a sentence, e.g. a one-line movie review")
    # A row that wraps, of buttons as wide as their words: a narrow screen never cuts one short.
    with st.container(horizontal=True, vertical_alignment="center", key="examples"):
        st.markdown("Examples:", width="content")
        for label, sentence in state.EXAMPLES.items():
            st.button(label, key=f"example_{label}", on_click=_set, args=("text", sentence),
                      help=state.EXAMPLE_HELP[label])
        for label, example in state.MODEL_EXAMPLES.items():
            if example["model"] in models:         # a shipped model: absent only from a partial install
                st.button(label, key=f"example_{label}", on_click=_open_example, args=(example,),
                          help=state.MODEL_EXAMPLE_HELP[label])
        if corpus:
            problem = ss.get("_corpus_problem")
            st.button("Random review", key="random_sentence", on_click=_random_sentence,
                      disabled=problem is not None,
                      help=problem or "A random review from the movies test split")
    if corpus and ss.get("_corpus_problem"):
        st.caption(f"“Random review” is off: {md_escape(ss['_corpus_problem'])}")


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
    st.caption("Movies test set: " + " · ".join(shown) if shown else "No test-set metrics in this model's card yet.")


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
    ss["_slider_epoch"] = ss.get("_slider_epoch", 0) + 1        # the browser's sliders take these values


def hyper_controls(model) -> None:
    """The attention hyperparameter sliders: in the browser (views/components.py). A move repaints the
    charts there, a release asks the live route for the charts at the new values, and the values come
    back here once the sliders rest (`_hyper_sent`, `live_route.HYPER_SEND_MS`) and go to the URL."""
    sliders = []
    for spec in model.slider_specs:
        trained = model.trained_hyper.get(spec.name)
        # any value of the range (from the URL, typed, another model's): the grid holds it (LiveGrid's others)
        ss[spec.name] = state.hyper_value(spec.name, ss.get(spec.name, state.default_hyper(spec.name, model)))
        values = state.hyper_options(spec.name, trained, ss[spec.name])
        sliders.append({"name": spec.name, "label": spec.label, "help": spec.help, "scale": spec.scale,
                        "values": values, "trained": trained, "current": float(ss[spec.name]),
                        "dev_note": state.dev_calibrated_note(model, spec.name),
                        "side": "prior" if spec.prior_only else "posterior"})
    note = None if sliders else f"{model.name} uses {model.family} attention: no attention hyperparameter to move."
    if sliders:
        st.markdown("**Attention hyperparameters**")
    components.sliders({"kind": "sliders", "epoch": ss.get("_slider_epoch", 0), "sliders": sliders,
                        "presentation": bool(ss.get("presentation")), "note": note,
                        "send_ms": live_route.HYPER_SEND_MS, "exact_digits": state.EXACT_DIGITS},
                        on_change=_hyper_sent)


def _hyper_sent() -> None:
    """The browser sent slider values (on release, or typed): keep each, in its range, for the URL."""
    _keep_hyper(components.sent_hyper(ss))


def _frame_sent() -> None:
    """A page that makes its frames sent its frame, with the slider values it is at (`views.page_frames`),
    once it was its turn (`views.turns`)."""
    _keep_hyper(page_frames.sent(components.SUMMARY_KEY))


def _keep_hyper(sent: dict) -> None:
    model = state.get_model(ss["model"])
    for name, value in sent.items():
        if name in model.hyper_names and isinstance(value, (int, float)) and math.isfinite(value):
            ss[name] = state.hyper_value(name, value)


def sampling_controls(model) -> None:
    reason = None if model.stochastic else f"{model.name} is deterministic: every sample would be the same."
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


def target_control(model, result) -> int | None:
    """The class the one-class panels show (the headline, the sweep, the histogram, the downloads):
    "predicted (<name>)" first, then every class of the model. Returns its index, None for the
    predicted class. A class from the URL is read here, once the model's classes are known; a new
    model keeps the class of the same name, else shows its predicted class."""
    classes = tuple(model.classes)
    if "_target_from_url" in ss:
        ss[state.TARGET_KEY] = state.target_option(ss.pop("_target_from_url"), classes)
    elif ss.get("_target_classes") not in (None, classes):
        ss[state.TARGET_KEY] = state.target_option(ss.get("_target_name"), classes)
    if not isinstance(ss.get(state.TARGET_KEY), int) or not -1 <= ss[state.TARGET_KEY] < len(classes):
        ss[state.TARGET_KEY] = state.PREDICTED
    # Holds the class names and the predicted one, never the result (the session keeps format_func).
    # waiting for the page's frame: which class E[f(z)] predicts is not known yet
    predicted = "…" if result.waiting else display_token(classes[result.predicted])
    name = functools.partial(_class_option, classes, predicted)
    option = st.selectbox("Class shown (target)", [state.PREDICTED, *range(len(classes))], key=state.TARGET_KEY,
                          format_func=name, persist_state="session",
                          help="The class whose probability the headline, the sweep and the histogram show. "
                               "The predicted class is the one with the largest E[f(z)] at these settings.")
    ss["_target_classes"], ss["_target_name"] = classes, state.target_in_url(option, classes)
    state.write_query_params((state.TARGET_KEY,), {state.TARGET_KEY: ss["_target_name"]})
    return None if option == state.PREDICTED else option


def _class_option(classes: tuple[str, ...], predicted: str, option: int) -> str:
    return f"predicted ({predicted})" if option == state.PREDICTED else display_token(classes[option])


# ---- panels: drawn in the browser from every slider value at once --------------------------------
def summary_panel(grid, result, hyper: dict, route: str | None) -> None:
    """Headline estimates with their errors, the sweep over the posterior slider, the prediction,
    for the class `result.target`."""
    post, prior = panels.indices(grid, hyper)
    payload = panels.summary_bytes(grid, result, post, prior, bool(ss.get("presentation")), ss.get("_runs", 0), route)
    components.charts(payload, components.SUMMARY_KEY, on_frame=_frame_sent if grid.in_browser else None)


def picture_controls(result, model) -> tuple[int, int, int, int, bool]:
    T, L, H = len(result.tokens), model.n_layers, model.n_heads
    default_layer = result.stochastic_layers[-1] if result.stochastic_layers else L - 1
    for key, n, default in (("layer", L, default_layer), ("head", H, 0), ("query_token", T, 0),
                            ("key_token", T, min(1, T - 1))):
        index = _as_index(ss.get(key))
        ss[key] = default if index is None else min(max(index, 0), n - 1)

    # A widget keeps its format_func in the session until the session ends: these hold the tokens and
    # layer numbers only, never the result (a closure over `result` kept every session's alive).
    tokens, stochastic = tuple(result.tokens), frozenset(result.stochastic_layers)
    token_name = functools.partial(token_option, tokens)
    c = st.columns(4)
    c[0].selectbox("Layer (layer)", range(L), key="layer", format_func=functools.partial(_layer_name, stochastic),
                   persist_state="session")
    c[1].selectbox("Head (head)", range(H), key="head", format_func=lambda h: f"head {h}", persist_state="session")
    options = list(range(T))
    c[2].selectbox("Query token (query_token)", options, key="query_token", persist_state="session",
                   format_func=token_name, help="Whose attention to inspect: [CLS] is what the classifier reads.")
    c[3].selectbox("Key token for the density (key_token)", options, key="key_token",
                   persist_state="session", format_func=token_name)
    window_control(result)
    ss.setdefault("relative_colour", False)
    st.toggle("Relative colour scales", key="relative_colour", persist_state="session",
              help="Off: every colour scale is fixed (weights 0 to 1, std and spread 0 to 0.5, KL on a log "
                   "scale), so a colour means the same value everywhere. On: each scale stretches over the "
                   "values shown, for contrast; a bright cell is then high only compared with the others.")
    state.write_query_params(state.PICTURE_KEYS, {k: ss.get(k) for k in state.PICTURE_KEYS})
    return ss["layer"], ss["head"], ss["query_token"], ss["key_token"], ss["relative_colour"]


def _layer_name(stochastic: frozenset, i: int) -> str:
    return f"layer {i}" + ("" if i in stochastic else " (deterministic)")


def window_control(result) -> None:
    """On a sentence too long for readable maps, where their window of tokens starts: around the
    query token at first, moved to it when a newly chosen query falls outside, else where it is put."""
    T, query = len(result.tokens), ss["query_token"]
    starts = window_starts(T)
    if not starts:
        ss["window_start"] = None                      # every token fits: no window, none in the URL
        return
    start = _as_index(ss.get("window_start"))
    query_moved = ss.get("_window_query", query) != query
    if start is None or (query_moved and query not in token_window(T, start)):
        start = window_around(T, query)
    ss["window_start"] = min(max(start, starts[0]), starts[-1])
    ss["_window_query"] = query
    st.select_slider(
        "Tokens shown in the bars and maps (window_start)", options=starts, key="window_start",
        format_func=lambda s: window_label(T, s), persist_state="session",
        help=f"The sentence has {T} tokens, too many to read in a map: the maps show [CLS], "
             f"{TOKEN_WINDOW - 2} tokens in a row from here, and [SEP]. Choosing a query token "
             "outside them moves them to it.")


@st.fragment
@state.foreground
@page_frames.running
def inspection(view: state.View, model, hyper: dict) -> None:
    """The layer, head and token pickers and what they select: reruns alone, and re-slices the
    sentence's slider grid without running the model (a new token window makes a new grid).

    A fragment keeps its arguments for its reruns, in the session, until the session ends (two
    minutes after its tab closes): so it takes the view's key, not the result and grid (every sampled
    weight of the sentence), and finds them in the shared cache."""
    grid = view.grid(model)
    post, prior = panels.indices(grid, hyper)
    # Started here too: the cache may have let the run's grid go since (a new one has no frame yet).
    grid.start(post)
    st.subheader("Inside the attention")
    result = page_frames.result(grid, post, prior, view.target)
    layer, head, query, key, relative = picture_controls(result, model)
    shown = token_window(len(grid.tokens), ss.get("window_start") or 1)
    if shown != grid.window:                       # a long sentence's window moved: its own grid
        if grid.in_browser:                        # the page makes the new window's frames: from the top
            st.rerun(scope="app")
        grid = view._replace(window=tuple(shown)).grid(model)
        grid.start(post)
        result = live.FrameResult(grid, post, prior, view.target)
    live_route.inside(ss.get(live_route.TOKEN_KEY), view._replace(window=tuple(grid.window)),
                      (layer, head, query, key, bool(relative)))
    payload, meta = panels.inside_parts(model, grid, result, (layer, head, query, key, relative),
                                        bool(ss.get("presentation")))
    components.charts_by_url(payload, components.INSIDE_KEY, meta)
    st.divider()
    downloads(view, model, result, layer, head)   # here, so that they follow the selected layer and head


def downloads(view: state.View, model, result, layer: int, head: int) -> None:
    """What the page shows for the selected layer and head, with the settings in a header and in
    the file name; `bam_viz.inference.export.full_json` has every layer and head, from the library."""
    c = st.columns(2)
    # Deferred to the click: the page's reruns need not serialise anything. The session keeps these
    # functions until it ends, so they hold the view's key, not the result.
    c[0].download_button(f"Download layer {layer} head {head} (JSON)",
                         data=lambda: json.dumps(export.view_json(view.result(model), layer, head),
                                                 ensure_ascii=False),
                         file_name=export.file_name(result, layer, head, "json"), mime="application/json",
                         on_click="ignore", key="download_json")
    c[1].download_button(f"Download layer {layer} head {head} (CSV)",
                         data=lambda: export.view_csv(view.result(model), layer, head),
                         file_name=export.file_name(result, layer, head, "csv"), mime="text/csv",
                         on_click="ignore", key="download_csv")


def text_tag(text: str) -> str:
    """A short fingerprint of the sentence in the footer: the load benchmark checks with it that
    every session is shown its own sentence."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:8]


def render_marker(values: dict, started: float, n_samples: int, whole: list[bool]) -> None:
    """A footer that names the view and the server's time on it: its run counter is what the latency
    benchmarks and the browser tests wait for, and the time lets them split server from browser.
    It is always written, and shown only with the URL parameter debug=1: otherwise a style hides it,
    and it stays in the page for the benchmarks to read (`innerText` of a hidden element is its text)."""
    ss["_runs"] = ss.get("_runs", 0) + 1
    hyper = " · ".join(f"{k}={state.format_value(values[k])}" for k in state.SLIDERS if k in values)
    server_ms = 1000 * (time.perf_counter() - started)
    with st.container(key="render_marker"):
        st.caption(f"view {ss['_runs']} · text {text_tag(values['text'])} · model {md_escape(values['model'])} · "
                   f"{hyper or 'no hyperparameters'} · "
                   f"{count(n_samples, 'sample')} · seed {values['seed']} · "
                   f"slider grid {sum(whole)}/{len(whole)} · server {server_ms:.0f} ms")


# ---- the page -----------------------------------------------------------------------------------
@state.foreground
@turns.urgent
def main() -> None:
    st.title("Seeing attention uncertainty")
    st.caption("Bayesian Attention Modules (Fan et al., NeurIPS 2020) make attention weights random. "
               "Type a sentence, pick a model, move the sliders, and watch what the model is unsure about.")
    models = bam_viz.available_models()
    for entry in missing_user_folders():   # a mistyped $BAM_VIZ_MODELS entry: say so, go on
        st.warning(f"$BAM_VIZ_MODELS names {md_escape(entry)}, which holds no model folder (card.json).")
    if refused := refused_models():                # folders the model list leaves out: say why, go on
        st.warning(refused_models_line(refused))
    if not models:
        st.error("No pretrained models found in pretrained/: the lead's training has not shipped any yet.")
        return
    state.load_query_params(models)
    with st.sidebar:
        presentation_toggle()
    page_style(ss["presentation"])
    sentence_controls(state.corpus_available(), models)
    with st.sidebar:
        model_controls(models)
    name = ss["model"]
    try:
        model = state.get_model(name)
    except Exception as err:  # a corrupt or missing checkpoint: say so, keep the app alive
        st.error(model_error(name, err))
        state.write_query_params(state.MAIN_KEYS, {"text": ss.get("text"), "model": name,
                                                   "presentation": 1 if ss["presentation"] else None})
        return
    sync_hyper_to_model(model)
    with st.sidebar:
        model_summary(model)
    st.fragment(live_view)(model, name)


@state.foreground
@page_frames.running
def live_view(model, name: str) -> None:
    """The sliders and everything they change, a fragment. The browser moves the sliders and redraws
    the charts by itself, and the live route (`views.live_route`, registered here) answers a release
    and a poll for new frames without a run; this reruns when the sliders' values come back once they
    rest (for the URL and the sections below), when n_samples or the seed changes, and when the page
    polls without a route. A new sentence or model reruns the whole page, and this with it."""
    started = time.perf_counter()
    with st.sidebar:
        hyper_controls(model)
        st.markdown("**Sampling**")
        sampling_controls(model)
    text, hyper = ss.get("text", ""), {h: float(ss[h]) for h in model.hyper_names}
    values = {"text": text, "model": name, "n_samples": ss["n_samples"], "seed": ss["seed"],
              "presentation": 1 if ss["presentation"] else None, **hyper}
    state.write_query_params(state.MAIN_KEYS, values)
    if not text.strip():
        st.info("Type a sentence above, or pick an example, to see how the model reads it.")
        return
    n_samples, seed = (ss["n_samples"], ss["seed"]) if model.stochastic else (1, 0)
    try:
        n_samples, reduced = state.samples_that_fit(model, text, n_samples)
    except ValueError as err:                      # a bad $BAM_VIZ_APP_ATTENTION_MB: the server's setting
        st.error(md_escape(str(err)))
        return
    if reduced:
        st.info(reduced)
    try:
        # The page reads the sentence's slider grid only: its frame at these values is the result
        # (`live.FrameResult`), so a release or a poll runs no model once the frame is made.
        trained = model.trained_hyper
        view = state.View(name, text, tuple(hyper.items()), n_samples, seed, _window(model, text),
                          tuple((h, v) for h, v in hyper.items()
                                if h not in state.LIVE_SLIDERS or state.off_grid(h, v, trained.get(h))))
        grid = view.grid(model)
        post, prior = panels.indices(grid, hyper)
        grid.start(post)
        page_frames.take(grid)
        result = page_frames.result(grid, post, prior)
        with st.columns([1, 2])[0]:
            target = target_control(model, result)
        result = result.for_target(target)
        view = view._replace(target=target)
        ss["_explorer_view"] = view                # what a lesson's revealed number reads (views/lessons.py)
    except ValueError as err:
        st.info(md_escape(str(err)))
        return
    for note in result.notes:
        (st.warning if note.warning else st.info)(note)
    route = live_route.summary(ss, model, view, bool(ss.get("presentation")))
    summary_panel(grid, result, hyper, route)
    inspection(view, model, hyper)
    with st.container(key=state.WHY_PANEL_KEY):
        why_view.why_section(view, model)
    render_marker(values, started, result.n_samples, grid.whole)


def _window(model, text: str) -> tuple[int, ...]:
    """The token window of the maps on this run (every token of a short sentence)."""
    return tuple(token_window(len(lower_states(model, text).tokens), _as_index(ss.get("window_start")) or 1))


if __name__ == "__main__":         # Streamlit runs a page as __main__; views/lessons.py imports it
    main()
