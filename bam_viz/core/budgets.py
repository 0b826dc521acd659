"""Memory budgets set in the environment, and the size most of them bound: sampled attention.

Every budget is an environment variable holding a number of megabytes (2**20 bytes), read by
`env_megabytes`: $BAM_VIZ_MAX_ATTENTION_MB (what one explain() may hold, `inputs`), $BAM_VIZ_CACHE_MB
and $BAM_VIZ_WORK_MB (what the caches keep and what calls made at once hold, `cache`), and
$BAM_VIZ_APP_ATTENTION_MB (what one sentence may hold in the explorer, views/state.py). What they
count is mostly attention weights, S x L x H x T x T float32 numbers: `attention_bytes`.
"""

from __future__ import annotations

import math
import os

FLOAT32_BYTES = 4
MB = 2**20


def attention_bytes(layers: int, heads: int, tokens: int, n_samples: int = 1) -> int:
    """Bytes of `n_samples` x `layers` x `heads` x `tokens` x `tokens` float32 attention weights."""
    return FLOAT32_BYTES * n_samples * layers * heads * tokens * tokens


def env_megabytes(name: str, default_mb: float) -> float:
    """$name as a number of megabytes (`default_mb` when unset or blank); a ValueError naming the
    variable for anything but a finite number >= 0."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return float(default_mb)
    try:
        mb = float(raw)
    except ValueError:
        raise ValueError(f"${name} must be a number of megabytes, not {raw!r}") from None
    if not (mb >= 0 and math.isfinite(mb)):
        raise ValueError(f"${name} must be a finite number of megabytes >= 0, not {raw!r}")
    return mb


def env_bytes(name: str, default_mb: float) -> int:
    """`env_megabytes` in whole bytes."""
    return int(env_megabytes(name, default_mb) * MB)
