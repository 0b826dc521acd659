"""views.live_route: a release or a poll answered without a run of the page. Its answer names the same
payloads, with the same captions, as a run of the page at those slider values would send; a token it
does not know, a grid the cache let go, or a malformed query is answered with a status the page falls
back from (a run, as before the route); the sessions it remembers are bounded, and a new sentence
forgets the last one's panel selection. The page's side is tests/js/route.test.mjs and
tests/test_browser_route.py."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest
from app_pages import ok
from test_app import component, new_app, payload, settle, slider_data
from test_static_serving import _call

import bam_viz
from bam_viz.live import grid as live
from views import components, live_route, state

TEXT = "A quietly moving film."
pytestmark = pytest.mark.usefixtures("no_frames_left_behind")   # tests/conftest.py


def _token(at) -> str:
    route = payload(at)[0]["route"]
    assert urlparse(route).path == "/" + live_route.PATH
    return parse_qs(urlparse(route).query)["t"][0]


def test_a_release_answered_by_the_route_is_what_a_run_at_those_values_sends():
    at = ok(new_app(model="bam-wc", text=TEXT).run())
    settle()                                         # every frame made: the run below sees the same grid
    token = _token(at)
    assert at.session_state[live_route.TOKEN_KEY] == token
    assert slider_data(at)["send_ms"] == live_route.HYPER_SEND_MS
    sliders = slider_data(at)["sliders"]
    k = next(s["values"] for s in sliders if s["name"] == "shape_k")[9]
    beta = next(s["values"] for s in sliders if s["name"] == "beta")[20]
    status, body = live_route.respond(f"t={token}&shape_k={k}&beta={beta}".encode())
    assert status == 200
    answer = json.loads(body)
    routed, routed_arrays = live.unpack(components.served_file(answer["summary"]).read_bytes())
    assert routed["captions_at"] == [9, 20] and answer["inside_meta"]["current"] == [9, 20]

    at.session_state["shape_k"], at.session_state["beta"] = k, beta     # the run the values bring later
    ok(at.run())
    ran, ran_arrays = live.unpack(component(at, "live_summary").bytes)
    assert routed.pop("poll")["run"] != ran.pop("poll")["run"]
    assert routed == ran
    assert routed_arrays.keys() == ran_arrays.keys()
    for name, a in routed_arrays.items():
        assert a.tobytes() == ran_arrays[name].tobytes(), name
    inside = json.loads(component(at, "live_inside").json)
    assert answer["inside"] == inside["url"] and answer["inside_meta"] == inside["meta"]


def test_a_slider_the_query_does_not_name_keeps_the_runs_value_and_numbers_are_snapped():
    at = ok(new_app(model="bam-wc", text=TEXT, shape_k="3", beta="1").run())
    token = _token(at)
    status, body = live_route.respond(f"t={token}&shape_k=4.4&other=7".encode())
    assert status == 200
    header, _ = live.unpack(components.served_file(json.loads(body)["summary"]).read_bytes())
    post, prior = header["captions_at"]
    assert header["slider"]["values"][post] == pytest.approx(4.43, abs=0.01)      # the nearest on the grid
    assert prior == payload(at)[0]["captions_at"][1]                             # beta where the run left it


@pytest.mark.parametrize("query, status", [
    (b"", 400), (b"shape_k=3", 400), (b"t=abc&shape_k=three", 400),
    (b"t=nobody-has-this-token&shape_k=3", 404),
])
def test_a_query_the_route_cannot_answer_gets_a_status_the_page_falls_back_from(query, status):
    got, body = live_route.respond(query)
    assert got == status and "error" in json.loads(body)


def test_a_session_whose_grid_the_cache_let_go_is_answered_404(monkeypatch):
    at = ok(new_app(model="bam-wc", text=TEXT).run())
    token = _token(at)
    monkeypatch.setattr(state, "find_grid", lambda view: None)
    status, _ = live_route.respond(f"t={token}&shape_k=3".encode())
    assert status == 404


def test_the_sessions_remembered_are_bounded_and_a_new_sentence_forgets_the_panel(monkeypatch):
    model = bam_viz.load("bam-wc")
    monkeypatch.setattr(live_route, "_handles", type(live_route._handles)())
    monkeypatch.setattr(live_route, "KEEP", 3)
    view = state.View("bam-wc", TEXT, (("shape_k", 3.0), ("beta", 1.0)), 8, 0, (0, 1, 2), ())
    sessions = [{} for _ in range(4)]
    for s in sessions:
        live_route.summary(s, model, view, False)
    tokens = [s[live_route.TOKEN_KEY] for s in sessions]
    assert len(set(tokens)) == 4 and list(live_route._handles) == tokens[1:]      # the oldest forgotten
    live_route.inside(tokens[3], view, (5, 0, 0, 1, False))
    live_route.summary(sessions[3], model, view._replace(hyper=(("shape_k", 5.0), ("beta", 1.0))), False)
    assert live_route._handles[tokens[3]].selection == (5, 0, 0, 1, False)      # a release: kept
    live_route.summary(sessions[3], model, view._replace(text="Another sentence."), False)
    assert live_route._handles[tokens[3]].selection is None                     # a new sentence: gone


@pytest.mark.parametrize("base", ["", "/class/"])
def test_the_middleware_answers_its_path_only(monkeypatch, base):
    monkeypatch.setattr(live_route, "respond", lambda query: (404, json.dumps({"q": query.decode()}).encode()))
    path, mw = f"{base.rstrip('/')}/{live_route.PATH}", {"base_url": base}
    status, headers, body, passed = _call(mw, path, cls=live_route.LiveRoute, query=b"t=abc&k=1")
    assert status == 404 and not passed and json.loads(body) == {"q": "t=abc&k=1"}
    assert headers["content-type"] == "application/json" and headers["cache-control"] == "no-store"
    for other, method in ((path, "POST"), (path + "/x", "GET"), ("/_stcore/stream", "GET")):
        assert _call(mw, other, method, cls=live_route.LiveRoute)[3], (other, method)
