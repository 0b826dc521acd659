"""The device is chosen once, at load: BAM_VIZ_DEVICE if set, else CUDA, then MPS, then CPU."""

from __future__ import annotations

import os

import torch


def choose_device(override: str | None = None) -> torch.device:
    name = override or os.environ.get("BAM_VIZ_DEVICE")
    if name:
        device = torch.device(name)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"BAM_VIZ_DEVICE={name} but CUDA is not available here")
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise RuntimeError(f"BAM_VIZ_DEVICE={name} but MPS is not available here")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


# glibc's malloc options (mallopt(3)): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD and M_ARENA_MAX.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
ARENAS = 2
_allocator_tuned: bool | None = None


# (mmap threshold, trim threshold) per profile, bytes. "speed": large blocks reused (batch scoring,
# training, benchmarks). "memory": freed blocks go back soon (a server shared by a class): a lower peak,
# at some cost in speed (docs/performance.md, "What kept memory alive").
PROFILES = {"speed": (32 << 20, 256 << 20), "memory": (4 << 20, 16 << 20)}
ALLOCATOR_ENV = "BAM_VIZ_MALLOC_TUNING"


def tune_allocator() -> bool:
    """Tune glibc's malloc for tensors, by $BAM_VIZ_MALLOC_TUNING: "speed" (the default), "memory"
    (what `app.py` sets), or "0" (glibc's own settings); "1" means "speed".

    glibc serves a large allocation (the S-sample pass makes several) with a fresh mmap and
    unmaps it on free, so every pass page-faults its activations in again (docs/performance.md,
    "glibc keeps freed tensor memory", has what that costs). Raising the mmap threshold to 32 MB
    and the trim threshold to 256 MB lets those blocks be reused ("speed"). That keeps up to 256 MB
    free in each malloc arena, and glibc makes up to 8 arenas a core for a threaded server (a thread
    per session): so the arenas are capped at `ARENAS`, the server uses "memory", and `trim_heap()`
    hands free pages back when a cache evicts or the working memory empties. Process-wide and
    idempotent; glibc only.
    Returns whether a setting is in force.
    """
    global _allocator_tuned
    if _allocator_tuned is None:
        _allocator_tuned = False
        profile = os.environ.get(ALLOCATOR_ENV, "speed")
        profile = "speed" if profile == "1" else profile
        if profile in PROFILES:
            mmap, trim = PROFILES[profile]
            try:
                import ctypes

                libc = ctypes.CDLL("libc.so.6")
                _allocator_tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap)
                                        and libc.mallopt(_M_TRIM_THRESHOLD, trim)
                                        and libc.mallopt(_M_ARENA_MAX, ARENAS))
            except (OSError, AttributeError):  # not glibc (macOS, musl, Windows)
                pass
    return _allocator_tuned


def trim_heap() -> bool:
    """glibc's malloc_trim(0): give every arena's free pages back to the system (False elsewhere)."""
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False
