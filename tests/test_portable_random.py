"""bam_viz.core.portable_random: uniform in (0, 1), uncorrelated along a stream and across draws,
addressable from any offset, and the numbers tests/js/fixtures/random.json holds for its JavaScript
twin (views/live/random.js, checked by tests/js/random.test.mjs)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from bam_viz.core.portable_random import mix32, stream_key, uniforms

N = 1_000_000
MAKER = Path(__file__).resolve().parent / "js" / "make_random_fixture.py"


def _maker():
    spec = importlib.util.spec_from_file_location("make_random_fixture", MAKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a.astype(np.float64), b.astype(np.float64))[0, 1])


@pytest.mark.parametrize("seed", [0, 12345, 2**63 - 1])
def test_float32_inside_the_open_interval_and_the_same_each_time(seed):
    u = uniforms(seed, 3, N)
    assert u.dtype == np.float32 and u.shape == (N,)
    assert 0.0 < u.min() and u.max() < 1.0
    np.testing.assert_array_equal(u, uniforms(seed, 3, N))


def test_the_largest_number_it_can_make_is_below_one():
    # element 1464559 of (seed 0, site 0) hashes to 0xffffffbf: its top 23 bits are all ones
    key = np.uint32(stream_key(0, 0))
    n = np.array([1464559], dtype=np.uint32)
    assert int(mix32(mix32(n ^ key) + key)[0]) >> 9 == 2**23 - 1
    assert uniforms(0, 0, 1, start=1464559)[0] == np.float32(1 - 2.0**-24)


@pytest.mark.parametrize("seed", [0, 2**32 + 7, 2**63 - 1])
def test_mean_and_variance_are_the_uniform_distributions(seed):
    u = uniforms(seed, 0, N).astype(np.float64)
    # SE of the mean: sqrt(1/12 / N); of the sample variance: sqrt((E(u - 1/2)^4 - 1/12^2) / N), 1/80 - 1/144 = 1/180
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 4 * np.sqrt(1 / 180 / N)


@pytest.mark.parametrize("seed", [0, 1, 2**53 - 1])
def test_neighbours_along_a_stream_are_uncorrelated(seed):
    u = uniforms(seed, 2, N)
    assert abs(_corr(u[:-1], u[1:])) < 4 / np.sqrt(N)
    assert abs(_corr(u[:-2], u[2:])) < 4 / np.sqrt(N)


@pytest.mark.parametrize(("a", "b"), [((0, 0), (0, 1)), ((5, 6), (5, 7)), ((1, 0), (2, 0)), ((7, 0), (2**32 + 7, 0)),
                                      ((2**63 - 1, 0), (2**63 - 2, 0))])
def test_draws_of_neighbouring_sites_and_seeds_are_uncorrelated(a, b):
    (seed_a, site_a), (seed_b, site_b) = a, b
    assert stream_key(seed_a, site_a) != stream_key(seed_b, site_b)
    assert abs(_corr(uniforms(seed_a, site_a, N), uniforms(seed_b, site_b, N))) < 4 / np.sqrt(N)


@pytest.mark.parametrize("start", [1, 999, 2**20 + 3])
def test_a_stream_read_from_an_offset_is_the_same_stream(start):
    whole = uniforms(2**32 + 7, 4, start + 1000)
    np.testing.assert_array_equal(uniforms(2**32 + 7, 4, 1000, start=start), whole[start:])
    np.testing.assert_array_equal(uniforms(2**32 + 7, 4, 0, start=start), whole[:0])


def test_the_last_numbers_of_a_stream_are_its_own():
    tail = uniforms(9, 1, 4, start=2**32 - 4)
    assert tail.shape == (4,)
    assert not np.array_equal(tail, uniforms(9, 1, 4))


def test_numbers_past_the_end_of_a_stream_are_refused():
    with pytest.raises(ValueError):
        uniforms(9, 1, 5, start=2**32 - 4)


def test_a_negative_start_is_refused():
    with pytest.raises(ValueError):
        uniforms(9, 1, 5, start=-1)


def test_the_javascripts_fixture_is_current():
    maker = _maker()
    assert maker.FIXTURE.read_text(encoding="utf-8") == maker.text(), \
        "tests/js/fixtures/random.json is stale: run `.venv/bin/python tests/js/make_random_fixture.py`"
    cases = json.loads(maker.text())["cases"]
    assert {c["seed"] for c in cases} >= {0, 1, 12345, 2**32 + 7, 2**53 - 1, str(2**63 - 1)}
    assert any(c["start"] > 0 for c in cases)
