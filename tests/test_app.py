"""The app end to end through Streamlit's AppTest (no browser), on the shipped models.

One AppTest is reused where the order of interactions does not matter: importing torch and loading
models takes seconds, so each fresh AppTest costs.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from app_pages import as_shown, ok
from streamlit.testing.v1 import AppTest

import bam_viz
from bam_viz.live import grid as live
from bam_viz.plots import captions
from views import components, state
from views.state import N_SAMPLES_RANGE

APP = Path(__file__).resolve().parents[1] / "app.py"
# A browser polls while a sentence's frames are being made, which keeps its grid alive; AppTest does
# not, so here no grid is given up as abandoned (tests/test_live.py covers the giving up).
live.IDLE_S = float("inf")
MODELS = bam_viz.available_models()

HOSTILE_TEXTS = {
    "script": "<script>alert(1)</script> what a <b>bold</b> & brave film",
    "emoji": "I loved it 😍🎬👍🏽 so much",
    "rtl": "הסרט היה נהדר and الفيلم رائع",
    "zero_width": "good\u200b\u200bmovie\u200f\u202e reversed",
    "control": "bad\x00\x07\x1b[31m movie\r\n\ttruly",
}


def new_app(**query) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def component(at: AppTest, key: str):
    """The live component mounted with `key` (views/components.py)."""
    found = [e for e in at.get("bidi_component") if e.key == key]
    assert len(found) == 1, [e.key for e in at.get("bidi_component")]
    return found[0].proto


def payload(at: AppTest, key: str = "live_summary") -> tuple[dict, dict]:
    """The header and arrays the browser's charts receive (`bam_viz.live.grid.unpack`): the summary's in
    the element, the inside panels' from the file it names, with the element's meta applied as
    live.js applies it."""
    proto = component(at, key)
    if proto.bytes:
        return live.unpack(proto.bytes)
    data = json.loads(proto.json)
    header, arrays = live.unpack(components.served_file(data["url"]).read_bytes())
    meta = dict(data["meta"])
    post, prior = meta.pop("current")
    header |= meta
    for name, index in (("slider", post), ("prior_slider", prior)):
        if header[name]:
            header[name]["current"] = index
    return header, arrays


def slider_data(at: AppTest) -> dict:
    return json.loads(component(at, "live_sliders").json)


def shown_stats(at: AppTest) -> dict[str, float]:
    """The headline's numbers at the server's current slider value, as the browser first draws them."""
    header, arrays = payload(at)
    i = header["slider"]["current"] if header["slider"] else 0
    return dict(zip(header["stats"], arrays["stats"][i].tolist(), strict=True))


def assert_finite_view(at: AppTest):
    """Both chart payloads are there, every number the current frame shows is finite (errors may be
    NaN only where they are not estimable), and nothing drawn is NaN or infinite."""
    stats = shown_stats(at)
    assert all(math.isfinite(stats[k]) for k in ("p_mc", "p_mean_attention", "p_softmax", "gap", "gap_softmax", "mi",
                                                         "expected_entropy")), stats
    header, arrays = payload(at, "live_inside")
    i = header["slider"]["current"] if header["slider"] else 0
    for name, a in arrays.items():
        rows = a[i] if name in ("maps", "post_row", "spread", "kl", "post_density") else a
        assert np.isfinite(rows).all(), name


def captions_of(at: AppTest) -> str:
    """Every panel's prose the browser shows, from both payloads."""
    return " ".join(" ".join(payload(at, key)[0].get("captions", {}).values())
                    for key in ("live_summary", "live_inside"))


def settle() -> None:
    """Until the background frames of every grid are made (they call explain() from worker threads)."""
    assert live.wait_idle(420)          # a bound on a wait, not a timing: 128-token grids on a busy machine


pytestmark = pytest.mark.usefixtures("no_frames_left_behind")   # tests/conftest.py


@pytest.fixture(scope="module")
def at() -> AppTest:
    app = new_app()
    ok(app.run())
    return app


def test_zoo_is_there():
    assert "bam-wc" in MODELS, "no shipped bam-wc model in pretrained/"


def test_default_view(at):
    assert at.selectbox(key="model").value == "bam-wc"
    assert_finite_view(at)
    header, _ = payload(at)
    assert header["slider"]["name"] == "shape_k" and header["ready"][header["slider"]["current"]]
    assert header["slider"]["values"][header["slider"]["current"]] == 3.0          # the trained k
    assert at.query_params["model"] == "bam-wc"
    assert any(c.value.startswith("view ") for c in at.caption)
    assert not at.get("plotly_chart")                                       # drawn in the browser


def test_the_footer_is_shown_only_with_debug(at):
    """The footer (view count, server time) is always written, for the benchmarks; a style hides it
    unless the URL says debug=1 (tests/test_browser.py checks what the browser shows)."""
    hide = ".st-key-render_marker {display: none}"
    assert any(hide in h.proto.body for h in at.get("html"))
    debug = ok(new_app(debug="1").run())
    assert not any(hide in h.proto.body for h in debug.get("html"))
    assert any(c.value.startswith("view ") for c in debug.caption)


def test_bam_wcs_dev_chosen_k_is_named_beside_its_slider_never_applied(at):
    """bam-wc's card records the inference k of lowest mean dev NLL over its grid (`make inference-k`):
    the shape_k slider's note names that k beside the trained value, and the slider still starts at
    the trained value."""
    model = bam_viz.load("bam-wc")
    selection = model.card["inference_selection"]
    dev_nll = {float(k): v for k, v in selection["dev_nll"].items()}
    assert selection["name"] == "shape_k" and sorted(dev_nll) == sorted(selection["grid"])
    best = min(selection["grid"], key=dev_nll.get)
    assert selection["chosen"] == best
    assert at.selectbox(key="model").value == "bam-wc"
    sliders = {s["name"]: s for s in slider_data(at)["sliders"]}
    note = sliders["shape_k"]["dev_note"]
    assert f"best calibrated on movies dev at {state.format_value(best)} " in note and "lowest NLL" in note
    assert sliders["shape_k"]["current"] == sliders["shape_k"]["trained"] == model.trained_hyper["shape_k"]
    assert sliders["beta"]["dev_note"] is None                                # only for shape_k


@pytest.mark.parametrize("name", MODELS)
def test_every_model_renders(at, name):
    at.selectbox(key="model").set_value(name)
    ok(at.run())
    assert_finite_view(at)
    model = bam_viz.load(name)
    sliders = slider_data(at)
    assert [s["name"] for s in sliders["sliders"]] == [s.name for s in model.slider_specs]
    assert (sliders["note"] is None) == bool(model.slider_specs)
    for s in sliders["sliders"]:
        assert s["values"] == state.hyper_options(s["name"], model.trained_hyper.get(s["name"]))
        assert s["side"] == ("prior" if model.attention_family.spec(s["name"]).prior_only else "posterior")
    assert at.slider(key="n_samples").disabled == (not model.stochastic)
    assert at.query_params["model"] == name


@pytest.mark.parametrize("name, keys", [("bam-wc", ["shape_k", "beta"]), ("bam-lc", ["sigma"]),
                                        ("dirichlet", ["concentration"])])
def test_hyper_values_at_the_extremes(at, name, keys):
    """A slider released at either end of its range (the browser sends it; here Session State takes
    it): the URL says so, the charts start there, and every number drawn is finite."""
    if name not in MODELS:
        pytest.fail(f"{name} is not shipped")
    at.selectbox(key="model").set_value(name)
    ok(at.run())
    for key in keys:
        spec = state.SLIDERS[key]
        for value in (spec.low, spec.high):
            at.session_state[key] = value
            ok(at.run())
            assert float(at.query_params[key]) == pytest.approx(value)
            header, _ = payload(at, "live_inside")
            slider = header["prior_slider" if spec.prior_only else "slider"]
            assert slider["values"][slider["current"]] == pytest.approx(value)
            assert_finite_view(at)


def test_sampling_and_picture_controls_at_extremes(at):
    at.selectbox(key="model").set_value("bam-wc")
    ok(at.run())
    for key, values in (("n_samples", (*N_SAMPLES_RANGE, 32)),):
        for v in values:
            at.slider(key=key).set_value(v)
            ok(at.run())
            assert_finite_view(at)
    for v in (0, 9999, 0):
        at.number_input(key="seed").set_value(v)
        ok(at.run())
    for key in ("layer", "head", "query_token", "key_token"):
        options = at.selectbox(key=key).options
        for index in (len(options) - 1, 0):
            at.selectbox(key=key).set_value(index)
            ok(at.run())
            assert at.query_params[key] == str(index)
            header, _ = payload(at, "live_inside")
            assert header[{"query_token": "query", "key_token": "key"}.get(key, key)] == index
            assert_finite_view(at)


def test_picture_controls_do_not_rerun_the_model(at, monkeypatch):
    """Layer, head and tokens re-slice the sentence's slider grid: no explain() at all."""
    at.selectbox(key="model").set_value("bam-wc")
    ok(at.run())
    settle()
    calls = []
    real = bam_viz.model.BamClassifier.explain

    def counting(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(bam_viz.model.BamClassifier, "explain", counting)
    for key in ("layer", "head", "query_token", "key_token"):
        at.selectbox(key=key).set_value(1)
        ok(at.run())
    assert calls == []
    at.number_input(key="seed").set_value(7)        # a new grid: the current value first, the rest after
    ok(at.run())
    assert len(calls) >= 1


def test_a_release_reads_its_frame_not_the_model(monkeypatch):
    """A slider released on a value whose frame is made runs no model: the page's captions come from
    the frame (`live.FrameResult`), and say what explain() says at that value (the prior quoted is
    the prior's bar, tests/test_frame_result.py)."""
    text = "A quietly moving film."
    at = ok(new_app(model="bam-wc", text=text).run())
    settle()
    calls = []
    real = bam_viz.model.BamClassifier.explain
    monkeypatch.setattr(bam_viz.model.BamClassifier, "explain",
                        lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    sliders = slider_data(at)["sliders"]
    k_values = next(s["values"] for s in sliders if s["name"] == "shape_k")
    beta_values = next(s["values"] for s in sliders if s["name"] == "beta")
    at.session_state["shape_k"], at.session_state["beta"] = k_values[9], beta_values[20]
    ok(at.run())
    assert calls == []
    header, _ = payload(at)
    assert header["captions_at"] == [9, 20]
    model = bam_viz.load("bam-wc")
    r = model.explain(text, n_samples=state.DEFAULT_N_SAMPLES, seed=0, shape_k=k_values[9], beta=beta_values[20])
    assert payload(at)[0]["captions"]["prediction"] == captions.prediction_caption(r)
    layer, head, query = at.selectbox(key="layer").value, at.selectbox(key="head").value, 0
    shown = list(range(len(r.tokens)))
    inside = payload(at, "live_inside")[0]["captions"]
    assert inside["maps"] == captions.sampled_maps_caption(r, layer, head, shown=shown)
    prior = re.compile(r" \(prior \d\.\d\d\)")
    assert (prior.sub("", inside["bars"])
            == prior.sub("", captions.prior_posterior_caption(r, layer, head, query, shown=shown)))


def test_the_page_polls_while_its_grid_is_made_and_stops_when_it_is_whole(monkeypatch):
    """The summary's header asks the page to poll (`poll.ms`, the server's `poll_interval` now) while
    the sentence's grid is being made, with new bytes every run so that the page sets its timer again,
    and asks for none once every frame is made; no fragment keeps a Streamlit timer (`run_every`), whose
    stale reruns crashed a page's element tree (docs/performance.md, "Tried and not kept")."""
    monkeypatch.setattr(live.FRAMES, "poll_interval", lambda: 2.5)
    at = ok(new_app(model="bam-wc", text="A film I keep thinking about.").run())
    first = payload(at)[0]["poll"]
    assert not all(payload(at)[0]["ready"]) and first["ms"] == 2500
    at.session_state["live_summary"] = {"poll": 1}             # the page's poll: its state, a rerun
    ok(at.run())
    assert payload(at)[0]["poll"]["run"] != first["run"]
    settle()
    ok(at.run())
    header = payload(at)[0]
    assert all(header["ready"]) and header["poll"]["ms"] == 0
    assert "run_every" not in (Path(__file__).resolve().parents[1] / "views" / "explorer.py").read_text()


@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_text_asks_politely(at, text):
    at.text_area(key="text").set_value(text)
    ok(at.run())
    assert any("Type a sentence" in i.value for i in at.info)
    assert not [e for e in at.get("bidi_component") if e.key != "live_sliders"]


def test_long_text_is_truncated_with_a_notice(at):
    at.selectbox(key="model").set_value("bam-wc")
    at.text_area(key="text").set_value(" ".join(["good"] * 2500 + ["bad"] * 2500))
    ok(at.run())
    assert at.warning and "maximum" in at.warning[0].value
    assert len(at.selectbox(key="query_token").options) == bam_viz.load("bam-wc").max_tokens
    assert_finite_view(at)


@pytest.mark.parametrize("kind", list(HOSTILE_TEXTS))
def test_hostile_text_is_shown_as_text(at, kind):
    """Tokens reach the browser as JSON strings, which live.js writes with textContent and fillText
    only (tests/test_browser.py checks that a script in the text never runs); no markdown or HTML
    element of the page carries them unescaped."""
    at.text_area(key="text").set_value(HOSTILE_TEXTS[kind])
    ok(at.run())
    assert_finite_view(at)
    header, _ = payload(at, "live_inside")
    assert all(isinstance(t, str) for t in header["tokens"])
    for md in list(at.markdown) + list(at.caption):
        assert not md.proto.allow_html or "<script" not in md.value
    for h in at.get("html"):
        assert "<script" not in h.proto.body and "bold" not in h.proto.body


def test_query_params_round_trip():
    query = {"text": "A quietly moving film.", "model": "bam-wc", "shape_k": "2", "beta": "0.5",
             "n_samples": "16", "seed": "42", "layer": "4", "head": "3", "query_token": "2",
             "key_token": "3"}
    at = ok(new_app(**query).run())
    assert at.text_area(key="text").value == query["text"]
    assert at.selectbox(key="model").value == "bam-wc"
    sliders = {s["name"]: s for s in slider_data(at)["sliders"]}
    assert sliders["shape_k"]["current"] == 2.0 and 2.0 in sliders["shape_k"]["values"]   # held, off the grid
    assert sliders["beta"]["current"] == 0.5 and 0.5 in sliders["beta"]["values"]
    assert sliders["shape_k"]["values"] == state.hyper_options("shape_k", 3.0, 2.0)
    assert at.slider(key="n_samples").value == 16
    assert at.number_input(key="seed").value == 42
    for key in ("layer", "head", "query_token", "key_token"):
        assert at.selectbox(key=key).value == int(query[key])
    assert any("16 samples · seed 42" in c.value for c in at.caption)
    at.slider(key="n_samples").set_value(8)
    at.selectbox(key="head").set_value(5)
    ok(at.run())
    assert at.query_params["n_samples"] == "8" and at.query_params["head"] == "5"
    assert at.query_params["text"] == query["text"] and at.query_params["shape_k"] == "2"


def test_a_typed_value_is_kept_in_its_range_and_the_captions_say_it():
    """Any value of a slider's range, as the page sends it once typed: kept (to EXACT_DIGITS, clamped into
    the range), in the URL, and the view's grid holds it."""
    at = ok(new_app(text="A quietly moving film.", model="bam-wc").run())
    at.session_state["shape_k"], at.session_state["beta"] = 2.4567891234, 1e9
    ok(at.run())
    sliders = {s["name"]: s for s in slider_data(at)["sliders"]}
    assert sliders["shape_k"]["current"] == 2.45679 and sliders["beta"]["current"] == sliders["beta"]["values"][-1]
    assert at.query_params["shape_k"] == "2.45679"
    footer = next(c.value for c in at.caption if c.value.startswith("view "))
    assert "shape_k=2.46" in footer and "beta=1e+04" in footer and "/47 · " in footer, footer   # a grid of 46 + 1


def test_bad_query_params_are_ignored_or_clamped():
    at = ok(new_app(model="no-such-model", shape_k="nan", n_samples="1e9", seed="x", layer="99",
                    query_token="-3").run())
    assert at.selectbox(key="model").value == "bam-wc"
    assert at.slider(key="n_samples").value == N_SAMPLES_RANGE[1] == 64
    assert at.number_input(key="seed").value == 0
    assert at.selectbox(key="layer").value == bam_viz.load("bam-wc").n_layers - 1
    assert at.selectbox(key="query_token").value == 0


def test_page_switch_keeps_the_state(at):
    at.selectbox(key="model").set_value("bam-wc")
    at.text_area(key="text").set_value("An unforgettable evening.")
    ok(at.run())
    at.switch_page("views/about.py")
    ok(at.run())
    assert at.title[0].value.startswith("About")
    assert not at.get("bidi_component")
    at.switch_page("views/explorer.py")
    ok(at.run())
    assert at.text_area(key="text").value == "An unforgettable evening."
    assert_finite_view(at)


def test_the_about_page_states_the_inference_k_that_bam_wcs_card_records(at):
    """The closing question's k is the one the dev sweep chose (bam-wc's `inference_selection`)."""
    card = bam_viz.load("bam-wc").card
    trained, chosen = card["trained_hyper"]["shape_k"], card["inference_selection"]["chosen"]
    at.switch_page("views/about.py")
    ok(at.run())
    text = " ".join(m.value for m in at.markdown)
    said = (f"best calibrated at *k* = {state.format_value(chosen)}," if chosen != trained
            else "best calibrated there too")
    assert f"trained at *k* = {state.format_value(trained)}" in text and said in text and "movies dev" in text
    at.switch_page("views/explorer.py")
    ok(at.run())


def test_a_bad_memory_setting_is_one_message_and_the_page_keeps_running(monkeypatch):
    """A server started with a $BAM_VIZ_APP_ATTENTION_MB that is not a number says which variable,
    instead of a traceback; the controls are still there."""
    monkeypatch.setenv("BAM_VIZ_APP_ATTENTION_MB", "lots")
    at = new_app(model="bam-wc")
    at.run()
    assert not at.exception
    assert "$BAM_VIZ_APP_ATTENTION_MB" in as_shown(at.error[0].value)
    assert at.selectbox(key="model").value == "bam-wc"


def test_model_load_error_is_reported(monkeypatch):
    from bam_viz.zoo import CheckpointError

    real_load = bam_viz.load

    def load(name, device=None):
        if name == "broken":
            raise CheckpointError("pretrained/broken/model.safetensors is corrupt")
        return real_load(name, device=device)

    monkeypatch.setattr(bam_viz, "available_models", lambda: [*MODELS, "broken"])
    monkeypatch.setattr(bam_viz, "load", load)
    at = new_app(model="broken")
    at.run()
    assert not at.exception
    assert "corrupt" in at.error[0].value
    at.selectbox(key="model").set_value("bam-wc")
    ok(at.run())
    assert_finite_view(at)


def test_monte_carlo_numbers_carry_their_standard_error():
    """E[f(z)], the gap and the MI reach the browser with their standard errors at every slider value
    made (live.js prints them ± 1 SE and says whether the gap is told from zero); one sample sends
    no error at all (NaN, "needs ≥ 2 samples") and no NaN value."""
    at = ok(new_app(text="The plot is thin but the actors are wonderful.", model="bam-wc", n_samples="32").run())
    stats = shown_stats(at)
    assert all(stats[k] > 0 for k in ("p_se", "gap_se", "mi_se")), stats
    settle()
    ok(at.run())
    header, arrays = payload(at)
    assert all(header["ready"]) and np.isfinite(arrays["stats"]).all()
    at.slider(key="n_samples").set_value(1)
    ok(at.run())
    stats = shown_stats(at)
    assert all(math.isnan(stats[k]) for k in ("p_se", "gap_se", "mi_se"))
    assert all(math.isfinite(stats[k]) for k in ("p_mc", "gap", "mi"))
    assert "sweep" not in payload(at)[0]["captions"]                      # no sweep from one sample


def test_relative_colour_is_a_picture_control_in_the_url(monkeypatch):
    """Colour scales are fixed unless the toggle asks for relative ones (live.js scales the colours);
    the toggle is mirrored in the URL like the other picture controls and does not rerun the model."""
    at = ok(new_app(model="bam-wc", layer="5", relative_colour="true").run())
    assert at.toggle(key="relative_colour").value is True
    assert at.query_params["relative_colour"] == "True"
    assert payload(at, "live_inside")[0]["relative"] is True
    settle()
    calls = []
    real = bam_viz.model.BamClassifier.explain
    monkeypatch.setattr(bam_viz.model.BamClassifier, "explain",
                        lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    at.toggle(key="relative_colour").set_value(False)
    ok(at.run())
    assert calls == [] and at.query_params["relative_colour"] == "False"
    assert payload(at, "live_inside")[0]["relative"] is False
    assert "Colours are absolute" in captions_of(at)
    assert ok(new_app(model="bam-wc").run()).toggle(key="relative_colour").value is False
    assert ok(new_app(model="bam-wc", relative_colour="maybe").run()).toggle(key="relative_colour").value is False


def test_the_footer_counts_the_samples_actually_drawn():
    """softmax is deterministic: the page draws one sample whatever the n_samples slider says."""
    at = ok(new_app(model="softmax", n_samples="32", debug="1").run())
    footer = next(c.value for c in at.caption if c.value.startswith("view "))
    assert "· 1 sample ·" in footer
    header, arrays = payload(at)
    assert header["n_samples"] == 1 and arrays["p_samples"].shape == (1, 1) and header["slider"] is None


@pytest.mark.parametrize("name, says, never", [
    ("mc-dropout", "Every layer is stochastic through dropout", ("grey rows", "moved furthest", "KL 0 nats")),
    ("categorical", "Only layer 5 is stochastic;", ("layers 5", "moved furthest")),
])
def test_the_captions_fit_the_model(name, says, never):
    if name not in MODELS:
        pytest.fail(f"{name} is not shipped")
    at = ok(new_app(model=name, layer="5").run())
    captions = captions_of(at)
    assert says in captions and "no KL" in captions
    assert not any(phrase in captions for phrase in never), captions
    inside = payload(at, "live_inside")[0]
    assert inside["kl_message"] and "no" in inside["kl_message"].lower()
    assert inside["density_message"]                                      # neither has a density
    at.slider(key="n_samples").set_value(1)
    ok(at.run())
    captions = captions_of(at)
    assert "Layer 5 is deterministic" not in captions and "1 attention sample was drawn" in captions
    assert "1 attention samples" not in captions


LONG_TEXT = ("The film opens with a long, quiet shot of a harbour at dawn, and for the first hour it hardly raises "
             "its voice. The actors are good, especially the older sister, whose silences say more than the script "
             "ever does, but the plot wanders between three families without deciding which one it cares about. "
             "By the time the storm arrives I had stopped waiting for it; the ending is beautiful to look at and "
             "strangely empty, like a postcard from a trip you do not remember taking. Still, the music is lovely, "
             "the camera loves the sea, and there are ten minutes in the middle, a wedding on a fishing boat, "
             "that I will not forget. See it on the biggest screen you can find, and bring someone patient.")


def test_a_long_sentence_shows_a_window_of_the_maps_in_the_url():
    """150 word pieces: the note says how many were kept, and the maps show a window of tokens that
    a control moves, mirrored in the URL like the other picture controls."""
    from bam_viz.plots import tokens
    from bam_viz.plots.style import TOKEN_WINDOW

    model = bam_viz.load("bam-wc")
    T, W = model.max_tokens, TOKEN_WINDOW
    assert model.tokenizer.length(LONG_TEXT) == 152                # 150 word pieces, [CLS] and [SEP]
    at = ok(new_app(text=LONG_TEXT, model="bam-wc", layer="5").run())
    assert f"it has 150 word pieces, and only the first {T - 2}" in at.warning[0].value
    window = at.select_slider(key="window_start")
    assert window.options == [tokens.window_label(T, s) for s in tokens.window_starts(T)]
    assert window.value == 1 and at.query_params["window_start"] == "1"       # from [CLS], the query
    header, arrays = payload(at, "live_inside")
    assert header["window"] == tokens.token_window(T, 1) and len(header["tokens"]) == T
    assert arrays["maps"].shape[-2:] == (W, W)
    at.select_slider(key="window_start").set_value(60)
    ok(at.run())
    assert at.query_params["window_start"] == "60"
    assert payload(at, "live_inside")[0]["window"] == tokens.token_window(T, 60)
    assert f"The maps show {W} of {T} tokens" in captions_of(at)
    at.selectbox(key="query_token").set_value(T - 2)               # outside the window: it follows
    ok(at.run())
    assert at.select_slider(key="window_start").value == tokens.window_around(T, T - 2) == T - W + 1
    # the link reproduces the window
    again = ok(new_app(text=LONG_TEXT, model="bam-wc", layer="5", window_start="60").run())
    assert again.select_slider(key="window_start").value == 60
    assert payload(again, "live_inside")[0]["window"] == tokens.token_window(T, 60)
    # a short sentence shows every token: no window control, none in the URL
    again.text_area(key="text").set_value("A quietly moving film.")
    ok(again.run())
    assert "window_start" not in [s.key for s in again.select_slider] and "window_start" not in again.query_params


# A phrase from each panel's explanation on the default page (the sentence, bam-wc at its trained values).
PANEL_PROSE = ("Where the red line leaves the green band", "Averaging them gives",
               "Grey bars", "The dashed grey curve", "Each small map", "grey rows are ordinary")


def test_presentation_mode_is_in_the_url_and_folds_the_prose():
    """presentation=1 turns the sidebar toggle on and tells the charts (live.js folds each panel's
    prose under "What this shows": tests/test_browser.py); the prose sent is the same; turning it
    off drops it from the URL."""
    normal = ok(new_app(model="bam-wc").run())
    settle()
    ok(normal.run())
    assert normal.toggle(key="presentation").value is False and "presentation" not in normal.query_params
    prose = captions_of(normal)
    assert all(phrase in prose for phrase in PANEL_PROSE), prose
    assert not payload(normal)[0]["presentation"] and not slider_data(normal)["presentation"]

    at = ok(new_app(model="bam-wc", presentation="1").run())
    assert at.toggle(key="presentation").value is True and at.query_params["presentation"] == "1"
    assert payload(at)[0]["presentation"] and payload(at, "live_inside")[0]["presentation"]
    assert slider_data(at)["presentation"]
    assert captions_of(at) == prose

    at.toggle(key="presentation").set_value(False)
    ok(at.run())
    assert "presentation" not in at.query_params and not payload(at)[0]["presentation"]
    for junk in ("maybe", ""):
        assert ok(new_app(model="bam-wc", presentation=junk).run()).toggle(key="presentation").value is False


@pytest.mark.parametrize("damage", ["missing", "a folder"])
def test_a_broken_corpus_turns_random_review_off_with_a_reason(tmp_path, monkeypatch, damage):
    """BAM_VIZ_DATA points at a copy of the corpora without the movie texts (or with a folder in
    their place): "Random review" says why and turns itself off; the page and its charts go on."""
    import shutil

    from bam_viz.data import data_dir

    broken = tmp_path / "corpora"
    shutil.copytree(data_dir(), broken)
    target = broken / "movieReviewSnippets_GroundTruth.txt"
    target.unlink()
    if damage == "a folder":
        target.mkdir()
    monkeypatch.setenv("BAM_VIZ_DATA", str(broken))
    state.test_sentences.clear()
    try:
        at = ok(new_app(model="softmax").run())
        at.button(key="random_sentence").click()
        ok(at.run())
        assert at.button(key="random_sentence").disabled
        said = " ".join(as_shown(c.value) for c in at.caption)
        assert "“Random review” is off: the movies corpus cannot be read" in said
        assert "movieReviewSnippets_GroundTruth.txt" in said and str(tmp_path) not in said
        assert_finite_view(at)
    finally:
        state.test_sentences.clear()


def test_a_session_keeps_keys_not_results():
    """What a session keeps between runs (widgets' format functions, a fragment's arguments, the
    downloads' functions) must not hold the sentence's result: every session's would stay alive until
    the session ended, two minutes after its tab closed (measured: 12 sessions held 4.6 GB). Emptied,
    the shared cache is the only owner, so nothing of the run is left while the session lives on."""
    import gc

    from bam_viz.core.cache import CACHE
    from bam_viz.inference.result import ExplainResult

    at = ok(new_app(text="a slow , tender film that stays with you long after it ends").run())
    at.selectbox(key="query_token").set_value(2)
    ok(at.run())
    live.wait_idle()
    CACHE.clear()
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is ExplainResult]
    assert not alive, [gc.get_referrers(o)[:3] for o in alive][:1]
    ok(at.run())                                       # the page makes what it needs again
    assert component(at, "live_summary") is not None


def test_a_long_sentence_draws_fewer_samples_and_says_so():
    """The explorer bounds one sentence's sampled attention (the server is shared): at 128 tokens it
    draws 28 samples, not 64, and a line says what was reduced and why."""
    long_text = " ".join(["a slow and tender film about a family that never knows what it wants"] * 12)
    at = ok(new_app(text=long_text, n_samples="64", model="bam-wc").run())
    said = [i.value for i in at.info if "attention samples, not 64" in i.value]
    assert len(said) == 1 and "128 tokens" in said[0] and "draws 28" in said[0], [i.value for i in at.info]
    header, _ = payload(at)
    assert header["n_samples"] == 28
    assert at.slider(key="n_samples").value == 64          # the user's choice stays, for a shorter sentence


# ---- the class shown: K classes, and the binary zoo's predicted class ------------------------------
@pytest.fixture()
def three_classes(monkeypatch):
    """A three-class model (a random head on the real MiniLM, classes c0, c1, c2) among the models
    the page offers, as "t3": injected as test_model_load_error_is_reported injects its model."""
    from fake_result import k_class_model

    model = k_class_model(3)
    real_load = bam_viz.load
    monkeypatch.setattr(bam_viz, "available_models", lambda: [*MODELS, model.name])
    monkeypatch.setattr(bam_viz, "load", lambda name, device=None: model if name == model.name
                        else real_load(name, device=device))
    state.get_model.clear()
    yield model
    state.get_model.clear()


def test_a_k_class_model_has_a_class_selector_that_changes_the_class_shown(three_classes):
    text = "A quietly moving film."
    at = ok(new_app(model="t3", text=text).run())
    header, arrays = payload(at)
    predicted = header["predicted"]
    box = at.selectbox(key="target")
    assert box.options == [f"predicted (c{predicted})", "c0", "c1", "c2"] and box.value == state.PREDICTED
    assert header["classes"] == ["c0", "c1", "c2"] and header["target"] == predicted
    assert header["labels"]["p"] == f"P(c{predicted})" and header["entropy_bound"] == pytest.approx(math.log(3))
    assert "target" not in at.query_params
    other = (predicted + 1) % 3
    box.set_value(other)
    ok(at.run())
    header, arrays = payload(at)
    i = header["slider"]["current"]
    assert header["target"] == other and header["predicted"] == predicted and header["labels"]["p"] == f"P(c{other})"
    stats = shown_stats(at)
    assert stats["p_mc"] == pytest.approx(float(arrays["class_probs"][i, 0, other]), abs=1e-6)
    r = three_classes.explain(text, n_samples=state.DEFAULT_N_SAMPLES, seed=0).for_target(other)
    assert stats["gap"] == pytest.approx(r.gap, abs=1e-6) and stats["p_se"] == pytest.approx(r.se.p_target, rel=1e-4)
    assert f"gives its own P(c{other})" in captions_of(at) and f"the model's answer is c{predicted}" in captions_of(at)
    assert at.query_params["target"] == f"c{other}"
    # a link reopens it; a class the model does not have falls back to the predicted one
    again = ok(new_app(model="t3", text=text, target=f"c{other}").run())
    assert again.selectbox(key="target").value == other and payload(again)[0]["target"] == other
    unknown = ok(new_app(model="t3", text=text, target="positive").run())
    assert unknown.selectbox(key="target").value == state.PREDICTED and payload(unknown)[0]["target"] == predicted
    # another model keeps the class of the same name, else shows its predicted class
    again.selectbox(key="model").set_value("bam-wc")
    ok(again.run())
    assert again.selectbox(key="target").value == state.PREDICTED and "target" not in again.query_params


def test_the_binary_zoo_shows_the_predicted_class_and_either_on_request(at):
    at.selectbox(key="model").set_value("bam-wc")
    at.text_area(key="text").set_value("A dull, tedious mess.")
    ok(at.run())
    assert at.selectbox(key="target").options == ["predicted (negative)", "negative", "positive"]
    header, arrays = payload(at)
    assert header["target"] == header["predicted"] == 0 and header["labels"]["p"] == "P(negative)"
    assert shown_stats(at)["p_mc"] > 0.5 and "gives its own P(negative)" in captions_of(at)
    at.selectbox(key="target").set_value(1)
    ok(at.run())
    header, _ = payload(at)
    assert header["target"] == 1 and header["labels"]["p"] == "P(positive)" and shown_stats(at)["p_mc"] < 0.5
    assert at.query_params["target"] == "positive"
    at.selectbox(key="target").set_value(state.PREDICTED)
    ok(at.run())


def test_an_example_opens_the_three_class_model_on_its_class():
    (label, example), = state.MODEL_EXAMPLES.items()
    assert example["model"] in MODELS
    app = ok(new_app().run())
    app.button(key=f"example_{label}").click()
    ok(app.run())
    assert app.selectbox(key="model").value == example["model"]
    assert app.text_area(key="text").value == example["text"]
    assert app.query_params["target"] == example["target"]
    header, _ = payload(app)
    assert header["classes"] == ["negative", "neutral", "positive"]
    assert header["classes"][header["target"]] == "neutral"


def test_a_bam_viz_models_entry_without_models_is_a_warning_and_the_page_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("BAM_VIZ_MODELS", str(tmp_path / "nowhere"))
    app = new_app().run()
    assert not app.exception and any("holds no model folder" in w.value for w in app.warning)
    assert app.selectbox(key="model").value == "bam-wc"
