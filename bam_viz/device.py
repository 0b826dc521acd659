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
