"""What `waffle.tensor` should record for an array, computed independently of waffle: the hash
with the `xxhash` package's XXH3-64 over the array's little-endian bytes in C order, the
statistics with NumPy over the finite elements; and `check`, which compares a decoded event
with it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xxhash

RESERVED = [
    "tensor.name",
    "tensor.dtype",
    "tensor.shape",
    "tensor.count",
    "tensor.hash",
    "tensor.rms",
    "tensor.min",
    "tensor.max",
    "tensor.nan",
    "tensor.pinf",
    "tensor.ninf",
]


def expected(name: str, a: np.ndarray, dtype: str, raw: bytes | None = None) -> dict:
    """The reserved fields of `a`, computed with NumPy and the xxhash package."""
    values = a.astype(np.float64).ravel()
    finite = values[np.isfinite(values)]
    if finite.size:
        rms = math.sqrt(math.fsum(float(x) * float(x) for x in finite) / finite.size)
        low, high = float(finite.min()), float(finite.max())
    else:
        rms = low = high = math.nan
    data = raw if raw is not None else np.ascontiguousarray(a).tobytes()
    return {
        "tensor.name": name,
        "tensor.dtype": dtype,
        "tensor.shape": "x".join(str(d) for d in a.shape),
        "tensor.count": a.size,
        "tensor.hash": xxhash.xxh3_64_intdigest(data),
        "tensor.rms": rms,
        "tensor.min": low,
        "tensor.max": high,
        "tensor.nan": int(np.isnan(values).sum()),
        "tensor.pinf": int(np.isposinf(values).sum()),
        "tensor.ninf": int(np.isneginf(values).sum()),
    }


def check(event: dict, want: dict) -> None:
    fields = event["fields"]
    assert list(fields)[: len(RESERVED)] == RESERVED
    for key, value in want.items():
        got = fields[key]
        if key == "tensor.rms" and not math.isnan(value):
            assert got == pytest.approx(value, rel=1e-12), key
        elif isinstance(value, float) and math.isnan(value):
            assert math.isnan(got), key
        else:
            assert got == value, key
