"""The explorer's state: cached model and results, slider grids, and the URL round trip.

Every control has a fixed widget key, which is also its query parameter, so a copied link
reproduces the view. Values read from a URL are validated and clamped here, before any widget
sees them.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import NamedTuple

import streamlit as st

import bam_viz
from bam_viz import families
from bam_viz.core.budgets import MB, attention_bytes, env_megabytes
from bam_viz.core.cache import CACHE
from bam_viz.live import grid as live
from bam_viz.live.grid import LiveGrid

DEFAULT_MODEL = "bam-wc"
DEFAULT_N_SAMPLES = 32
N_SAMPLES_RANGE = (1, 64)             # see get_result for the memory bound
SEED_RANGE = (0, 9999)
# The example buttons and the default sentence: movies dev sentences chosen by the rule in
# bam_viz/evaluation/examples.py, which wrote this file with the figures that chose them (`make examples`).
# The file is part of the repository, so the buttons work without the corpora.
EXAMPLES_FILE = Path(__file__).with_name("examples.json")
_CHOSEN = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
EXAMPLES = {e["category"]: e["text"] for e in _CHOSEN["examples"]}
DEFAULT_TEXT = EXAMPLES[_CHOSEN["default"]]            # the largest mutual information of the examples
EXAMPLE_HELP = {
    e["category"]: (f"“{e['text']}”  \nChosen as **{e['category']}**: {e['criterion']}; of those, the largest "
                    f"mutual information on movies dev at {_CHOSEN['model']}'s trained setting "
                    f"({_CHOSEN['n_samples']} samples, seed {_CHOSEN['seed']}): "
                    f"MI {e['mutual_information']:.3f} nats (plug-in), gap to the deterministic pass "
                    f"E[f(z)] − f(softmax) {e['gap_softmax']:+.3f}.")
    for e in _CHOSEN["examples"]
}
# Examples that open another model (the three-class one): each sets the model, the class shown and
# the sentence; chosen by the rule in bam_viz/evaluation/examples.py (`three_way_example`).
MODEL_EXAMPLES = {e["label"]: e for e in _CHOSEN.get("model_examples", [])}


def _model_example_help(e: dict) -> str:
    p = e[f"p_{e['target']}"]
    return (f"“{e['text']}”  \nOpens **{e['model']}** showing P({e['target']}): {e['criterion']} "
            f"(P({e['target']}) {p:.3f}, {e['n_samples']} samples, seed {e['seed']}).")


MODEL_EXAMPLE_HELP = {label: _model_example_help(e) for label, e in MODEL_EXAMPLES.items()}
# Every family's slider hyperparameters (range, scale, label, help), each name once.
SLIDERS = {spec.name: spec for spec in families.all_slider_specs()}
# Keys written by the main script; the inspection fragment writes its own (PICTURE_KEYS).
# `presentation` (larger type, prose folded away: for a projector) is in the URL only when on.
MAIN_KEYS = ("text", "model", *SLIDERS, "n_samples", "seed", "presentation")
PICTURE_KEYS = ("layer", "head", "query_token", "key_token", "relative_colour", "window_start")
PICTURE_TOGGLES = ("relative_colour",)      # on/off picture controls; the rest are indices
# The class the one-class panels show (`target`): a class index, or PREDICTED for the predicted class.
# In the URL as the class's name, and absent for the predicted class.
TARGET_KEY = "target"
PREDICTED = -1
# The "Why this prediction" section's controls, written by its own fragment (views/why_view.py).
WHY_KEYS = ("why", "why_target", "why_samples", "why_steps")
WHY_SAMPLES = (4, 8, 16)
WHY_PANEL_KEY = "why_panel"          # the section's container: what a lesson outlines (views/lesson_files.py)
WHY_STEPS = (16, 32, 64)


def foreground(fn):
    """Run `fn` (a page or fragment) as a request being answered: background frames wait for it
    (`bam_viz.live.scheduler.FrameScheduler.foreground`)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with live.FRAMES.foreground():
            return fn(*args, **kwargs)
    return run


# ---- cached work --------------------------------------------------------------------------------
MODELS_KEPT = 16                # models kept loaded: the zoo's eight and a user's few, each version of a folder apart
def get_model(name: str):
    """One model per process and version of its folder's files, shared by every session and treated
    as read-only: a user's folder trained again, or broken, under the same name is read again."""
    from bam_viz.model_files import file_key
    from bam_viz.zoo import listed_folders

    folder = listed_folders().get(name)
    files = () if folder is None else tuple(file_key(folder / f) for f in ("card.json", "model.safetensors"))
    return _loaded_model(name, files)


@st.cache_resource(show_spinner="Loading the model…", max_entries=MODELS_KEPT)
def _loaded_model(name: str, files: tuple):
    """`get_model`'s cache, by name and the files' keys (`model_files.file_key`)."""
    _one_torch_thread()
    return bam_viz.load(name)


get_model.clear = _loaded_model.clear


def _one_torch_thread() -> None:
    """One intra-op thread, unless OMP_NUM_THREADS says otherwise.

    Sessions already run in threads of their own, and torch's default (a thread per core)
    oversubscribes the CPU as soon as anything else runs: then the threads of one `explain()` wait
    for each other (docs/performance.md, "Threads in the app", has it measured).
    """
    import os

    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


# Shared, read-only results and grids, kept in the library's one byte budget (`bam_viz.core.cache.CACHE`,
# $BAM_VIZ_CACHE_MB) with the models' own caches, rather than `st.cache_data` (which pickles a
# whole result on every miss and unpickles it on every hit) or `st.cache_resource` (bounded in
# entries: a result at 128 tokens and 64 samples is 2000 times one at 8 tokens and 4).
# What one sentence may hold of sampled attention in the explorer, the server's memory being shared by
# every session: the S x L x H x T x T weights of explain(), 4.5 MiB a sample at 128 tokens. One
# explain() peaks at a few times its weights, and the whole zoo with its caches must stay under
# 2.5 GB (docs/performance.md). Up to 85 tokens the explorer's 64 samples fit.
APP_ATTENTION_ENV = "BAM_VIZ_APP_ATTENTION_MB"
APP_ATTENTION_MB = 128


def samples_that_fit(model, text: str, n_samples: int) -> tuple[int, str | None]:
    """The samples the explorer draws for `text`: `n_samples`, or fewer for a long sentence, with a
    sentence saying what was reduced and why (None when nothing was). A bad $BAM_VIZ_APP_ATTENTION_MB
    is a ValueError naming it, as every budget's is (`bam_viz.core.budgets`)."""
    budget = env_megabytes(APP_ATTENTION_ENV, APP_ATTENTION_MB) * MB
    try:
        T = len(model.tokenizer.encode(text)[0])
    except Exception:                  # a text the tokenizer refuses: explain() says why, with its message
        return n_samples, None
    per_sample = attention_bytes(model.n_layers, model.n_heads, T)
    fit = max(1, int(budget // per_sample))
    if n_samples <= fit:
        return n_samples, None
    return fit, (f"This sentence has {T} tokens: the explorer draws {fit} attention samples, not {n_samples}, so "
                 f"that one sentence holds at most {budget / 2**20:.0f} MB of sampled attention on a server shared "
                 "by every visitor. Shorten the sentence for more samples, or use the library.")


def get_result(model, name: str, text: str, hyper: tuple[tuple[str, float], ...], n_samples: int, seed: int):
    """`explain()` once per (model, text, hyperparameters, n_samples, seed). The charts come from the
    slider grid: this result writes the captions and the downloads.

    Every session shares the returned object: nothing may modify it.
    """
    key = (name, text, hyper, n_samples, seed)
    hit = CACHE.get("app.result", key)
    if hit is None:
        with st.spinner("Sampling attention…"):
            hit = CACHE.put("app.result", key, model.explain(text, n_samples=n_samples, seed=seed, **dict(hyper)))
    else:
        CACHE.grew("app.result", key)  # its cached properties fill in as the views read them
    return hit


CACHE.keep_longer("app.grid")


def get_attribution(model, name: str, text: str, hyper: tuple[tuple[str, float], ...], n_samples: int, seed: int,
                    steps: int, target: int, layer: int):
    """`model.attribute()` once per (model, text, hyperparameters, samples, seed, steps, target,
    layer), shared by every session; made on demand (the Why section is off until asked for)."""
    key = (name, text, hyper, n_samples, seed, steps, target, layer)
    return CACHE.get_or_make("app.attribution", key,
                             lambda: model.attribute(text, n_samples=n_samples, seed=seed, steps=steps,
                                                     target=target, layer=layer, **dict(hyper)))


def get_label_posterior(model, name: str, text: str, hyper: tuple[tuple[str, float], ...], n_samples: int,
                        seed: int, layer: int | None):
    """`model.label_posterior()` on the explorer's own samples (its S and seed), shared by every session."""
    key = (name, text, hyper, n_samples, seed, layer)
    return CACHE.get_or_make("app.label_posterior", key,
                             lambda: model.label_posterior(text, n_samples=n_samples, seed=seed, layer=layer,
                                                           **dict(hyper)))


# The sliders the browser moves by itself: every family slider (the rest of a model's hyperparameters
# are fixed at their trained values and key the grid).
LIVE_SLIDERS = frozenset(SLIDERS)


def get_grid(model, name: str, text: str, n_samples: int, seed: int, window: tuple[int, ...],
             others: tuple[tuple[str, float], ...]):
    """The sentence at every value of the model's sliders (`bam_viz.live.grid.LiveGrid`), shared by every
    session that asks for the same (model, text, S, seed, token window).
    Its frames are made in the background: `start()` it. Grids grow as frames are made (and
    payloads are memoised from them), so the store measures this one again on every hit."""
    key = (name, text, n_samples, seed, window, others)
    hit = CACHE.get("app.grid", key)
    if hit is None:
        with st.spinner("Computing every slider value…"):
            grid = LiveGrid(model, text, n_samples, seed, window=list(window), **dict(others))
            hit = CACHE.put("app.grid", key, grid)
    elif hit.measured != hit.version:  # frames, and the payloads made from them, were added since it was measured
        hit.measured = hit.version
        CACHE.grew("app.grid", key)
    return hit


def find_grid(view):
    """`view`'s grid if the cache still holds it, else None (never made here: `views.live_route`)."""
    return CACHE.get("app.grid", (view.name, view.text, view.n_samples, view.seed, view.window, view.others))


class View(NamedTuple):
    """What a run shows, as a key: its result and grid are found in the shared cache (and made again
    if they were evicted). Held by what a session keeps between runs (a fragment's arguments, a
    download's function) instead of the objects, which the cache alone may keep alive."""

    name: str
    text: str
    hyper: tuple[tuple[str, float], ...]
    n_samples: int
    seed: int
    window: tuple[int, ...]
    others: tuple[tuple[str, float], ...]

    target: int | None = None        # the class shown: an index of the model's classes, None the predicted

    def result(self, model):
        """The shared result, for the class this view shows (`ExplainResult.for_target`: no copy)."""
        return get_result(model, self.name, self.text, self.hyper, self.n_samples, self.seed).for_target(self.target)

    def grid(self, model):
        return get_grid(model, self.name, self.text, self.n_samples, self.seed, self.window, self.others)


def inside_bytes(grid, post: int, prior: int, layer: int, head: int, query: int, key: int, extra: dict) -> bytes:
    """`live.inside_payload`, kept on the grid per selection and frames made: a rerun that
    only moves a slider (post, prior: sent beside the file as meta) gets the same bytes, so the
    same served file, and the page fetches nothing."""
    import json

    cache_key = (tuple(grid.ready), layer, head, query, key, json.dumps(extra, sort_keys=True))
    return grid.memo("inside", cache_key, lambda: live.inside_payload(
        grid, post, prior, layer, head, query, key, extra), keep=1)


def corpus_problem(err: Exception) -> str:
    """One line for a user on why the corpus cannot be read: the file's name, never a server path."""
    name = Path(getattr(err, "filename", "") or "").name
    what = getattr(err, "reason", None) or {
        FileNotFoundError: "a file is missing", IsADirectoryError: "a folder stands where a file should",
        PermissionError: "a file cannot be opened"}.get(type(err), "a file cannot be read")
    return (f"the movies corpus cannot be read ({what}{': ' + name if name else ''}). "
            "Check the folder in BAM_VIZ_DATA.")


@st.cache_resource(show_spinner=False)
def test_sentences() -> list[str]:
    from bam_viz.data import load_split

    return [s.text for s in load_split("movies", "test")]


def corpus_available() -> bool:
    from bam_viz.data import data_dir

    try:
        return data_dir() is not None
    except Exception:                   # a broken corpus folder must not take the page down
        return False


# ---- slider grids -------------------------------------------------------------------------------
def hyper_options(name: str, trained: float | None, exact: float | None = None) -> list[float]:
    """The values a hyperparameter slider offers: the live grid's (`live.slider_values`), `exact` among them."""
    spec = SLIDERS[name]
    return live.slider_values(spec, trained, "prior" if spec.prior_only else "posterior", exact)


EXACT_DIGITS = 6        # a value set off the grid is kept to this many significant digits (the URL's)


def hyper_value(name: str, value: float) -> float:
    """A slider's value as the user set it: any value of its range (clamped into it), to EXACT_DIGITS."""
    spec = SLIDERS[name]
    return min(max(float(f"{float(value):.{EXACT_DIGITS}g}"), spec.low), spec.high)


def off_grid(name: str, value: float, trained: float | None) -> bool:
    """Whether `value` is none of the slider's grid values (with the trained one)."""
    return value not in hyper_options(name, trained)


def format_value(x: float) -> str:
    return f"{x:.3g}"


def dev_calibrated(card: dict | None, name: str) -> float | None:
    """The inference value of `name` chosen on movies dev and recorded in a model's card
    (`inference_selection`, bam_viz.evaluation.selection), or None. Shown; never a default."""
    selection = (card or {}).get("inference_selection") or {}
    chosen = selection.get("chosen")
    return float(chosen) if selection.get("name") == name and isinstance(chosen, (int, float)) else None


def dev_calibrated_note(model, name: str) -> str | None:
    """What the slider of `name` says beside the trained value about `dev_calibrated`, or None."""
    chosen = dev_calibrated(getattr(model, "card", None), name)
    return None if chosen is None else f"best calibrated on movies dev at {format_value(chosen)} (lowest NLL)"


def default_hyper(name: str, model) -> float:
    """The trained value where the model has one, else the middle of the range (log middle for log)."""
    trained = model.trained_hyper.get(name)
    return float(trained) if trained is not None else SLIDERS[name].middle


# ---- the URL round trip -------------------------------------------------------------------------
def _int(raw: str, lo: int, hi: int) -> int | None:
    try:
        return min(max(int(float(raw)), lo), hi)
    except (TypeError, ValueError, OverflowError):
        return None


def _bool(raw: str) -> bool | None:
    """A toggle from the URL: what `write_query_params` writes (True, False), or 1/0, yes/no, on/off."""
    value = str(raw).strip().lower()
    return True if value in {"true", "1", "yes", "on"} else False if value in {"false", "0", "no", "off"} else None


def _float(raw: str, lo: float, hi: float) -> float | None:
    try:
        x = float(raw)
    except (TypeError, ValueError):
        return None
    return min(max(x, lo), hi) if math.isfinite(x) else None


def load_query_params(models: list[str]) -> None:
    """On a session's first run, copy valid query parameters into Session State (before widgets).

    Picture controls (layer, head, tokens) are clamped later, once the model and text are known.
    """
    ss = st.session_state
    if ss.get("_query_loaded"):
        return
    ss["_query_loaded"] = True
    qp = st.query_params
    if "text" in qp:
        ss["text"] = qp["text"]
    if qp.get("model") in models:
        ss["model"] = qp["model"]
    for name, spec in SLIDERS.items():
        if name in qp and (x := _float(qp[name], spec.low, spec.high)) is not None:
            ss[name] = x
            ss.setdefault("_hyper_from_url", set()).add(name)
    for name, (lo, hi) in (("n_samples", N_SAMPLES_RANGE), ("seed", SEED_RANGE)):
        if name in qp and (n := _int(qp[name], lo, hi)) is not None:
            ss[name] = n
    if TARGET_KEY in qp:                    # a class name: checked once the model's classes are known
        ss["_target_from_url"] = str(qp[TARGET_KEY])
    if "presentation" in qp and (on := _bool(qp["presentation"])) is not None:
        ss["presentation"] = on
    if "why" in qp and (on := _bool(qp["why"])) is not None:
        ss["why"] = on
    if isinstance(qp.get("why_target"), str) and qp["why_target"]:   # the view checks it against the classes
        ss["why_target"] = qp["why_target"]
    for name, options in (("why_samples", WHY_SAMPLES), ("why_steps", WHY_STEPS)):
        if name in qp and (n := _int(qp[name], min(options), max(options))) in options:
            ss[name] = n
    for name in PICTURE_KEYS:
        if name in qp:
            value = _bool(qp[name]) if name in PICTURE_TOGGLES else _int(qp[name], 0, 10_000)
            if value is not None:
                ss[name] = value


def target_option(value, classes: tuple[str, ...]) -> int:
    """The class selector's option for a value from the URL or the session: a class name (or its
    index, as an int) of `classes`, else PREDICTED (the URL's "predicted", or anything else)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value < len(classes) else PREDICTED
    return classes.index(value) if isinstance(value, str) and value in classes else PREDICTED


def target_in_url(option: int, classes: tuple[str, ...]) -> str | None:
    """What the URL holds for the selector's `option`: the class's name, None for the predicted class."""
    return None if option == PREDICTED else classes[option]


def write_query_params(keys, values: dict) -> None:
    """Mirror the given controls into the URL (the fragment writes only its own keys)."""
    for k in keys:
        if k in values and values[k] is not None:
            v = values[k]
            st.query_params[k] = f"{v:.{EXACT_DIGITS}g}" if isinstance(v, float) else str(v)
        elif k in st.query_params:
            del st.query_params[k]
