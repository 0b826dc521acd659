"""The live explorer's browser side: one Streamlit custom component (v2, in the page, no iframe),
mounted three times, whose JavaScript (the ES modules in `views/live/`, entry point `live.js`)
draws on canvases.

  sliders   the attention hyperparameter sliders (sidebar): a move repaints the charts in the
            browser; a release asks the live route for the charts at the new values
            (`views.live_route`) and sends the values back once the sliders rest (Session State,
            then the URL).
  summary   headline estimates with their errors, the sweep, the prediction (`bam_viz.live.grid.summary_payload`)
  inside    prior vs posterior, density, maps, layer x head grids (`bam_viz.live.grid.inside_payload`)

Every value of the sliders is in the bytes sent, so a slider move never waits for the server.
The summary's bytes (~12 kB) go in the element itself. The inside payload (~1 MB at 24 tokens) goes
to a file under Streamlit's static serving (`server.enableStaticServing`; sent gzipped by
`views.serving.ServedPayloads`), named by its hash, and the element holds its URL and the few things
a rerun changes (captions, colour mode): a rerun that moves no more than the sliders then sends
kilobytes, and the page fetches the arrays only when they change. The files are kept for KEEP_S
after their last use, at most KEEP_FILES of them once they are FRESH_S old: a class of twenty
publishes hundreds in a minute, and a file pruned before the page that was sent its URL fetched it
had left that page on its last payload.

The modules are served the same way. Streamlit runs a component's `js` as one module at a blob:
URL, against which no relative import resolves (and a component's own files are served only for an
installed package's). So the `js` given is a loader that imports `live.js` from static/live/js/,
where `_modules` copies views/live/*.js into a folder named by their hash: their relative imports
then resolve there, and a browser never keeps a stale module under a URL, since new code has a
new folder.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path

import streamlit as st

HERE = Path(__file__).with_name("live")
STATIC = Path(__file__).resolve().parents[1] / "static" / "live"     # served at /app/static/live/
KEEP_S, KEEP_FILES = 600.0, 256
FRESH_S = 60.0                 # never pruned younger: a page fetches a payload seconds after its run
PAYLOAD_GZIP_LEVEL = 1         # 7-8 ms for a 0.8 MB payload, to a sixth of it (level 6: 11-12 ms, 2% smaller)
PRUNE_S = 5.0                  # the least time between two prunings of the served files
_pruned = [float("-inf")]      # when the served files were last pruned (time.monotonic)
PAYLOAD_NAME = re.compile(r"[0-9a-f]{24}\.bin")       # `publish`'s names: the payload's hash
HASH_CHARS = 16                # `hashed_copy`'s folder names
SLIDERS_KEY, SUMMARY_KEY, INSIDE_KEY = "live_sliders", "live_summary", "live_inside"
_lock = threading.Lock()


@st.cache_resource(show_spinner=False)
def _component():
    return st.components.v2.component(
        "bamviz_live", html='<div class="bamviz-host"></div>',
        css=(HERE / "live.css").read_text(encoding="utf-8"), js=_loader(_modules()), isolate_styles=False)


def _loader(entry: str) -> str:
    """The component's `js`: a module whose default export is that of the module at URL `entry`
    (a top-level await: Streamlit awaits the import, then calls the export on every data change)."""
    return ("// bam-viz live component: its modules are served from static/live/js/ (views/components.py)\n"
            f"export default (await import(new URL({json.dumps(entry)}, location.href).href)).default;\n")


def _modules() -> str:
    """Copy views/live/*.js to static/live/js/<hash of them>/ (once) and return the URL of live.js there."""
    return _served(f"js/{hashed_copy(sorted(HERE.glob('*.js')), STATIC / 'js')}/live.js")


def hashed_copy(files: list[Path], root: Path) -> str:
    """Copy `files` to root/<hash of their names and bytes>/ (once) and return that folder's name, whose
    files never change: the server sends them as immutable (views.serving.CrossOriginIsolated). Other
    versions' folders unused for KEEP_S go."""
    hashed = hashlib.sha256()
    for f in files:
        hashed.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    digest = hashed.hexdigest()[:HASH_CHARS]
    folder = root / digest
    with _lock:
        if not folder.is_dir():
            tmp = root / f".{digest}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.mkdir(parents=True)
            for f in files:
                shutil.copyfile(f, tmp / f.name)
            try:
                tmp.rename(folder)                    # never half a folder at the URL
            except OSError:                           # another server wrote it first
                shutil.rmtree(tmp, ignore_errors=True)
        folder.touch()
        for old in root.iterdir():
            if old != folder and time.time() - old.stat().st_mtime > KEEP_S:
                shutil.rmtree(old, ignore_errors=True)
    return digest


def sliders(data: dict, on_change) -> None:
    """The sidebar's sliders; `on_change` runs (before the rerun) when the browser sends new values."""
    _component()(data=data, key=SLIDERS_KEY, on_hyper_change=on_change)


def charts(payload: bytes, key: str, on_frame=None) -> None:
    """Mount a chart instance with its payload in the element. The summary's page may send a "poll" state
    while the payload's header asks for one (`poll.ms`) and the live route cannot answer it, which reruns
    the fragment it is in; a page that makes its frames sends its "frame" instead (`views.page_frames`),
    and `on_frame` runs before that rerun."""
    if on_frame is not None:
        _component()(data=payload, key=key, on_frame_change=on_frame)
    else:
        _component()(data=payload, key=key, on_poll_change=_polled)


def _polled() -> None:
    """A poll's callback: nothing to do, the rerun it brings is the point."""


def charts_by_url(payload: bytes, key: str, meta: dict) -> None:
    """Mount a chart instance whose payload the page fetches from a served file; `meta` overrides
    the payload header's fields (captions, presentation, relative colours) without a new file."""
    _component()(data={"kind": "inside", "url": publish(payload), "meta": meta}, key=key)


def publish(payload: bytes) -> str:
    """Write `payload` under static/live/ by its hash (once) and return the URL it is served at."""
    name = hashlib.sha256(payload).hexdigest()[:24] + ".bin"       # PAYLOAD_NAME
    path = STATIC / name
    with _lock:
        STATIC.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            _write(path, payload)
            _prune()
        else:
            path.touch()
    return _served(name)


def _write(path: Path, body: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(body)
    tmp.replace(path)                                     # never half a file at the URL


def packed(path: Path) -> Path:
    """The gzipped copy of a published payload."""
    return path.with_name(path.name + ".gz")


def packed_bytes(path: Path) -> bytes:
    """The published payload at `path` gzipped: its copy on disk, written at the first call (a payload's
    first fetch, in a thread of `views.serving.ServedPayloads`: never in the run that published it).
    A payload is a sixth of its size gzipped (the frames not made yet are NaN). OSError: not published,
    or pruned."""
    gz = packed(path)
    try:
        return gz.read_bytes()
    except FileNotFoundError:
        body = gzip.compress(path.read_bytes(), PAYLOAD_GZIP_LEVEL, mtime=0)
        _write(gz, body)                                  # two first fetches at once: equal bytes, either wins
        return body


def _served(name: str) -> str:
    """The URL of static/live/`name` (Streamlit's static serving, under the server's base path)."""
    return app_path(f"app/static/live/{name}")


def app_path(path: str, base_url: str | None = None) -> str:
    """`path` under the server's base path (`base_url`, else `server.baseUrlPath`)."""
    if base_url is None:
        from streamlit import config

        base_url = config.get_option("server.baseUrlPath") or ""
    base = base_url.strip("/")
    return f"/{base + '/' if base else ''}{path}"


def _prune() -> None:
    """Under `_lock`, at most every PRUNE_S (a page's poll may publish a file; listing them all each
    time cost a class of twenty 8% of the server's runs)."""
    now = time.monotonic()
    if now - _pruned[0] < PRUNE_S:
        return
    _pruned[0] = now
    files = sorted(STATIC.glob("*.bin"), key=lambda f: f.stat().st_mtime, reverse=True)
    now = time.time()
    for i, f in enumerate(files):
        age = now - f.stat().st_mtime
        if age > KEEP_S or (i >= KEEP_FILES and age > FRESH_S):
            f.unlink(missing_ok=True)
            packed(f).unlink(missing_ok=True)


def served_file(url: str) -> Path:
    """The file behind a URL from `publish` (tests read payloads through it)."""
    return STATIC / url.rsplit("/", 1)[-1]


def sent_hyper(session_state) -> dict[str, float]:
    """The slider values the browser last sent ({} before any)."""
    state = session_state.get(SLIDERS_KEY) or {}
    hyper = state.get("hyper") if isinstance(state, dict) else None
    return {str(k): v for k, v in hyper.items()} if isinstance(hyper, dict) else {}
