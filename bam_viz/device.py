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


def tune_allocator() -> bool:
    """Keep freed CPU tensor memory in the process instead of handing it back to the OS.

    glibc serves a large allocation (the S-sample pass makes several of 1-5 MB) with a fresh
    mmap and unmaps it on free, so every pass page-faults its activations in again: measured here,
    a tenth to a sixth of the batched pass. Raising the mmap threshold to 32 MB and the trim
    threshold to 256 MB lets those blocks be reused. That keeps up to 256 MB free in each malloc
    arena, and glibc makes up to 8 arenas a core for a threaded server (a thread per session): so
    the arenas are capped at `ARENAS`, and `trim_heap()` hands the free pages back when the app's
    caches evict. Process-wide and idempotent; glibc only;
    `BAM_VIZ_MALLOC_TUNING=0` opts out. Returns whether the setting is in force.
    """
    global _allocator_tuned
    if _allocator_tuned is None:
        _allocator_tuned = False
        if os.environ.get("BAM_VIZ_MALLOC_TUNING", "1") != "0":
            try:
                import ctypes

                libc = ctypes.CDLL("libc.so.6")
                _allocator_tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
                                        and libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
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
