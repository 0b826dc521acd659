"""The benchmark's plumbing (never its timings: this machine is shared and noisy)."""

import argparse

import pytest

from bam_viz import bench


def test_interleaved_timing_takes_turns_and_reports_every_function():
    calls = []
    fns = {name: (lambda n=name: calls.append(n)) for name in ("a", "b", "c")}
    medians = bench._interleaved_medians_ms(fns, repeats=3)
    assert calls == ["a", "b", "c"] + ["a", "b", "c"] * 3          # warm-up, then turns
    assert set(medians) == {"a", "b", "c"} and all(v >= 0 for v in medians.values())


def test_run_bench_reports_consistent_figures(tmp_path):
    args = argparse.Namespace(model="bam-wc", samples=4, repeats=1, tokens=12, json=str(tmp_path / "b.json"))
    r = bench.run_bench(args)
    assert r["tokens"] == 12 and r["n_samples"] == 4
    assert r["speedup_batched_vs_looped"] == pytest.approx(r["looped_passes_ms"] / r["batched_pass_ms"], abs=0.01)
    assert r["speedup_end_to_end"] == pytest.approx(r["looped_from_ids_ms"] / r["batched_from_ids_ms"], abs=0.01)
    assert 0 < r["grid_first_frame_ms"] < r["grid_complete_ms"] and r["grid_values"] == 46
    assert r["grid_prior_values"] == 33 and r["summary_bytes"] > 0 and r["inside_bytes"] > r["summary_bytes"]
    assert (tmp_path / "b.json").exists()
