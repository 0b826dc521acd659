"""The Lessons page (views/lessons.py) through Streamlit's AppTest: both shipped lessons walked with
Next and Back, each step's controls set on its page and in the URL, Reveal showing the answer only
when clicked, a teacher's lesson from $BAM_VIZ_LESSONS and a broken one's message, and a copied link
that adjusts a step."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from app_pages import app_page, ok
from hostile_lessons import CASES, expected, hostile_folder
from streamlit.testing.v1 import AppTest

from views import corpus, join, lesson_files, lessons, state, theory
from views.text import md_escape, safe_links

APP = Path(__file__).resolve().parents[1] / "app.py"
PAGE = "views/lessons.py"

pytestmark = pytest.mark.usefixtures("no_frames_left_behind")   # tests/conftest.py


def new_page(**query) -> AppTest:
    return app_page(PAGE, 300, **query)


def keys(at: AppTest) -> set[str]:
    return {c.key for c in at.get("flex_container") if c.key}


def css(at: AppTest) -> str:
    return " ".join(h.proto.body for h in at.get("html"))


def same(raw: str, value) -> bool:
    """A URL's `raw` value reads as `value`."""
    if isinstance(value, bool):
        return state._bool(raw) is value
    return math.isclose(float(raw), value) if isinstance(value, (int, float)) else raw == value


def sliders(at: AppTest) -> dict:
    """What the browser's sliders are sent (views/components.py): their epoch and current values."""
    (found,) = [e for e in at.get("bidi_component") if e.key == "live_sliders"]
    data = json.loads(found.proto.json)
    return {"epoch": data["epoch"], **{s["name"]: s["current"] for s in data["sliders"]}}


def assert_step(at: AppTest, lesson: lesson_files.Lesson, n: int) -> None:
    """Step n is shown: in the URL, with its page's controls at the view's values and its panel outlined."""
    ok(at)
    step = lesson.steps[n - 1]
    assert at.query_params["lesson"] == lesson.id and at.query_params["step"] == str(n)
    assert "lesson_step" in keys(at)
    assert f"Step {n} of {len(lesson.steps)}" in at.caption[0].value
    for name, value in step.view.params.items():
        key = {v: k for k, v in corpus.URL_KEYS.items()}[name] if step.view.page == "corpus" else name
        assert at.session_state[key] == value, (n, name, at.session_state[key])
        if name in at.query_params:
            assert same(at.query_params[name], value), (n, name, at.query_params[name])
        else:                                   # the Theory lab leaves a control at its default out of the URL
            default = theory.CHOICES[name][1] if name in theory.CHOICES else (
                theory.SLIDERS[name].default if name in theory.SLIDERS else state.DEFAULT_TEXT)
            assert step.view.page == "theory" and value == default, (n, name)
    if step.view.page == "explorer":
        sent = sliders(at)
        for name in step.view.params.keys() & set(state.SLIDERS):
            assert sent[name] == step.view.params[name], (n, name)
    page = lesson_files.PAGES[step.view.page]
    if step.view.panel:
        assert lessons.OUTLINE_CSS.format(page.panels[step.view.panel].selector) in css(at)


def controls(at: AppTest, step: lesson_files.Step) -> dict:
    """Every control of the step's page, the ones its view leaves alone too."""
    return {k: at.session_state[k] for k in lessons.session_keys(step.view.page) if k in at.session_state}


def reveal(at: AppTest, step: lesson_files.Step) -> None:
    """Before Reveal: no answer, the hidden panel hidden; after: the answer, its number, the panel."""
    page = lesson_files.PAGES[step.view.page]
    hidden = lessons.HIDE_CSS.format(page.panels[step.reveal.hide].selector) if step.reveal.hide else None
    assert "lesson_answer" not in keys(at)
    assert hidden is None or hidden in css(at)
    ok(at.button(key="lesson_reveal").click().run())
    assert "lesson_answer" in keys(at) and at.button(key="lesson_reveal").disabled
    assert hidden is None or hidden not in css(at)
    if step.reveal.value:
        (metric,) = at.metric
        assert metric.label.startswith(lesson_files.VALUES[step.reveal.value].label)
        assert math.isfinite(float(metric.value.split(" ± ")[0]))


def test_both_shipped_lessons_walk_forward_with_next_and_back_with_back():
    at = ok(new_page().run())
    shipped, problems = lesson_files.load_lessons("")
    assert problems == []
    for lesson in shipped:
        ok(at.button(key=f"lesson_start_{lesson.id}").click().run())
        epoch, seen = 0, {}
        for n in range(1, len(lesson.steps) + 1):
            assert_step(at, lesson, n)
            seen[n] = controls(at, lesson.steps[n - 1])
            assert at.button(key="lesson_back").disabled == (n == 1)
            assert at.button(key="lesson_next").disabled == (n == len(lesson.steps))
            if lesson.steps[n - 1].view.page == "explorer":
                assert sliders(at)["epoch"] > epoch       # the browser's sliders take the step's values
                epoch = sliders(at)["epoch"]
            if lesson.steps[n - 1].reveal:
                reveal(at, lesson.steps[n - 1])
            if n < len(lesson.steps):
                at.button(key="lesson_next").click().run()
        for n in range(len(lesson.steps) - 1, 0, -1):
            at.button(key="lesson_back").click().run()
            assert_step(at, lesson, n)
            assert controls(at, lesson.steps[n - 1]) == seen[n]     # nothing of a later step lingers
            assert "lesson_answer" not in keys(at)         # a revealed answer is hidden again on return
        ok(at.button(key="lesson_home").click().run())
        assert "lesson" not in at.query_params and at.button(key=f"lesson_start_{lesson.id}")


TEACHER = '''
title = "Our own lesson"
summary = "A corpus step, then the explorer's Why section."

[[steps]]
title = "Where people disagree"
text = "The shipped test splits."
question = "Is the model unsure where the raters disagree?"
[steps.view]
page = "corpus"
model = "bam-wc"
compare = "softmax"
measure = "predictive_entropy"
panel = "scatter"
[steps.reveal]
answer = "Look at Spearman's rho."
hide = "scatter"

[[steps]]
title = "Why"
text = "Token attributions."
question = "Which word pushed the prediction?"
[steps.view]
page = "explorer"
text = "A glorious mess."
model = "bam-lc"
sigma = 0.608
why_samples = 4
why_steps = 16
panel = "why"
'''


def test_a_teachers_lesson_from_bam_viz_lessons_appears_and_a_broken_one_says_why(tmp_path, monkeypatch):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ours.toml").write_text(TEACHER, encoding="utf-8")
    broken = folder / "broken.toml"
    broken.write_text(TEACHER.replace('page = "corpus"', 'page = "corpora"'), encoding="utf-8")
    monkeypatch.setenv(lesson_files.LESSONS_ENV, str(folder))
    at = new_page().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value.replace("\\", "") for e in at.error] == [
        f"class/{broken.name}: steps[1].view.page: 'corpora' is not a page (the pages: explorer, theory, corpus)"]
    ours = lesson_files.read_lesson(folder / "ours.toml", lesson_files.bam_viz.available_models())[0]
    ok(at.button(key="lesson_start_ours").click().run())
    assert_step(at, ours, 1)
    reveal(at, ours.steps[0])
    ok(at.button(key="lesson_next").click().run())
    assert_step(at, ours, 2)
    assert at.session_state["why"] is True and same(at.query_params["why"], True)     # the panel opened it
    assert at.session_state["sigma"] == 0.608 and at.session_state["model"] == "bam-lc"


def test_a_copied_link_adjusts_its_step_once_and_presentation_mode_enlarges_the_card():
    at = ok(new_page(lesson="attention-random-variable", step="3", shape_k="0.526", presentation="1").run())
    assert at.session_state["shape_k"] == 0.526 and at.session_state["layer"] == 5
    assert at.query_params["step"] == "3" and at.query_params["presentation"] == "1"
    assert lessons.PRESENTATION_CSS in css(at) and "2.4rem" in lessons.PRESENTATION_CSS
    ok(at.button(key="lesson_next").click().run())
    assert at.session_state["shape_k"] == 0.2                   # the next step is the lesson's own
    assert at.query_params["presentation"] == "1" and at.session_state["presentation"] is True


def test_an_unknown_lesson_shows_the_list_and_a_bad_step_is_corrected():
    at = new_page(lesson="nope").run()
    assert not at.exception and not at.error
    assert "There is no lesson “nope” here" in at.warning[0].value
    assert at.button(key="lesson_start_prior-posterior-gap")
    for raw, shown in (("99", "7"), ("two", "1"), ("0", "1")):      # a link typed: a new session each
        at = ok(new_page(lesson="prior-posterior-gap", step=raw).run())
        assert at.query_params["step"] == shown and f"Step {shown} of 7" in at.caption[0].value


def test_a_rerun_that_brings_an_older_url_does_not_move_the_step_back():
    """Next changes the URL; a rerun the browser sent before it saw the change (the explorer's fragment
    polling for frames) carries the old query string. The step stays where Next put it."""
    at = ok(new_page(lesson="prior-posterior-gap", step="1").run())
    ok(at.button(key="lesson_next").click().run())
    assert str(at.query_params["step"]).strip("[]'") == "2"
    at.query_params["step"] = "1"                           # the stale query string of that rerun
    ok(at.run())
    assert any("Step 2 of" in c.value for c in at.caption)
    assert str(at.query_params["step"]).strip("[]'") == "2"


LINKS = TEACHER.replace("The shipped test splits.", "[data](data:text/html,<script>alert(1)</script>), "
                        "[js](javascript:alert(1)), <data:text/html,x> and [the corpus](./corpus)")


def test_a_hostile_teachers_folder_leaves_the_page_running_with_one_line_a_file(tmp_path, monkeypatch):
    """Each file that crashed, hung or exhausted memory (a 5,000-level nesting, a named pipe, a link to
    /dev/zero, 10,000 steps) is one error naming it within the teacher's folder; the shipped lessons and
    the teacher's good ones are still listed, and a lesson's links to other schemes show as text."""
    folder = hostile_folder(tmp_path / "class", LINKS)
    monkeypatch.setenv(lesson_files.LESSONS_ENV, str(folder))
    at = new_page().run()
    assert not at.exception, [e.value for e in at.exception]
    problems = lesson_files.load_lessons()[1]
    assert [e.value for e in at.error] == [md_escape(p) for p in problems]
    assert len(problems) == len(CASES)
    for line, start in zip(problems, expected(folder), strict=True):
        assert line.startswith(start), (line[:200], start[:200])
    assert not any(str(tmp_path) in e.value.replace("\\", "") for e in at.error)
    for lesson in ("attention-random-variable", "prior-posterior-gap", "good"):
        assert at.button(key=f"lesson_start_{lesson}")
    ok(at.button(key="lesson_start_good").click().run())
    (text,) = [m.value for m in at.markdown if "javascript" in m.value]
    assert text == safe_links(LINKS.split('text = "')[1].split('"')[0])
    assert "[data\\](data:" in text and "[js\\](javascript:" in text and "\\<data:" in text
    assert "[the corpus](./corpus)" in text


def test_a_5000_character_public_url_leaves_the_steps_running(monkeypatch):
    """The setting is refused in one line on every step (the join panel is the same on each): the QR
    code of the link made without it is drawn, and Next still moves on."""
    monkeypatch.setenv(join.PUBLIC_URL_ENV, "http://room12.school/" + "a" * 5000)
    lesson = lesson_files.load_lessons("")[0][1]
    at = ok(new_page(lesson=lesson.id, step="1").run())
    for n in (1, 2):
        assert_step(at, lesson, n)
        (warning,) = [w.value for w in at.warning if join.PUBLIC_URL_ENV in w.value]
        assert "5,021 characters long" in warning and "aaaa" not in warning
        assert at.get("image") and "room12" not in at.code[0].value
        at.button(key="lesson_next").click().run()
