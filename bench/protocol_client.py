"""A student whose browser is on another machine: Streamlit's own protocol, without a browser.

`bench/load.py --browsers B` runs B of its sessions in chromium and the rest as `Student`s. A
student asks of the server exactly what the explorer's page asks of it, in the same order:

  page      GET the page and the scripts and styles it names, open the websocket (`/_stcore/stream`),
            ask for a run with the URL's query string;
  polls     while the summary's payload header asks for one (`poll.ms` > 0: the slider grid's frames
            are being made), after that many ms, the live route (`views.live_route`: the header's
            `route`) with the sliders' values, and the payloads its answer names, as the page's summary
            view does (views/live/view.js, `poll`); without a route, its "poll" state, a rerun of its
            fragment;
  payloads  GET every chart payload a run names (`/app/static/live/<hash>.bin`), once each, as the
            page's component does;
  sentence  the text area's new value (Ctrl+Enter), a full run;
  release   the live route with the sliders' new values and the payloads its answer names, timed to
            the last byte of them; the sliders component's `hyper` state (a rerun of its fragment)
            `HYPER_SEND_MS` after the last release, as the page sends it (views/live/sliders.js); without
            a route, that state at once, timed to the footer. Where the page makes its frames, nothing
            until the sliders rest; then, once the route gives it its turn (the header's `turn`), the
            summary's `frame` state, the values with the page's frame there (`caption_numbers`: made-up
            numbers of the right shape), as views/live/local.js sends it;
  captions  where the page makes its frames and a summary payload's captions wait for its frame
            (`captions_wait`), that `frame` state, once per sentence and value, after its turn.

and it times each against the footer the server writes (`views.explorer.render_marker`: the
sentence's fingerprint, the slider values, the grid's progress). What it leaves out is the
browser's own work (parsing Streamlit's scripts, drawing), which in a classroom runs on each
student's machine; a press in the explorer never reaches the server, so a student has no presses
of its own to time, only their releases.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import re
import struct
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qs, urlencode

# The reader parses the chart payloads' headers with bam_viz's own reader (`live.wire.header_of`):
# the repository's root on the path, however the benchmark was started (`python bench/load.py`).
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from views.live_route import HYPER_SEND_MS  # noqa: E402

MARKER = re.compile(r"view \d+ · text (?P<tag>[0-9a-f]{8}) · .*slider grid (?P<ready>\d+)/(?P<total>\d+)")
SERVER_MS = re.compile(r"· server (?P<ms>\d+) ms")
PAYLOAD = re.compile(rb"/app/static/live/[0-9a-f]{24}\.bin")
ASSETS = re.compile(r'(?:src|href)="(\.?/?static/[^"]+)"')
# Each student fetches on connections of its own, as its browser would (6 per host in chromium and
# firefox). Shared, asyncio's default pool (cpu_count + 4 threads: 6 here) made twenty students' page
# loads wait behind one another's payload fetches in this process, not in the server.
CONNECTIONS = 6


def tag(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def caption_numbers(here: dict, index: int) -> dict:
    """What a page that makes its frames sends the server of its frame at `index` for the captions
    (views/live/local.js, `captionNumbers`), by the summary header's `frames_here`, with made-up values
    in range: a student makes no frame (its laptop would), and the server's work on them is the same."""
    C, S, G = len(here["softmax_probs"]), here["n_samples"], len(here["values"])
    L, H, T, window = here["layers"], here["heads"], here["tokens"], here["window"]
    stats = [0.25] * (C * len(here["rules"]["stats"]))
    row = {"top": [0] * (H * T), **{f: [0.25] * (H * T) for f in ("mean", "se", "lo", "hi", "share")},
           "query": [window[0]] * H, "key": [window[-1]] * H,
           **{f: [0.25] * H for f in ("std_max", "std_mean", "map_share")}}
    return {"sentence": here["sentence"], "index": index, "n_samples": S, "stats": stats,
            "p_samples": [1 / C] * (S * C), "spread": [0.01] * (L * H),
            "rows": {str(layer): row for layer in here["stochastic_layers"]},
            "sweep": [stats if i == index else None for i in range(G)]}


class Student:
    """One protocol session. `await start(query)`, then `type(text)` and `release(name, value)`;
    each returns the seconds until the server's footer shows the change."""

    def __init__(self, base: str):
        self.base = base
        self.ws = None
        self.widgets: dict[str, str] = {}          # key -> widget id
        self.fragment_of: dict[str, str] = {}      # widget id -> its fragment's id
        self.states: dict[str, object] = {}        # widget id -> the value this "browser" holds
        self._poll: asyncio.TimerHandle | None = None   # the summary's poll, armed by its latest payload
        self.route: str | None = None              # the live route the summary's header names
        self._hyper: dict[str, float] | None = None    # the sliders' values this "browser" holds
        self._send_later: asyncio.TimerHandle | None = None   # their send to Session State, once they rest
        self._summaries: dict[str, dict] = {}      # a fetched summary payload's URL -> its header
        self.summary: dict | None = None           # the header of the latest summary payload drawn
        self.query = ""
        self.page = ""                             # the page's url path ("lessons"), "" for the default page
        self.marker = ""
        self.release_log: list[dict] = []       # each release: when sent, and its round trip
        self.sentence_server_s: float | None = None     # the new sentence's run, its fragment's part
        self.sliders: dict | None = None           # the sliders component's data (values, current)
        self.fetched: set[bytes] = set()
        self.bytes_in = 0
        self.model_bytes = 0                       # the runtime's and the graph's, on a first visit
        self._model: asyncio.Task | None = None    # their download
        self.polls = 0
        self.frames_sent = 0                       # frames sent for the captions (a page that makes them)
        self._wanted: tuple | None = None          # (index, hyper) of the frame to send when its turn comes
        self._asking = False                       # a turn asked for, not come yet
        self._waits_answered: set = set()          # (sentence, index) the captions waited for, answered
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._pool = ThreadPoolExecutor(max_workers=CONNECTIONS, thread_name_prefix="student")
        # Where a page load's time went: seconds from `start` to its page and scripts fetched
        # ("assets"), its websocket open ("socket"), the first footer ("footer") and chart payload
        # ("payload") received.
        self.timeline: dict[str, float] = {}

    # ---- the page --------------------------------------------------------------------------------
    async def start(self, query: str, page: str = "") -> None:
        """Open the page at url path `page` ("" for the default page) with the query string `query`."""
        import websockets

        self._t0 = time.perf_counter()
        html = (await self._fetch(self._get, "/")).decode("utf-8", "replace")
        # The scripts and styles the page names, on this student's connections at once, as a browser
        # fetches them (one after another, they took a page load 62 requests' round trips in a row).
        await asyncio.gather(*(self._fetch(self._get, "/" + asset.lstrip("./"))
                               for asset in sorted(set(ASSETS.findall(html)))))
        self._stamp("assets")
        url = self.base.replace("http", "ws", 1) + "/_stcore/stream"
        self.ws = await websockets.connect(url, subprotocols=["streamlit"], origin=self.base, max_size=None)
        self._stamp("socket")
        self.query, self.page = query, page
        self._tasks = [asyncio.create_task(self._read())]
        await self._send()

    async def _fetch(self, fn, *args):
        """`fn(*args)` on one of this student's connections (`CONNECTIONS`)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _stamp(self, event: str) -> None:
        if event not in self.timeline and hasattr(self, "_t0"):
            self.timeline[event] = round(time.perf_counter() - self._t0, 3)

    def _get(self, path: str) -> bytes:
        """GET `path` as a browser does: gzip accepted, and unzipped when it came so (the bytes counted
        are those on the wire)."""
        req = urllib.request.Request(self.base + path, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=120) as r:
            body, packed = r.read(), r.headers.get("Content-Encoding") == "gzip"
        self.bytes_in += len(body)
        return gzip.decompress(body) if packed else body

    async def close(self) -> None:
        if self._send_later is not None:
            self._send_later.cancel()
        if self._poll is not None:
            self._poll.cancel()
        for t in self._tasks:
            t.cancel()
        if self.ws is not None:
            await self.ws.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- what a user does ------------------------------------------------------------------------
    async def type(self, text: str, timeout: float) -> float:
        t0 = time.perf_counter()
        self.states[self.widgets["text"]] = ("string_value", text)
        await self._send()
        await self._until(lambda: self._shows(tag(text)), timeout)
        m = SERVER_MS.search(self.marker)       # the explorer's fragment's own time, which the footer states
        self.sentence_server_s = int(m["ms"]) / 1000 if m else None
        return time.perf_counter() - t0

    async def release(self, name: str, value: float, timeout: float) -> float | None:
        """A slider's release: `name` moved to `value`, every other slider where it is. Where the page makes
        its own frames (its summary names a frame graph) the server is asked nothing: the values go to
        Session State once the sliders rest, and None comes back. Else answered by the live route when the
        page has one (timed to the last byte of the payloads its answer names; the values go once the
        sliders rest), else by a run (timed to the footer)."""
        sliders = self.sliders or {}
        hyper = {s["name"]: float(s["current"]) for s in sliders.get("sliders", [])}
        hyper.update(self._hyper or {})
        hyper[name] = float(value)
        self._hyper = hyper
        wid = self.widgets["live_sliders"]
        t0 = time.perf_counter()
        if (self.summary or {}).get("frame_graph"):
            # the values go with the page's frame there, for the captions, once the sliders rest
            if self._send_later is not None:
                self._send_later.cancel()
            index = self._posterior_index(hyper)
            self._send_later = asyncio.get_running_loop().call_later(
                HYPER_SEND_MS / 1000, lambda: asyncio.ensure_future(self._send_frame(index, dict(hyper))))
            return None
        if self.route:
            if self._send_later is not None:
                self._send_later.cancel()
            await asyncio.wait_for(self._ask_route(), timeout)
            self._send_later = asyncio.get_running_loop().call_later(
                HYPER_SEND_MS / 1000, lambda: asyncio.ensure_future(self._send_hyper(wid)))
        else:
            self.states[wid] = ("json_value", json.dumps({"hyper": hyper}))
            await self._send(fragment=self.fragment_of.get(wid, ""))
            want = f"{name}={value:.3g}"
            await self._until(lambda: want in self.marker, timeout)
        took = time.perf_counter() - t0
        self.release_log.append({"at": t0, "s": took})
        return took

    async def settle(self, name: str, value: float, timeout: float) -> None:
        """Until the server's footer shows `name` at `value`: the values sent to Session State."""
        want = f"{name}={value:.3g}"
        await self._until(lambda: want in self.marker, timeout)

    async def _ask_route(self) -> None:
        """The live route at the sliders' values, then the payloads its answer names, each fetched once
        (as the page's views do), the summary's header arming the next poll."""
        answer = json.loads(await self._fetch(self._get, self.route + "&" + urlencode(self._hyper or {})))
        url = answer["summary"]
        if url not in self._summaries:
            self._summaries[url] = self._header(await self._fetch(self._get, url))
        inside = answer.get("inside")
        if inside and inside.encode() not in self.fetched:
            self.fetched.add(inside.encode())
            await self._fetch(self._get, inside)
        self._arm(self._summaries[url], self.widgets.get("live_summary", ""))
        self._changed.set()

    async def _model_files(self, header: dict | None) -> None:
        """What a page that makes its own frames downloads before its first frame, once (a second visit
        finds them in the browser's cache): the runtime's files and the model's frame graph, which the
        summary's header names (`views.runtime.frame_graph`). It makes no frame: its own machine would."""
        from views.runtime import FILES

        graph = (header or {}).get("frame_graph") or {}
        if not isinstance(graph.get("graph"), str) or not isinstance(graph.get("runtime"), str):
            return
        folder = graph["runtime"].rsplit("/", 1)[0] + "/"
        todo = [u for u in [folder + name for name in FILES] + [graph["graph"]] if u.encode() not in self.fetched]
        self.fetched.update(u.encode() for u in todo)
        got = await asyncio.gather(*(self._fetch(self._get, u) for u in todo))
        self.model_bytes += sum(len(b) for b in got)
        self._stamp("model")
        self._changed.set()

    def _posterior_index(self, hyper: dict) -> int | None:
        """The summary's posterior slider value nearest to its value in `hyper` (None without one)."""
        slider = (self.summary or {}).get("slider") or {}
        values, v = slider.get("values") or [], hyper.get(slider.get("name"))
        return None if v is None or not values else min(range(len(values)), key=lambda k: abs(values[k] - v))

    async def _send_frame(self, index: int | None, hyper: dict | None) -> None:
        """The summary's "frame" state, as a page that makes its frames sends it (views/page_frames.py): the
        slider values (None: the server's) and the frame at posterior value `index` for the captions."""
        self._send_later = None
        # one still waiting for its turn gives up its place, not the slider values it carries (as local.js)
        self._wanted = (index, hyper or (self._wanted[1] if self._wanted else None))
        turn = (self.summary or {}).get("turn")
        if isinstance(turn, str):                  # the page's turn first (views/turns.py), as local.js asks it:
            if self._asking:                       # one ask at a time; what is wanted when it comes goes
                return
            self._asking = True
            try:
                await self._fetch(self._get, turn)
            except OSError:
                pass                               # the page sends at once when the ask fails
            finally:
                self._asking = False
        (index, hyper), self._wanted = self._wanted, None
        here = (self.summary or {}).get("frames_here")
        if not here:
            return
        if index is None:
            index = (self.summary.get("slider") or {}).get("current", 0)
        wid = self.widgets["live_summary"]
        self.frames_sent += 1
        self.states[wid] = ("json_value", json.dumps({"frame": {"hyper": hyper,
                                                                "numbers": caption_numbers(here, index)}}))
        await self._send(fragment=self.fragment_of.get(wid, ""))

    async def _send_hyper(self, wid: str) -> None:
        self._send_later = None
        self.states[wid] = ("json_value", json.dumps({"hyper": self._hyper}))
        await self._send(fragment=self.fragment_of.get(wid, ""))

    def slider_values(self, name: str) -> tuple[list[float], float]:
        for s in (self.sliders or {}).get("sliders", []):
            if s["name"] == name:
                return [float(v) for v in s["values"]], float(s["current"])
        raise KeyError(name)

    async def until_charts(self, timeout: float) -> None:
        """Until the first charts' payloads, and where the page makes its frames the model's files, are here."""
        await self._until(lambda: bool(MARKER.search(self.marker)) and bool(self.fetched)
                          and (self._model is None or self._model.done()), timeout)
        if self._model is not None and self._model.exception() is not None:
            raise RuntimeError(f"the model's files could not be fetched: {self._model.exception()!r}")

    def own(self, text: str) -> dict:
        """Whether the server's footer and URL for this session name its own sentence."""
        shown = parse_qs(self.query).get("text", [""])[0]
        return {"own_text_in_footer": f"text {tag(text)} " in self.marker, "own_text_in_url": shown == text}

    def grid(self) -> tuple[int, int]:
        """(frames made, frames) of the sentence's grid, as the latest summary payload the page drew says
        (a run's, or the live route's), else as the footer does."""
        ready = (self.summary or {}).get("ready")
        if isinstance(ready, list) and ready:
            return sum(r is True for r in ready), len(ready)
        m = MARKER.search(self.marker)
        return (int(m["ready"]), int(m["total"])) if m else (0, 0)

    def _shows(self, text_tag: str) -> bool:
        m = MARKER.search(self.marker)
        return bool(m) and m["tag"] == text_tag

    async def _until(self, done, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while not done():
            for task in self._tasks:         # a reader that died (a bad message): say why, not a time-out
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise RuntimeError(f"the student's reader failed: {task.exception()!r}")
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no answer in {timeout:.0f} s (footer: {self.marker[:80]!r})")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass

    # ---- the protocol ----------------------------------------------------------------------------
    async def _send(self, fragment: str = "") -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        rs = msg.rerun_script
        rs.query_string = self.query
        rs.page_script_hash = ""
        rs.page_name = self.page
        rs.fragment_id = fragment
        for wid, (kind, value) in self.states.items():
            w = rs.widget_states.widgets.add()
            w.id = wid
            setattr(w, kind, value)
        await self.ws.send(msg.SerializeToString())

    @property
    def polling(self) -> bool:
        """Whether the page's latest summary asked for a poll that has not been sent yet."""
        return self._poll is not None

    @staticmethod
    def _header(data: bytes) -> dict:
        from bam_viz.live.wire import header_of

        try:
            return header_of(data)[0]
        except (ValueError, AttributeError, struct.error):
            return {}

    def _arm(self, header: dict, wid: str) -> None:
        """A summary payload arrived (a run's or the route's): its route, and a poll after its header's
        `poll.ms`, if any (the one timer set again by every payload, as the page's)."""
        self.summary = header
        if self._poll is not None:
            self._poll.cancel()
            self._poll = None
        if isinstance(header.get("route"), str):
            self.route = header["route"]
        try:
            ms = float((header.get("poll") or {}).get("ms") or 0)
        except (ValueError, AttributeError):
            return
        if ms > 0:
            self._poll = asyncio.get_running_loop().call_later(
                ms / 1000, lambda: asyncio.ensure_future(self._send_poll(wid)))

    async def _send_poll(self, wid: str) -> None:
        self._poll = None
        self.polls += 1
        if self.route:
            try:
                await self._ask_route()
                return
            except Exception:                       # the page asks for a run when the route fails
                pass
        self.states[wid] = ("json_value", json.dumps({"poll": self.polls}))
        await self._send(fragment=self.fragment_of.get(wid, ""))

    async def _read(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        async for data in self.ws:
            self.bytes_in += len(data)
            f = ForwardMsg()
            f.ParseFromString(data)
            kind = f.WhichOneof("type")
            if kind == "delta":
                await self._delta(f.delta)
            elif kind == "page_info_changed":
                self.query = f.page_info_changed.query_string
            self._changed.set()

    async def _delta(self, delta) -> None:
        if delta.WhichOneof("type") != "new_element":
            return
        el = delta.new_element
        kind = el.WhichOneof("type")
        sub = getattr(el, kind)
        wid = getattr(sub, "id", "")
        if wid and wid.startswith("$$ID-"):
            key = wid.split("-", 2)[-1]
            self.widgets[key] = wid
            self.fragment_of[wid] = delta.fragment_id
        if kind == "bidi_component":
            if wid.endswith("-live_sliders") and sub.json:
                self.sliders = json.loads(sub.json)
            if wid.endswith("-live_summary") and sub.WhichOneof("data") == "bytes":
                self._arm(self._header(sub.bytes), wid)
                wait = (self.summary or {}).get("captions_wait")
                here = (self.summary or {}).get("frames_here") or {}
                if isinstance(wait, int) and (here.get("sentence"), wait) not in self._waits_answered:
                    self._waits_answered.add((here.get("sentence"), wait))        # the captions wait for its frame
                    asyncio.ensure_future(self._send_frame(wait, None))
                if self._model is None and (self.summary or {}).get("frame_graph"):
                    self._model = asyncio.create_task(self._model_files(self.summary))
            for url in set(PAYLOAD.findall(sub.SerializeToString())):
                if url not in self.fetched:
                    self.fetched.add(url)
                    await self._fetch(self._get, url.decode())
                    self._stamp("payload")
        elif kind == "markdown" and MARKER.search(sub.body):
            self.marker = sub.body
            self._stamp("footer")
