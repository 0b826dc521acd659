"""The Theory lab page (views/theory.py) through Streamlit's AppTest, and once in headless chromium:
every section renders, the URL reproduces the view, a slider moves a figure, nothing leaves the host."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from app_pages import ok
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "views" / "theory.py"
APP = ROOT / "app.py"


def new_page(**query) -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def captions(at: AppTest) -> list[str]:
    """The captions as read, Markdown escapes taken out (the page escapes every caption)."""
    return [c.value.replace("\\", "") for c in at.caption]


def charts(at: AppTest) -> list:
    return [e.proto for e in at.get("plotly_chart")]


def test_the_default_view_shows_deng_et_al_numbers():
    at = ok(new_page())
    text = " ".join(captions(at))
    assert "f(E[z]) = 0.881" in text and "E[f(z)] = 0.741" in text
    assert "bam-wc gives E[f(z)]" in text                  # the per-layer gap on the default sentence
    figures = charts(at)
    assert len(figures) == 2
    assert all(json.loads(f.config)["toImageButtonOptions"]["format"] == "svg" for f in figures)
    assert dict(at.query_params) == {}                         # defaults leave the URL clean


@pytest.mark.parametrize("section, expect", [
    ("elbo", "falls short of it by exactly KL"),
    ("inference", "matched temperature"),
    ("bam", "closed form"),
    ("space", "one training seed"),
])
def test_every_section_renders_with_its_caption(section, expect):
    at = ok(new_page(section=section))
    assert at.sidebar.radio(key="section").value == section
    assert any(expect in c for c in captions(at)), captions(at)
    assert charts(at)


def test_the_url_reproduces_a_view_and_bad_values_are_ignored():
    fresh = ok(new_page(section="bam"))
    k = float(fresh.select_slider(key="w_k").options[10])
    beta_max = float(fresh.select_slider(key="g_beta").options[-1])
    alpha_default = fresh.select_slider(key="g_alpha").value
    at = ok(new_page(section="bam", pair="weibull", w_k=f"{k:g}", g_beta="1e9", g_alpha="abc", label="maybe"))
    assert at.select_slider(key="w_k").value == k
    assert at.select_slider(key="g_beta").value == beta_max                 # clamped to the range
    assert at.select_slider(key="g_alpha").value == alpha_default           # ignored
    assert f"k = {k:.3g}" in " ".join(captions(at))
    assert at.query_params["w_k"] == f"{k:g}" and "g_alpha" not in at.query_params
    assert "label" not in at.query_params


def test_moving_a_slider_moves_the_figure_and_the_url():
    at = ok(new_page())
    before, caption_before = charts(at)[0].spec, captions(at)[1]
    at.select_slider(key="jensen_p").set_value(0.8).run()
    ok(at)
    assert charts(at)[0].spec != before and captions(at)[1] != caption_before
    assert "P(z = 4) = 0.8" in captions(at)[1]
    assert at.query_params["jensen_p"] == "0.8"


def test_a_wrong_temperature_is_named_and_png_downloads_can_be_chosen():
    at = ok(new_page(section="inference", toy_temp="2", image_format="png"))
    assert any("wrong limit" in c for c in captions(at))
    assert all(json.loads(f.config)["toImageButtonOptions"]["format"] == "png" for f in charts(at))


def test_the_elbo_slider_and_the_label_change_the_bound():
    at = ok(new_page(section="elbo"))
    first = [c for c in captions(at) if "ELBO" in c][0]
    at.radio(key="label").set_value("negative").run()
    at.select_slider(key="q_t").set_value(1.0).run()
    ok(at)
    last = [c for c in captions(at) if "ELBO" in c][0]
    assert last != first and "y = negative" in last and "KL(q ‖ p(z | x, y)) = 0.0000" in last
    assert at.query_params["label"] == "negative" and at.query_params["q_t"] == "1"


@pytest.mark.parametrize("section", ["jensen", "elbo"])
def test_an_empty_or_hostile_sentence_is_a_message_not_a_traceback(section):
    at = ok(new_page(section=section, sentence="   "))
    assert any("Type a sentence" in i.value for i in at.info)
    at = ok(new_page(section=section, sentence="<script>alert(1)</script> <b>bold</b> & fine"))
    assert charts(at)


def test_every_stochastic_model_gives_its_gap():
    at = ok(new_page())
    for name in at.selectbox(key="gap_model").options:
        at.selectbox(key="gap_model").set_value(name).run()
        ok(at)
        assert any(f"{name} gives E[f(z)]" in c for c in captions(at)), name


def test_the_app_routes_to_the_theory_lab():
    at = AppTest.from_file(str(APP), default_timeout=240).run()
    at.switch_page("views/theory.py").run()
    ok(at)
    assert at.title[0].value == "Theory lab"


# ---- in a real browser ------------------------------------------------------------------------------
@pytest.mark.browser
def test_in_chromium_a_slider_moves_a_figure_and_nothing_leaves_the_host():
    import browser_latency as bl
    from playwright.sync_api import sync_playwright

    artifacts = ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with bl.serve(APP, log=artifacts / "browser-theory-server.log") as url, sync_playwright() as p:
        browser = bl.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            outside = []
            page.on("request", lambda r: None if r.url.startswith((url, "data:", "blob:")) else outside.append(r.url))
            page.goto(f"{url}/theory?section=inference")
            keys_svg = "() => document.querySelector('.js-plotly-plot .main-svg')?.outerHTML"
            page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 3",
                                   timeout=180_000)
            page.wait_for_timeout(1000)
            before = page.evaluate(keys_svg)
            slider = page.get_by_role("slider", name="N tokens (toy_n)")
            slider.focus()
            slider.press("ArrowRight")
            page.wait_for_function(f"before => ({keys_svg})() !== before", arg=before, timeout=60_000)
            page.wait_for_function("() => location.search.includes('toy_n=128')", timeout=30_000)
            assert parse_qs(urlparse(page.evaluate("() => location.href")).query)["toy_n"] == ["128"]
            page.screenshot(path=str(artifacts / "browser-theory.png"), full_page=True)
        finally:
            browser.close()
    assert outside == []
