"""views.serving: Streamlit's frontend files, compressed once and sent from memory, byte for byte the
files Streamlit would send, and the explorer's chart payloads from the gzipped copies written when they
are published; anything else (another path, a client without gzip, a path out of the folder) goes to
Streamlit unchanged. And `streamlit run app.py` finds the app that serves them."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import pytest

from views.live_route import LiveRoute
from views.serving import BackendBase, CrossOriginIsolated, HashedStatic, PrecompressedStatic, ServedPayloads

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def frontend(tmp_path):
    static = tmp_path / "static"
    (static / "js").mkdir(parents=True)
    (static / "media").mkdir()
    script = ("export const x = 1;\n" * 4000).encode()
    (static / "js" / "index.Ab12.js").write_bytes(script)
    (static / "media" / "font.woff2").write_bytes(bytes(range(256)) * 40)        # does not compress
    (tmp_path / "secret.txt").write_text("not served")
    return tmp_path, script


def _call(middleware, path, method="GET", headers=(("accept-encoding", "gzip, deflate, br"),), cls=PrecompressedStatic,
          query=b"", app=None):
    """(status, headers, body, whether the request went on to Streamlit) for one request, to a new `cls`
    made with `middleware`, or to `app` (its `app` then Streamlit)."""
    sent, passed = [], []

    async def streamlit(scope, receive, send):
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"streamlit"})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    if app is None:
        app = cls(streamlit, **middleware)
    else:
        app.app = streamlit
    scope = {"type": "http", "method": method, "path": path, "query_string": query,
             "headers": [(k.encode(), v.encode()) for k, v in headers]}
    asyncio.run(app(scope, receive, send))
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body, bool(passed)


def test_a_script_is_sent_gzipped_from_memory_with_streamlits_headers(frontend):
    folder, script = frontend
    status, headers, body, passed = _call({"directory": folder, "base_url": ""}, "/static/js/index.Ab12.js")
    assert status == 200 and not passed
    assert gzip.decompress(body) == script and len(body) < len(script) / 4
    assert headers["content-encoding"] == "gzip" and headers["vary"] == "Accept-Encoding"
    assert headers["content-length"] == str(len(body))
    assert headers["content-type"].startswith(("text/javascript", "application/javascript"))
    assert headers["cache-control"] == "public, immutable, max-age=31536000"


@pytest.mark.parametrize("accept", ["gzip", "deflate, gzip;q=0.5", "*", "br;q=1.0, GZIP"])
def test_gzip_is_sent_to_whoever_accepts_it(frontend, accept):
    folder, script = frontend
    status, headers, body, passed = _call({"directory": folder, "base_url": ""}, "/static/js/index.Ab12.js",
                                          headers=(("accept-encoding", accept),))
    assert status == 200 and not passed and gzip.decompress(body) == script


def test_a_cached_copy_is_answered_not_modified_and_head_sends_no_body(frontend):
    folder, _ = frontend
    mw = {"directory": folder, "base_url": ""}
    _, headers, _, _ = _call(mw, "/static/js/index.Ab12.js")
    status, again, body, _ = _call(mw, "/static/js/index.Ab12.js",
                                   headers=(("accept-encoding", "gzip"), ("if-none-match", headers["etag"])))
    assert status == 304 and body == b"" and again["etag"] == headers["etag"]
    status, head, body, _ = _call(mw, "/static/js/index.Ab12.js", method="HEAD")
    assert status == 200 and body == b"" and head["content-length"] == headers["content-length"]


def test_what_does_not_compress_is_sent_as_it_is(frontend):
    folder, _ = frontend
    status, headers, body, passed = _call({"directory": folder, "base_url": ""}, "/static/media/font.woff2")
    assert status == 200 and not passed and "content-encoding" not in headers
    assert body == (folder / "static" / "media" / "font.woff2").read_bytes()


def test_a_large_body_goes_in_pieces_each_after_the_last_and_arrives_whole(frontend, monkeypatch):
    """A body past SEND_CHUNK is several body messages, all but the last with more_body: a graph of 22 MB
    written whole was copied and moved in the transport's buffer again and again."""
    import views.serving as serving

    folder, _ = frontend
    monkeypatch.setattr(serving, "SEND_CHUNK", 1000)
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    async def streamlit(scope, receive, send):
        raise AssertionError("sent from memory")

    scope = {"type": "http", "method": "GET", "path": "/static/media/font.woff2", "query_string": b"",
             "headers": [(b"accept-encoding", b"gzip")]}
    asyncio.run(PrecompressedStatic(streamlit, directory=folder, base_url="")(scope, receive, send))
    pieces = sent[1:]
    want = (folder / "static" / "media" / "font.woff2").read_bytes()
    assert len(pieces) == -(-len(want) // 1000) == 11 and all(len(m["body"]) == 1000 for m in pieces[:-1])
    assert [m["more_body"] for m in pieces] == [True] * 10 + [False] and b"".join(m["body"] for m in pieces) == want


@pytest.mark.parametrize("path, headers", [
    ("/static/js/index.Ab12.js", ()),                                        # no gzip: Streamlit's own answer
    ("/static/js/index.Ab12.js", (("accept-encoding", "identity"),)),
    ("/static/js/index.Ab12.js", (("accept-encoding", "br, gzip;q=0"),)),    # gzip refused
    ("/static/../secret.txt", (("accept-encoding", "gzip"),)),               # out of the folder
    ("/static/js/../../secret.txt", (("accept-encoding", "gzip"),)),
    ("/static//etc/passwd", (("accept-encoding", "gzip"),)),
    ("/static/js/missing.js", (("accept-encoding", "gzip"),)),
    ("/static/js", (("accept-encoding", "gzip"),)),                           # a folder
    ("/static/js\\index.Ab12.js", (("accept-encoding", "gzip"),)),
    ("/app/static/live/a.bin", (("accept-encoding", "gzip"),)),              # the app's own files
    ("/", (("accept-encoding", "gzip"),)),
])
def test_anything_else_goes_to_streamlit(frontend, path, headers):
    folder, _ = frontend
    status, _, body, passed = _call({"directory": folder, "base_url": ""}, path, headers=headers)
    assert passed and status == 299 and body == b"streamlit"


def test_a_base_url_path_is_honoured(frontend):
    folder, script = frontend
    mw = {"directory": folder, "base_url": "/class/"}
    status, _, body, passed = _call(mw, "/class/static/js/index.Ab12.js")
    assert status == 200 and gzip.decompress(body) == script and not passed
    assert _call(mw, "/static/js/index.Ab12.js")[3]                          # outside the base: Streamlit's


def test_streamlits_own_frontend_is_served_whole():
    """Every script and style Streamlit's index.html names: the same bytes, once decompressed."""
    from protocol_client import ASSETS
    from streamlit import file_util

    static = Path(file_util.get_static_dir())
    html = (static / "index.html").read_text(encoding="utf-8")
    assets = sorted({a.lstrip("./") for a in ASSETS.findall(html)})
    assert len(assets) > 10
    for asset in assets:
        status, headers, body, passed = _call({}, "/" + asset)
        assert status == 200 and not passed, asset
        raw = (static / asset).read_bytes()
        assert (gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body) == raw, asset


def test_streamlit_run_finds_the_app_and_its_middleware():
    """`streamlit run app.py` looks for an ASGI app in the file (without running it) and serves it."""
    import runpy

    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.app_name == "app" and found.import_string == "app:app"
    module = runpy.run_path(str(ROOT / "app.py"), run_name="app")             # as uvicorn imports it
    app = module["app"]
    assert Path(app._script_path).resolve() == ROOT / "app.py"
    assert [m.cls for m in app._user_middleware] == [CrossOriginIsolated, BackendBase, PrecompressedStatic,
                                                     ServedPayloads, HashedStatic, LiveRoute]


def test_payload_files_are_pruned_only_once_no_page_may_still_fetch_them(tmp_path, monkeypatch):
    """The explorer's payload files (views/components.py): past KEEP_FILES, only those FRESH_S old go;
    any past KEEP_S; a payload published again is the same file at the same URL, used again."""
    import os
    import time

    from views import components

    monkeypatch.setattr(components, "STATIC", tmp_path)
    monkeypatch.setattr(components, "KEEP_FILES", 1)
    now = time.time()
    ages = {"a.bin": 5, "b.bin": 10, "c.bin": components.FRESH_S + 40, "d.bin": components.KEEP_S + 1}
    for name, age in ages.items():
        (tmp_path / name).write_bytes(name.encode())
        os.utime(tmp_path / name, (now - age, now - age))
    monkeypatch.setattr(components, "_pruned", [float("-inf")])
    with components._lock:
        components._prune()
    assert sorted(p.name for p in tmp_path.glob("*.bin")) == ["a.bin", "b.bin"]    # b is past the limit, but fresh

    url = components.publish(b"payload")
    assert url.endswith(".bin") and components.served_file(url).read_bytes() == b"payload"
    os.utime(components.served_file(url), (now - 30, now - 30))
    assert components.publish(b"payload") == url and components.served_file(url).stat().st_mtime > now - 5


@pytest.fixture()
def published(tmp_path, monkeypatch):
    """A payload as the explorer publishes it (views/components.py), in a folder of the test's own."""
    from views import components

    monkeypatch.setattr(components, "STATIC", tmp_path)
    payload = bytes(range(256)) * 64 + b"\x00" * 200_000                   # the frames not made: NaN, alike
    url = components.publish(payload)
    return tmp_path, payload, url, components


@pytest.mark.parametrize("base", ["", "/class/"])
def test_a_payload_is_sent_gzipped_in_one_piece(published, base):
    folder, payload, url, _ = published
    name = url.rsplit("/", 1)[-1]
    mw = {"directory": folder, "base_url": base}
    status, headers, body, passed = _call(mw, f"{base.rstrip('/')}/app/static/live/{name}", cls=ServedPayloads)
    assert status == 200 and not passed
    assert gzip.decompress(body) == payload and len(body) < len(payload) / 4
    assert headers["content-encoding"] == "gzip" and headers["content-length"] == str(len(body))
    assert headers["content-type"] == "application/octet-stream" and headers["x-content-type-options"] == "nosniff"
    status, head, body, _ = _call(mw, f"{base.rstrip('/')}/app/static/live/{name}", method="HEAD", cls=ServedPayloads)
    assert status == 200 and body == b"" and head["content-length"] == headers["content-length"]


def test_a_payload_is_gzipped_at_its_first_fetch_once_not_when_published(published, monkeypatch):
    folder, payload, url, components = published
    path = components.served_file(url)
    assert not components.packed(path).exists()                              # the run that published it: no gzip
    name = "/app/static/live/" + path.name
    first = _call({"directory": folder, "base_url": ""}, name, cls=ServedPayloads)[2]
    assert gzip.decompress(components.packed(path).read_bytes()) == payload
    monkeypatch.setattr(components.gzip, "compress", lambda *a, **k: pytest.fail("compressed again"))
    assert _call({"directory": folder, "base_url": ""}, name, cls=ServedPayloads)[2] == first


def test_a_pruned_payload_goes_with_its_gzipped_copy(published, monkeypatch):
    import os
    import time

    folder, _, url, components = published
    path = components.served_file(url)
    components.packed_bytes(path)
    os.utime(path, (time.time() - components.KEEP_S - 1,) * 2)
    monkeypatch.setattr(components, "_pruned", [float("-inf")])
    with components._lock:
        components._prune()
    assert list(folder.iterdir()) == []
    status, _, _, passed = _call({"directory": folder, "base_url": ""}, "/app/static/live/" + path.name,
                                 cls=ServedPayloads)
    assert passed and status == 299                                          # Streamlit's 404


@pytest.mark.parametrize("path, headers", [
    ("NAME", ()),                                                            # no gzip: Streamlit's raw file
    ("NAME", (("accept-encoding", "identity"),)),
    ("0123456789abcdef01234567.bin", (("accept-encoding", "gzip"),)),        # never published
    ("../../secret.bin", (("accept-encoding", "gzip"),)),
    ("js/0123456789abcdef01234567.bin", (("accept-encoding", "gzip"),)),
    ("NAME.gz", (("accept-encoding", "gzip"),)),
    ("js/abc/live.js", (("accept-encoding", "gzip"),)),                     # the modules: Streamlit's
])
def test_anything_but_a_published_payload_goes_to_streamlit(published, path, headers):
    folder, _, url, _ = published
    path = "/app/static/live/" + path.replace("NAME", url.rsplit("/", 1)[-1])
    status, _, body, passed = _call({"directory": folder, "base_url": ""}, path, headers=headers, cls=ServedPayloads)
    assert passed and status == 299 and body == b"streamlit"


PAGE = b"<!doctype html><html><head><meta charset=utf-8><title>x</title></head><body></body></html>"


def _page(base_url, kind=b"text/html; charset=utf-8", packed=False, status=200, pieces=2):
    """(status, headers, body) of a page Streamlit sends in `pieces` body messages, through BackendBase."""
    body = gzip.compress(PAGE) if packed else PAGE
    sent = []

    async def streamlit(scope, receive, send):
        headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), (b"etag", b'"e"')]
        await send({"type": "http.response.start", "status": status,
                    "headers": headers + ([(b"content-encoding", b"gzip")] if packed else [])})
        cut = len(body) // pieces
        for i in range(pieces):
            await send({"type": "http.response.body", "body": body[i * cut:(i + 1) * cut if i < pieces - 1 else None],
                        "more_body": i < pieces - 1})

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/lessons", "query_string": b"", "headers": []}
    asyncio.run(BackendBase(streamlit, base_url=base_url)(scope, None, send))
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize(("base_url", "root"), [("", "/"), ("/class/", "/class/")])
def test_every_page_tells_the_frontend_its_server_so_it_probes_no_page_path(base_url, root, packed):
    """A page's HTML gets window.__streamlit.BACKEND_BASE_URL, the server's root under its base path, before
    anything else in <head>, gzipped again where it came gzipped, with its length right; the frontend then
    probes no `<page>/_stcore/...` address (tests/test_browser.py: nothing in any page's console)."""
    status, headers, body = _page(base_url, packed=packed)
    html = gzip.decompress(body) if packed else body
    assert status == 200 and int(headers["content-length"]) == len(body)
    assert headers.get("content-encoding") == ("gzip" if packed else None) and headers["etag"] == '"e"'
    script = f'<script>window.__streamlit={{BACKEND_BASE_URL:new URL("{root}",location.href).href}}</script>'
    assert html == PAGE.replace(b"<head>", b"<head>" + script.encode())


def test_anything_but_a_page_goes_through_unchanged():
    for kind, status in ((b"application/javascript", 200), (b"text/html", 304), (b"application/json", 200)):
        got_status, headers, body = _page("", kind=kind, status=status)
        assert (got_status, body) == (status, PAGE) and int(headers["content-length"]) == len(PAGE)


HEX = "0123456789abcdef"                                                     # a hashed folder's name


def _isolated(path, status=200, headers=((b"content-type", b"application/octet-stream"),), base_url=""):
    """(status, headers as a list of pairs) of a response Streamlit sends, through CrossOriginIsolated."""
    sent = []

    async def streamlit(scope, receive, send):
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, (b"cache-control", b"no-cache"), (b"etag", b'"e"')]})
        await send({"type": "http.response.body", "body": b"x"})

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": []}
    asyncio.run(CrossOriginIsolated(streamlit, base_url=base_url)(scope, None, send))
    return sent[0]["status"], [(k.decode(), v.decode()) for k, v in sent[0]["headers"]]


ISOLATED = [("cross-origin-opener-policy", "same-origin"), ("cross-origin-embedder-policy", "require-corp"),
            ("cross-origin-resource-policy", "same-origin")]


@pytest.mark.parametrize("path", ["/", "/lessons", "/_stcore/health", "/static/js/index.Ab12.js",
                                  "/app/static/live/0123456789abcdef01234567.bin", f"/app/static/ort/{HEX}"])
@pytest.mark.parametrize("status", [200, 404])
def test_every_response_is_cross_origin_isolated_and_otherwise_as_streamlit_sent_it(path, status):
    got, headers = _isolated(path, status)
    assert got == status
    assert headers == [("content-type", "application/octet-stream"), ("cache-control", "no-cache"),
                       ("etag", '"e"'), *ISOLATED]


@pytest.mark.parametrize("base_url", ["", "/class/"])
@pytest.mark.parametrize("path, kind", [
    (f"ort/{HEX}/ort-wasm-simd-threaded.wasm", "application/wasm"),
    (f"ort/{HEX}/ort.wasm.min.mjs", "text/javascript; charset=utf-8"),
    (f"live/js/{HEX}/live.js", "text/javascript; charset=utf-8"),
    (f"graphs/{HEX}/frame.onnx", "application/octet-stream"),
    (f"graphs/{HEX}/frame.json", "application/json"),
])
def test_a_hashed_folders_file_is_immutable_with_its_type(base_url, path, kind):
    """The runtime's, the modules' and the frame graphs' folders are named by a hash of their files: a
    year in the cache, and a type the browser accepts whatever the machine's mime.types says."""
    status, headers = _isolated(f"{base_url.rstrip('/')}/app/static/{path}", base_url=base_url)
    assert status == 200
    assert headers == [("etag", '"e"'), *ISOLATED, ("cache-control", "public, immutable, max-age=31536000"),
                       ("content-type", kind)]
    _, headers = _isolated(f"{base_url.rstrip('/')}/app/static/{path}", 304, headers=(), base_url=base_url)
    assert headers == [("etag", '"e"'), *ISOLATED, ("cache-control", "public, immutable, max-age=31536000")]


@pytest.mark.parametrize("path, status", [
    (f"/app/static/ort/{HEX}/ort.wasm.min.mjs", 404),                        # no such file: Streamlit's answer
    (f"/app/static/ort/{HEX[:-1]}/ort.wasm.min.mjs", 200),                   # not a hash's folder
    (f"/app/static/ort/{HEX}/sub/ort.wasm.min.mjs", 200),
    (f"/app/static/graphs/{HEX}/sub/frame.onnx", 200),
    (f"/app/static/graphs/{HEX[:-1]}/frame.onnx", 200),
    (f"/app/static/ort/{HEX.upper()}/ort.wasm.min.mjs", 200),
    (f"/app/static/other/{HEX}/live.js", 200),
    (f"/app/static/live/{HEX}/live.js", 200),
    (f"/class/app/static/live/js/{HEX}/live.js", 200),                      # a base path the server has not
    (f"/static/live/js/{HEX}/live.js", 200),
])
def test_nothing_else_is_made_immutable(path, status):
    _, headers = _isolated(path, status)
    assert ("cache-control", "no-cache") in headers and ("content-type", "application/octet-stream") in headers


@pytest.mark.parametrize("path, compressible", [
    (f"/app/static/graphs/{HEX}/frame.onnx", False),           # float32 weights: 7% smaller for a second's CPU
    (f"/app/static/graphs/{HEX}/frame.json", True),
    (f"/app/static/ort/{HEX}/ort-wasm-simd-threaded.wasm", True),
    ("/app/static/graphs/frame.onnx", True),                     # not a hashed folder's: as the browser asked
])
def test_a_frame_graph_is_asked_of_streamlit_uncompressed(path, compressible):
    seen = []

    async def streamlit(scope, receive, send):
        seen.append(scope["headers"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message):
        pass

    asked = [(b"accept-encoding", b"gzip, deflate, br"), (b"user-agent", b"chromium")]
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": asked}
    asyncio.run(CrossOriginIsolated(streamlit, base_url="")(scope, None, send))
    assert seen == [asked if compressible else [(b"user-agent", b"chromium")]]
    assert scope["headers"] == asked                                           # the request itself untouched


def test_a_websocket_goes_through_untouched():
    passed = []

    async def streamlit(scope, receive, send):
        passed.append((scope, send))

    async def send(message):
        pass

    scope = {"type": "websocket", "path": "/_stcore/stream", "headers": []}
    asyncio.run(CrossOriginIsolated(streamlit, base_url="")(scope, None, send))
    assert passed == [(scope, send)]


@pytest.fixture()
def hashed(tmp_path):
    """The app's static folder with a module, a runtime binary and a graph in hashed folders."""
    files = {"live/js/0123456789abcdef/live.js": ("export const y = 2;\n" * 3000).encode(),
             "ort/fedcba9876543210/ort.wasm": b"\x00asm" + bytes(20000),
             "graphs/00112233445566aa/frame.onnx": bytes(range(256)) * 300,
             "graphs/00112233445566bb/frame.onnx": bytes(range(255, -1, -1)) * 300}
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    (tmp_path / "live" / "0123456789abcdef0123456789.bin").write_bytes(b"a payload")
    return tmp_path, files


def test_a_hashed_folders_file_is_read_once_and_sent_from_memory(hashed, monkeypatch):
    import views.serving as serving

    root, files = hashed
    made = []

    class Counted(serving.Entry):
        def __init__(self, path):
            made.append(str(path.relative_to(root)))
            super().__init__(path)

    monkeypatch.setattr(serving, "Entry", Counted)
    app = HashedStatic(None, directory=root)
    for name, data in files.items():
        for _ in range(2):
            status, headers, body, passed = _call({}, "/app/static/" + name, app=app)
            assert status == 200 and not passed
            assert (gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body) == data
        assert made.count(name) == 1, made
    _, headers, body, _ = _call({}, "/app/static/graphs/00112233445566aa/frame.onnx", headers=(), app=app)
    assert "content-encoding" not in headers and body == files["graphs/00112233445566aa/frame.onnx"]
    status, headers, body, _ = _call({}, "/app/static/ort/fedcba9876543210/ort.wasm", app=app)
    assert headers["content-encoding"] == "gzip" and len(body) < len(files["ort/fedcba9876543210/ort.wasm"]) / 4


@pytest.mark.parametrize("path", ["/app/static/live/0123456789abcdef0123456789.bin", "/app/static/ort/short/ort.wasm",
                                  "/app/static/ort/fedcba9876543210/missing.wasm", "/static/js/x.js"])
def test_anything_but_a_hashed_folders_file_goes_to_streamlit(hashed, path):
    assert _call({"directory": hashed[0]}, path, cls=HashedStatic)[3]


def test_the_files_kept_are_bounded_least_recently_sent_first(hashed, monkeypatch):
    import views.serving as serving

    root, files = hashed
    monkeypatch.setattr(serving, "HASHED_KEEP_BYTES", 80_000)
    app = HashedStatic(None, directory=root)

    async def fetch(name):
        async def send(message):
            pass
        scope = {"type": "http", "method": "GET", "path": "/app/static/" + name, "query_string": b"",
                 "headers": [(b"accept-encoding", b"gzip")]}
        await app(scope, None, send)

    async def walk():
        for name in ("ort/fedcba9876543210/ort.wasm", "graphs/00112233445566aa/frame.onnx",
                     "live/js/0123456789abcdef/live.js", "ort/fedcba9876543210/ort.wasm",
                     "graphs/00112233445566bb/frame.onnx"):
            await fetch(name)
    asyncio.run(walk())
    kept = [k for k, e in app._entries.items() if e is not None]        # the first graph went, the oldest sent
    assert kept == ["live/js/0123456789abcdef/live.js", "ort/fedcba9876543210/ort.wasm",
                    "graphs/00112233445566bb/frame.onnx"]


@pytest.mark.parametrize("cls", [HashedStatic, PrecompressedStatic])
def test_first_requests_that_come_together_compress_a_file_once(hashed, monkeypatch, cls):
    """A class opens the page at once: twenty first requests of the runtime wait for one compression."""
    import threading

    import views.serving as serving

    root, files = hashed
    made = []
    slow = threading.Event()

    class Slow(serving.Entry):
        def __init__(self, path):
            made.append(path.name)
            slow.wait(5)                              # every request arrives before the first is read
            super().__init__(path)

    monkeypatch.setattr(serving, "Entry", Slow)
    name = "ort/fedcba9876543210/ort.wasm"
    if cls is PrecompressedStatic:                   # Streamlit's frontend folder: <directory>/static/
        (root / "static" / name).parent.mkdir(parents=True)
        (root / "static" / name).write_bytes(files[name])
    app = cls(None, directory=root)
    path = ("/app/static/" if cls is HashedStatic else "/static/") + name
    bodies = []

    async def fetch():
        sent = []

        async def send(message):
            sent.append(message)
        scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
                 "headers": [(b"accept-encoding", b"gzip")]}
        await app(scope, None, send)
        bodies.append(gzip.decompress(sent[-1]["body"]))

    async def class_of_twenty():
        asyncio.get_running_loop().call_later(0.2, slow.set)
        await asyncio.gather(*(fetch() for _ in range(20)))
    asyncio.run(class_of_twenty())
    assert made == ["ort.wasm"] and len(bodies) == 20 and set(bodies) == {files[name]}
