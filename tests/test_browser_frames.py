"""views/live/frame_worker.js in chromium: a tiny model's frame graph, served by the app
(`views.runtime.graph_url`) and run by onnxruntime-web in the module worker, gives Python onnxruntime's
and `explain(..., rng="portable")`'s numbers, the slider's frame first; a move or a new sentence
changes what comes next; every failure (a graph that 404s or is cut short or corrupt, a sentence too
long, another origin's runtime) is one posted line, never a hang; and a page that is not
cross-origin isolated still gets its frames, on one thread.

The page is one of the app's origin that loads nothing else (bench/frame_browser.open_page), and the
worker is driven by that benchmark's harness. Fails (never skips) when chromium is missing.
"""

from __future__ import annotations

import json
import shutil

import frame_browser as fb
import numpy as np
import pytest

from bam_viz.core import portable_random
from bam_viz.inference.explain import lower_states
from bam_viz.inference.graph import GRAPHS_ENV
from views import runtime

pytestmark = pytest.mark.browser

S, SEED = 3, 2**53 + 7               # a seed past a double's integers: the worker gets it as a BigInt
TEXT = "the film was wonderful but far too long"
ATOL = 2e-6
SHAPES = (0.4, 0.9, 2.0, 4.5, 10.0)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from tinybert import make_tiny_bam

    return make_tiny_bam(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def graph(model, tmp_path_factory):
    """(URL of the served graph's folder, its manifest, the folder it is served from)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(GRAPHS_ENV, str(tmp_path_factory.mktemp("graphs")))
        url = runtime.graph_url(model, S)
    served = runtime.GRAPHS / url.split("/")[-2]
    return url, json.loads((served / "frame.json").read_text()), served


@pytest.fixture(scope="module")
def sentence(model):
    """The sentence's states and the frames' values."""
    return lower_states(model, TEXT).x.numpy(), [{"shape_k": k} for k in SHAPES]


@pytest.fixture
def page(server, browser):
    page = fb.open_page(browser, server)
    yield page
    page.close()


def test_the_graph_is_served_immutable_uncompressed_and_as_bytes(server, graph):
    import urllib.request

    url, manifest, served = graph
    for name, kind in ((manifest["graph"], "application/octet-stream"), ("frame.json", "application/json")):
        asked = urllib.request.Request(server + url + name, headers={"Accept-Encoding": "gzip, br"})
        with urllib.request.urlopen(asked, timeout=60) as r:
            headers, body = {k.lower(): v for k, v in r.headers.items()}, r.read()
        assert headers["cache-control"] == "public, immutable, max-age=31536000", name
        assert headers["content-type"] == kind and headers["cross-origin-embedder-policy"] == "require-corp", name
        if name == manifest["graph"]:
            assert "content-encoding" not in headers and body == (served / name).read_bytes()


def _run(page, graph, *messages, later=(), threads=2, until=None, timeout_s=120.0, **load):
    """The worker's messages: loaded with the graph (`load` overrides the load message's fields), then sent
    `messages`, until sentence `until` (else the last message's) is done or fails."""
    url, manifest, _ = graph
    message = fb.load_message(url, manifest, threads) | load
    run = fb.drive(page, fb.worker_url(), [message, *messages], later=later,
                   until=until if until is not None else messages[-1]["id"], timeout_s=timeout_s)
    seen = [(m["type"], m.get("id"), m.get("index"), m.get("error")) for m in run["got"]]
    assert not run["timedOut"], f"the worker posted no end in {timeout_s} s: {seen}"
    return run["got"]


def _of(got, kind):
    return [m for m in got if m["type"] == kind]


def _pythons(model, graph, states, values):
    """Per value, the frame by Python's onnxruntime on the served graph (the same uniforms)."""
    import onnxruntime

    _, manifest, served = graph
    session = onnxruntime.InferenceSession(str(served / manifest["graph"]), providers=["CPUExecutionProvider"])
    T = states.shape[1]
    noise = {}
    for i, site in enumerate(manifest["noise"]):
        dims = [T if d == "T" else d for d in site["dims"]]
        noise[site["name"]] = portable_random.uniforms(SEED, i, int(np.prod(dims))).reshape(dims)
    out = []
    for v in values:
        feeds = {"states": states, "hyper": np.array([v[n] for n in manifest["hyper"]], np.float32), **noise}
        out.append(dict(zip(manifest["outputs"], session.run(None, feeds), strict=True)))
    return out


def _arrays(frame):
    return {name: np.array(o["data"], dtype=np.float32).reshape(o["dims"]) for name, o in frame["outputs"].items()}


def test_the_browsers_frames_are_pythons_the_sliders_first(page, model, graph, sentence):
    states, values = sentence
    got = _run(page, graph, fb.sentence_message(1, states, values, current=3, seed=SEED, n_samples=S))
    assert _of(got, "error") == []
    loaded = _of(got, "loaded")[0]
    assert loaded["threads"] == 2 and loaded["note"] == "" and loaded["bytes"] == graph[1]["graph_bytes"]
    frames = _of(got, "frame")
    assert [f["index"] for f in frames] == [3, 4, 2, 1, 0] and all(f["id"] == 1 for f in frames)
    assert got[-1] == {"type": "done", "id": 1, "at": got[-1]["at"]}
    by_onnxruntime = _pythons(model, graph, states, values)
    for f in frames:
        v, arrays = values[f["index"]], _arrays(f)
        assert set(arrays) == set(graph[1]["outputs"])
        for name, want in by_onnxruntime[f["index"]].items():
            np.testing.assert_allclose(arrays[name], want, rtol=0, atol=ATOL, err_msg=f"{name} at {v}")
        r = model.explain(TEXT, n_samples=S, seed=SEED, rng="portable", cache=False, **v)
        np.testing.assert_allclose(arrays["sample_probs"], r.sample_probs.numpy(), rtol=0, atol=ATOL)
        for i in graph[1]["random_layers"]:
            np.testing.assert_allclose(arrays[f"weights_{i}"], r.sample_weights[:, i].numpy(), rtol=0, atol=ATOL)
    print(f"graph {loaded['bytes']} bytes: fetched in {loaded['fetchMs']:.0f} ms, session in "
          f"{loaded['sessionMs']:.0f} ms; frames {[round(f['ms'], 1) for f in frames]} ms")


def test_a_move_before_the_first_frame_reorders_them(page, graph, sentence):
    states, values = sentence
    moved = {"type": "current", "id": 7, "current": 1}
    got = _run(page, graph, fb.sentence_message(7, states, values, current=3, seed=SEED, n_samples=S), moved,
               until=7)
    assert [f["index"] for f in _of(got, "frame")] == [1, 0, 2, 3, 4]              # moved left: left first
    other = {"type": "current", "id": 6, "current": 4}                             # another sentence's: ignored
    got = _run(page, graph, fb.sentence_message(7, states, values, current=3, seed=SEED, n_samples=S), other,
               until=7)
    assert [f["index"] for f in _of(got, "frame")] == [3, 4, 2, 1, 0]


def test_a_new_sentence_between_frames_gives_up_the_last(page, graph, sentence):
    """Sent when the first sentence's first frame arrives: at most the frame being made then follows it."""
    states, values = sentence
    many = values * 4
    first = fb.sentence_message("a", states, many, current=0, seed=SEED, n_samples=S)
    second = fb.sentence_message("b", states[:, :4], values, current=2, seed=SEED + 1, n_samples=S)
    got = _run(page, graph, first, later=[second], until="b")
    assert _of(got, "error") == []
    ids = [f["id"] for f in _of(got, "frame")]
    assert 1 <= ids.count("a") <= 2 and ids[ids.count("a"):] == ["b"] * len(values)
    assert [m["id"] for m in _of(got, "done")] == ["b"]
    assert [f["index"] for f in _of(got, "frame") if f["id"] == "b"] == [2, 3, 1, 4, 0]


@pytest.fixture
def broken(graph):
    """A folder of the app's static graphs for the test's own bytes; removed after."""
    folder = runtime.GRAPHS / "test-broken"
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _error(got) -> str:
    errors = _of(got, "error")
    assert len(errors) == 1 and _of(got, "frame") == [], got
    assert "\n" not in errors[0]["error"]
    print(f"the worker: {errors[0]['error']}")
    return errors[0]["error"]


def test_a_graph_that_is_missing_cut_short_or_corrupt_is_one_line(page, graph, broken, sentence):
    url, manifest, served = graph
    states, values = sentence
    words = fb.sentence_message(1, states, values, seed=SEED, n_samples=S)
    data = (served / manifest["graph"]).read_bytes()
    (broken / "cut.onnx").write_bytes(data[: len(data) // 2])
    (broken / "corrupt.onnx").write_bytes(bytes(reversed(data)))
    base = "/app/static/graphs/test-broken/"
    error = _error(_run(page, graph, words, graphUrl=base + "absent.onnx"))
    assert error.startswith("the frame graph could not be fetched from http") and error.endswith("404 Not Found")
    error = _error(_run(page, graph, words, graphUrl=base + "cut.onnx"))
    assert f"is {len(data) // 2} bytes, not the {len(data)} of its manifest" in error
    error = _error(_run(page, graph, words, graphUrl=base + "corrupt.onnx"))
    assert error.startswith("onnxruntime-web cannot load the frame graph at http")


def test_a_sentence_that_does_not_fit_is_one_line_and_the_next_one_runs(page, graph, sentence):
    _, manifest, _ = graph
    states, values = sentence
    T = 3400                                   # the tiny graph's noise: 48 T^2 bytes, 529 MiB
    long = {**fb.sentence_message(1, states, values, seed=SEED, n_samples=S), "T": T, "states": T * manifest["hidden"]}
    got = _run(page, graph, long, fb.sentence_message(2, states, values, seed=SEED, n_samples=S))
    errors = _of(got, "error")
    assert [(e["id"], "\n" in e["error"]) for e in errors] == [(1, False)]
    assert errors[0]["error"].startswith("a sentence of 3400 tokens is too long for the browser")
    assert [f["id"] for f in _of(got, "frame")] == [2] * len(values)
    wrong = fb.sentence_message(3, states, values, seed=SEED, n_samples=S + 1)
    assert _error(_run(page, graph, wrong)) == f"the graph draws {S} samples a frame, not {S + 1}"


def test_a_runtime_of_another_origin_or_no_load_is_one_line(page, graph, sentence):
    states, values = sentence
    words = fb.sentence_message(1, states, values, seed=SEED, n_samples=S)
    error = _error(_run(page, graph, words, runtimeUrl="http://example.org/ort.wasm.min.mjs"))
    assert error == ("the frame worker failed: the runtime's URL http://example.org/ort.wasm.min.mjs is not of this "
                     "page's origin")
    run = fb.drive(page, fb.worker_url(), [words], until=1, timeout_s=60)
    assert _error(run["got"]) == 'no frame graph: send "load" before a sentence'
    error = _error(_run(page, graph, words, runtimeUrl=fb.runtime_entry().replace("ort.wasm", "ort.absent")))
    assert error.startswith("the browser runtime could not be loaded from http")


def test_a_page_not_cross_origin_isolated_gets_its_frames_on_one_thread(server, browser, model, graph, sentence):
    page = fb.open_page(browser, server, isolated=False)
    try:
        assert page.evaluate("crossOriginIsolated") is False
        states, values = sentence
        got = _run(page, graph, fb.sentence_message(1, states, values[:2], seed=SEED, n_samples=S), threads=2)
    finally:
        page.close()
    loaded = _of(got, "loaded")[0]
    assert loaded["threads"] == 1 and "not 2: the page is not cross-origin isolated" in loaded["note"]
    frames = _of(got, "frame")
    assert [f["index"] for f in frames] == [0, 1]
    for f, want in zip(frames, _pythons(model, graph, states, values[:2]), strict=True):
        for name, w in want.items():
            np.testing.assert_allclose(_arrays(f)[name], w, rtol=0, atol=ATOL, err_msg=name)


def test_a_sentence_with_reduce_gets_make_frames_frames_and_a_bad_rule_is_one_line(page, model, graph, sentence):
    """With `reduce` (what local.js sends), the worker posts each frame reduced, never its outputs: the
    page's main thread only draws. Its stats and samples are make_frame's for the same noise."""
    from bam_viz.live.frames import make_frame
    from bam_viz.live.grid import LiveGrid

    states, values = sentence
    here = LiveGrid(model, TEXT, S, SEED).browser_frames()
    reduce = fb.reduce_options(here)
    got = _run(page, graph, fb.sentence_message(1, states, values[:2], seed=SEED, n_samples=S, reduce=reduce))
    frames = _of(got, "frame")
    assert [f["index"] for f in frames] == [0, 1] and all("outputs" not in f for f in frames)
    assert all(f["reduceMs"] >= 0 for f in frames)
    for f in frames:
        want = make_frame(model, TEXT, S, SEED, values[f["index"]], here["window"], rng="portable")
        np.testing.assert_allclose(np.array(f["frame"]["stats"], float).reshape(want.stats.shape), want.stats,
                                   rtol=1e-5, atol=ATOL)
        np.testing.assert_allclose(f["frame"]["pSamples"], want.p_samples.ravel(), rtol=0, atol=ATOL)
        assert [int(k) for k in f["frame"]["layers"]] == sorted(want.maps)
    bad = fb.sentence_message(2, states, values[:2], seed=SEED, n_samples=S, reduce={**reduce, "rules": {}})
    error = _error(_run(page, graph, bad))
    assert error.startswith("frame 0 could not be read: the frame rules lack stats")
