"""The browser's ONNX runtime: onnxruntime-web's WASM build, pinned in package.json and installed into
node_modules/ by `make install` (npm ci), served by the app itself: a classroom may have no internet.

`runtime_url` copies its ES module loader, the module it imports and their binary once to
static/ort/<hash of them>/ and returns that folder's URL; the loader finds the other two beside itself.
The server sends those files as immutable, and every page cross-origin isolated, which the runtime's
WASM threads need (views.serving.CrossOriginIsolated).

`graph_url` serves what the runtime runs: a model's frame graph (`bam_viz.inference.graph.graph_for`,
exported once into its cache) linked into static/graphs/<its sha256>/, sent as immutable too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import threading
import time
import weakref
from pathlib import Path

from views.components import HASH_CHARS, STATIC, app_path, hashed_copy

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "node_modules" / "onnxruntime-web"
FOLDER = STATIC.parent / "ort"                           # served at <base>/app/static/ort/
ENTRY = "ort.wasm.min.mjs"                               # the WASM-only build; imports the worker module
FILES = (ENTRY, "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
GRAPHS = STATIC.parent / "graphs"                        # served at <base>/app/static/graphs/
GRAPH_FILES = ("frame.onnx", "frame.json")               # the graph and its manifest, as graph_for writes them
# A published graph unused this long goes: an open page fetched its graph when it loaded, and the next
# run of any page that shows that model links it again.
GRAPH_KEEP_S = 24 * 3600.0
_publishing = threading.Lock()
_graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # model -> {S: `frame_graph`'s answer}


class RuntimeMissing(RuntimeError):
    """node_modules/ lacks the runtime package.json pins; the message is one line for the page."""


class GraphUnavailable(RuntimeError):
    """A model's frame graph could not be exported or served; the message is one line for the page."""


def runtime_url() -> str:
    """The URL of the runtime's folder, `<base>/app/static/ort/<hash>/` (`ENTRY` is the module to import),
    its files copied there at the first call. RuntimeMissing: not installed, or not the pinned version."""
    return app_path(f"app/static/ort/{_published(PACKAGE, FOLDER)}/")


@functools.cache
def _published(package: Path, folder: Path) -> str:
    """The folder name of the copied files (an error is not cached: `make install` under a running server)."""
    wanted = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["dependencies"]["onnxruntime-web"]
    try:
        installed = json.loads((package / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        installed = None
    files = [package / "dist" / name for name in FILES]
    missing = [f.name for f in files if not f.is_file()]
    if installed != wanted or missing:
        found = ("not installed" if installed is None else f"found {installed}" if installed != wanted
                 else f"no dist/{missing[0]}")
        raise RuntimeMissing(f"The browser runtime onnxruntime-web {wanted} is missing from node_modules/ "
                             f"({found}): run `make install`.")
    return hashed_copy(files, folder)


def frame_graph(model, n_samples: int) -> dict:
    """What a page that makes its own frames loads (views/live/local.js): {"runtime": the runtime module's
    URL, "graph": the graph file's, "manifest": its frame.json}, or {"problem": one line} where the runtime
    or the graph cannot be had. Kept per model and S while the model lives: the weights are hashed once."""
    known = _graphs.setdefault(model, {})
    if n_samples not in known:
        try:
            url = graph_url(model, n_samples)
            manifest = json.loads((GRAPHS / url.rstrip("/").rsplit("/", 1)[-1] / GRAPH_FILES[1]).read_text("utf-8"))
            known[n_samples] = {"runtime": runtime_url() + ENTRY, "graph": url + manifest["graph"],
                                "manifest": manifest}
        except (RuntimeMissing, GraphUnavailable) as err:
            return {"problem": str(err)}            # not kept: `make install` may come while the server runs
    return known[n_samples]


def graph_url(model, n_samples: int = 32) -> str:
    """The URL of the folder serving `model`'s frame graph at S = `n_samples`,
    `<base>/app/static/graphs/<graph_sha256[:16]>/`, with GRAPH_FILES (the graph is the manifest's
    "graph"). Exported at the first call for these weights (`graph_for`, which hashes the weights at
    every call: a page asks once per model), then hard-linked (else copied) there, never exported again.
    GraphUnavailable: the export failed, or the cache or the static folder cannot be written."""
    from bam_viz.inference.graph import graph_for

    try:
        folder, manifest = graph_for(model, n_samples)
    except Exception as e:           # torch's, onnx's or the file system's: any of them ends the browser's frames
        raise GraphUnavailable(f"The frame graph of {model.name} could not be exported: {_one_line(e)}") from e
    try:
        digest = _linked(folder, manifest["graph_sha256"], GRAPHS)
    except OSError as e:
        raise GraphUnavailable(f"The frame graph of {model.name} could not be served from {GRAPHS}: "
                               f"{_one_line(e)}") from e
    return app_path(f"app/static/graphs/{digest}/")


def _linked(source: Path, sha256: str, root: Path) -> str:
    """Link `source`'s GRAPH_FILES into root/<sha256[:HASH_CHARS]>/ (once; a folder appears whole or not at
    all) and return that folder's name; other graphs' folders unused for GRAPH_KEEP_S go. The graph's
    bytes are checked against `sha256` first: its URL is immutable, so a torn cache must not reach it."""
    digest = sha256[:HASH_CHARS]
    folder = root / digest
    with _publishing:
        if not folder.is_dir():
            if _file_sha256(source / GRAPH_FILES[0]) != sha256:
                raise GraphUnavailable(f"The cached frame graph in {source} is not the one its manifest names: "
                                       "delete that folder to export it again.")
            tmp = root / f".{digest}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.mkdir(parents=True)
            try:
                for name in GRAPH_FILES:
                    _link_or_copy(source / name, tmp / name)
                tmp.rename(folder)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                if not folder.is_dir():               # else another server wrote it first
                    raise
        folder.touch()
        for old in root.iterdir():
            if old != folder and time.time() - old.stat().st_mtime > GRAPH_KEEP_S:
                shutil.rmtree(old, ignore_errors=True)
    return digest


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link costs no space; across file systems (the cache on another disk), a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _one_line(error: BaseException) -> str:
    """The error's first line, else its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
