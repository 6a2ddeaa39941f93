"""`waffle.tensor` and `waffle.step` end to end: every fingerprint field decoded back and compared
with values computed here on their own (the hash with the `xxhash` package's XXH3-64 over the
array's little-endian bytes, the statistics with NumPy over the finite elements)."""

from __future__ import annotations

import array

import numpy as np
import pytest
from conftest import Recording
from tensor_checks import check, expected

import waffle


def test_tensors_inside_a_step_decode_to_their_fingerprints(trec: Recording) -> None:
    act = np.linspace(-3.0, 5.0, 2560, dtype=np.float32).reshape(1, 2560)
    bad = np.array([[0.5, np.nan, np.inf], [-np.inf, -0.25, 2.0]], dtype=np.float32)
    with waffle.step(7, epoch=1) as s:
        first = waffle.tensor("blk0/attn_norm", act, layer=0)
        second = waffle.tensor("blk0/bad", bad, caused_by=first)
    assert first and second
    d = trec.stop()
    step = d.one("step")
    assert step["fields"] == {"step": 7, "epoch": 1}
    assert step["id"] == int(s.id)
    events = d.named("tensor")
    assert [e["id"] for e in events] == [int(first), int(second)]
    check(events[0], expected("blk0/attn_norm", act, "f32"))
    assert events[0]["fields"]["layer"] == 0
    check(events[1], expected("blk0/bad", bad, "f32"))
    assert events[1]["fields"]["tensor.nan"] == 1
    assert events[1]["links"] == [int(first)]
    assert all(d.parent_name(e) == "step" for e in events)


def test_every_dtype(trec: Recording) -> None:
    arrays = {
        "f16": np.array([1.5, -4.0, np.inf, 65504.0], dtype=np.float16),
        "f64": np.array([[1e300, -2.5], [np.nan, 0.0]]),
        "i8": np.array([-128, 127, 3], dtype=np.int8),
        "i16": np.array([-300, 7], dtype=np.int16),
        "i32": np.arange(-5, 6, dtype=np.int32).reshape(11, 1),
        "i64": np.array([-(2**40), 2**40], dtype=np.int64),
        "u8": np.array([0, 255], dtype=np.uint8),
        "u16": np.array([65535], dtype=np.uint16),
        "u32": np.array([4_000_000_000], dtype=np.uint32),
        "u64": np.array([2**63, 1], dtype=np.uint64),
    }
    for dtype, a in arrays.items():
        waffle.tensor(dtype, a)
    d = trec.stop()
    events = d.named("tensor")
    assert len(events) == len(arrays)
    for e, (dtype, a) in zip(events, arrays.items()):
        check(e, expected(dtype, a, dtype))


def test_bfloat16_through_ml_dtypes(trec: Recording) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1.5, -4.0, 0.0, np.nan], dtype=ml_dtypes.bfloat16)
    waffle.tensor("h", a)
    d = trec.stop()
    raw = a.view(np.uint16).astype("<u2").tobytes()
    assert raw[:4] == bytes([0xC0, 0x3F, 0x80, 0xC0])
    check(d.one("tensor"), expected("h", a, "bf16", raw))


def test_strided_arrays_and_other_buffers(trec: Recording) -> None:
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    strided = base[:, ::2]
    assert not strided.flags.c_contiguous
    waffle.tensor("strided", strided)
    waffle.tensor("fortran", np.asfortranarray(base))
    doubles = array.array("d", [1.0, -2.0, 4.0])
    waffle.tensor("array.array", doubles)
    waffle.tensor("bytes", b"\x01\x02\xff")
    waffle.tensor("scalar", np.float32(2.0).reshape(()))
    d = trec.stop()
    e = {x["fields"]["tensor.name"]: x for x in d.named("tensor")}
    check(e["strided"], expected("strided", strided, "f64"))
    check(e["fortran"], expected("fortran", base, "f64"))
    check(e["array.array"], expected("array.array", np.array(doubles), "f64"))
    check(e["bytes"], expected("bytes", np.frombuffer(b"\x01\x02\xff", dtype=np.uint8), "u8"))
    assert e["scalar"]["fields"]["tensor.shape"] == ""
    assert e["scalar"]["fields"]["tensor.count"] == 1


class ArrayLike:
    """Not a buffer; converts through __array__, as PyTorch CPU tensors and JAX arrays do."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.calls = 0

    def __array__(self, dtype=None, copy=None):
        self.calls += 1
        return self.a


def test_objects_with_array_interface(trec: Recording) -> None:
    like = ArrayLike(np.array([3.0, 4.0], dtype=np.float32))
    waffle.tensor("like", like)
    assert like.calls == 1
    d = trec.stop()
    check(d.one("tensor"), expected("like", like.a, "f32"))


def test_off_means_nothing_is_read_or_recorded(rec: Recording) -> None:
    # `rec` starts without WAFFLE_TENSORS: off.
    like = ArrayLike(np.zeros(3, dtype=np.float32))
    assert waffle.tensor("off", like).is_null
    assert like.calls == 0
    waffle.set_tensors(True)
    assert not waffle.tensor("on", like).is_null
    waffle.set_tensors(False)
    assert waffle.tensor("off again", like).is_null
    assert like.calls == 1
    with waffle.step(1):
        pass
    d = rec.stop()
    assert [e["fields"]["tensor.name"] for e in d.named("tensor")] == ["on"]
    assert d.one("step")["fields"] == {"step": 1}


def test_what_cannot_be_a_tensor(trec: Recording) -> None:
    with pytest.raises(TypeError, match="buffer protocol, __dlpack__ or __array__"):
        waffle.tensor("x", [1.0, 2.0])
    with pytest.raises(TypeError, match="format"):
        waffle.tensor("x", np.array([True, False]))
    with pytest.raises(TypeError, match="format"):
        waffle.tensor("x", np.array([1.0], dtype=">f8"))
    with pytest.raises(TypeError, match="field `bad`"):
        waffle.tensor("x", np.zeros(2), bad=[1])
    trec.stop()


def test_jax_arrays(trec: Recording) -> None:
    jnp = pytest.importorskip("jax.numpy")
    a = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    waffle.tensor("jax", a)
    d = trec.stop()
    check(d.one("tensor"), expected("jax", np.asarray(a), "f32"))
