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


# glibc's malloc options (mallopt(3)): M_TRIM_THRESHOLD and M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_allocator_tuned: bool | None = None


def tune_allocator() -> bool:
    """Keep freed CPU tensor memory in the process instead of handing it back to the OS.

    glibc serves a large allocation (the S-sample pass makes several of 1-5 MB) with a fresh
    mmap and unmaps it on free, so every pass page-faults its activations in again: measured here,
    a tenth to a sixth of the batched pass. Raising the mmap threshold to 32 MB and the trim
    threshold to 256 MB lets those blocks be reused. Process-wide and idempotent; glibc only;
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
                                        and libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20))
            except (OSError, AttributeError):  # not glibc (macOS, musl, Windows)
                pass
    return _allocator_tuned
