"""The Why section (views/why_view.py) through Streamlit's AppTest: its class selector for a K-class
model injected into the zoo (as tests/test_app.py injects a broken one), class names shown as text,
and the binary zoo's default class, the predicted one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from why_k_models import random_head_model

import bam_viz
from views.text import md_escape

APP = Path(__file__).resolve().parents[1] / "app.py"
TEXT = "A dull, lifeless film with one brilliant scene."
# Class names as a user's data may spell them: Markdown, LaTeX and HTML, all to be shown as typed.
CLASSES = ("sports", "*world* <b>news</b>", "$x$ business")
QUICK = {"n_samples": "4", "seed": "0", "why": "1", "why_samples": "4", "why_steps": "16"}


pytestmark = pytest.mark.usefixtures("no_frames_left_behind")   # tests/conftest.py


@pytest.fixture(scope="module")
def k3():
    return random_head_model(CLASSES, name="k3-why")


def with_model(monkeypatch, model) -> None:
    """`model` in the zoo the app lists and loads, beside the shipped ones."""
    listed, load = bam_viz.available_models, bam_viz.load
    monkeypatch.setattr(bam_viz, "available_models", lambda: [*listed(), model.name])
    monkeypatch.setattr(bam_viz, "load", lambda name, device=None: model if name == model.name
                        else load(name, device=device))


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def new_app(**query) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=600)
    for k, v in {**QUICK, "text": TEXT, **query}.items():
        at.query_params[k] = v
    return at


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_a_k_class_model_gets_a_class_selector_defaulting_to_the_predicted_class(monkeypatch, k3):
    with_model(monkeypatch, k3)
    at = run(new_app(model=k3.name))
    predicted = CLASSES[int(k3.predict([TEXT], n_samples=4, seed=0)[0].argmax())]
    selector = at.selectbox(key="why_target")
    assert selector.options == [f"predicted ({predicted})", *CLASSES]
    assert selector.value == "" and at.query_params["why_target"] == "predicted"
    assert f"**Which words moved P({md_escape(predicted)})**" in markdown(at)

    for name in CLASSES:
        at.selectbox(key="why_target").set_value(name)
        run(at)
        shown = markdown(at)
        assert f"**Which words moved P({md_escape(name)})**" in shown, shown
        assert at.query_params["why_target"] == name
        captions = " ".join(c.value for c in at.caption)
        assert f"P({md_escape(name)}) at the deterministic pass" in captions
        # The label posterior describes the class chosen, and that class alone.
        told = [m.value for m in at.markdown if "the sentence is" in m.value]
        assert len(told) == 1 and f"the sentence is {md_escape(name)}" in told[0], told
    # No class name reached the page as markup.
    assert not any("<b>news</b>" in m.value for m in at.markdown)


def test_a_class_of_another_model_falls_back_to_the_predicted_class(monkeypatch, k3):
    with_model(monkeypatch, k3)
    at = run(new_app(model=k3.name, why_target="positive"))            # the binary zoo's class, from a link
    assert at.selectbox(key="why_target").value == ""


def test_the_binary_zoo_attributes_the_predicted_class_by_default():
    at = run(new_app(model="bam-wc"))
    selector = at.selectbox(key="why_target")
    assert selector.options == ["predicted (negative)", "negative", "positive"] and selector.value == ""
    assert "**Which words moved P(negative)**" in markdown(at)
    # Both labels' posteriors, as before: one sentence each.
    assert sum("If the model were told the sentence is" in m.value or "Being told the sentence is" in m.value
               for m in at.markdown) == 2
    at.selectbox(key="why_target").set_value("positive")
    assert "**Which words moved P(positive)**" in markdown(run(at))
