"""The Lessons page: a teacher walks a class through the explorer, the Theory lab and the Corpus page,
one step at a time, with a question for the class and, where a step has one, an answer kept back
until Reveal.

The lessons are data (`views/lesson_files.py` reads and checks them). `?lesson=<id>&step=<n>` (n from 1)
opens a step: its card on top, the join panel beside it (`views/join.py`), and the step's page under it,
that page's own `main()` run with the step's controls. A step's view is applied as a link to that page
would be: the page's session keys are dropped, the URL set to the view's parameters, and the page's
once-per-session URL flag reset, so that its own `load_query_params` checks and applies them. On a
session's first run the URL's other parameters (a copied link of an adjusted view) win over the step's.
A lesson's own text is Markdown, shown through `views.text.safe_links` (a link is http(s) or relative),
and every line about a file, through `md_escape`.
"""

from __future__ import annotations

import math

import streamlit as st

from bam_viz.core.labels import probability
from bam_viz.core.text import display_token
from bam_viz.plots.wording import count
from views import corpus, explorer, join, lesson_files, state, theory
from views.lesson_files import PAGES, VALUES, Lesson, Step
from views.text import md_escape, safe_links

ss = st.session_state
# Each page's once-per-session URL flag, set by its `load_query_params`.
URL_FLAGS = {"explorer": "_query_loaded", "theory": "_theory_query_loaded", "corpus": "_corpus_query_loaded"}
# What the explorer keeps between runs about a URL's values beside its widgets' keys: a class not yet
# resolved, and where the token window followed the query.
EXPLORER_PENDING = ("_target_from_url", "_window_query")
MAINS = {"explorer": explorer.main, "theory": theory.main, "corpus": corpus.main}
# Static CSS only, never a lesson's text. The question and the answer are the class's: in presentation
# mode they are read from the back of a room. `div.` outweighs the explorer's presentation type.
CARD_CSS = """
div.st-key-lesson_question {border-left: 6px solid #1d4ed8; padding-left: 0.9rem}
div.st-key-lesson_question [data-testid="stMarkdownContainer"] :is(p, li) {font-size: 1.4rem; font-weight: 600}
div.st-key-lesson_answer {border-left: 6px solid #15803d; padding-left: 0.9rem}
"""
PRESENTATION_CSS = """
div.st-key-lesson_question [data-testid="stMarkdownContainer"] :is(p, li),
div.st-key-lesson_answer [data-testid="stMarkdownContainer"] :is(p, li) {
    font-size: 2.4rem; font-weight: 700; line-height: 1.3; opacity: 1}
div.st-key-lesson_value [data-testid="stMetricValue"] {font-size: 4.5rem; font-weight: 800}
div.st-key-lesson_value [data-testid="stMetricLabel"] p {font-size: 1.6rem; opacity: 1}
"""
OUTLINE_CSS = "{} {{outline: 4px solid #d97706; outline-offset: 6px; border-radius: 8px}}"
HIDE_CSS = "{} {{display: none}}"


# ---- moving through a lesson: callbacks that change the URL, which the next run follows ----------------
def _start(lesson_id: str) -> None:
    st.query_params.from_dict({"lesson": lesson_id, "step": "1"})


def _go(step: int) -> None:
    # Kept in the session as well as the URL: a rerun the browser sent before it saw the new URL (the
    # explorer's fragment polling for frames) carries the old query string, and would take the step back.
    ss["_lesson_go"] = step
    st.query_params["step"] = str(step)


def _home() -> None:
    st.query_params.from_dict({"presentation": "1"} if ss.get("presentation") else {})


def _reveal(lesson_id: str, step: int) -> None:
    ss["_lesson_revealed"] = (lesson_id, step)


def step_number(raw, n_steps: int) -> int:
    """The URL's step (from 1), clamped to the lesson; 1 for anything that is not a number."""
    try:
        return min(max(int(float(raw)), 1), n_steps)
    except (TypeError, ValueError, OverflowError):
        return 1


def current_step(lesson: Lesson, first: bool):
    """The step to show: the URL's on a session's first run (a link opened) or in another lesson, then
    the session's own, moved only by Back and Next, since the URL a rerun brings may be older."""
    go, at = ss.pop("_lesson_go", None), ss.get("_lesson_at")
    if go is not None:
        return go
    if not first and at and at[0] == lesson.id:
        return at[1]
    return st.query_params.get("step")


def session_keys(page: str) -> list[str]:
    """The session keys a page keeps its controls under: its URL names, but the Corpus page's own keys."""
    if page == "corpus":
        return list(corpus.URL_KEYS)
    return [*PAGES[page].params, *(EXPLORER_PENDING if page == "explorer" else ())]


def apply_view(lesson: Lesson, n: int, first: bool) -> None:
    """Show step `n` of `lesson` as a link to its page would, before any widget of the run."""
    view = lesson.steps[n - 1].view
    for key in session_keys(view.page):
        ss.pop(key, None)
    link = {k: v for k, v in st.query_params.to_dict().items() if k not in ("lesson", "step")} if first else {}
    query = {**view.query(), **link, "lesson": lesson.id, "step": str(n)}
    if ss.get("presentation"):
        query["presentation"] = "1"
    st.query_params.from_dict(query)
    ss[URL_FLAGS[view.page]] = False
    ss.pop("_lesson_revealed", None)
    if view.page == "explorer":
        # Start the sliders again from the model's trained values, keeping those the view sets, and
        # send them to the browser's sliders (`explorer.sync_hyper_to_model` bumps their epoch).
        ss.pop("_hyper_model", None)
        ss["_hyper_from_url"] = {k for k in view.params if k in state.SLIDERS}
    ss["_lesson_at"] = (lesson.id, n)


# ---- the page ------------------------------------------------------------------------------------------
def lesson_list(lessons: list[Lesson], problems: list[str]) -> None:
    st.title("Lessons")
    st.caption("Each lesson walks a class through the explorer and the Theory lab, a step at a time: a short "
               "text, a question for the class, and the page set up to answer it. A teacher adds lessons of "
               f"their own as TOML files in a folder named by `{lesson_files.LESSONS_ENV}` (docs/design.md, "
               "“Lessons”).")
    for problem in problems:
        st.error(md_escape(problem))
    for lesson in lessons:
        with st.container(border=True):
            st.subheader(safe_links(lesson.title))
            st.markdown(safe_links(lesson.summary))
            minutes = f" · about {lesson.minutes} minutes" if lesson.minutes else ""
            st.caption(count(len(lesson.steps), "step") + minutes)
            st.button("Start", key=f"lesson_start_{lesson.id}", on_click=_start, args=(lesson.id,))


def card(lesson: Lesson, n: int, step: Step, revealed: bool):
    """The step's card; returns where the revealed number goes (None when there is none to show)."""
    page = PAGES[step.view.page]
    with st.container(key="lesson_step", border=True):
        st.caption(f"{safe_links(lesson.title)} · Step {n} of {len(lesson.steps)} · {page.title}")
        st.subheader(safe_links(step.title))
        st.markdown(safe_links(step.text))
        with st.container(key="lesson_question"):
            st.markdown(safe_links(step.question))
        if step.view.panel:
            st.markdown(f"Look at: **{page.panels[step.view.panel].label}** (outlined below).")
        reveal = step.reveal
        if reveal and reveal.hide and not revealed:
            st.caption(f"Hidden until Reveal: {page.panels[reveal.hide].label}.")
        with st.container(horizontal=True, key="lesson_nav"):
            st.button("Back", key="lesson_back", disabled=n == 1, on_click=_go, args=(n - 1,))
            st.button("Next", key="lesson_next", type="primary", disabled=n == len(lesson.steps),
                      on_click=_go, args=(n + 1,))
            if reveal:
                st.button("Reveal", key="lesson_reveal", disabled=revealed, on_click=_reveal, args=(lesson.id, n))
            st.button("Back to the lessons", key="lesson_home", on_click=_home)
        if not (reveal and revealed):
            return None
        with st.container(key="lesson_answer"):
            slot = st.empty() if reveal.value else None
            st.markdown(safe_links(reveal.answer))
    return slot


def show_value(slot, name: str) -> None:
    """A revealed number, from the explain() result the explorer drew this run (the shared cache's)."""
    view, value = ss.get("_explorer_view"), VALUES[name]
    with slot.container(key="lesson_value"):
        if view is None:
            st.caption(f"{value.label}: the explorer has no result for this view.")
            return
        result = view.result(state.get_model(view.name))
        x, se = value.of(result), value.se(result)
        shown = f"{x:+.3f}" if value.signed else f"{x:.3f}"
        if se is not None and math.isfinite(se):
            shown += f" ± {se:.3f}"
        label = value.label + (f", {probability(display_token(result.target_name))}" if value.per_class else "")
        st.metric(label, shown, help="± one Monte Carlo standard error over the explorer's samples")
        settings = [f"{k} {state.format_value(v)}" for k, v in view.hyper]
        st.caption(" · ".join([view.name, *settings, count(view.n_samples, "sample"), f"seed {view.seed}"]))


def style(step: Step, revealed: bool) -> None:
    rules = [CARD_CSS, PRESENTATION_CSS if ss.get("presentation") else ""]
    panels = PAGES[step.view.page].panels
    if step.view.panel:
        rules.append(OUTLINE_CSS.format(panels[step.view.panel].selector))
    if step.reveal and step.reveal.hide and not revealed:
        rules.append(HIDE_CSS.format(panels[step.reveal.hide].selector))
    st.html(f"<style>{''.join(rules)}</style>")


def main() -> None:
    lessons, problems = lesson_files.load_lessons()
    first = "_lesson_at" not in ss
    qp = st.query_params
    if first and (on := state._bool(qp.get("presentation", ""))) is not None:
        ss["presentation"] = on
    lesson_id = qp.get("lesson")
    lesson = next((x for x in lessons if x.id == lesson_id), None)
    if lesson is None:
        ss["_lesson_at"] = None
        if lesson_id is not None:
            st.warning(f"There is no lesson “{md_escape(lesson_id)}” here: choose one below.")
        lesson_list(lessons, problems)
        return
    n = step_number(current_step(lesson, first), len(lesson.steps))
    if ss.get("_lesson_at") != (lesson.id, n):
        apply_view(lesson, n, first)
    elif qp.get("step") != str(n):
        st.query_params["step"] = str(n)
    step = lesson.steps[n - 1]
    revealed = ss.get("_lesson_revealed") == (lesson.id, n)
    style(step, revealed)
    left, right = st.columns([3, 1], gap="large")
    with left:
        slot = card(lesson, n, step, revealed)
    with right:
        join.join_panel(lesson.id, n)
    ss.pop("_explorer_view", None)
    if step.view.page != "explorer":                 # the explorer draws the toggle itself
        with st.sidebar:
            explorer.presentation_toggle()
    MAINS[step.view.page]()
    if slot is not None:
        show_value(slot, step.reveal.value)
    state.write_query_params(("presentation",), {"presentation": 1 if ss.get("presentation") else None})


if __name__ == "__main__":         # Streamlit runs a page as __main__
    main()
