"""One memory budget for everything the library and the app keep between requests.

Every cache (a model's per-text lower states and S-sample passes, the app's explain() results and
live grids) is a namespace of one process-wide least-recently-used store, `CACHE`, bounded in bytes
rather than entries: a result at 128 tokens and 64 samples is 2000 times one at 8 tokens and 4, so
a bound in entries is no bound. The budget is $BAM_VIZ_CACHE_MB (default `DEFAULT_MB`), read once.

Sizes are measured, not declared: `nbytes` walks an object (tensors by their storage, NumPy arrays,
bytes, containers, dataclasses and `__dict__`s), counting each storage once. An entry may grow after
it is stored (a result's lazily computed fields, a live grid's frames): the store measures an entry
when it is put, and again when its owner says `CACHE.grew()`.

Memory given back by an eviction reaches the operating system only if the allocator lets it go:
`release_memory()` asks glibc to (see `tune_allocator`, and docs/performance.md for the
measurements that made both necessary).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np
import torch

from bam_viz.core.budgets import attention_bytes, env_bytes

BUDGET_ENV = "BAM_VIZ_CACHE_MB"
DEFAULT_MB = 256


def budget_bytes() -> int:
    """$BAM_VIZ_CACHE_MB in bytes (`DEFAULT_MB` when unset)."""
    return env_bytes(BUDGET_ENV, DEFAULT_MB)


def nbytes(obj, _seen: set | None = None) -> int:
    """The bytes of array data `obj` keeps alive: tensors (by storage, each counted once), NumPy
    arrays, bytes, and what containers, dataclasses, named tuples and objects' `__dict__` hold.
    Python objects' own overhead is not counted; it is small beside the arrays."""
    seen = set() if _seen is None else _seen
    key = id(obj)
    if key in seen:
        return 0
    seen.add(key)
    if isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        ptr = ("storage", storage.data_ptr())
        if ptr in seen or obj.device.type == "meta":
            return 0
        seen.add(ptr)
        return storage.nbytes()
    if isinstance(obj, np.ndarray):
        base = obj if obj.base is None else obj.base
        if base is not obj:
            return nbytes(base, seen)
        return obj.nbytes
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return len(obj)
    if isinstance(obj, (str, int, float, bool, type(None), torch.nn.Module, threading.Thread)):
        return 0          # a model is shared and counted by nobody's cache
    if isinstance(obj, dict):
        return sum(nbytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return sum(nbytes(v, seen) for v in obj)
    if hasattr(obj, "nbytes_held"):
        return int(obj.nbytes_held(seen))
    if hasattr(obj, "__dict__") and not isinstance(obj, type) and not callable(obj):
        return sum(nbytes(v, seen) for v in vars(obj).values())      # dataclass fields and cached_property values
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):   # a dataclass with slots
        return sum(nbytes(getattr(obj, f.name, None), seen) for f in dataclasses.fields(obj))
    return 0


class Cache:
    """A least-recently-used store of (namespace, key) -> value, bounded by the bytes its values hold.

    Thread-safe: the app's sessions are threads sharing one store. `get_or_make` makes a missing
    value outside the lock (other keys stay readable meanwhile); two threads missing the same key
    at once may both make it, and the second stored wins (values are deterministic).
    A value larger than the whole budget is returned but not kept.
    """

    def __init__(self, budget: int | None = None):
        self._budget = budget
        self._items: OrderedDict[tuple, tuple[object, int]] = OrderedDict()
        self._lock = threading.RLock()
        self._dear: set[str] = set()
        self.evictions = 0

    def keep_longer(self, namespace: str) -> None:
        """Evict `namespace`'s entries only when no other is left: for values that are small beside
        what they cost to make again (a live grid holds one slider value's reduced frame per
        explain() call it made, where one result holds every sampled weight of one call)."""
        with self._lock:
            self._dear.add(namespace)

    @property
    def budget(self) -> int:
        if self._budget is None:
            self._budget = budget_bytes()
        return self._budget

    def set_budget(self, budget: int) -> None:
        with self._lock:
            self._budget = int(budget)
            self._evict()

    def get(self, namespace: str, key: Hashable, default=None):
        with self._lock:
            hit = self._items.get((namespace, key))
            if hit is None:
                return default
            self._items.move_to_end((namespace, key))
            return hit[0]

    def put(self, namespace: str, key: Hashable, value):
        size = nbytes(value)
        with self._lock:
            if size > self.budget:
                self._items.pop((namespace, key), None)
                return value
            self._items[(namespace, key)] = (value, size)
            self._items.move_to_end((namespace, key))
            self._evict()
        return value

    def get_or_make(self, namespace: str, key: Hashable, make: Callable[[], object]):
        hit = self.get(namespace, key)
        return hit if hit is not None else self.put(namespace, key, make())

    def grew(self, namespace: str | None = None, key: Hashable = None) -> None:
        """A stored value may be larger now: measure it again (every value, when no namespace is
        named) and evict to the budget. Sizes are measured on `put` and here, never on every
        eviction: walking every entry's tensors holds the GIL, and on every call it would block
        every other session's rerun (docs/performance.md, "What earlier measurements changed")."""
        with self._lock:
            keys = (list(self._items) if namespace is None
                    else [(namespace, key)] if (namespace, key) in self._items else [])
            for k in keys:
                value = self._items[k][0]
                self._items[k] = (value, nbytes(value))
            self._evict()

    def _evict(self) -> None:
        total = sum(size for _, size in self._items.values())
        evicted = False
        for dear in (False, True):                  # the cheap to make again first, least recent first
            for k in [k for k in self._items if (k[0] in self._dear) == dear]:
                if total <= self.budget:
                    break
                total -= self._items.pop(k)[1]
                self.evictions += 1
                evicted = True
        if evicted:
            release_memory()

    def discard(self, namespace: str, predicate: Callable[[Hashable], bool] = lambda key: True) -> None:
        """Drop every entry of `namespace` whose key satisfies `predicate`."""
        with self._lock:
            for k in [k for k in self._items if k[0] == namespace and predicate(k[1])]:
                del self._items[k]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def count(self, namespace: str, predicate: Callable[[Hashable], bool] = lambda key: True) -> int:
        with self._lock:
            return sum(1 for k in self._items if k[0] == namespace and predicate(k[1]))

    def used(self) -> int:
        with self._lock:
            return sum(size for _, size in self._items.values())

    def report(self) -> dict[str, dict[str, int]]:
        """Per namespace: entries and bytes, as last measured."""
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            for (namespace, _), (_, size) in self._items.items():
                row = out.setdefault(namespace, {"entries": 0, "bytes": 0})
                row["entries"] += 1
                row["bytes"] += size
        return out

    def __len__(self) -> int:
        return len(self._items)


CACHE = Cache()


# ---- the allocator ------------------------------------------------------------------------------
def release_memory() -> None:
    """Ask glibc to return free heap pages to the system (a no-op elsewhere): see `device.tune_allocator`."""
    from bam_viz.core.device import trim_heap

    trim_heap()


# ---- working memory -----------------------------------------------------------------------------
WORK_ENV = "BAM_VIZ_WORK_MB"
TRIM_AFTER_BYTES = 64 * 2**20     # a call this large that leaves nothing running hands its pages back
DEFAULT_WORK_MB = 512


def explain_bytes(n_samples: int, layers: int, stochastic_layers: int, heads: int, tokens: int) -> int:
    """What one explain() holds at its peak, from its attention tensors: the result's S x L x H x T x T
    float32 weights, and about three more of those per stochastic layer in the sampled pass (weights,
    scores, the prior's log-probabilities). docs/performance.md compares it with a measured peak;
    tests/test_cache.py checks it against what explain() holds."""
    return attention_bytes(layers + 3 * stochastic_layers, heads, tokens, n_samples)


class WorkingMemory:
    """A semaphore counted in bytes: heavy calls `hold(estimate)` while they allocate, so calls made
    at once (the app's sessions, a live grid's workers) never hold more than the budget between
    them ($BAM_VIZ_WORK_MB, default `DEFAULT_WORK_MB`). A call above the whole budget waits until
    it can run alone; callers that must refuse such a call check first (`inputs.check_attention_budget`).
    Waiting is first come, first served."""

    def __init__(self, budget: int | None = None):
        self._budget, self._held = budget, 0
        self._cond = threading.Condition()
        self._queue: list[object] = []

    @property
    def budget(self) -> int:
        if self._budget is None:
            self._budget = max(env_bytes(WORK_ENV, DEFAULT_WORK_MB), 1)
        return self._budget

    @property
    def held(self) -> int:
        return self._held

    def hold(self, nbytes: int):
        return _Held(self, min(int(nbytes), self.budget))

    def _acquire(self, n: int) -> int:
        """Wait for `n` bytes (at most the budget as it is when granted) and return what was taken.
        Clamped here, not only in `hold`: a budget lowered while a call waits (tests, `set_budget`)
        must not leave it at the head of the queue forever, and everyone behind it."""
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            self._cond.wait_for(lambda: self._queue[0] is ticket and self._held + min(n, self.budget) <= self.budget)
            self._queue.pop(0)
            n = min(n, self.budget)
            self._held += n
            self._cond.notify_all()
        return n

    def _release(self, n: int) -> None:
        with self._cond:
            self._held -= n
            idle = self._held == 0 and not self._queue
            self._cond.notify_all()
        if idle and n >= TRIM_AFTER_BYTES:
            release_memory()            # a burst is over: its freed pages go back to the system


class _Held:
    def __init__(self, work: WorkingMemory, n: int):
        self.work, self.n = work, n

    def __enter__(self):
        self.n = self.work._acquire(self.n)
        return self

    def __exit__(self, *exc):
        self.work._release(self.n)
        return False


WORK = WorkingMemory()
