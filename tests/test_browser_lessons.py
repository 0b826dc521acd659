"""A lesson in headless Debian chromium: the teacher walks the first shipped lesson from its first step
to its last with "Next", reveals an answer, and the QR code on the page decodes to the link shown
beside it; a student who opens that link in a browser context of their own lands on the same step.
Neither browser asks anything of another host.

Fails (never skips) when chromium is missing. Screenshots land in artifacts/ (git-ignored).
"""

from __future__ import annotations

import io
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import browser_latency as bl
import numpy as np
import pytest
import zxingcpp
from hostile_links import DEAD, LIVE
from PIL import Image

from views import join
from views.lesson_files import load_lessons

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"

pytestmark = pytest.mark.browser
CARD, ANSWER, JOIN, LINK = ".st-key-lesson_step", ".st-key-lesson_answer", ".st-key-lesson_join", ".st-key-lesson_link"
LARGE = ".st-key-lesson_join_large"               # the QR code shown large, in a dialog
FIRST_RUN_MS = 120_000                     # a fresh server's first page imports torch and the lessons
# Hosts a request may go to: this machine. The test server listens on loopback (.streamlit/config.toml),
# so the link the page shows is a loopback one too.
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def new_person(browser, outside: list[str]):
    """A page in a browser context of its own (its own cookies, hence its own Streamlit session) that
    records every request and WebSocket leaving this machine into `outside`."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def record(url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("data", "blob") and parts.hostname not in LOCAL_HOSTS:
            outside.append(url)

    context.on("request", lambda r: record(r.url))
    page = context.new_page()
    page.on("websocket", lambda ws: record(ws.url))
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    return page


def idle(page) -> None:
    """Until the run is over: no "Running" widget, and no element of the last run left stale (Streamlit
    keeps those on screen until the run that replaces or drops them ends)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]') && "
                           "!document.querySelector('[data-stale=\"true\"]')", timeout=60_000)


def at_step(page, n: int, m: int, timeout_ms: float = 60_000) -> None:
    """Until the card reads "Step n of m", nothing runs, and the URL's `step` is n."""
    page.locator(CARD).filter(has_text=f"Step {n} of {m}").wait_for(timeout=timeout_ms)
    idle(page)
    page.wait_for_function("n => new URLSearchParams(location.search).get('step') === String(n)", arg=n,
                           timeout=30_000)


def press(page, label: str) -> None:
    """Click the card's button `label` (Back, Next, Reveal), once the card shows exactly one."""
    button = page.locator(CARD).get_by_role("button", name=label, exact=True)
    page.wait_for_function("([sel, label]) => [...document.querySelectorAll(sel + ' button')]"
                           ".filter(b => b.innerText.trim() === label).length === 1", arg=[CARD, label],
                           timeout=30_000)
    button.click()


def query(page) -> dict[str, list[str]]:
    """From the page's own location: Playwright's `page.url` can miss a history.replaceState."""
    return parse_qs(urlsplit(page.evaluate("() => location.href")).query)


def decoded_qr(page, where: str = JOIN) -> str:
    """The QR code in `where` as the browser draws it, read back by a decoder."""
    png = page.locator(f"{where} img").screenshot()
    (found,) = zxingcpp.read_barcodes(np.asarray(Image.open(io.BytesIO(png)).convert("L")))
    return found.text


def test_a_lesson_walked_to_its_end_and_a_student_joining_by_its_qr_code(server, browser):
    lessons, problems = load_lessons("")                   # the shipped ones only
    assert problems == []
    lesson = lessons[0]
    assert len(lesson.steps) >= 2 and any(s.reveal for s in lesson.steps), lesson.path
    outside: list[str] = []
    teacher = new_person(browser, outside)
    try:
        walk_reveal_and_join(server, browser, teacher, lesson, outside)
    finally:
        for context in browser.contexts:
            context.close()
    assert outside == []


def walk_reveal_and_join(server, browser, teacher, lesson, outside: list[str]) -> None:
    m = len(lesson.steps)
    teacher.goto(f"{server}/{join.LESSONS_PATH}?lesson={lesson.id}&step=1")
    at_step(teacher, 1, m, FIRST_RUN_MS)
    revealed = 0
    for n, step in enumerate(lesson.steps, start=1):
        if n > 1:
            press(teacher, "Next")
            at_step(teacher, n, m)
        assert query(teacher)["lesson"] == [lesson.id]
        assert step.title in teacher.locator(CARD).inner_text()
        if step.reveal:
            assert teacher.locator(ANSWER).count() == 0, f"step {n}: the answer shows before Reveal"
            press(teacher, "Reveal")
            teacher.locator(ANSWER).wait_for(timeout=30_000)
            idle(teacher)
            revealed += 1
    assert revealed >= 1
    teacher.screenshot(path=str(ARTIFACTS / "browser-lesson-teacher.png"), full_page=True)

    shown = teacher.locator(LINK).inner_text().strip()
    assert decoded_qr(teacher) == shown
    link = urlsplit(shown)
    assert link.hostname in LOCAL_HOSTS and link.port == urlsplit(server).port
    assert link.path == f"/{join.LESSONS_PATH}"
    assert parse_qs(link.query) == {"lesson": [lesson.id], "step": [str(m)]}
    teacher.get_by_role("button", name="Show the code large", exact=True).click()
    teacher.locator(f"{LARGE} img").wait_for(timeout=30_000)
    idle(teacher)
    assert decoded_qr(teacher, LARGE) == shown
    teacher.screenshot(path=str(ARTIFACTS / "browser-lesson-qr-large.png"))
    teacher.keyboard.press("Escape")
    teacher.locator(LARGE).wait_for(state="detached", timeout=30_000)
    idle(teacher)
    assert teacher.locator(LARGE).count() == 0
    # a loopback server: the teacher is told that students' laptops cannot reach it, and how to fix that
    assert "ADDRESS=0.0.0.0" in teacher.locator(JOIN).inner_text()

    student = new_person(browser, outside)
    student.goto(shown)
    at_step(student, m, m, FIRST_RUN_MS)
    assert lesson.steps[-1].title in student.locator(CARD).inner_text()
    if lesson.steps[-1].reveal:
        assert student.locator(ANSWER).count() == 0
    student.locator(CARD).get_by_role("button", name="Back", exact=True).wait_for(timeout=30_000)
    student.locator(f"{JOIN} img").wait_for(timeout=30_000)
    assert decoded_qr(student) == shown                   # the student's panel points at the same step
    student.screenshot(path=str(ARTIFACTS / "browser-lesson-student.png"), full_page=True)
    # the student's session is their own: the teacher's Reveal is not theirs, and their Back moves
    # neither the teacher's card nor the teacher's URL
    press(student, "Back")
    at_step(student, m - 1, m)
    teacher.wait_for_timeout(1000)
    assert teacher.locator(CARD).filter(has_text=f"Step {m} of {m}").count() == 1
    assert query(teacher)["step"] == [str(m)]

    assert teacher.errors == [] and student.errors == []


def test_a_lessons_links_to_other_schemes_are_text_in_the_browser(browser):
    """What Streamlit draws of `safe_links`: no anchor or image for a target that is not http(s) or
    relative, in any of its spellings (tests/hostile_links.py), while the same link as written is live
    there; the http(s) and relative links keep their targets."""
    with bl.serve(ROOT / "tests" / "data" / "links_app.py", log=ARTIFACTS / "links-server.log") as url:
        page = browser.new_page()
        try:
            page.goto(url)
            page.get_by_text("all drawn").wait_for(timeout=FIRST_RUN_MS)
            idle(page)
            assert page.locator(".st-key-raw a").get_attribute("href").startswith("data:text/html")

            def targets(key: str) -> list[str]:
                return page.locator(f".st-key-{key}").evaluate(
                    "el => [...el.querySelectorAll('a[href], img[src]')].map(e => e.getAttribute('href') ?? "
                    "e.getAttribute('src'))")

            for i, text in enumerate(DEAD):
                assert targets(f"dead_{i}") == [], text
            for i, (text, target) in enumerate(LIVE.items()):
                assert targets(f"live_{i}") == ([target] if target else []), text
        finally:
            page.close()
