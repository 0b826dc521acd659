"""views.turns: a run a student does not wait for (the captions of a frame its page drew, the URL once its
sliders rest) waits for its turn, asked of the live route: while a run one does wait for (a page opening, a new
sentence) is in progress, behind the turns asked before it, and never past its bounds; and the route answers
the ask."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from views import live_route, turns


@pytest.fixture(autouse=True)
def quiet():
    yield
    assert turns._urgent == [0] and not turns._queue and not turns._woken and not turns._asking
    turns._held.clear()


def test_a_turn_with_nothing_urgent_is_given_at_once_and_ends_with_its_run():
    assert asyncio.run(turns.wait("a")) < 1.0 and set(turns._held) == {"a"}
    turns.end("b")                                      # another's run ending leaves it
    assert set(turns._held) == {"a"}
    turns.end("a")
    assert not turns._held


RUN_S = {"first": 0.3, "second": 1.2, "third": 0.3}


def test_turns_wait_for_the_urgent_run_in_progress_then_go_two_at_a_time_in_the_order_asked():
    release, log = threading.Event(), []

    @turns.urgent
    def page_opening():
        log.append("urgent began")
        release.wait(10)
        log.append("urgent ended")

    urgent = threading.Thread(target=page_opening)
    urgent.start()
    while not turns._urgent[0]:
        time.sleep(0.01)

    async def deferred(name):
        await turns.wait(name)
        log.append(f"{name} ran")
        await asyncio.sleep(RUN_S[name])                # its run, while a third waits for a turn
        log.append(f"{name} ended")
        turns.end(name)

    async def class_():
        waiting = []
        for name in ("first", "second", "third"):
            waiting.append(asyncio.create_task(deferred(name)))
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.6)                        # a turn would have been given by now
        assert log == ["urgent began"]
        release.set()
        await asyncio.gather(*waiting)

    asyncio.run(class_())
    urgent.join(5)
    assert log == ["urgent began", "urgent ended", "first ran", "second ran", "first ended", "third ran",
                   "third ended", "second ended"]


def test_a_session_waits_for_one_turn_at_a_time(monkeypatch):
    monkeypatch.setattr(turns, "_urgent", [1])

    async def twice():
        first = asyncio.create_task(turns.wait("a"))
        await asyncio.sleep(0.1)
        again = await turns.wait("a")                   # answered at once, with no turn
        monkeypatch.setattr(turns, "_urgent", [0])
        return again, await first

    again, first = asyncio.run(twice())
    assert again is None and first is not None and set(turns._held) == {"a"}


def test_a_turn_goes_after_its_bounds(monkeypatch):
    monkeypatch.setattr(turns, "DEFER_MAX_S", 0.3)
    monkeypatch.setattr(turns, "_urgent", [1])          # an urgent run that never ends
    assert 0.3 <= asyncio.run(turns.wait("a")) < 5
    monkeypatch.setattr(turns, "TURN_S", 0.3)           # "a" never ran (its page closed): its turn lapses
    turns._held["c"] = time.monotonic() + 10            # and "c" holds the other
    assert 0.3 <= asyncio.run(turns.wait("b")) < 5 and set(turns._held) == {"b", "c"}
    monkeypatch.setattr(turns, "_urgent", [0])


def test_the_route_answers_a_turn_for_a_known_session_only():
    async def ask(query: bytes):
        sent = []

        async def send(message):
            sent.append(message)

        async def app(scope, receive, send):
            raise AssertionError("a turn is the route's")
        await live_route.LiveRoute(app, "")({"type": "http", "method": "GET", "path": "/" + live_route.PATH,
                                             "query_string": query}, None, send)
        return sent[0]["status"], json.loads(sent[1]["body"])

    live_route._handles["known"] = live_route.Handle(lambda: None, None, False)
    try:
        status, body = asyncio.run(ask(b"t=known&turn=1"))
        assert status == 200 and body["waited"] < 1.0 and set(turns._held) == {"known"}
        assert asyncio.run(ask(b"t=nobody&turn=1"))[0] == 404
        turns._asking.add("known")                      # an ask of this session's waiting already
        assert asyncio.run(ask(b"t=known&turn=1"))[0] == 409
        turns._asking.discard("known")
    finally:
        del live_route._handles["known"]
    assert live_route.turn_url("/_bamviz/live?t=x") == "/_bamviz/live?t=x&turn=1" and live_route.turn_url(None) is None
