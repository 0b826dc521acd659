"""`python -m bam_viz bench`: explain() latency, what batching the samples buys, what a new
sentence costs the live explorer (its first frame, then every slider value), and token attribution
(`attribute_ms`: Integrated Gradients of ATTRIBUTE_SAMPLES samples and the mean field at
ATTRIBUTE_STEPS nodes, exactly that many: the speed target is 2 s for bam-wc at 24 tokens), in one run.

Medians over repeated runs on this machine, all measured in the same process so that ratios
compare like with like. A benchmark, not a test: shared machines are noisy.

Two speed-ups of batching are reported. `speedup_batched_vs_looped` is the strict one: from the
cached lower layers, one S-sample pass against S single-sample passes, so it measures batching
alone. `speedup_end_to_end` starts from token ids: the lower layers once plus the batched pass,
against S complete single-sample forward passes, what S calls of a one-sample model would cost.

`python -m bam_viz bench --scoring` measures corpus scoring instead (`run_scoring_bench`).
"""

from __future__ import annotations

import platform
import statistics
import time

import torch

ATTRIBUTE_SAMPLES, ATTRIBUTE_STEPS = 8, 32
SENTENCE = ("The acting is superb and the story moves quickly, yet the ending feels rushed and "
            "strangely hollow.")


def _median_ms(fn, repeats: int) -> float:
    return _interleaved_medians_ms({"fn": fn}, repeats)["fn"]


def _interleaved_medians_ms(fns: dict, repeats: int) -> dict:
    """Median ms of each function, timed in turns (a, b, c, a, b, c, ...) so that a burst of load
    on this shared machine hits every one of them alike and their ratios stay fair."""
    for fn in fns.values():
        fn()  # warm-up
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def sentence_of_length(model, n_tokens: int) -> str:
    """A natural sentence cut to exactly n_tokens word pieces (with [CLS] and [SEP])."""
    words = (SENTENCE + " ") * 8
    words = words.split()
    for i in range(1, len(words) + 1):
        text = " ".join(words[:i])
        if len(model.tokenize(text)) >= n_tokens:
            return text
    return SENTENCE


def run_scoring_bench(args) -> dict:
    """Sentences per second of corpus scoring (bam_viz.evaluation.score.scorer) on the same movies test sentences: the
    local engine, then Ray Data with 1 and 2 workers, each a median over `scoring_repeats` runs in
    this one process, one torch thread a process (`score.one_thread`, as scoring always runs).

    The local engine gets the model already loaded (its load is timed apart);
    `local_batched32_sent_per_s` times the design it does not take, padded batches of 32. Ray's
    start-up is reported apart from its throughput: `ray_init_s` starts the local cluster once; every
    Ray run then starts its actors, which import torch and load the model, so
    `ray_{w}w_first_batch_s` is the wait for the first RAY_BATCH rows and `ray_{w}w_steady_sent_per_s`
    the rate after them, beside the end-to-end `ray_{w}w_sent_per_s`. `ray_equals_local` compares
    every row of every Ray run with the local engine's, exactly.
    """
    import os

    from bam_viz import zoo
    from bam_viz.evaluation.score import scorer as score
    from bam_viz.evaluation.score.ray_engine import RAY_BATCH, start_ray

    inputs = score.corpus_inputs(["movies"], "test").iloc[: args.sentences]
    n, S, repeats = len(inputs), args.samples, max(1, args.scoring_repeats)
    t0 = time.perf_counter()
    model = zoo.load_model(args.model)
    figures = {"local_load_s": time.perf_counter() - t0}
    score.score_inputs(inputs.iloc[:4], [model], n_samples=S)                       # warm-up
    local_s, reference = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        reference = score.score_inputs(inputs, [model], n_samples=S)
        local_s.append(time.perf_counter() - t0)
    figures["local_sent_per_s"] = n / statistics.median(local_s)
    # The design not taken: padded batches of 32 with one generator a batch (a sentence's draws would
    # then depend on its batch), timed on the same sentences for comparison.
    texts, batched_s = list(inputs["text"]), []
    with score.one_thread():
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in range(0, n, 32):
                model.predict_samples(texts[i : i + 32], n_samples=S, seed=i)
                model.predict_softmax(texts[i : i + 32])
            batched_s.append(time.perf_counter() - t0)
    figures["local_batched32_sent_per_s"] = n / statistics.median(batched_s)

    t0 = time.perf_counter()
    started = start_ray(None, 2)
    figures["ray_init_s"] = time.perf_counter() - t0
    equal = True
    try:
        for workers in (1, 2):
            walls, firsts, steady = [], [], []
            for _ in range(repeats):
                stamps = []
                t0 = time.perf_counter()

                def stamp(done, total, t0=t0, stamps=stamps):
                    stamps.append((time.perf_counter() - t0, done))

                rows = score.score_inputs(inputs, [args.model], n_samples=S, progress=stamp, engine="ray",
                                          num_workers=workers)
                walls.append(time.perf_counter() - t0)
                equal &= rows.equals(reference)
                (first_t, first_n), (last_t, _) = stamps[0], stamps[-1]
                firsts.append(first_t)
                steady.append((n - first_n) / (last_t - first_t) if last_t > first_t else float("nan"))
            figures |= {f"ray_{workers}w_sent_per_s": n / statistics.median(walls),
                        f"ray_{workers}w_first_batch_s": statistics.median(firsts),
                        f"ray_{workers}w_steady_sent_per_s": statistics.median(steady)}
    finally:
        if started:
            import ray

            ray.shutdown()
    return {"model": args.model, "n_samples": S, "sentences": n, "corpus": "movies test (first sentences, ambiguous "
            "ones included)", "repeats": repeats, "torch_threads": score.SCORING_THREADS,
            "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(),
            "ray_batch": RAY_BATCH, "ray_equals_local": bool(equal),
            **{k: round(v, 2) for k, v in figures.items()}}


def run_bench(args) -> dict:
    import json

    if getattr(args, "scoring", False) or getattr(args, "theory", False):
        if getattr(args, "theory", False):
            from bam_viz.bench.theory import run_theory_bench

            result = run_theory_bench(args.repeats)
        else:
            result = run_scoring_bench(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        return result

    from bam_viz import zoo
    from bam_viz.core.device import tune_allocator
    from bam_viz.core.grids import nearest_index
    from bam_viz.inference import gaps
    from bam_viz.inference.attribution import attribute
    from bam_viz.live import grid as live
    from bam_viz.nn.attention import Mode, Trace

    model = zoo.load_model(args.model)
    args.tokens = args.tokens or 24
    S = args.samples
    text = sentence_of_length(model, args.tokens)
    tokens = model.tokenize(text)

    moves = iter(range(10**9))

    def explain_warm():  # a shape_k move: a new value each time; tokens and lower layers cached
        model.explain(text, n_samples=S, seed=1, shape_k=7.0 + 1e-3 * next(moves))

    def explain_beta():  # a beta move: the sampled pass is reused, prior and KL recomputed
        model.explain(text, n_samples=S, seed=1, shape_k=7.0, beta=1.0 + 1e-3 * next(moves))

    def explain_cold():  # a new sentence: nothing cached
        model.clear_caches()
        model.explain(text, n_samples=S, seed=1)

    grid_times: dict[str, list[float]] = {"grid_first_frame_ms": [], "grid_complete_ms": []}
    sizes = {}

    def grid_new_sentence():  # a new sentence in the live explorer: nothing cached
        model.clear_caches()
        t0 = time.perf_counter()
        g = live.LiveGrid(model, text, S, 1)
        post = nearest_index(g.values, model.trained_hyper.get(g.posterior_spec.name, 1.0), True) \
            if g.posterior_spec else 0
        g.start(post)
        layer = g.stochastic_layers[-1] if g.stochastic_layers else model.n_layers - 1
        live.summary_payload(g, post)
        live.inside_payload(g, post, 0, layer, 0, 0, 1)
        grid_times["grid_first_frame_ms"].append(1000 * (time.perf_counter() - t0))
        g.wait(300)
        grid_times["grid_complete_ms"].append(1000 * (time.perf_counter() - t0))
        sizes.update(grid_values=len(g.values), grid_prior_values=len(g.prior_values),
                     summary_bytes=len(live.summary_payload(g, post)),
                     inside_bytes=len(live.inside_payload(g, post, 0, layer, 0, 0, 1)))

    ids = torch.tensor([model.tokenizer.encode(text)[0]], device=model.device)
    mask = torch.ones_like(ids, dtype=torch.bool)
    with torch.inference_mode():
        x, _ = model.lower(ids, mask)
        g = torch.Generator(device=model.device).manual_seed(0)

        def batched():
            model.upper(x, mask, n_samples=S, generator=g)

        def looped():
            for _ in range(S):
                model.upper(x, mask, n_samples=1, generator=g)

        def deterministic():
            model.upper(x, mask, mode=Mode.MEAN)

        # f(E[w]) and its S leave-one-out values, the Deng gap's jackknife (one pass of S + 1 rows).
        traces = model.upper(x, mask, n_samples=S, generator=g, trace=Trace.SAMPLES)[1]
        drawn = {i: traces[i - (model.n_layers - len(traces))].weights for i in gaps.attention_random_layers(model)}
        passes = {"leave_one_out_pass_ms": lambda: gaps.leave_one_out_probs(model, x, mask, drawn, model.hyper())} \
            if drawn and S >= 2 else {}

        # End to end, from token ids: S complete single-sample forward passes (embeddings and all
        # six layers each time, as a model without the lower-layer cache or batching would run),
        # against the lower layers once and the batched S-sample pass.
        def batched_from_ids():
            model.upper(model.lower(ids, mask)[0], mask, n_samples=S, generator=g)

        def looped_from_ids():
            for _ in range(S):
                model.upper(model.lower(ids, mask)[0], mask, n_samples=1, generator=g)

        figures = {
            "explain_warm_ms": _median_ms(explain_warm, args.repeats),
            "explain_beta_ms": _median_ms(explain_beta, args.repeats),
            "explain_cold_ms": _median_ms(explain_cold, args.repeats),

            # The passes whose ratios are reported, timed in turns.
            **_interleaved_medians_ms({"batched_pass_ms": batched, "looped_passes_ms": looped,
                                       "deterministic_pass_ms": deterministic, **passes,
                                       "batched_from_ids_ms": batched_from_ids,
                                       "looped_from_ids_ms": looped_from_ids}, args.repeats),
        }
        for _ in range(max(3, args.repeats // 6)):
            grid_new_sentence()
        figures |= {k: statistics.median(v) for k, v in grid_times.items()}

    def attribute_once():  # a fixed node count: the cost of the integral, not of a refinement
        attribute(model, text, n_samples=ATTRIBUTE_SAMPLES, seed=1, steps=ATTRIBUTE_STEPS, tolerance=None)

    figures["attribute_ms"] = _median_ms(attribute_once, max(3, args.repeats // 6))
    result = {
        "model": args.model, "n_samples": S, "tokens": len(tokens), "sentence": text,
        "torch_threads": torch.get_num_threads(), "device": str(model.device),
        "allocator_tuned": tune_allocator(),
        "machine": platform.processor() or platform.machine(), "repeats": args.repeats,
        **{k: round(v, 2) for k, v in figures.items()},
        "speedup_batched_vs_looped": round(figures["looped_passes_ms"] / figures["batched_pass_ms"], 2),
        "speedup_end_to_end": round(figures["looped_from_ids_ms"] / figures["batched_from_ids_ms"], 2),
        "cost_batched_vs_one_deterministic": round(figures["batched_pass_ms"] / figures["deterministic_pass_ms"], 2),
        "grid_workers": live.WORKERS, **sizes,
        "attribute_samples": ATTRIBUTE_SAMPLES, "attribute_steps": ATTRIBUTE_STEPS,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result
