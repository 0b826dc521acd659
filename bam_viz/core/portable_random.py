"""A counter-based uniform generator that Python and the browser both implement, bit for bit.

Draw `site` of a pass seeded with `seed` (0 <= seed < 2**63) is a stream of float32 uniforms in
(0, 1); element n of it depends only on (seed, site, n), so the browser makes exactly the numbers
the library makes, in any order and any number at once. Its twin is `views/live/random.js`;
`tests/js/random.test.mjs` holds the two equal on numbers this module writes.

Each 32-bit step is Wellons' "lowbias32" integer hash (mix32, bias 0.17 in his avalanche test):
  key(seed, site) = mix32(mix32(lo ^ mix32(hi + GOLDEN)) ^ mix32(site + SITE))
  u_n            = ((mix32(mix32(n ^ key) + key) >> 9) + 0.5) / 2**23
where lo and hi are the seed's low and high 32 bits; u_n is a float32 exactly, in [2**-24, 1 - 2**-24].
"""

from __future__ import annotations

import numpy as np

GOLDEN, SITE = 0x9E3779B9, 0x85EBCA6B
_M1, _M2 = np.uint32(0x7FEB352D), np.uint32(0x846CA68B)
_MASK = 0xFFFFFFFF


def mix32(x: np.ndarray) -> np.ndarray:
    """lowbias32 on uint32 (arrays wrap on overflow, as JavaScript's Math.imul does)."""
    x = np.asarray(x, dtype=np.uint32)
    x = x ^ (x >> np.uint32(16))
    x = x * _M1
    x = x ^ (x >> np.uint32(15))
    x = x * _M2
    return x ^ (x >> np.uint32(16))


def _scalar(x: int) -> int:
    return int(mix32(np.array([x & _MASK], dtype=np.uint32))[0])


def stream_key(seed: int, site: int) -> int:
    """The 32-bit key of draw `site` in a pass seeded with `seed`."""
    lo, hi = seed & _MASK, (seed >> 32) & _MASK
    return _scalar(_scalar(lo ^ _scalar(hi + GOLDEN)) ^ _scalar(site + SITE))


def uniforms(seed: int, site: int, count: int, start: int = 0) -> np.ndarray:
    """Elements start .. start + count - 1 of draw `site`'s stream, float32 in (0, 1)."""
    if start < 0 or count < 0 or start + count > 2**32:
        raise ValueError(f"a draw holds at most 2**32 numbers, not {start + count}")
    key = np.uint32(stream_key(seed, site))
    n = np.arange(start, start + count, dtype=np.uint64).astype(np.uint32)
    h = mix32(mix32(n ^ key) + key)
    return (((h >> np.uint32(9)).astype(np.float32) + np.float32(0.5)) * np.float32(2.0**-23)).astype(np.float32)
