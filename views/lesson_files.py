"""Lessons as data: one TOML file a lesson, read and checked here before the Lessons page
(views/lessons.py) shows any of it. No Streamlit call is made here.

A lesson's id is its file's stem. The shipped lessons are in `lessons/`; `$BAM_VIZ_LESSONS` adds
folders of `*.toml` files, or single files, after them. A step's view names a page and sets that
page's URL parameters, by the names and within the ranges the page itself reads them with
(`views/state.py`, `views/theory.py`, `views/corpus.py`): a lesson is a list of links, checked.

Every problem is one line naming the file and the field, `<file>: steps[3].view.shape_k: ...`
(steps counted from 1, as the page counts them); a file with a problem is left out, and the others load.
A file is named as the teacher would find it, by its folder's name and its own, never by the server's
path. A teacher's file is read within bounds (a regular file, `MAX_BYTES`, `MAX_NESTING`, `MAX_STEPS`
before any step is checked), and what a file gives is kept until its size, time or inode change.
"""

from __future__ import annotations

import functools
import os
import re
import reprlib
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import bam_viz
from bam_viz import families, zoo
from bam_viz.core.files import FileRefused, file_stamp, read_regular, toml_too_deep
from bam_viz.core.labels import LABELS
from bam_viz.data import CORPORA
from bam_viz.evaluation import corpus as corpus_lib
from views import components, corpus, state, theory

LESSONS_ENV = "BAM_VIZ_LESSONS"
SHIPPED = Path(__file__).resolve().parents[1] / "lessons"
MAX_STEPS = 30
MAX_BYTES = 256 * 1024                       # a shipped lesson is 7 KiB
MAX_NESTING = 16                             # arrays and tables within each other; a lesson needs 4
LESSON_FIELDS = ("title", "summary", "minutes", "steps")
STEP_FIELDS = ("title", "text", "question", "view", "reveal")
REVEAL_FIELDS = ("answer", "hide", "value")
VIEW_FIELDS = ("page", "panel")              # every other key of a view is one of its page's URL parameters
THEORY_SECTION = "section"                   # the Theory lab's URL name of the section it shows


# ---- a parameter's check: None when `value` is good, else what is wrong ---------------------------------
Check = Callable[[object, list[str]], "str | None"]      # (value, the models there are)
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 60


def quoted(value) -> str:
    """A file's value as a problem line quotes it: its repr, cut short whatever the file holds."""
    return _SHORT.repr(value)


_KEY = re.compile(r"[\w-]{1,60}")


def key_text(key: str) -> str:
    """A file's key as a field path writes it: as it is when it is a short bare key, else quoted and cut."""
    return key if _KEY.fullmatch(key) else quoted(key)


def _number_text(x) -> str:
    return f"{x:g}" if isinstance(x, float) else quoted(x)


def text(value, models) -> str | None:
    return None if isinstance(value, str) and value.strip() else "must be a non-empty string"


def flag(value, models) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def number(lo: float, hi: float, integer: bool = False) -> Check:
    def check(value, models) -> str | None:
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return f"must be {'an integer' if integer else 'a number'}, not {quoted(value)}"
        if not lo <= value <= hi:
            return f"{_number_text(value)} is outside {_number_text(lo)}..{_number_text(hi)}"
        return None
    return check


def index(value, models) -> str | None:
    """A layer, head or token: the page clamps it to the model and the sentence."""
    return number(0, 10_000, integer=True)(value, models)


def choice(options) -> Check:
    def check(value, models) -> str | None:
        return None if isinstance(value, str) and value in options else \
            f"{quoted(value)} is not one of {', '.join(map(str, options))}"
    return check


def one_of(options: tuple[int, ...]) -> Check:
    def check(value, models) -> str | None:
        return None if type(value) is int and value in options else \
            f"{quoted(value)} is not one of {', '.join(map(str, options))}"
    return check


def model(value, models) -> str | None:
    return choice(models)(value, models)


def compared(value, models) -> str | None:
    return choice([*models, corpus.NONE])(value, models)


def corpora(value, models) -> str | None:
    """Corpus names joined by commas, as in the Corpus page's links."""
    names = value.split(",") if isinstance(value, str) else None
    if not names or not all(n in CORPORA for n in names):
        return f"{quoted(value)} is not corpus names joined by commas ({', '.join(CORPORA)})"
    return None


# ---- the pages: their URL parameters, and the parts a step can point at or hide --------------------------
class Panel(NamedTuple):
    label: str                   # "Look at: <label>"
    selector: str                # CSS of its keyed container


class Page(NamedTuple):
    title: str
    params: dict[str, Check]
    panels: dict[str, Panel]


def _explorer_params() -> dict[str, Check]:
    checks = {"text": text, "model": model, "n_samples": number(*state.N_SAMPLES_RANGE, integer=True),
              "seed": number(*state.SEED_RANGE, integer=True),
              **{name: number(spec.low, spec.high) for name, spec in state.SLIDERS.items()}}
    # Presentation mode is the teacher's, not a step's.
    out = {k: checks[k] for k in state.MAIN_KEYS if k != "presentation"}
    out[state.TARGET_KEY] = text                     # a class of the model: `_model_checks`
    out |= {k: flag if k in state.PICTURE_TOGGLES else index for k in state.PICTURE_KEYS}
    why = {"why": flag, "why_target": text, "why_samples": one_of(state.WHY_SAMPLES),
           "why_steps": one_of(state.WHY_STEPS)}
    return out | {k: why[k] for k in state.WHY_KEYS}


def _theory_params() -> dict[str, Check]:
    checks = {theory.TEXT_KEY: text, **{name: choice(options) for name, (options, _) in theory.CHOICES.items()},
              **{name: number(min(c.options), max(c.options)) for name, c in theory.SLIDERS.items()}}
    return {k: checks[k] for k in theory.URL_KEYS}


def _corpus_params() -> dict[str, Check]:
    checks = {"model": model, "compare": compared, "corpus": corpora, "measure": choice(tuple(corpus_lib.MEASURES)),
              "outcome": choice(corpus_lib.OUTCOMES), "clarity": choice(corpus_lib.CLARITIES)}
    return {name: checks[name] for name in corpus.URL_KEYS.values()}


PAGES = {
    "explorer": Page("Explorer", _explorer_params(), {
        "summary": Panel("the prediction: headline, sweep and histogram", f".st-key-{components.SUMMARY_KEY}"),
        "inside": Panel("Inside the attention", f".st-key-{components.INSIDE_KEY}"),
        "why": Panel("Why this prediction", f".st-key-{state.WHY_PANEL_KEY}"),
    }),
    "theory": Page("Theory lab", _theory_params(), {
        section: Panel(f"section {title}", f".st-key-{theory.SECTION_KEY.format(section)}")
        for section, title in theory.SECTIONS.items()}),
    # The charts' keys change with what their axes mean (`corpus.chart_key`): matched by their start.
    "corpus": Page("Corpus", _corpus_params(), {
        **{name: Panel(f"the {name} chart", f'[class*="st-key-corpus_{name}_"]') for name in corpus.CHARTS},
        "sentences": Panel("the table of sentences", '[class*="st-key-corpus_table_"]'),
        "metrics": Panel("the metrics table", ".st-key-corpus_metrics"),
    }),
}


# ---- the numbers a step can reveal: read from the explorer's explain() result ----------------------------
class Value(NamedTuple):
    label: str
    of: Callable                  # ExplainResult -> float
    se: Callable                  # ExplainResult -> its Monte Carlo standard error, or None
    signed: bool = False
    per_class: bool = True        # of the class the explorer shows


VALUES = {
    "prediction": Value(LABELS["mc"], lambda r: float(r.mc_probs[r.target]), lambda r: r.se.p_target),
    "mean_attention": Value(LABELS["mean_attention"], lambda r: float(r.mean_attention_probs[r.target]),
                            lambda r: None),
    "softmax": Value(LABELS["softmax"], lambda r: float(r.softmax_probs[r.target]), lambda r: None),
    "gap": Value(LABELS["gap"], lambda r: r.gap, lambda r: r.se.gap, signed=True),
    "gap_softmax": Value(LABELS["gap_softmax"], lambda r: r.gap_softmax, lambda r: r.se.gap_softmax, signed=True),
    "mutual_information": Value(LABELS["mi"], lambda r: r.mutual_information, lambda r: r.se.mutual_information,
                                per_class=False),
    "entropy": Value("Total uncertainty (predictive entropy), nats", lambda r: r.predictive_entropy,
                     lambda r: None, per_class=False),
}


# ---- a lesson ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    page: str
    params: dict[str, object]              # URL name -> the TOML value
    panel: str | None = None

    def query(self) -> dict[str, str]:
        """The page's URL parameters for this view, as its links write them. A panel the page must
        open or choose is set too: the explorer's Why section, the Theory lab's section."""
        params = dict(self.params)
        if self.page == "explorer" and self.panel == "why":
            params.setdefault("why", True)
        if self.page == "theory" and self.panel:
            params.setdefault(THEORY_SECTION, self.panel)
        return {k: _url_value(v) for k, v in params.items()}


def _url_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Reveal:
    answer: str                            # markdown
    hide: str | None = None                # a panel of the view, hidden until Reveal
    value: str | None = None               # a name of VALUES


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    question: str
    view: View
    reveal: Reveal | None = None


@dataclass(frozen=True)
class Lesson:
    id: str
    path: Path
    title: str
    summary: str
    steps: tuple[Step, ...]
    minutes: int | None = None


# ---- reading -------------------------------------------------------------------------------------------
class _Problems:
    def __init__(self, name: str):
        self.name, self.lines = name, []

    def add(self, field: str, why: str) -> None:
        self.lines.append(f"{self.name}: {field}: {why}" if field else f"{self.name}: {why}")


def _unknown(table: dict, known, where: str, problems: _Problems) -> None:
    for key in table:
        if key not in known:
            problems.add(f"{where}{key_text(key)}", f"unknown field (the fields here: {', '.join(known)})")


def _string(table: dict, key: str, where: str, problems: _Problems, required: bool = True) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            problems.add(f"{where}{key}", "is missing")
        return None
    if not isinstance(value, str) or not value.strip():
        problems.add(f"{where}{key}", "must be a non-empty string")
        return None
    return value


def _model_facts(name: str) -> tuple[set[str], tuple[str, ...]] | None:
    """A model's sliders and classes from its card (no weights loaded); None when the card cannot be read,
    for the page to say so."""
    try:
        card = zoo.read_card(zoo.model_folder(name))
        family = families.get(card["config"]["attention"]["family"])
        return {s.name for s in family.slider_specs}, tuple(card["classes"])
    except Exception:
        return None


def _model_checks(params: dict, where: str, problems: _Problems) -> None:
    """What only the explorer's model decides: which sliders move it, which classes it has."""
    name = params.get("model", state.DEFAULT_MODEL)
    facts = _model_facts(name) if isinstance(name, str) else None
    if facts is None:
        return
    sliders, classes = facts
    for key in params:
        if key in state.SLIDERS and key not in sliders:
            has = ", ".join(sorted(sliders)) or "none"
            problems.add(f"{where}{key}", f"{name} has no {key} slider (its sliders: {has})")
    for key in (state.TARGET_KEY, "why_target"):
        value = params.get(key)
        if isinstance(value, str) and value not in (*classes, "predicted"):
            problems.add(f"{where}{key}", f"{quoted(value)} is not a class of {name} ({', '.join(classes)}, "
                                          "or predicted)")


def _panel(value, page: Page, key: str, where: str, problems: _Problems) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in page.panels:
        problems.add(f"{where}{key}", f"{quoted(value)} is not a part of the {page.title} (its parts: "
                                      f"{', '.join(page.panels)})")
        return None
    return value


def _view(table, where: str, models: list[str], problems: _Problems) -> View | None:
    if not isinstance(table, dict):
        problems.add(where.rstrip("."), "is missing: a step's [steps.view] names its page")
        return None
    name = table.get("page")
    if name is None:
        problems.add(f"{where}page", f"is missing (the pages: {', '.join(PAGES)})")
        return None
    if not isinstance(name, str) or name not in PAGES:
        problems.add(f"{where}page", f"{quoted(name)} is not a page (the pages: {', '.join(PAGES)})")
        return None
    page = PAGES[name]
    params = {k: v for k, v in table.items() if k not in VIEW_FIELDS}
    bad = len(problems.lines)
    for key, value in params.items():
        if key not in page.params:
            problems.add(f"{where}{key_text(key)}", f"the {page.title} has no parameter {key_text(key)} (its "
                                                    f"parameters: {', '.join(page.params)}, and "
                                                    f"{', '.join(VIEW_FIELDS)})")
        elif (why := page.params[key](value, models)) is not None:
            problems.add(f"{where}{key}", why)
    if name == "explorer" and len(problems.lines) == bad:
        _model_checks(params, where, problems)
    panel = _panel(table.get("panel"), page, "panel", where, problems)
    section = params.get(THEORY_SECTION)
    if name == "theory" and panel and section is not None and panel != section:
        problems.add(f"{where}panel", f"{panel!r} is not the section the view shows ({quoted(section)})")
    return View(name, params, panel)


def _reveal(table, view: View | None, where: str, problems: _Problems) -> Reveal | None:
    if not isinstance(table, dict):
        problems.add(where.rstrip("."), "must be a table ([steps.reveal])")
        return None
    _unknown(table, REVEAL_FIELDS, where, problems)
    answer = _string(table, "answer", where, problems)
    hide, value = table.get("hide"), table.get("value")
    if view is not None:
        hide = _panel(hide, PAGES[view.page], "hide", where, problems)
        section = view.params.get(THEORY_SECTION, view.panel or theory.CHOICES[THEORY_SECTION][1])
        if view.page == "theory" and hide and hide != section:
            problems.add(f"{where}hide", f"{hide!r} is not the section the view shows ({quoted(section)})")
    if value is not None:
        if view is not None and view.page != "explorer":
            problems.add(f"{where}value", "a value is computed from the explorer's result: only an explorer "
                                          "view has one")
        elif not isinstance(value, str) or value not in VALUES:
            problems.add(f"{where}value", f"{quoted(value)} is not a value (the values: {', '.join(VALUES)})")
    return Reveal(answer or "", hide, value)


def _step(table, where: str, models: list[str], problems: _Problems) -> Step | None:
    if not isinstance(table, dict):
        problems.add(where.rstrip("."), "must be a table ([[steps]])")
        return None
    _unknown(table, STEP_FIELDS, where, problems)
    title, text_, question = (_string(table, k, where, problems) for k in ("title", "text", "question"))
    view = _view(table.get("view"), f"{where}view.", models, problems)
    reveal = _reveal(table["reveal"], view, f"{where}reveal.", problems) if "reveal" in table else None
    return Step(title or "", text_ or "", question or "", view, reveal) if view else None


# ---- a file: read within bounds, checked once a version -----------------------------------------------
# A step's header, counted before tomllib parses the steps (30 µs a table): 10,000 are refused at once.
_STEP_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*steps[ \t]*\]\]", re.MULTILINE)


def _too_many(n: int | str) -> str:
    return f"must be 1 to {MAX_STEPS} [[steps]] tables, not {n}"


def _too_deep(line: int | None) -> str:
    at = f" (line {line})" if line else ""
    return f"nests arrays or tables more than {MAX_NESTING} deep{at}: a lesson needs 4"


def read_lesson(path: Path, models: list[str], name: str | None = None) -> tuple[Lesson | None, list[str]]:
    """The lesson in `path`, or None and every problem found in it, each line starting with `name` (the
    file's name by default). Checked once a version of the file (`file_stamp`) and of the models."""
    name = name or path.name
    try:
        stamp = file_stamp(path, MAX_BYTES)
    except FileRefused as err:
        return None, [f"{name}: {err}"]
    lesson, problems = _checked(path, name, tuple(models), stamp)
    return lesson, list(problems)


@functools.lru_cache(maxsize=256)
def _checked(path: Path, name: str, models: tuple[str, ...], stamp: tuple) -> tuple[Lesson | None, tuple]:
    """`read_lesson`'s answer for the version `stamp` of the file, which only keys the cache: a changed
    file is a new entry, read and checked again."""
    problems = _Problems(name)
    try:
        source = read_regular(path, MAX_BYTES).decode("utf-8")
        if (headers := len(_STEP_HEADER.findall(source))) > MAX_STEPS:
            raise FileRefused(f"steps: {_too_many(headers)}")
        if (line := toml_too_deep(source, MAX_NESTING)) is not None:
            raise FileRefused(_too_deep(line))
        data = tomllib.loads(source)
    except FileRefused as err:
        problems.add("", str(err))
    except UnicodeDecodeError as err:
        problems.add("", f"is not UTF-8 text (byte {err.start}): save it as UTF-8")
    except RecursionError:                 # a nesting the scan did not see, should tomllib read it otherwise
        problems.add("", _too_deep(None))
    except tomllib.TOMLDecodeError as err:
        problems.add("", f"is not valid TOML: {err}")
    except ValueError as err:              # int()'s refusal of 5,000 digits, less its advice on Python settings
        problems.add("", f"is not valid TOML: {str(err).split(':')[0]}")
    if problems.lines:
        return None, tuple(problems.lines)
    _unknown(data, LESSON_FIELDS, "", problems)
    title, summary = _string(data, "title", "", problems), _string(data, "summary", "", problems)
    minutes = data.get("minutes")
    if minutes is not None and (type(minutes) is not int or minutes <= 0):
        problems.add("minutes", f"must be a positive integer, not {quoted(minutes)}")
    raw = data.get("steps")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_STEPS:      # before any step is checked
        problems.add("steps", _too_many(len(raw) if isinstance(raw, list) else "none"))
        return None, tuple(problems.lines)
    names = list(models)
    steps = [_step(s, f"steps[{i}].", names, problems) for i, s in enumerate(raw, start=1)]
    if problems.lines:
        return None, tuple(problems.lines)
    return Lesson(path.stem, path, title, summary, tuple(steps), minutes), ()


class LessonFile(NamedTuple):
    path: Path
    name: str                  # what its problem lines call it: its folder's name and its own


def _file_name(*parts: str) -> str:
    name = "/".join(p for p in parts if p)
    return name if name.isprintable() else quoted(name)


def lesson_files(value: str | None = None) -> tuple[list[LessonFile], list[str]]:
    """The shipped lesson files, then those `$BAM_VIZ_LESSONS` names (folders of *.toml, or files), and a
    line for each entry that is neither."""
    value = os.environ.get(LESSONS_ENV, "") if value is None else value
    files, problems = _toml_files(SHIPPED), []
    for entry in zoo.path_list(value):
        path = Path(entry).expanduser()
        if path.is_dir():
            files += _toml_files(path)
        elif path.is_file() and path.suffix == ".toml":
            files.append(LessonFile(path, _file_name(path.name)))
        else:
            problems.append(f"{_file_name(path.name or entry)}: ${LESSONS_ENV} names it, but it is neither a "
                            "folder nor a .toml file")
    return files, problems


def _toml_files(folder: Path) -> list[LessonFile]:
    if not folder.is_dir():
        return []
    return [LessonFile(p, _file_name(folder.name, p.name))
            for p in sorted(folder.glob("*.toml")) if not p.name.startswith(".")]


def load_lessons(value: str | None = None) -> tuple[list[Lesson], list[str]]:
    """Every lesson that reads, in order (the shipped first), and one line for every problem: a broken
    file never stops the others."""
    files, problems = lesson_files(value)
    models = bam_viz.available_models()
    lessons: dict[str, tuple[Lesson, str]] = {}
    for file in files:
        lesson, found = read_lesson(file.path, models, file.name)
        problems += found
        if lesson is None:
            continue
        if lesson.id in lessons:
            problems.append(f"{file.name}: the lesson id {quoted(lesson.id)} (the file's name) is already taken "
                            f"by {lessons[lesson.id][1]}: rename one of the two")
            continue
        lessons[lesson.id] = lesson, file.name
    return [lesson for lesson, _ in lessons.values()], problems
