"""tests/js/fixtures/frame.json, the frames views/live/frame.js must reduce as the server does
(tests/js/frame.test.mjs), is current: its rules are `bam_viz.live.frames.frame_rules()`, its graph
outputs are what explain() gives now, and its expected arrays are what the server's reduction
(`bam_viz.live.frames.make_frame`, `bam_viz.live.payloads`) makes of them now."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

MAKER = Path(__file__).resolve().parent / "js" / "make_frame_fixture.py"
STALE = "tests/js/fixtures/frame.json is stale: run `.venv/bin/python tests/js/make_frame_fixture.py`"
# The tiny model's passes in float32, on this host's kernels against the fixture's host's: probabilities and
# weights in [0, 1] agree to a few ulps of 1 (as tests/test_frame_graph.py's ATOL)
PASS_ATOL = 1e-5
# The reductions of the same float32 numbers: float64 (and float32 for the maps) in NumPy's and torch's
# order, which another host's SIMD may change by an ulp
REDUCTION_RTOL, REDUCTION_ATOL = 1e-6, 1e-9


@pytest.fixture(scope="module")
def maker():
    spec = importlib.util.spec_from_file_location("make_frame_fixture", MAKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def committed(maker):
    return json.loads(maker.FIXTURE.read_text(encoding="utf-8"))


def assert_same(got, want, rtol: float, atol: float, where: str = "") -> None:
    """The same structure, strings and None, and numbers within rtol / atol."""
    assert type(got) is type(want) or {type(got), type(want)} <= {int, float}, f"{where}: {got!r} != {want!r}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], rtol, atol, f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{where}: {len(got)} items, not {len(want)}"
        if want and all(isinstance(v, (int, float)) or v is None for v in want + got):
            g, w = (np.array([math.nan if v is None else v for v in x], dtype=np.float64) for x in (got, want))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=where)
        else:
            for k, (a, b) in enumerate(zip(got, want, strict=True)):
                assert_same(a, b, rtol, atol, f"{where}[{k}]")
    elif isinstance(want, float):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def test_the_fixtures_rules_are_pythons_now(committed):
    """frame.js reads every fact it shares with the server from `frame_rules()`, the test from the fixture."""
    from bam_viz.live.frames import frame_rules

    assert committed["rules"] == json.loads(json.dumps(frame_rules())), STALE


def test_the_fixtures_graph_outputs_are_explains_now(maker, committed):
    fresh = maker.fixture()
    inputs = ("name", "classes", "layers", "heads", "tokens", "window", "n_samples", "stochastic", "softmax_probs")
    try:
        assert {k: v for k, v in fresh.items() if k != "cases"} == {k: v for k, v in committed.items() if k != "cases"}
        assert len(fresh["cases"]) == len(committed["cases"])
        for new, old in zip(fresh["cases"], committed["cases"], strict=True):
            assert_same({k: new[k] for k in inputs}, {k: old[k] for k in inputs}, 0, PASS_ATOL, old["name"])
            assert_same([f and f["outputs"] for f in new["frames"]], [f and f["outputs"] for f in old["frames"]],
                        0, PASS_ATOL, old["name"])
            assert_same([s["softmax"] for s in new["inside"]], [s["softmax"] for s in old["inside"]], 0, PASS_ATOL,
                        old["name"])
    except AssertionError as e:
        raise AssertionError(f"{STALE}\n{e}") from None


def test_the_fixtures_expected_arrays_are_the_servers_reduction_now(maker, committed):
    again = maker.fixture(given=committed)
    try:
        assert_same(again, committed, REDUCTION_RTOL, REDUCTION_ATOL)
    except AssertionError as e:
        raise AssertionError(f"{STALE}\n{e}") from None


def test_make_frame_reduces_as_the_fixture_has_it(maker, committed, tmp_path):
    """The fixture's reduction is the one the server's frames are made by: make_frame (float16 maps) on the
    same explain() gives its numbers, its caption rows included."""
    from bam_viz.live.frames import make_frame
    from tests.tinybert import make_tiny_bert

    name, family, classes, options, n_samples, plan, _ = maker.CASES[0]
    want = committed["cases"][0]["frames"][0]
    bert = make_tiny_bert(tmp_path / "bert", **maker.BERT)
    model = maker.tiny_model(bert, family, classes, options)
    parts = make_frame(model, maker.TEXT, plan[0][1], maker.SEED, want["hyper"], maker.WINDOW, rng="portable")
    stats = np.array([math.nan if v is None else v for v in want["stats"]]).reshape(parts.stats.shape)
    np.testing.assert_allclose(parts.stats, stats, rtol=REDUCTION_RTOL, atol=PASS_ATOL)
    np.testing.assert_allclose(parts.p_samples.ravel(), want["outputs"]["sample_probs"]["data"], atol=PASS_ATOL)
    np.testing.assert_allclose(parts.spread.ravel(), want["spread"], atol=PASS_ATOL)
    assert sorted(parts.maps) == sorted(int(k) for k in want["maps"])
    for layer, maps in parts.maps.items():
        assert maps.dtype == np.float16
        np.testing.assert_allclose(maps.astype(np.float32).ravel(), np.float32(want["maps"][str(layer)]),
                                   rtol=2.0**-10, atol=PASS_ATOL, err_msg=f"layer {layer}")   # float16's rounding
    assert sorted(parts.rows) == sorted(int(k) for k in want["rows"])
    for layer, (row, summary) in parts.rows.items():
        for got, written in ((row, want["rows"][str(layer)]["row_summary"]),
                             (summary, want["rows"][str(layer)]["map_summary"])):
            assert list(got._fields) == list(written), f"layer {layer}"
            for name, a in got._asdict().items():
                if name in ("top", "query", "key"):             # token indices
                    assert a.ravel().tolist() == written[name], f"layer {layer} {name}"
                else:
                    np.testing.assert_allclose(a.ravel(), written[name], rtol=REDUCTION_RTOL, atol=PASS_ATOL,
                                               err_msg=f"layer {layer} {name}")
