"""bam_viz.core.cache: sizes measured, one byte budget for every cache, and working memory shared by calls."""

import dataclasses
import threading
import time
from functools import cached_property

import numpy as np
import pytest
import torch

import bam_viz
from bam_viz.core.cache import CACHE, Cache, WorkingMemory, budget_bytes, explain_bytes, nbytes


@pytest.fixture(scope="module")
def models():
    """The shipped models this file needs (loading shares their pretrained tensors)."""
    return {name: bam_viz.load(name) for name in ("bam-wc", "bam-lc", "softmax")}


def test_nbytes_counts_each_storage_once_through_containers_and_objects():
    t = torch.zeros(1000)                                   # 4000 bytes
    assert nbytes(t) == 4000
    assert nbytes([t, t[:10], t.view(10, 100)]) == 4000     # views share the storage
    a = np.zeros(500)                                       # 4000 bytes
    assert nbytes({"a": a, "b": a[::2], "c": (b"x" * 7,)}) == 4007

    @dataclasses.dataclass
    class Result:
        weights: torch.Tensor

        @cached_property
        def doubled(self):
            return self.weights * 2

    r = Result(torch.zeros(250))
    assert nbytes(r) == 1000
    _ = r.doubled                                           # a lazily computed field counts once made
    assert nbytes(r) == 2000
    assert nbytes(torch.nn.Linear(100, 100)) == 0           # a model is shared: no cache pays for it


def test_cache_evicts_least_recently_used_by_bytes():
    c = Cache(budget=10_000)
    c.put("n", "a", torch.zeros(1000)), c.put("n", "b", torch.zeros(1000))       # 8000 bytes
    assert c.get("n", "a") is not None                      # "a" is now the most recent
    c.put("m", "c", torch.zeros(1000))                      # 12000 > 10000: "b" goes
    assert c.get("n", "b") is None and c.get("n", "a") is not None and c.get("m", "c") is not None
    assert c.used() == 8000 and c.evictions == 1
    assert c.report() == {"n": {"entries": 1, "bytes": 4000}, "m": {"entries": 1, "bytes": 4000}}
    big = torch.zeros(5000)                                 # 20000 bytes: returned, never kept
    assert c.put("n", "big", big) is big and c.get("n", "big") is None and c.used() == 8000
    c.discard("n")
    assert c.count("n") == 0 and c.count("m") == 1


def test_a_value_that_grows_is_measured_again():
    c = Cache(budget=10_000)
    grows = {"frames": []}
    c.put("grid", 1, grows)
    c.put("grid", 2, torch.zeros(1000))                     # 4000 bytes
    grows["frames"].append(torch.zeros(1500))               # 6000 bytes more, after it was stored
    assert c.used() == 4000                                 # as last measured
    c.grew()                                                # 10000: within the budget
    assert c.used() == 10_000 and len(c) == 2
    grows["frames"].append(torch.zeros(10))
    c.grew()                                                # over: the older entry (the grid) goes
    assert c.get("grid", 1) is None and c.used() == 4000


def test_one_grown_value_is_measured_alone():
    """`grew(namespace, key)` measures that entry; a put measures only its own value: an eviction
    never walks the other entries (it used to, on every call, and held the GIL for it)."""
    import bam_viz.core.cache as cache_module

    c = Cache(budget=100_000)
    a, b = {"frames": []}, {"frames": []}
    c.put("grid", "a", a)
    c.put("grid", "b", b)
    a["frames"].append(torch.zeros(1000))
    b["frames"].append(torch.zeros(1000))
    c.grew("grid", "a")
    assert c.report() == {"grid": {"entries": 2, "bytes": 4000}}      # b as last measured: 0
    c.grew("grid", "missing")                                          # not stored: nothing to do
    walked = []
    real = cache_module.nbytes
    cache_module.nbytes = lambda value, _seen=None: walked.append(value) or real(value, _seen)
    try:
        c.put("n", 1, torch.zeros(10))
    finally:
        cache_module.nbytes = real
    assert len(walked) == 1                                            # the new value alone
    c.grew()                                                           # every entry, when asked
    assert c.used() == 8040


def test_cache_survives_threads():
    c = Cache(budget=3 * 400)

    def hammer(offset):               # the app's sessions share one store, each in a thread
        for i in range(1000):
            c.put("n", offset + i % 5, torch.zeros(100))
            c.get("n", offset + (i + 1) % 5)

    threads = [threading.Thread(target=hammer, args=(k * 10,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(c) == 3 and c.used() == 1200


def test_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("BAM_VIZ_CACHE_MB", "64")
    assert budget_bytes() == 64 * 2**20
    monkeypatch.delenv("BAM_VIZ_CACHE_MB")
    assert budget_bytes() == 256 * 2**20
    for bad in ("lots", "-1", "inf", "nan"):
        monkeypatch.setenv("BAM_VIZ_CACHE_MB", bad)
        with pytest.raises(ValueError, match="BAM_VIZ_CACHE_MB"):
            budget_bytes()


def test_working_memory_makes_calls_that_do_not_fit_together_wait():
    work = WorkingMemory(budget=100)
    order, inside = [], threading.Event()

    def first():
        with work.hold(70):
            inside.set()
            time.sleep(0.3)
            order.append("first done")

    def second():
        inside.wait()
        with work.hold(70):                                 # 140 > 100: waits for the first
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order == ["first done", "second in"] and work.held == 0
    with work.hold(30), work.hold(70):                      # fit together: no wait (a deadlock otherwise)
        assert work.held == 100
    with work.hold(10**9):                                  # above the budget: runs alone, holding it all
        assert work.held == 100


def test_a_call_waiting_when_the_budget_is_lowered_still_runs():
    """A waiter asked for more than the budget became: it runs alone at the new budget instead of
    blocking the queue forever (a background frame waiting while a test lowered the budget hung the
    suite this way)."""
    work = WorkingMemory(budget=100)
    inside, done = threading.Event(), []

    def waiter():
        inside.wait()
        with work.hold(80):                                 # 80 + 50 > 100: waits behind the holder
            done.append(work.held)

    t = threading.Thread(target=waiter)
    t.start()
    with work.hold(50):
        inside.set()
        time.sleep(0.2)
        work._budget = 40                                   # lowered under the waiter's 80
    t.join(timeout=5)
    assert not t.is_alive() and done == [40] and work.held == 0


def test_explain_bytes_matches_what_explain_holds(models):
    """The estimate covers the result's weights and the cached sampled pass, as measured."""
    m = models["bam-wc"]
    CACHE.clear()                                           # only this call's entries below
    r = m.explain("a slow , tender and often very funny film about a family", n_samples=8, seed=0)
    T = len(r.tokens)
    held = nbytes(r) + sum(nbytes(CACHE.get("explain.sampled", k)) for k in list(_keys("explain.sampled")))
    estimate = explain_bytes(8, m.n_layers, len(m.config.stochastic_layers), m.n_heads, T)
    assert 0.8 * held <= estimate <= 1.6 * held


def _keys(namespace):
    with CACHE._lock:
        return [k[1] for k in CACHE._items if k[0] == namespace]


def test_every_explain_cache_lives_in_the_one_budget(models):
    m = models["bam-lc"]
    old = CACHE.budget
    try:
        CACHE.set_budget(3 * 2**20)
        for i in range(6):
            m.explain(f"the film number {i} is a long and rather moving story about a family", 16, seed=i)
            assert CACHE.used() <= 3 * 2**20
        assert 0 < len(m.explain_cache.sampled) < 6         # kept while they fit, the oldest gone
    finally:
        CACHE.set_budget(old)


def test_explain_without_cache_keeps_no_sampled_pass(models):
    m = models["bam-wc"]
    m.clear_caches()
    a = m.explain("kept out of the cache", 4, seed=1, cache=False)
    assert len(m.explain_cache.sampled) == 0
    b = m.explain("kept out of the cache", 4, seed=1)
    assert torch.equal(a.sample_weights, b.sample_weights) and len(m.explain_cache.sampled) == 1


def test_predict_cuts_a_batch_to_the_working_memory_and_refuses_one_text_too_large(models, monkeypatch):
    from bam_viz.core import cache

    m = models["bam-wc"]
    texts = [f"review number {i} : a fine and moving film" for i in range(6)]
    T = m.tokenizer.batch(texts)[0].shape[1]
    per_text = explain_bytes(4, 0, len(m.config.stochastic_layers), m.n_heads, T)
    calls = []
    upper = m.upper
    monkeypatch.setattr(m, "upper", lambda x, *a, **k: calls.append(x.shape[0]) or upper(x, *a, **k))
    monkeypatch.setattr(cache.WORK, "_budget", 2 * per_text)          # two texts a pass
    p = m.predict_samples(texts, n_samples=4, seed=0)
    assert calls == [2, 2, 2] and p.shape == (6, 4, 2) and torch.isfinite(p).all()
    monkeypatch.setattr(cache.WORK, "_budget", per_text - 1)
    with pytest.raises(ValueError, match=r"n_samples=4 at \d+ tokens needs .* MB .*BAM_VIZ_WORK_MB"):
        m.predict_samples(texts[:1], n_samples=4, seed=0)


def test_zoo_models_share_the_unchanged_pretrained_tensors(models):
    a, b = models["bam-wc"], models["softmax"]
    key = "embeddings.word_embeddings.weight"
    ta, tb = a.bert.state_dict()[key], b.bert.state_dict()[key]
    assert ta.data_ptr() == tb.data_ptr()                   # one copy of 47 MB for the whole zoo
    from bam_viz.nn.encoder import load_minilm_state

    pretrained = load_minilm_state()
    for k, t in a.bert.state_dict().items():                # only what still equals MiniLM is shared
        if k in pretrained and t.data_ptr() == pretrained[k].data_ptr():
            assert torch.equal(t, pretrained[k]), k
    ln = "encoder.layer.0.attention.output.LayerNorm.weight"  # trained: its own tensor in each model
    assert not torch.equal(a.bert.state_dict()[ln], pretrained[ln])
    assert a.bert.state_dict()[ln].data_ptr() != pretrained[ln].data_ptr()


def test_dear_entries_go_last():
    """A live grid is small beside a result and dear to make again: results go first."""
    c = Cache(budget=10_000)
    c.keep_longer("grid")
    c.put("grid", 1, torch.zeros(500))                      # 2000 bytes, the least recent
    c.put("result", 1, torch.zeros(1500))                   # 6000
    c.put("result", 2, torch.zeros(1000))                   # 4000: 12000 > 10000, the older result goes
    assert c.get("grid", 1) is not None and c.get("result", 1) is None and c.get("result", 2) is not None
    c.put("grid", 2, torch.zeros(1500))                     # 6000: 12000, the result goes, grids stay
    assert c.get("result", 2) is None and c.get("grid", 1) is not None and c.get("grid", 2) is not None
    c.put("grid", 3, torch.zeros(1000))                     # no result left: the least recent grid goes
    assert c.get("grid", 1) is None and c.get("grid", 2) is not None and c.get("grid", 3) is not None
