"""The lesson files (views/lesson_files.py): the shipped lessons are valid and say what their pages
show; every kind of broken file is one line naming the file and the field; $BAM_VIZ_LESSONS adds a
teacher's lessons, and a broken one leaves the others loading."""

from __future__ import annotations

import os
from pathlib import Path

import hostile_lessons as hostile
import pytest
from hostile_lessons import hostile_folder

from views import lesson_files as lf
from views import state, theory

GOOD = '''
title = "A teacher's lesson"
summary = "One step."
minutes = 5

[[steps]]
title = "First"
text = "Some *markdown*."
question = "What will k do?"
[steps.view]
page = "explorer"
model = "bam-wc"
shape_k = 0.2
panel = "summary"
[steps.reveal]
answer = "It spreads."
hide = "summary"
value = "gap"
'''


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def problems_of(path: Path) -> list[str]:
    lesson, problems = lf.read_lesson(path, lf.bam_viz.available_models())
    assert (lesson is None) == bool(problems)
    return problems


def test_the_shipped_lessons_are_valid_and_have_5_to_8_steps_on_more_than_one_page():
    lessons, problems = lf.load_lessons("")
    assert problems == []
    assert {"attention-random-variable", "prior-posterior-gap"} <= {x.id for x in lessons}
    for lesson in lessons:
        assert 5 <= len(lesson.steps) <= 8, lesson.id
        assert {"explorer", "theory"} <= {s.view.page for s in lesson.steps}, lesson.id
        assert any(s.reveal for s in lesson.steps), lesson.id


def test_the_shipped_views_set_values_their_sliders_offer():
    """A lesson's text names the values it sets ("k = 0.2"): each is one the page's slider offers, so
    the page shows exactly it and does not snap it to a neighbour."""
    models = {}
    for lesson in lf.load_lessons("")[0]:
        for step in lesson.steps:
            params = step.view.params
            if step.view.page == "explorer":
                name = params.get("model", state.DEFAULT_MODEL)
                model = models.setdefault(name, lf.bam_viz.load(name))
                for key in params.keys() & set(state.SLIDERS):
                    assert params[key] in state.hyper_options(key, model.trained_hyper.get(key)), (lesson.id, key)
            elif step.view.page == "theory":
                for key in params.keys() & set(theory.SLIDERS):
                    assert params[key] in theory.SLIDERS[key].options, (lesson.id, key)


def test_a_good_file_reads_as_its_steps(tmp_path):
    lesson, found = lf.read_lesson(write(tmp_path, "good.toml", GOOD), lf.bam_viz.available_models())
    assert found == [] and lesson.id == "good" and lesson.minutes == 5
    (step,) = lesson.steps
    assert step.view == lf.View("explorer", {"model": "bam-wc", "shape_k": 0.2}, "summary")
    assert step.reveal == lf.Reveal("It spreads.", "summary", "gap")
    assert step.view.query() == {"model": "bam-wc", "shape_k": "0.2"}


@pytest.mark.parametrize("old, new, field, says", [
    ('summary = "One step."', 'summary = ', "", "is not valid TOML: Invalid value (at line 3"),
    ('title = "A teacher\'s lesson"\n', "", "title", "is missing"),
    ('title = "A teacher\'s lesson"', "title = 3", "title", "must be a non-empty string"),
    ("minutes = 5", "minutes = 0", "minutes", "must be a positive integer"),
    ("minutes = 5", 'minutes = "five"', "minutes", "must be a positive integer"),
    ("minutes = 5", 'colour = "red"', "colour", "unknown field (the fields here: title, summary, minutes, steps)"),
    ('question = "What will k do?"', 'qestion = "What will k do?"', "steps[1].qestion", "unknown field"),
    ('question = "What will k do?"', 'text2 = ""', "steps[1].question", "is missing"),
    ('page = "explorer"', 'page = "explore"', "steps[1].view.page", "'explore' is not a page (the pages: explorer, "
                                                                       "theory, corpus)"),
    ("shape_k = 0.2", "shape = 0.2", "steps[1].view.shape", "the Explorer has no parameter shape (its parameters: "
                                                           "text, model, shape_k"),
    ("shape_k = 0.2", "shape_k = 5000", "steps[1].view.shape_k", "5000 is outside 0.2..1000"),
    ("shape_k = 0.2", 'shape_k = "small"', "steps[1].view.shape_k", "must be a number"),
    ("shape_k = 0.2", "n_samples = 8.5", "steps[1].view.n_samples", "must be an integer"),
    ("shape_k = 0.2", "n_samples = 65", "steps[1].view.n_samples", "65 is outside 1..64"),
    ("shape_k = 0.2", "layer = true", "steps[1].view.layer", "must be an integer"),
    ("shape_k = 0.2", "why_samples = 5", "steps[1].view.why_samples", "5 is not one of 4, 8, 16"),
    ('model = "bam-wc"', 'model = "bam-xx"', "steps[1].view.model", "'bam-xx' is not one of softmax"),
    ('model = "bam-wc"', 'model = "softmax"', "steps[1].view.shape_k", "softmax has no shape_k slider (its sliders: "
                                                                      "none)"),
    ('model = "bam-wc"', 'target = "great"', "steps[1].view.target", "'great' is not a class of bam-wc (negative, "
                                                                    "positive, or predicted)"),
    ('panel = "summary"', 'panel = "sidebar"', "steps[1].view.panel", "'sidebar' is not a part of the Explorer (its "
                                                                     "parts: summary, inside, why)"),
    ('hide = "summary"', 'hide = "maps"', "steps[1].reveal.hide", "'maps' is not a part of the Explorer"),
    ('value = "gap"', 'value = "accuracy"', "steps[1].reveal.value", "'accuracy' is not a value (the values: "
                                                                    "prediction"),
    ('answer = "It spreads."', "", "steps[1].reveal.answer", "is missing"),
    ("[steps.view]", "[steps.vista]", "steps[1].view", "is missing"),
    ('page = "explorer"', 'page = ["explorer"]', "steps[1].view.page", "['explorer'] is not a page"),
    ('panel = "summary"', "panel = 3", "steps[1].view.panel", "3 is not a part of the Explorer"),
    ('value = "gap"', "value = [1]", "steps[1].reveal.value", "[1] is not a value"),
])
def test_a_broken_file_is_one_line_naming_the_file_and_the_field(tmp_path, old, new, field, says):
    assert old in GOOD
    path = write(tmp_path, "broken.toml", GOOD.replace(old, new, 1))
    problems = problems_of(path)
    prefix = f"{path.name}: {field}: " if field else f"{path.name}: "
    assert any(p.startswith(prefix) and says in p for p in problems), problems


@pytest.mark.parametrize("view, field, says", [
    ('page = "theory"\nsection = "jensen"\nw_k = 100.0', "steps[1].view.w_k", "100 is outside 0.2..50"),
    ('page = "theory"\njensen_f = "cube"', "steps[1].view.jensen_f", "'cube' is not one of sigmoid, square"),
    ('page = "theory"\nsection = "elbo"\npanel = "jensen"', "steps[1].view.panel",
     "'jensen' is not the section the view shows ('elbo')"),
    ('page = "corpus"\nmeasure = "variance"', "steps[1].view.measure", "'variance' is not one of mutual_information"),
    ('page = "corpus"\ncorpus = "movies,films"', "steps[1].view.corpus", "is not corpus names joined by commas"),
    ('page = "corpus"\nshape_k = 3.0', "steps[1].view.shape_k", "the Corpus has no parameter shape_k"),
])
def test_each_page_checks_its_own_parameters(tmp_path, view, field, says):
    text = f'title = "t"\nsummary = "s"\n[[steps]]\ntitle = "a"\ntext = "b"\nquestion = "c"\n[steps.view]\n{view}\n'
    path = write(tmp_path, "page.toml", text)
    problems = problems_of(path)
    assert any(p.startswith(f"{path.name}: {field}: ") and says in p for p in problems), problems


def test_a_value_is_the_explorers_and_a_hidden_section_the_one_shown(tmp_path):
    text = ('title = "t"\nsummary = "s"\n[[steps]]\ntitle = "a"\ntext = "b"\nquestion = "c"\n'
            '[steps.view]\npage = "theory"\nsection = "bam"\n[steps.reveal]\nanswer = "d"\nvalue = "gap"\n'
            'hide = "jensen"\n')
    path = write(tmp_path, "theory.toml", text)
    problems = problems_of(path)
    assert f"{path.name}: steps[1].reveal.value: a value is computed from the explorer's result: only an explorer " \
           "view has one" in problems
    assert f"{path.name}: steps[1].reveal.hide: 'jensen' is not the section the view shows ('bam')" in problems


def test_the_steps_are_counted_from_1_and_bounded(tmp_path):
    second = GOOD[GOOD.index("[[steps]]"):].replace("shape_k = 0.2", "shape_k = 0.1")
    path = write(tmp_path, "two.toml", GOOD + second)
    assert [p for p in problems_of(path) if "shape_k" in p] == [f"{path.name}: steps[2].view.shape_k: 0.1 is outside "
                                                                "0.2..1000"]
    many = write(tmp_path, "many.toml", GOOD + second.replace("0.1", "0.2") * lf.MAX_STEPS)
    assert problems_of(many) == [f"{many.name}: steps: must be 1 to 30 [[steps]] tables, not 31"]
    none = write(tmp_path, "none.toml", GOOD[:GOOD.index("[[steps]]")])
    assert problems_of(none) == [f"{none.name}: steps: must be 1 to 30 [[steps]] tables, not none"]


def test_a_file_that_is_not_utf8_says_so(tmp_path):
    data = GOOD.replace("teacher's", "café").encode("latin-1")
    path, at = write(tmp_path, "latin1.toml", data), data.index("é".encode("latin-1"))
    assert problems_of(path) == [f"{path.name}: is not UTF-8 text (byte {at}): save it as UTF-8"]


def test_a_teachers_folder_adds_lessons_and_a_broken_file_stops_only_itself(tmp_path, monkeypatch):
    folder = tmp_path / "class"
    folder.mkdir()
    write(folder, "mine.toml", GOOD)
    write(folder, "broken.toml", GOOD.replace("shape_k = 0.2", "shape_k = 5000"))
    single = write(tmp_path, "single.toml", GOOD)
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(lf.LESSONS_ENV, os.pathsep.join([str(folder), f"{single},{missing}"]))
    lessons, problems = lf.load_lessons()
    ids = [x.id for x in lessons]
    assert ids[:2] == ["attention-random-variable", "prior-posterior-gap"] and ids[2:] == ["mine", "single"]
    assert problems == ["nowhere: $BAM_VIZ_LESSONS names it, but it is neither a folder nor a .toml file",
                        "class/broken.toml: steps[1].view.shape_k: 5000 is outside 0.2..1000"]


def test_an_id_given_twice_names_both_files(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    one = write(first, "same.toml", GOOD)
    write(second, "same.toml", GOOD)
    lessons, problems = lf.load_lessons(f"{first},{second}")
    assert [x.path for x in lessons if x.id == "same"] == [one]
    assert problems == ["b/same.toml: the lesson id 'same' (the file's name) is already taken by a/same.toml: "
                        "rename one of the two"]
    shipped = lf.SHIPPED / "prior-posterior-gap.toml"
    write(first, "prior-posterior-gap.toml", shipped.read_bytes())
    assert lf.load_lessons(str(first))[1][0].startswith("a/prior-posterior-gap.toml: the lesson id "
                                                        "'prior-posterior-gap' (the file's name) is already taken "
                                                        "by lessons/prior-posterior-gap.toml")


def test_a_view_opens_what_its_panel_needs():
    assert lf.View("explorer", {"shape_k": 3.0, "relative_colour": True}, "why").query() == {
        "shape_k": "3", "relative_colour": "true", "why": "true"}
    assert lf.View("explorer", {"why": False}, "why").query() == {"why": "false"}
    assert lf.View("theory", {}, "elbo").query() == {"section": "elbo"}
    # The URL's values are read back by the pages' own loaders as the view's values.
    assert state._bool(lf.View("explorer", {"why": True}).query()["why"]) is True
    assert state._float(lf.View("explorer", {"beta": 0.0316}).query()["beta"], 1e-4, 1e4) == 0.0316


# ---- a hostile or careless teacher's folder --------------------------------------------------------
def test_every_hostile_file_is_one_line_naming_it_in_its_folder_and_the_others_load(tmp_path, monkeypatch):
    folder = hostile_folder(tmp_path / "class", GOOD)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (opened.append(Path(path).name), real_open(path, *a, **k))[1])
    lessons, problems = lf.load_lessons(str(folder))
    assert [x.id for x in lessons] == ["attention-random-variable", "prior-posterior-gap", "good"]
    assert len(problems) == len(hostile.CASES)
    for line, start in zip(problems, hostile.expected(folder), strict=True):
        assert line.startswith(start), (line[:200], start[:200])
    # One line each, short, and no path of the server's disk.
    assert all("\n" not in p and len(p) < 300 and str(tmp_path) not in p for p in problems)
    # Judged by their metadata: the pipe, /dev/zero, the folder and the file over the limit are never opened.
    assert not {"pipe.toml", "zero.toml", "folder.toml", "big.toml"} & set(opened)
    assert {"good.toml", "deep.toml", "steps.toml"} <= set(opened)


def test_a_10000_step_lesson_is_refused_before_any_step_is_checked(tmp_path, monkeypatch):
    def checked(*args):
        raise AssertionError("a step was checked")

    monkeypatch.setattr(lf, "_step", checked)
    for name in ("steps.toml", "inline.toml"):
        make, why = hostile.CASES[name]
        make(tmp_path / name)
        assert problems_of(tmp_path / name) == [f"{name}: {why}"]


def test_a_file_is_read_and_checked_once_a_version(tmp_path, monkeypatch):
    """Until its size, modification time or inode change: the Lessons page reads every file on every run."""
    parsed, real_loads = [], lf.tomllib.loads
    monkeypatch.setattr(lf.tomllib, "loads", lambda source: (parsed.append(1), real_loads(source))[1])
    path, models = write(tmp_path, "mine.toml", GOOD), lf.bam_viz.available_models()
    first, again = lf.read_lesson(path, models), lf.read_lesson(path, models)
    assert first[0] is again[0] and first[1] == again[1] == [] and len(parsed) == 1
    stamp = path.stat()
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))      # saved again, same bytes
    assert lf.read_lesson(path, models)[0] == first[0] and len(parsed) == 2
    path.write_text(GOOD.replace("shape_k = 0.2", "shape_k = 5000"), encoding="utf-8")
    assert problems_of(path) == ["mine.toml: steps[1].view.shape_k: 5000 is outside 0.2..1000"]
    assert len(parsed) == 3
    replaced = write(tmp_path, "other.toml", GOOD)
    os.replace(replaced, path)                                    # a new inode with the first bytes
    assert problems_of(path) == [] and len(parsed) == 4


def test_brackets_and_dots_in_strings_and_comments_nest_nothing(tmp_path):
    deep, dots = "[" * 40, ".".join("abcdefghijklmnopqrstuvwxyz")
    text = GOOD.replace('"Some *markdown*."', f'"""{deep} {dots}\n{deep}"""  # {{{{{{{{{{{{{{{{{{{{{{{{ {dots}')
    text = text.replace('"It spreads."', f"'{deep}'").replace('"What will k do?"', f'"\\"{deep}"')
    assert problems_of(write(tmp_path, "brackets.toml", text)) == []
