"""The app end to end through Streamlit's AppTest (no browser), on the shipped models.

One AppTest is reused where the order of interactions does not matter: importing torch and loading
models takes seconds, so each fresh AppTest costs.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import bam_viz
from views import state
from views.state import N_SAMPLES_RANGE

APP = Path(__file__).resolve().parents[1] / "app.py"
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


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def metric_values(at: AppTest) -> dict[str, float]:
    return {m.label: float(m.value.split()[0]) for m in at.metric}


def assert_finite_metrics(at: AppTest):
    values = metric_values(at)
    assert len(values) == 4
    assert all(math.isfinite(v) for v in values.values()), values


def n_charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def charts_of(name: str) -> int:
    """Seven panels' charts, and the sweep where the model has a posterior slider to sweep."""
    return 7 + (state.swept_hyper(bam_viz.load(name)) is not None)


@pytest.fixture(scope="module")
def at() -> AppTest:
    app = new_app()
    ok(app.run())
    return app


def test_zoo_is_there():
    assert "bam-wc" in MODELS, "no shipped bam-wc model in pretrained/"


def test_default_view(at):
    assert at.selectbox(key="model").value == "bam-wc"
    assert_finite_metrics(at)
    assert n_charts(at) == charts_of(at.selectbox(key="model").value)
    assert at.query_params["model"] == "bam-wc"
    assert any(c.value.startswith("view ") for c in at.caption)


def test_the_footer_is_shown_only_with_debug(at):
    """The footer (view count, server time) is always written, for the benchmarks; a style hides it
    unless the URL says debug=1 (tests/test_browser.py checks what the browser shows)."""
    hide = ".st-key-render_marker {display: none}"
    assert any(hide in h.proto.body for h in at.get("html"))
    debug = ok(new_app(debug="1").run())
    assert not any(hide in h.proto.body for h in debug.get("html"))
    assert any(c.value.startswith("view ") for c in debug.caption)


def test_the_dev_calibrated_k_is_named_beside_the_slider_never_applied(at):
    """bam-wc's card records the inference k with the lowest dev NLL; the page names it next to
    the trained value, and the slider still starts at the trained value."""
    card = bam_viz.load("bam-wc").card["inference_selection"]
    chosen = state.format_value(card["chosen"])
    assert card["name"] == "shape_k" and min(card["dev_nll"], key=card["dev_nll"].get) == str(card["chosen"])
    assert any(f"best calibrated on dev (lowest NLL) at {chosen}" in c.value for c in at.caption)
    assert at.select_slider(key="shape_k").value == pytest.approx(bam_viz.load("bam-wc").trained_hyper["shape_k"])
    assert sum("best calibrated on dev" in c.value for c in at.caption) == 1     # only for shape_k


@pytest.mark.parametrize("name", MODELS)
def test_every_model_renders(at, name):
    at.selectbox(key="model").set_value(name)
    ok(at.run())
    assert_finite_metrics(at)
    assert n_charts(at) == charts_of(name)
    model = bam_viz.load(name)
    for h in state.SLIDERS:
        assert at.select_slider(key=h).disabled == (h not in model.hyper_names)
    assert at.slider(key="n_samples").disabled == (not model.stochastic)
    assert at.query_params["model"] == name


def _extremes(at, name, keys):
    at.selectbox(key="model").set_value(name)
    ok(at.run())
    for key in keys:
        lo, hi = state.SLIDERS[key].low, state.SLIDERS[key].high
        for value in (lo, hi):
            at.select_slider(key=key).set_value(value)
            ok(at.run())
            assert at.select_slider(key=key).value == value
            assert_finite_metrics(at)
        at.button(key=f"reset_{key}").click()
        ok(at.run())
        assert at.select_slider(key=key).value == pytest.approx(bam_viz.load(name).trained_hyper[key])


@pytest.mark.parametrize("name, keys", [("bam-wc", ["shape_k", "beta"]), ("bam-lc", ["sigma"]),
                                        ("dirichlet", ["concentration"])])
def test_hyper_sliders_at_extremes(at, name, keys):
    if name not in MODELS:
        pytest.fail(f"{name} is not shipped")
    _extremes(at, name, keys)


def test_sampling_and_picture_controls_at_extremes(at):
    at.selectbox(key="model").set_value("bam-wc")
    ok(at.run())
    for key, values in (("n_samples", (*N_SAMPLES_RANGE, 32)),):
        for v in values:
            at.slider(key=key).set_value(v)
            ok(at.run())
            assert_finite_metrics(at)
    for v in (0, 9999, 0):
        at.number_input(key="seed").set_value(v)
        ok(at.run())
    for key in ("layer", "head", "query_token", "key_token"):
        options = at.selectbox(key=key).options
        for index in (len(options) - 1, 0):
            at.selectbox(key=key).set_value(index)
            ok(at.run())
            assert at.query_params[key] == str(index)
            assert n_charts(at) == charts_of(at.selectbox(key="model").value)


def test_picture_controls_do_not_rerun_the_model(at, monkeypatch):
    at.selectbox(key="model").set_value("bam-wc")
    ok(at.run())
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
    at.number_input(key="seed").set_value(7)
    ok(at.run())
    assert len(calls) == 1


@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_text_asks_politely(at, text):
    at.text_area(key="text").set_value(text)
    ok(at.run())
    assert any("Type a sentence" in i.value for i in at.info)
    assert n_charts(at) == 0


def test_long_text_is_truncated_with_a_notice(at):
    at.selectbox(key="model").set_value("bam-wc")
    at.text_area(key="text").set_value(" ".join(["good"] * 2500 + ["bad"] * 2500))
    ok(at.run())
    assert at.warning and "maximum" in at.warning[0].value
    assert len(at.selectbox(key="query_token").options) == bam_viz.load("bam-wc").max_tokens
    assert_finite_metrics(at)


@pytest.mark.parametrize("kind", list(HOSTILE_TEXTS))
def test_hostile_text_is_shown_as_text(at, kind):
    at.text_area(key="text").set_value(HOSTILE_TEXTS[kind])
    ok(at.run())
    assert_finite_metrics(at)
    assert n_charts(at) == charts_of(at.selectbox(key="model").value)
    for md in list(at.markdown) + list(at.caption):
        assert not md.proto.allow_html or "<script" not in md.value
    specs = " ".join(chart.proto.spec for chart in at.get("plotly_chart"))
    for raw in ("<script", "\\u003cscript", "<b>bold", "\\u003cb\\u003ebold"):
        assert raw not in specs
    if kind == "script":
        assert "&lt;script&gt;" in specs or "&lt;" in specs


def test_query_params_round_trip():
    query = {"text": "A quietly moving film.", "model": "bam-wc", "shape_k": "2", "beta": "0.5",
             "n_samples": "16", "seed": "42", "layer": "4", "head": "3", "query_token": "2",
             "key_token": "3"}
    at = ok(new_app(**query).run())
    assert at.text_area(key="text").value == query["text"]
    assert at.selectbox(key="model").value == "bam-wc"
    assert at.select_slider(key="shape_k").value == pytest.approx(2.0, rel=0.08)  # snapped to the grid
    assert at.select_slider(key="beta").value == pytest.approx(0.5, rel=0.08)
    assert at.slider(key="n_samples").value == 16
    assert at.number_input(key="seed").value == 42
    for key in ("layer", "head", "query_token", "key_token"):
        assert at.selectbox(key=key).value == int(query[key])
    assert any("16 samples · seed 42" in c.value for c in at.caption)
    at.slider(key="n_samples").set_value(8)
    at.selectbox(key="head").set_value(5)
    ok(at.run())
    assert at.query_params["n_samples"] == "8" and at.query_params["head"] == "5"
    assert at.query_params["text"] == query["text"]


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
    assert n_charts(at) == 0
    at.switch_page("views/explorer.py")
    ok(at.run())
    assert at.text_area(key="text").value == "An unforgettable evening."
    assert n_charts(at) == charts_of(at.selectbox(key="model").value)


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
    assert n_charts(at) == charts_of(at.selectbox(key="model").value)


def test_monte_carlo_numbers_carry_their_standard_error():
    """E[f(z)], the gap and the MI show ± 1 SE below the value (a metric column is too narrow for both
    on one line), the estimator in the help, and the gap's verdict; one sample shows no NaN."""
    at = ok(new_app(text="The plot is thin but the actors are wonderful.", model="bam-wc", n_samples="32").run())
    with_error = [m for m in at.metric if not m.label.startswith("f(E[z])")]
    assert [m.label.split(" ")[0] for m in with_error] == ["P(positive)", "Gap", "Epistemic"]
    for m in with_error:
        assert m.delta.startswith("± ") and float(m.delta.split()[1]) > 0, (m.label, m.delta)
        assert "standard error" in m.help and "estimator" in m.help
    assert "jackknife" in with_error[2].help
    assert any("distinguishable from zero" in c.value for c in at.caption)
    at.slider(key="n_samples").set_value(1)
    ok(at.run())
    assert_finite_metrics(at)
    assert not any("nan" in f"{m.value} {m.delta}".lower() or "±" in m.delta for m in at.metric)
    assert any("needs at least 2 samples" in c.value for c in at.caption)


def _figure(at: AppTest, title_starts: str) -> dict:
    import json

    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return next(s for s in specs if s["layout"].get("title", {}).get("text", "").startswith(title_starts))


def test_relative_colour_is_a_picture_control_in_the_url(monkeypatch):
    """Colour scales are fixed unless the toggle asks for relative ones; the toggle is mirrored in the
    URL like the other picture controls and, like them, does not rerun the model."""
    at = ok(new_app(model="bam-wc", layer="5", relative_colour="true").run())
    assert at.toggle(key="relative_colour").value is True
    assert at.query_params["relative_colour"] == "True"
    std_axis = _figure(at, "Layer 5, head 0: attention maps")["layout"]["coloraxis2"]
    assert std_axis["cmax"] < 0.5 and "relative" in std_axis["colorbar"]["title"]["text"]
    calls = []
    real = bam_viz.model.BamClassifier.explain
    monkeypatch.setattr(bam_viz.model.BamClassifier, "explain",
                        lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    at.toggle(key="relative_colour").set_value(False)
    ok(at.run())
    assert calls == [] and at.query_params["relative_colour"] == "False"
    assert _figure(at, "Layer 5, head 0: attention maps")["layout"]["coloraxis2"]["cmax"] == 0.5
    assert any("Colours are absolute" in c.value for c in at.caption)
    assert ok(new_app(model="bam-wc").run()).toggle(key="relative_colour").value is False
    assert ok(new_app(model="bam-wc", relative_colour="maybe").run()).toggle(key="relative_colour").value is False


def test_the_footer_counts_the_samples_actually_drawn():
    """softmax is deterministic: the page draws one sample whatever the n_samples slider says."""
    at = ok(new_app(model="softmax", n_samples="32", debug="1").run())
    footer = next(c.value for c in at.caption if c.value.startswith("view "))
    assert "· 1 sample ·" in footer
    assert _figure(at, "P(positive)")["layout"]["title"]["text"].endswith("across 1 attention sample")


@pytest.mark.parametrize("name, says, never", [
    ("mc-dropout", "Every layer is stochastic through dropout", ("grey rows", "moved furthest", "KL 0 nats")),
    ("categorical", "Only layer 5 is stochastic;", ("layers 5", "moved furthest")),
])
def test_the_captions_fit_the_model(name, says, never):
    if name not in MODELS:
        pytest.fail(f"{name} is not shipped")
    at = ok(new_app(model=name, layer="5").run())
    captions = " ".join(c.value for c in at.caption)
    assert says in captions and "no KL" in captions
    assert not any(phrase in captions for phrase in never), captions
    at.slider(key="n_samples").set_value(1)
    ok(at.run())
    captions = " ".join(c.value for c in at.caption)
    assert "Layer 5 is deterministic" not in captions and "1 attention sample was drawn" in captions
    assert "1 attention samples" not in captions


LONG_TEXT = ("The film opens with a long, quiet shot of a harbour at dawn, and for the first hour it hardly raises "
             "its voice. The actors are good, especially the older sister, whose silences say more than the script "
             "ever does, but the plot wanders between three families without deciding which one it cares about. "
             "By the time the storm arrives I had stopped waiting for it; the ending is beautiful to look at and "
             "strangely empty, like a postcard from a trip you do not remember taking. Still, the music is lovely, "
             "the camera loves the sea, and there are ten minutes in the middle, a wedding on a fishing boat, "
             "that I will not forget. See it on the biggest screen you can find, and bring someone patient.")


def test_a_long_sentence_shows_a_window_of_the_maps_in_the_url(monkeypatch):
    """150 word pieces: the note says how many were kept, and the maps show a window of tokens that
    a control moves, mirrored in the URL like the other picture controls (and not rerunning the model)."""
    from bam_viz import charts

    model = bam_viz.load("bam-wc")
    T, W = model.max_tokens, charts.TOKEN_WINDOW
    assert model.tokenizer.length(LONG_TEXT) == 152                # 150 word pieces, [CLS] and [SEP]
    at = ok(new_app(text=LONG_TEXT, model="bam-wc", layer="5").run())
    assert f"it has 150 word pieces, and only the first {T - 2}" in at.warning[0].value
    assert n_charts(at) == charts_of("bam-wc")
    window = at.select_slider(key="window_start")
    assert window.options == [charts.window_label(T, s) for s in charts.window_starts(T)]
    assert window.value == 1 and at.query_params["window_start"] == "1"       # from [CLS], the query
    maps = _figure(at, "Layer 5, head 0: attention maps")
    assert maps["layout"]["xaxis"]["showticklabels"] and len(maps["data"][0]["x"]) == W    # a label per token
    assert f"{W} of {T} tokens (0–{W - 2} and {T - 1})" in maps["layout"]["title"]["text"]
    calls = []
    real = bam_viz.model.BamClassifier.explain
    monkeypatch.setattr(bam_viz.model.BamClassifier, "explain",
                        lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    at.select_slider(key="window_start").set_value(60)
    ok(at.run())
    assert calls == [] and at.query_params["window_start"] == "60"
    assert f"(0, 60–{60 + W - 3} and {T - 1})" in _figure(at, "Layer 5, head 0")["layout"]["title"]["text"]
    assert any(f"The maps show {W} of {T} tokens" in c.value for c in at.caption)
    at.selectbox(key="query_token").set_value(T - 2)               # outside the window: it follows
    ok(at.run())
    assert at.select_slider(key="window_start").value == charts.window_around(T, T - 2) == T - W + 1
    # the link reproduces the window
    again = ok(new_app(text=LONG_TEXT, model="bam-wc", layer="5", window_start="60").run())
    assert again.select_slider(key="window_start").value == 60
    assert f"(0, 60–{60 + W - 3} and {T - 1})" in _figure(again, "Layer 5, head 0")["layout"]["title"]["text"]
    # a short sentence shows every token: no window control, none in the URL
    again.text_area(key="text").set_value("A quietly moving film.")
    ok(again.run())
    assert "window_start" not in [s.key for s in again.select_slider] and "window_start" not in again.query_params


# A phrase from each panel's explanation on the default page (the sentence, bam-wc at its trained values).
PANEL_PROSE = ("Values are ± 1 SE", "Where the red line leaves the green band", "Averaging them gives",
               "Grey bars", "The dashed grey curve", "Each small map", "grey rows are ordinary")


def _folded(at: AppTest) -> list[str]:
    return [c.value for e in at.expander if e.label == "What this shows" for c in e.caption]


def test_presentation_mode_is_in_the_url_and_folds_the_prose():
    """presentation=1 turns the sidebar toggle on and puts every panel's caption in a "What this
    shows" expander, the same text as a normal page shows; turning it off drops it from the URL."""
    normal = ok(new_app(model="bam-wc").run())
    assert normal.toggle(key="presentation").value is False and "presentation" not in normal.query_params
    assert _folded(normal) == []
    shown = [c.value for c in normal.caption]
    assert all(any(phrase in c for c in shown) for phrase in PANEL_PROSE)

    at = ok(new_app(model="bam-wc", presentation="1").run())
    assert at.toggle(key="presentation").value is True and at.query_params["presentation"] == "1"
    folded = _folded(at)
    assert len(folded) == len(PANEL_PROSE) and set(folded) <= set(shown)
    assert all(any(phrase in c for c in folded) for phrase in PANEL_PROSE)
    outside = [c.value for c in at.caption if c.value not in folded]
    assert not any(phrase in c for c in outside for phrase in PANEL_PROSE), outside
    assert n_charts(at) == charts_of("bam-wc")

    at.toggle(key="presentation").set_value(False)
    ok(at.run())
    assert "presentation" not in at.query_params and _folded(at) == []
    assert set(folded) <= {c.value for c in at.caption}
    for junk in ("maybe", ""):
        assert ok(new_app(model="bam-wc", presentation=junk).run()).toggle(key="presentation").value is False
