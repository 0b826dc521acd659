"""Streamlit's own scripts, served compressed and from memory; the chart payloads, gzipped once.

Every new page fetches Streamlit's frontend: 2.3 MB of scripts and styles before its websocket opens.
Streamlit serves them uncompressed, in 64 KiB pieces, each read in a worker thread and written by the
event loop; under a class each piece waits for the server's GIL, which twenty sessions' runs want, so
later students waited 3-10 s for the scripts alone (docs/performance.md, "Tried and not kept").

`PrecompressedStatic` answers those requests itself: each file compressed once (gzip, to a quarter of
its size), kept in memory, and written in one piece. Only what a client asks for is kept (Streamlit's
whole frontend is 26 MB, its compressed scripts a quarter of that), and a client that does not accept
gzip, or a path that is not a file of the frontend, goes to Streamlit as before. The caching headers
are Streamlit's: the bundles' names carry their hash, so browsers may keep them for a year.
`ServedPayloads` does the same for the explorer's chart payloads, from their gzipped copies on disk, and
`HashedStatic` for the app's hashed folders: the explorer's modules, the browser runtime (15 MB of WASM,
which Streamlit gzipped again at every fetch, about a second of CPU per student) and the frame graphs.
`CrossOriginIsolated` makes every page cross-origin isolated (the browser runtime's WASM threads need
it) and sends the files of the app's hashed folders (modules, runtime, frame graphs) as immutable.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import mimetypes
import re
from pathlib import Path, PurePosixPath

from streamlit.web.server.starlette.starlette_server_config import STATIC_ASSET_CACHE_MAX_AGE_SECONDS

from views.components import HASH_CHARS, PAYLOAD_NAME, STATIC, app_path, packed_bytes

GZIP_LEVEL = 9                  # once per file, so the smallest: 2.3 MB of scripts to about 0.6 MB
COMPRESSIBLE = (".js", ".mjs", ".css", ".json", ".svg", ".html", ".map", ".txt", ".ttf", ".wasm")
HASHED_KEEP_BYTES = 256 * 2**20  # what `HashedStatic` keeps in memory: the runtime and a few models' graphs
SEND_CHUNK = 256 * 2**10        # a body is sent in pieces of this size (`PrecompressedStatic._send`)
# Streamlit's own contract for its hashed bundles (starlette_static_routes._apply_cache_headers).
CACHE_CONTROL = f"public, immutable, max-age={STATIC_ASSET_CACHE_MAX_AGE_SECONDS}".encode()
# On every response: the page may then share memory with its workers (SharedArrayBuffer), which
# onnxruntime-web's WASM threads need; in exchange it loads nothing from another origin.
ISOLATION = ((b"cross-origin-opener-policy", b"same-origin"), (b"cross-origin-embedder-policy", b"require-corp"),
             (b"cross-origin-resource-policy", b"same-origin"))
# Folders under the app's static/ named by a hash of their files (views.components.hashed_copy): the
# explorer's modules (views.components), the browser runtime and the models' frame graphs (views.runtime).
HASHED = rf"(?:live/js|ort|graphs)/[0-9a-f]{{{HASH_CHARS}}}/[^/]+"
# Whatever the machine's mime.types says: WebAssembly.instantiateStreaming takes application/wasm only,
# and Streamlit sends a type it does not know (.onnx) as text/plain.
HASHED_TYPES = {".wasm": b"application/wasm", ".mjs": b"text/javascript; charset=utf-8",
                ".js": b"text/javascript; charset=utf-8", ".onnx": b"application/octet-stream",
                ".json": b"application/json"}
# Sent as they are: a frame graph's float32 weights gzip to 93% of their size, for a second of the
# server's CPU per fetch of bam-wc's 22 MB (Streamlit's gzip, level 9, inside our middleware).
UNCOMPRESSED = (".onnx",)


def _accepts_gzip(scope) -> bool:
    """Whether the request's Accept-Encoding names gzip (or *) without q=0."""
    for name, value in scope.get("headers", ()):
        if name == b"accept-encoding":
            for item in value.decode("latin-1").lower().split(","):
                coding, _, params = item.partition(";")
                q = params.strip().removeprefix("q=") if params.strip().startswith("q=") else "1"
                try:
                    weight = float(q)
                except ValueError:
                    weight = 0.0
                if coding.strip() in ("gzip", "*") and weight > 0:
                    return True
    return False


def _header(scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return value
    return None


class Entry:
    """One file of the frontend as it is sent: its body (gzip when that is smaller) and headers."""

    def __init__(self, path: Path):
        raw = path.read_bytes()
        self.etag = b'"' + hashlib.sha1(raw).hexdigest()[:20].encode() + b'"'
        body, self.encoding = raw, None
        if path.suffix.lower() in COMPRESSIBLE:
            packed = gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)
            if len(packed) < 0.9 * len(raw):
                body, self.encoding = packed, b"gzip"
        self.body = body
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/javascript", "application/json"):
            kind += "; charset=utf-8"
        self.content_type = kind.encode()

    def headers(self, status: int) -> list[tuple[bytes, bytes]]:
        out = [(b"etag", self.etag), (b"cache-control", CACHE_CONTROL), (b"vary", b"Accept-Encoding")]
        if status == 200:
            out += [(b"content-type", self.content_type), (b"content-length", str(len(self.body)).encode())]
            if self.encoding:
                out.append((b"content-encoding", self.encoding))
        return out


class PrecompressedStatic:
    """ASGI middleware: GET and HEAD of `<base>/static/...`, a file under `directory`, from memory."""

    def __init__(self, app, directory: str | Path | None = None, base_url: str | None = None):
        self.app = app
        if directory is None:
            from streamlit import file_util

            directory = file_util.get_static_dir()
        self.root = (Path(directory) / "static").resolve()
        self.prefix = app_path("static/", base_url)
        self._entries: dict[str, Entry | None] = {}
        self._making: dict[str, asyncio.Task] = {}

    async def __call__(self, scope, receive, send):
        if (scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
                and scope["path"].startswith(self.prefix) and _accepts_gzip(scope)):
            entry = await self._entry(scope["path"][len(self.prefix):])
            if entry is not None:
                await self._send(entry, scope, send)
                return
        await self.app(scope, receive, send)

    def _file(self, relative: str) -> Path | None:
        """The frontend's file at `relative`, or None: nothing outside the folder, no odd paths."""
        if not relative or "\\" in relative or "\x00" in relative or relative.startswith("/"):
            return None
        path = (self.root / relative).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            return None
        return path

    async def _entry(self, relative: str) -> Entry | None:
        if relative in self._entries:
            return self._entries[relative]
        # Read and compressed once, in a thread (a 2 MB script takes about 0.1 s, the runtime's WASM 1.3 s):
        # the first requests of a class arrive together, and wait for that one.
        making = self._making.get(relative)
        if making is None:
            path = self._file(relative)
            if path is None:
                if len(self._entries) < 4096:                  # unknown paths: remembered, boundedly
                    self._entries[relative] = None
                return None
            making = self._making[relative] = asyncio.ensure_future(asyncio.to_thread(Entry, path))
            making.add_done_callback(lambda _: self._making.pop(relative, None))
        entry = await asyncio.shield(making)
        self._entries[relative] = entry
        return entry

    async def _send(self, entry: Entry, scope, send) -> None:
        status = 304 if _header(scope, b"if-none-match") == entry.etag else 200
        await send({"type": "http.response.start", "status": status, "headers": entry.headers(status)})
        body = entry.body if status == 200 and scope["method"] == "GET" else b""
        # In pieces, each sent once the socket took the last: a body written whole is copied into the
        # transport's buffer, which then moves its rest down after every send (a 22 MB graph: 9% of a
        # class's server time, py-spy).
        for start in range(0, len(body), SEND_CHUNK):
            await send({"type": "http.response.body", "body": body[start:start + SEND_CHUNK],
                        "more_body": start + SEND_CHUNK < len(body)})
        if not body:
            await send({"type": "http.response.body", "body": b""})


class HashedStatic(PrecompressedStatic):
    """ASGI middleware: GET and HEAD of a file of the app's hashed folders (`<base>/app/static/<HASHED>`:
    views.components.hashed_copy, views.runtime), which never change under their name: each is read and
    compressed once (gzip where that is smaller: the runtime's WASM to a quarter; a graph's float32 weights
    are sent as they are) and sent from memory in one piece, up to HASHED_KEEP_BYTES of them, the least
    recently sent going first. Headers: CrossOriginIsolated's (immutable, the type)."""

    def __init__(self, app, directory: str | Path | None = None, base_url: str | None = None):
        self.app = app
        self.root = Path(directory or STATIC.parent).resolve()
        self.prefix = app_path("app/static/", base_url)
        self._entries: dict[str, Entry | None] = {}
        self._making: dict[str, asyncio.Task] = {}
        self.hashed = re.compile(HASHED)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"].startswith(self.prefix):
            relative = scope["path"][len(self.prefix):]
            entry = await self._entry(relative) if self.hashed.fullmatch(relative) else None
            if entry is not None and (entry.encoding is None or _accepts_gzip(scope)):
                self._entries.pop(relative, None)
                self._entries[relative] = entry                                  # the most recently sent last
                await self._send(entry, scope, send)
                return
        await self.app(scope, receive, send)

    async def _entry(self, relative: str) -> Entry | None:
        entry = await super()._entry(relative)
        kept = [k for k, e in self._entries.items() if e is not None]
        while sum(len(self._entries[k].body) for k in kept) > HASHED_KEEP_BYTES and len(kept) > 1:
            self._entries.pop(kept.pop(0))
        return entry


class ServedPayloads:
    """ASGI middleware: GET and HEAD of a chart payload (`<base>/app/static/live/<hash>.bin`, written by
    `views.components.publish`), sent gzipped in one piece.

    Streamlit's static serving sent each payload (0.6-1 MB) in 64 KiB pieces, each read in a thread and
    gzipped again on the event loop, per fetch (docs/performance.md, "Tried and not kept"). Here a fetch
    costs one read in a thread (and at the payload's first fetch its compression,
    `components.packed_bytes`, kept beside it) and one write. A
    client that does not accept gzip, or a name never published, goes to Streamlit as before."""

    def __init__(self, app, directory: str | Path | None = None, base_url: str | None = None):
        self.app = app
        self.root = Path(directory or STATIC)
        self.prefix = app_path("app/static/live/", base_url)

    async def __call__(self, scope, receive, send):
        if (scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
                and scope["path"].startswith(self.prefix) and _accepts_gzip(scope)):
            name = scope["path"][len(self.prefix):]
            body = await asyncio.to_thread(self._read, name) if PAYLOAD_NAME.fullmatch(name) else None
            if body is not None:
                headers = [(b"content-type", b"application/octet-stream"), (b"content-encoding", b"gzip"),
                           (b"content-length", str(len(body)).encode()), (b"vary", b"Accept-Encoding"),
                           (b"x-content-type-options", b"nosniff")]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
                return
        await self.app(scope, receive, send)

    def _read(self, name: str) -> bytes | None:
        try:
            return packed_bytes(self.root / name)
        except OSError:                          # never published, or pruned: Streamlit's 404
            return None


class CrossOriginIsolated:
    """ASGI middleware: every HTTP response with the ISOLATION headers, and a file of a hashed folder
    (`<base>/app/static/<HASHED>`, sent by Streamlit's static serving) with CACHE_CONTROL and its type,
    uncompressed where its suffix is UNCOMPRESSED (the request reaches Streamlit without Accept-Encoding)."""

    def __init__(self, app, base_url: str | None = None):
        self.app = app
        self.hashed = re.compile(re.escape(app_path("app/static/", base_url)) + HASHED)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hashed = self.hashed.fullmatch(scope["path"]) is not None
        suffix = PurePosixPath(scope["path"]).suffix.lower()
        kind = HASHED_TYPES.get(suffix) if hashed else None
        if hashed and suffix in UNCOMPRESSED:
            scope = {**scope, "headers": [(k, v) for k, v in scope.get("headers", ()) if k != b"accept-encoding"]}

        async def send_isolated(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": _isolated(message, hashed, kind)}
            await send(message)

        await self.app(scope, receive, send_isolated)


def _isolated(start, hashed: bool, kind: bytes | None) -> list[tuple[bytes, bytes]]:
    """The headers of response `start`, with ours in place of any of the same name."""
    ours = list(ISOLATION)
    if hashed and start["status"] in (200, 206, 304):
        ours.append((b"cache-control", CACHE_CONTROL))
        if kind and start["status"] != 304:
            ours.append((b"content-type", kind))
    names = {name for name, _ in ours}
    return [(k, v) for k, v in start.get("headers", ()) if k.lower() not in names] + ours


class BackendBase:
    """ASGI middleware: tells Streamlit's frontend where its server is, in the page it is sent.

    Opened at a page's own address (`<base>/lessons`), the frontend does not know which part of the
    path is the server's and probes `<base>/lessons/_stcore/health` and `.../host-config` first; the
    server's 404s then sit in every page's console (streamlit#7074). The frontend reads the server's
    address from `window.__streamlit.BACKEND_BASE_URL` when a page sets it, and probes nothing else,
    so the HTML of every page gets that one line, the address made from the page's own origin."""

    def __init__(self, app, base_url: str | None = None):
        self.app = app
        root = json.dumps(app_path("", base_url))                # "/" or "/<base>/"
        self.script = (f"<script>window.__streamlit={{BACKEND_BASE_URL:new URL({root},location.href).href}}"
                       "</script>").encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        held: dict = {}

        async def send_page(message):
            if message["type"] == "http.response.start":
                kind = _response_header(message, b"content-type") or b""
                if message["status"] == 200 and kind.startswith(b"text/html"):
                    held.update(start=message, body=[])
                    return
            elif "start" in held and message["type"] == "http.response.body":
                held["body"].append(message.get("body", b""))
                if message.get("more_body"):
                    return
                start = held.pop("start")
                body = self._with_script(b"".join(held["body"]), start)
                headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                message = {"type": "http.response.body", "body": body}
            await send(message)

        await self.app(scope, receive, send_page)

    def _with_script(self, body: bytes, start) -> bytes:
        packed = _response_header(start, b"content-encoding") == b"gzip"
        html = gzip.decompress(body) if packed else body
        html = html.replace(b"<head>", b"<head>" + self.script, 1)
        return gzip.compress(html, compresslevel=GZIP_LEVEL, mtime=0) if packed else html


def _response_header(message, wanted: bytes) -> bytes | None:
    for name, value in message.get("headers", ()):
        if name.lower() == wanted:
            return value
    return None
