"""The live explorer's wire format: what `bam_viz.live.grid` packs for the page's chart components.

A little-endian uint32 header length, a UTF-8 JSON header naming the arrays (`offset` in bytes,
`shape`, `dtype` "f4" or "u2", where u2 holds a value in [0, 1] times 65535), zero padding to a
multiple of 4, then the arrays.
"""

from __future__ import annotations

import json
import struct

import numpy as np


def pack(header: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """Header and arrays as one bytes object (the module docstring has the layout). Arrays of
    dtype float16 are sent as u2 (value in [0, 1] times 65535); everything else as float32."""
    blobs, specs, offset = [], {}, 0
    for name, a in arrays.items():
        if a.dtype == np.float16:
            blob = np.round(np.clip(a.astype(np.float32), 0.0, 1.0) * 65535).astype("<u2").tobytes()
            dtype = "u2"
        else:
            blob = np.ascontiguousarray(a, dtype="<f4").tobytes()
            dtype = "f4"
        blob += b"\0" * (-len(blob) % 4)
        specs[name] = {"offset": offset, "shape": list(a.shape), "dtype": dtype}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps({**header, "arrays": specs}, ensure_ascii=False, allow_nan=False).encode("utf-8")
    head += b" " * (-(4 + len(head)) % 4)
    return struct.pack("<I", len(head)) + head + b"".join(blobs)


def header_of(data: bytes) -> tuple[dict, int]:
    """A packed payload's header and where its arrays start, without reading them."""
    (n,) = struct.unpack_from("<I", data, 0)
    return json.loads(data[4 : 4 + n].decode("utf-8")), 4 + n


def unpack(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The inverse of `pack` (tests, and anyone reading a saved payload); u2 arrays come back in [0, 1]."""
    header, base = header_of(data)
    arrays = {}
    for name, spec in header.pop("arrays").items():
        count = int(np.prod(spec["shape"])) if spec["shape"] else 1
        dt = np.dtype("<u2" if spec["dtype"] == "u2" else "<f4")
        a = np.frombuffer(data, dtype=dt, count=count, offset=base + spec["offset"]).reshape(spec["shape"])
        arrays[name] = a.astype(np.float32) / 65535 if spec["dtype"] == "u2" else a
    return header, arrays


FLOAT32_LIMIT = 3e38            # what a payload's float32 holds: the page shows a value at it as "> 3e38"


def finite32(a: np.ndarray) -> np.ndarray:
    """float32 with NaN kept (the page reads NaN as "not made yet") and values beyond FLOAT32_LIMIT
    (a Dirichlet KL at a small concentration, infinities) clipped to it."""
    return np.clip(np.asarray(a, dtype=np.float64), -FLOAT32_LIMIT, FLOAT32_LIMIT).astype(np.float32)
