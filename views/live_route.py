"""The live route: a slider's release, or a poll for new frames, answered without a run of the page,
where the server makes the frames (`BAM_VIZ_FRAMES=server`); and, where the page makes them, a turn before
it sends one for its captions (`<route>&turn=1`, `views.turns`).

A run of the explorer's fragment per release was a class's bottleneck (docs/performance.md, "Tried and
not kept"). The page asks
`<base>/_bamviz/live?t=<token>&shape_k=<k>&beta=<b>` instead (the sliders' values), and the answer names
the summary's and the inside panel's payloads at the nearest values of the grids, captions included,
made by the same functions as a run's (`views.panels`). The page sends the values to Session State
(the URL, the sections below the charts) once the sliders rest (views/live/sliders.js, `HYPER_SEND_MS`).

Each session's runs register what they showed under a token of the session's own (`TOKEN_KEY` in its
Session State, unguessable): the grid's key, the class shown, the inside panel's selection. A token
nobody used for a while is forgotten (at most KEEP are kept), and one whose grid the cache let go is
answered 404: the page then asks Streamlit for a run, as before. Nothing here holds a grid or a model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import parse_qs

from bam_viz.live import grid as live
from views import turns
from views.components import app_path

TOKEN_KEY = "_live_token"
PATH = "_bamviz/live"
TURN = "turn"                   # the query's parameter asking for a turn instead of payloads
# The page sends the sliders' values to Session State this long after their last release: one run of
# the page for a student's run of presses (views/live/sliders.js; bench/protocol_client.py does the same).
HYPER_SEND_MS = 1500
KEEP = 512                      # sessions remembered: a class is twenty
log = logging.getLogger(__name__)
# An answer waits for its frame (made in the worker): these threads wait, the event loop does not.
_POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="bam-viz-live")


@dataclass
class Handle:
    """What a session's last runs showed: enough to make its payloads at other slider values."""

    model: weakref.ref
    view: object                     # views.state.View: the summary's grid and class
    presentation: bool
    inside_view: object | None = None
    selection: tuple | None = None   # (layer, head, query, key, relative colours)
    answers: int = 0


_handles: OrderedDict[str, Handle] = OrderedDict()
_lock = threading.Lock()


def url(token: str) -> str:
    return app_path(f"{PATH}?t={token}")


def turn_url(route: str | None) -> str | None:
    """Where the page at `route` asks for a turn before it sends a frame for its captions (`views.turns`)."""
    return None if route is None else f"{route}&{TURN}=1"


def summary(session_state, model, view, presentation: bool) -> str:
    """Register a run's summary (the session's model, grid and class) and return the route's URL for it."""
    token = session_state.get(TOKEN_KEY)
    if not isinstance(token, str):
        token = session_state[TOKEN_KEY] = secrets.token_urlsafe(16)
    with _lock:
        old = _handles.get(token)
        handle = Handle(weakref.ref(model), view, presentation)
        if old is not None and old.model() is model and _grid_key(old.view) == _grid_key(view):
            handle.inside_view, handle.selection, handle.answers = old.inside_view, old.selection, old.answers
        _handles[token] = handle
        _handles.move_to_end(token)
        while len(_handles) > KEEP:
            _handles.popitem(last=False)
    return url(token)


def inside(token: str | None, view, selection: tuple) -> None:
    """Register a run's inside panel: its grid (the token window's) and selection."""
    with _lock:
        handle = _handles.get(token) if token else None
        if handle is not None:
            handle.inside_view, handle.selection = view, selection


def _grid_key(view) -> tuple:
    return (view.name, view.text, view.n_samples, view.seed, view.others)


def answer(token: str, values: dict[str, float]) -> dict:
    """The payloads of `token`'s session at the sliders' `values` (the nearest on its grids; a slider not
    named keeps its last run's value), published (`views.components.publish`): {"summary": URL,
    "inside": URL, "inside_meta": {...}}, the inside panel's only once its run registered it.
    LookupError: an unknown token, or its grid is gone."""
    from views import components, panels, state

    with _lock:
        handle = _handles.get(token)
        if handle is not None:
            _handles.move_to_end(token)
            handle.answers += 1
    model = handle.model() if handle is not None else None
    grid = state.find_grid(handle.view) if model is not None else None
    if grid is None:
        raise LookupError("no such session, or its grid is gone")
    hyper = dict(handle.view.hyper)
    hyper.update((k, v) for k, v in values.items() if k in hyper and math.isfinite(v))
    post, prior = panels.indices(grid, hyper)
    with live.FRAMES.foreground():
        grid.start(post)
        result = live.FrameResult(grid, post, prior, handle.view.target)
        out = {"summary": components.publish(panels.summary_bytes(
            grid, result, post, prior, handle.presentation, -handle.answers, url(token)))}
        inner = state.find_grid(handle.inside_view) if handle.inside_view is not None else None
        if inner is not None:
            inner.start(post)
            result = live.FrameResult(inner, post, prior, handle.view.target)
            payload, meta = panels.inside_parts(model, inner, result, handle.selection, handle.presentation)
            out["inside"], out["inside_meta"] = components.publish(payload), meta
    return out


def respond(query: bytes) -> tuple[int, bytes]:
    """(HTTP status, JSON body) for the route's query string."""
    args = parse_qs(query.decode("latin-1"))
    try:
        token = args.pop("t")[0]
        values = {name: float(v[0]) for name, v in args.items()}
    except (KeyError, IndexError, ValueError):
        return 400, b'{"error": "t and the sliders\' values (numbers) are required"}'
    try:
        return 200, json.dumps(answer(token, values)).encode()
    except LookupError as err:
        return 404, json.dumps({"error": str(err)}).encode()
    except Exception:                           # the page falls back to a run, which says what went wrong
        log.exception("bam-viz: the live route failed")
        return 500, b'{"error": "the server could not make this view"}'


def _turn_token(query: bytes) -> str | None:
    """The token of a query that asks for a turn, else None."""
    args = parse_qs(query.decode("latin-1"))
    return args["t"][0] if TURN in args and args.get("t") else None


class LiveRoute:
    """ASGI middleware: GET `<base>/_bamviz/live` answered by `respond` in a thread of its own."""

    def __init__(self, app, base_url: str | None = None):
        self.app, self.path = app, app_path(PATH, base_url)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        query = scope.get("query_string", b"")
        turn = _turn_token(query)
        if turn is not None:                       # waits on this loop, holding no thread (`views.turns`)
            waited = await turns.wait(turn) if turn in _handles else -1.0
            status, body = ((404, b'{"error": "no such session"}') if waited == -1.0 else
                            (409, b'{"error": "this session is waiting for a turn already"}') if waited is None else
                            (200, json.dumps({"waited": round(waited, 3)}).encode()))
        else:
            status, body = await asyncio.get_running_loop().run_in_executor(_POOL, respond, query)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
