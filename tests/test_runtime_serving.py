"""views.runtime: onnxruntime-web as package.json pins it, served by the app from node_modules/ under a folder
named by its hash, or a one-line reason when it is not installed; and in chromium, every page of the app
cross-origin isolated, the runtime's files sent immutable, and an ONNX graph run by the served runtime."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import browser_latency as bl
import numpy as np
import pytest

from views import runtime

ROOT = Path(__file__).resolve().parents[1]
PINNED = json.loads((ROOT / "package.json").read_text())["dependencies"]["onnxruntime-web"]
YEAR = "public, immutable, max-age=31536000"


def _package(folder: Path, version: str = PINNED, files=runtime.FILES) -> Path:
    """A node_modules/onnxruntime-web of the test's own, with `files` in dist/."""
    (folder / "dist").mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": "onnxruntime-web", "version": version}))
    for name in files:
        (folder / "dist" / name).write_bytes(f"{folder.name} {name}".encode())
    return folder


@pytest.mark.parametrize("made, found", [
    (lambda tmp: tmp / "absent", "not installed"),
    (lambda tmp: _package(tmp / "old", version="1.17.0"), "found 1.17.0"),
    (lambda tmp: _package(tmp / "part", files=runtime.FILES[:2]), f"no dist/{runtime.FILES[2]}"),
])
def test_a_runtime_not_installed_as_pinned_says_so_in_one_line(tmp_path, monkeypatch, made, found):
    monkeypatch.setattr(runtime, "PACKAGE", made(tmp_path))
    monkeypatch.setattr(runtime, "FOLDER", tmp_path / "served")
    with pytest.raises(runtime.RuntimeMissing) as raised:
        runtime.runtime_url()
    message = str(raised.value)
    assert "\n" not in message and f"onnxruntime-web {PINNED}" in message and "make install" in message
    assert f"({found})" in message
    assert not (tmp_path / "served").exists()


def test_the_runtime_is_copied_once_to_a_folder_named_by_its_files(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "FOLDER", tmp_path / "served")
    monkeypatch.setattr(runtime, "PACKAGE", _package(tmp_path / "a"))
    url = runtime.runtime_url()
    digest = url.removeprefix("/app/static/ort/").removesuffix("/")
    assert len(digest) == 16 and set(digest) <= set("0123456789abcdef") and url.endswith("/")
    for name in runtime.FILES:
        assert (tmp_path / "served" / digest / name).read_bytes() == (tmp_path / "a" / "dist" / name).read_bytes()
    assert runtime.runtime_url() == url
    monkeypatch.setattr(runtime, "PACKAGE", _package(tmp_path / "b"))           # other bytes: another folder
    assert runtime.runtime_url() != url


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tinybert import make_tiny_bam

    return make_tiny_bam(tmp_path_factory.mktemp("tiny"))


def test_a_graph_is_linked_once_to_a_folder_named_by_its_sha256(tiny_model, tmp_path, monkeypatch):
    from bam_viz.inference import graph

    monkeypatch.setenv(graph.GRAPHS_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(runtime, "GRAPHS", tmp_path / "served")
    url = runtime.graph_url(tiny_model, 3)
    cached, manifest = graph.graph_for(tiny_model, 3)
    assert url == f"/app/static/graphs/{manifest['graph_sha256'][:16]}/"
    served = tmp_path / "served" / url.split("/")[-2]
    assert sorted(p.name for p in served.iterdir()) == sorted(runtime.GRAPH_FILES)
    for name in runtime.GRAPH_FILES:
        assert (served / name).read_bytes() == (cached / name).read_bytes()
        assert (served / name).stat().st_ino == (cached / name).stat().st_ino      # a link: no second copy
    stamp = (cached / "frame.onnx").stat().st_mtime_ns
    assert runtime.graph_url(tiny_model, 3) == url
    assert (cached / "frame.onnx").stat().st_mtime_ns == stamp                     # not exported again
    assert runtime.graph_url(tiny_model, 2) != url                                  # S is the graph's


def test_a_graph_across_file_systems_is_copied(tiny_model, tmp_path, monkeypatch):
    from bam_viz.inference import graph

    monkeypatch.setenv(graph.GRAPHS_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(runtime, "GRAPHS", tmp_path / "served")

    def cross_device(source, target):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(runtime.os, "link", cross_device)
    served = tmp_path / "served" / runtime.graph_url(tiny_model, 3).split("/")[-2]
    cached, _ = graph.graph_for(tiny_model, 3)
    assert (served / "frame.onnx").read_bytes() == (cached / "frame.onnx").read_bytes()
    assert (served / "frame.onnx").stat().st_ino != (cached / "frame.onnx").stat().st_ino


@pytest.mark.parametrize("broken, says", [
    ("cache", "could not be exported"), ("served", "could not be served from"), ("torn", "is not the one its manifest"),
])
def test_a_graph_that_cannot_be_made_or_served_says_so_in_one_line(tiny_model, tmp_path, monkeypatch, broken, says):
    from bam_viz.inference import graph

    blocker = tmp_path / "a file"                         # a folder under a file: unwritable, even for root
    blocker.write_text("")
    monkeypatch.setenv(graph.GRAPHS_ENV, str(blocker / "cache" if broken == "cache" else tmp_path / "cache"))
    monkeypatch.setattr(runtime, "GRAPHS", blocker / "served" if broken == "served" else tmp_path / "served")
    if broken == "torn":                                  # the right size, other bytes: graph_for keeps it
        cached, _ = graph.graph_for(tiny_model, 3)
        onnx = cached / "frame.onnx"
        onnx.write_bytes(bytes(reversed(onnx.read_bytes())))
    with pytest.raises(runtime.GraphUnavailable) as raised:
        runtime.graph_url(tiny_model, 3)
    message = str(raised.value)
    assert "\n" not in message and says in message and message.startswith("The ")
    assert not (tmp_path / "served").exists() or not any((tmp_path / "served").iterdir())


# ---- in chromium, against the real app ---------------------------------------------------------------


@pytest.fixture(scope="module")
def explorer(server, browser):
    """The explorer in a new page, its charts painted; `problems`: what it logged (console errors and
    warnings, uncaught errors, failed requests) from then on; `started`: the URLs of the workers it started."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.problems, page.started = [], []
    page.on("console", lambda m: page.problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: page.problems.append(f"uncaught: {e}"))
    page.on("response", lambda r: page.problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: page.problems.append(f"failed {r.url}"))
    page.on("worker", lambda w: page.started.append(w.url))
    try:
        page.goto(server)
        bl.painted(page, complete=True)
        yield page
    finally:
        page.close()


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()


def _isolating(headers: dict[str, str]) -> bool:
    return (headers.get("cross-origin-opener-policy") == "same-origin"
            and headers.get("cross-origin-embedder-policy") == "require-corp")


@pytest.mark.browser
def test_the_explorer_is_cross_origin_isolated_and_quiet(explorer):
    assert explorer.evaluate("() => [crossOriginIsolated, typeof SharedArrayBuffer]") == [True, "function"]
    assert explorer.problems == []


@pytest.mark.browser
def test_the_page_its_modules_and_the_runtime_are_sent_as_isolation_and_caching_want(server, explorer):
    status, headers, _ = _get(server + "/")
    assert status == 200 and _isolating(headers)
    modules = explorer.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)"
                                ".filter(n => n.includes('/app/static/live/js/'))")
    assert modules, "the explorer's modules were not fetched from their hashed folder"
    status, headers, _ = _get(modules[0])
    assert status == 200 and _isolating(headers) and headers["cache-control"] == YEAR
    assert headers["content-type"].startswith("text/javascript")

    base = server + runtime.runtime_url()
    for name, kind in ((runtime.FILES[2], "application/wasm"), (runtime.ENTRY, "text/javascript")):
        status, headers, body = _get(base + name)
        assert status == 200 and _isolating(headers) and headers["cache-control"] == YEAR, name
        assert headers["content-type"].split(";")[0] == kind, name
        assert body == (runtime.PACKAGE / "dist" / name).read_bytes(), name


def _tiny_model() -> bytes:
    """y = relu(x * w + b), x of shape (2, 3): an ONNX graph made here, checked by onnx."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("w", TensorProto.FLOAT, [3], [0.5, -1.0, 2.0]),
         helper.make_tensor("b", TensorProto.FLOAT, [3], [0.25, 0.0, -1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


RUN = """async ([entry, model, x, threads]) => {
    const ort = await import(entry);
    ort.env.wasm.numThreads = threads;
    const session = await ort.InferenceSession.create(new Uint8Array(model));
    const out = await session.run({x: new ort.Tensor('float32', Float32Array.from(x), [2, 3])});
    return {wasm: typeof ort.env.wasm, threads: ort.env.wasm.numThreads, y: Array.from(out.y.data),
            dims: out.y.dims, cores: navigator.hardwareConcurrency};
}"""


@pytest.mark.browser
def test_the_served_runtime_runs_an_onnx_graph_on_wasm_threads(explorer):
    """Imported in the explorer's page, the runtime makes a session and runs it as onnxruntime does in
    Python; with two threads asked for, it keeps two (it falls back to one in a page that is not
    cross-origin isolated) and starts its workers."""
    import onnxruntime

    model, x = _tiny_model(), [1.0, 2.0, -3.0, -0.5, 0.0, 4.0]
    expected = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": np.array(x, dtype=np.float32).reshape(2, 3)})[0]
    started = time.perf_counter()
    got = explorer.evaluate(RUN, [runtime.runtime_url() + runtime.ENTRY, list(model), x, 2])
    print(f"onnxruntime-web: session and run in {time.perf_counter() - started:.2f} s; threads {got['threads']}, "
          f"hardwareConcurrency {got['cores']}; workers {explorer.started}")
    assert got["wasm"] == "object" and got["dims"] == [2, 3]
    np.testing.assert_allclose(np.array(got["y"]).reshape(2, 3), expected, rtol=1e-6)
    assert got["threads"] == 2
    assert any(runtime.FILES[1] in url for url in explorer.started)
    assert explorer.problems == []
