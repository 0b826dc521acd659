"""The benchmark's plumbing (never its timings: this machine is shared and noisy)."""

import argparse

import pytest

from bam_viz.bench import library as bench


def test_interleaved_timing_takes_turns_and_reports_every_function():
    calls = []
    fns = {name: (lambda n=name: calls.append(n)) for name in ("a", "b", "c")}
    medians = bench._interleaved_medians_ms(fns, repeats=3)
    assert calls == ["a", "b", "c"] + ["a", "b", "c"] * 3          # warm-up, then turns
    assert set(medians) == {"a", "b", "c"} and all(v >= 0 for v in medians.values())


def test_run_bench_reports_consistent_figures(tmp_path):
    args = argparse.Namespace(model="bam-wc", samples=4, repeats=1, tokens=12, json=str(tmp_path / "b.json"))
    r = bench.run_bench(args)
    assert r["tokens"] == 12 and r["n_samples"] == 4 and r["leave_one_out_pass_ms"] > 0
    assert r["speedup_batched_vs_looped"] == pytest.approx(r["looped_passes_ms"] / r["batched_pass_ms"], abs=0.01)
    assert r["speedup_end_to_end"] == pytest.approx(r["looped_from_ids_ms"] / r["batched_from_ids_ms"], abs=0.01)
    assert 0 < r["grid_first_frame_ms"] < r["grid_complete_ms"] and r["grid_values"] == 46
    assert r["grid_prior_values"] == 33 and r["summary_bytes"] > 0 and r["inside_bytes"] > r["summary_bytes"]
    assert (tmp_path / "b.json").exists()


def test_the_browser_benchmarks_ask_what_they_claim():
    """bench/soak.py's URLs are long (past the models' 128 tokens) and distinct, and bench/load.py's
    twenty sentences are distinct with distinct footer fingerprints: otherwise a cache would answer
    the soak, and cross-talk between students could not be told apart."""
    import load
    import soak

    import bam_viz

    tokenizer = bam_viz.load("softmax").tokenizer
    texts = [soak.long_sentence(i) for i in range(30)]
    assert len(set(texts)) == 30 and all(tokenizer.length(t) > 128 for t in texts)
    assert len({soak.url_for("http://127.0.0.1:1", i, "bam-wc") for i in range(30)}) == 30
    sentences = [load.sentence(j) for j in range(20)]
    assert len(set(sentences)) == 20 and len({load.tag(s) for s in sentences}) == 20
    assert all(10 < tokenizer.length(s) < 40 for s in sentences)


def test_the_class_benchmark_counts_busy_seconds_of_the_whole_machine(monkeypatch):
    """bench/load.py's `machine_busy`: the busy cores of a second, from /proc/stat's counters, and the
    summary's share of seconds with every core busy."""
    import asyncio
    import os

    import load

    cores = os.cpu_count() or 1
    summary = load.busy_summary([0.5 * cores, cores, 0.97 * cores, 0.1 * cores])
    assert summary["seconds"] == 4 and summary["saturated_share"] == 0.5
    assert summary["median"] == 0.97 * cores and summary["p90"] == cores
    assert load.busy_summary([]) == {}

    async def two_seconds():
        task = asyncio.create_task(load.machine_busy())
        await asyncio.sleep(2.3)
        task.cancel()

    asyncio.run(two_seconds())
    assert len(load.BUSY) == 2 and all(0 <= b <= cores for b in load.BUSY)


def test_the_class_benchmark_reports_the_servers_memory_against_the_soaks_bound():
    """bench/load.py's `memory`: the peak over every sample of the run (not the last one), judged
    against bench/soak.py's bound, and sampled from a live process as the soak samples the server."""
    import os
    import time

    import load
    import soak

    bound = soak.GOAL_PEAK_GB * 1024
    summary = load.memory_summary([(0.0, "start", 900.0), (0.5, "start", bound + 1), (1.0, "start", 1200.0)])
    assert summary == {"peak_mb": bound + 1, "at_end_mb": 1200.0, "samples": 3, "under_bound": False}
    assert load.memory_summary([(0.0, "start", bound)])["under_bound"] is True
    assert load.memory_summary([]) == {}

    sampler = soak.RssSampler(os.getpid(), every=0.05)
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    rss = soak.status_kb(os.getpid()) / 1024
    assert len(sampler.samples) >= 3 and all(0.5 * rss < r < 2 * rss for _, _, r in sampler.samples)
