"""`waffle.tensor` on objects it reads through DLPack: a producer written by hand
(`dlpack_producer.HandMade`, nothing but `__dlpack__`/`__dlpack_device__`) for every layout the
protocol allows and for the protocol's own rules, NumPy's and JAX's capsules behind such an
object, JAX arrays, PyTorch tensors where PyTorch is installed, and tensors on a device copied
to the host. Every fingerprint is compared with values computed here with NumPy and the
`xxhash` package (`tensor_checks`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import Recording
from dlpack_producer import BFLOAT, BOOL, COMPLEX, CUDA, FLOAT, INT, UINT, HandMade, capsule_name
from tensor_checks import check, expected

import waffle

ml_dtypes = pytest.importorskip("ml_dtypes")


def by_name(d) -> dict:
    return {e["fields"]["tensor.name"]: e for e in d.named("tensor")}


def test_every_layout_of_a_hand_made_tensor(trec: Recording) -> None:
    f64 = np.arange(24, dtype=np.float64) * 0.5 - 3.0
    f32 = np.array([1.0, -2.0, np.nan, np.inf, 0.25, 3.0, 7.0, -np.inf, 9.0], dtype=np.float32)
    i16 = np.arange(-8, 8, dtype=np.int16) * 1000
    bf16 = np.array([1.5, -4.0, np.nan, np.inf, 0.0, 2.0, -0.5, 65280.0], dtype=ml_dtypes.bfloat16)
    u8 = np.arange(7, dtype=np.uint8) * 37
    tensors = {
        # C order, strides left out: read where it lies.
        "c order": (HandMade(f32, FLOAT, 32, (2, 3)), np.float32, "f32"),
        # A transposed view 8 bytes into its allocation: byte_offset and strides honoured.
        "transposed": (HandMade(f64, FLOAT, 64, (4, 3), strides=(1, 4), byte_offset=8), np.float64, "f64"),
        # Backwards from the 13th element, every other one.
        "negative": (HandMade(i16, INT, 16, (6,), strides=(-2,), byte_offset=2 * 12), np.int16, "i16"),
        # bfloat16 in Fortran order.
        "bf16": (HandMade(bf16, BFLOAT, 16, (2, 3), strides=(1, 2)), ml_dtypes.bfloat16, "bf16"),
        # A row broadcast over three rows (stride 0).
        "broadcast": (HandMade(u8, UINT, 8, (3, 4), strides=(0, 1), byte_offset=2), np.uint8, "u8"),
        # Contiguous, but the data pointer is one byte past an f32's alignment: copied first.
        "misaligned": (HandMade(np.arange(10, dtype=np.uint8) * 3, FLOAT, 32, (2,), data_offset=1), np.float32, "f32"),
        # Explicit C-order strides, and a dimension of one element with a meaningless stride.
        "explicit": (HandMade(f32, FLOAT, 32, (1, 3, 2), strides=(999, 2, 1), byte_offset=4), np.float32, "f32"),
        "scalar": (HandMade(f64, FLOAT, 64, (), byte_offset=8 * 5), np.float64, "f64"),
        "empty": (HandMade(f32, FLOAT, 32, (0, 3)), np.float32, "f32"),
        # The unversioned struct, as producers before DLPack 1.0 hand out.
        "legacy": (HandMade(f64, FLOAT, 64, (2, 2), strides=(4, 1), versioned=False), np.float64, "f64"),
    }
    for name, (t, _, _) in tensors.items():
        waffle.tensor(name, t)
    d = trec.stop()
    got = by_name(d)
    assert set(got) == set(tensors)
    for name, (t, dtype, short) in tensors.items():
        want = t.expected(dtype)
        check(got[name], expected(name, want, short))
        # The protocol: asked once for version 1.1, the capsule renamed as consumed and the
        # deleter called exactly once, by waffle (the capsules have no destructor, and are
        # still alive here).
        assert [c["max_version"] for c in t.calls] == [(1, 1)], name
        want_name = "used_dltensor_versioned" if t.versioned else "used_dltensor"
        assert [capsule_name(c) for c in t.capsules] == [want_name], name
        assert len(t.deleted) == 1, name
    assert got["scalar"]["fields"]["tensor.shape"] == ""
    assert got["scalar"]["fields"]["tensor.count"] == 1
    assert got["empty"]["fields"]["tensor.shape"] == "0x3"
    assert got["broadcast"]["fields"]["tensor.shape"] == "3x4"


def test_what_a_dlpack_tensor_cannot_be(trec: Recording) -> None:
    memory = np.zeros(8, dtype=np.float64)
    complex64 = HandMade(memory, COMPLEX, 64, (2,))
    with pytest.raises(TypeError, match=r"complex64 elements \(on cpu:0\)"):
        waffle.tensor("x", complex64)
    boolean = HandMade(memory, BOOL, 8, (4,))
    with pytest.raises(TypeError, match=r"bool elements \(on cpu:0\)"):
        waffle.tensor("x", boolean)
    # A major version waffle does not know: refused, and the deleter called all the same.
    future = HandMade(memory, FLOAT, 64, (2,), version=(2, 0))
    with pytest.raises(BufferError, match=r"version 2\.0"):
        waffle.tensor("x", future)
    for t in (complex64, boolean, future):
        assert len(t.deleted) == 1
        assert capsule_name(t.capsules[0]) == "used_dltensor_versioned"

    class Twice:
        """Hands out the same capsule on every call."""

        def __init__(self) -> None:
            self.capsule = np.zeros(2).__dlpack__()

        def __dlpack__(self, **kwargs):
            return self.capsule

    twice = Twice()
    waffle.tensor("first", twice)
    with pytest.raises(BufferError, match="consumed already"):
        waffle.tensor("second", twice)

    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(TypeError, match="returned a int, not a DLPack capsule"):
        waffle.tensor("x", NotACapsule())
    d = trec.stop()
    assert [e["fields"]["tensor.name"] for e in d.named("tensor")] == ["first"]


def test_off_never_asks_for_a_capsule(rec: Recording) -> None:
    # `rec` starts without WAFFLE_TENSORS: off.
    t = HandMade(np.ones(4, dtype=np.float32), FLOAT, 32, (4,), device=(CUDA, 0))
    assert waffle.tensor("off", t).is_null
    assert t.calls == [] and t.deleted == []
    rec.stop()


class Capsules:
    """Nothing but `__dlpack__`/`__dlpack_device__`, forwarded to another array (so the
    capsule is NumPy's or JAX's), keeping every capsule handed out and the arguments asked."""

    def __init__(self, inner, legacy: bool = False) -> None:
        self.inner = inner
        self.legacy = legacy
        self.calls: list[dict] = []
        self.capsules: list[object] = []

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        if self.legacy and "max_version" in kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.calls.append(kwargs)
        capsule = self.inner.__dlpack__(**kwargs)
        self.capsules.append(capsule)
        return capsule


def test_numpy_capsules_versioned_and_not(trec: Recording) -> None:
    a = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)[:, ::2]
    new, old = Capsules(a), Capsules(a, legacy=True)
    before = sys.getrefcount(a)
    waffle.tensor("versioned", new)
    waffle.tensor("legacy", old)
    # NumPy's capsule holds a reference to the array until its deleter runs: back to where it
    # was while the capsules are still alive, so waffle called the deleters.
    assert sys.getrefcount(a) == before
    assert [capsule_name(c) for c in new.capsules] == ["used_dltensor_versioned"]
    assert [capsule_name(c) for c in old.capsules] == ["used_dltensor"]
    assert old.calls == [{}]
    d = trec.stop()
    got = by_name(d)
    check(got["versioned"], expected("versioned", a, "f32"))
    check(got["legacy"], expected("legacy", a, "f32"))


def test_jax_arrays_through_dlpack(trec: Recording) -> None:
    jnp = pytest.importorskip("jax.numpy")
    values = [1.5, -4.0, float("nan"), float("inf"), 0.0, 3.25]
    arrays = {
        "bf16": (jnp.array(values, dtype=jnp.bfloat16).reshape(2, 3), "bf16"),
        "f16": (jnp.array(values, dtype=jnp.float16), "f16"),
        "f32": (jnp.arange(6, dtype=jnp.float32).reshape(2, 3), "f32"),
        "i8": (jnp.array([-128, 0, 127], dtype=jnp.int8), "i8"),
        "u32": (jnp.array([0, 4_000_000_000], dtype=jnp.uint32), "u32"),
    }
    for name, (a, _) in arrays.items():
        waffle.tensor(name, a)
    # JAX's own capsule ("dltensor", the unversioned struct) behind an object with nothing else.
    wrapped = Capsules(arrays["bf16"][0])
    waffle.tensor("wrapped bf16", wrapped)
    assert [capsule_name(c) for c in wrapped.capsules] == ["used_dltensor"]
    d = trec.stop()
    got = by_name(d)
    for name, (a, short) in arrays.items():
        check(got[name], expected(name, np.asarray(a), short))
    check(got["wrapped bf16"], expected("wrapped bf16", np.asarray(arrays["bf16"][0]), "bf16"))
    raw = np.asarray(arrays["bf16"][0]).view(np.uint16).astype("<u2").tobytes()
    assert raw[:4] == bytes([0xC0, 0x3F, 0x80, 0xC0])


def test_a_tensor_on_a_device_is_copied_to_the_host_by_its_framework(trec: Recording) -> None:
    host = np.array([[1.0, 2.0], [np.nan, -8.0]], dtype=np.float32)
    # DLPack's own way: the copy asked of `__dlpack__` with dl_device=(kDLCPU, 0), copy=True.
    copy = HandMade(host, FLOAT, 32, (2, 2))
    device = HandMade(np.zeros(4, np.float32), FLOAT, 32, (2, 2), device=(CUDA, 0), on_copy_to_host=copy)
    waffle.tensor("dl_device", device)
    assert [(c["dl_device"], c["copy"]) for c in device.calls] == [((1, 0), True)]
    assert len(copy.deleted) == 1 and device.deleted == []

    class OldDeviceTensor:
        """A device tensor whose `__dlpack__` predates `dl_device`, with a `.cpu()` (PyTorch's
        name for the host copy)."""

        dtype = "float32"

        def __init__(self) -> None:
            self.cpu_calls = 0

        def __dlpack_device__(self):
            return (CUDA, 1)

        def __dlpack__(self, stream=None):
            raise AssertionError("a device tensor's capsule is not readable on the host")

        def cpu(self):
            self.cpu_calls += 1
            return Capsules(host)

    old = OldDeviceTensor()
    waffle.tensor("cpu()", old)
    assert old.cpu_calls == 1

    class Unreachable(OldDeviceTensor):
        def cpu(self):
            raise RuntimeError("no driver")

    with pytest.raises(BufferError, match=r"a Unreachable of float32 on cuda:1 could not be copied to the host") as e:
        waffle.tensor("x", Unreachable())
    assert "no driver" in str(e.value) and "dl_device" in str(e.value)

    class Stays(OldDeviceTensor):
        """A host copy that is not one."""

        def cpu(self):
            return self

    with pytest.raises(BufferError, match=r"\.cpu\(\) gave a Stays of float32, not in host memory"):
        waffle.tensor("x", Stays())
    d = trec.stop()
    got = by_name(d)
    assert set(got) == {"dl_device", "cpu()"}
    check(got["dl_device"], expected("dl_device", host, "f32"))
    check(got["cpu()"], expected("cpu()", host, "f32"))


def test_a_jax_array_sharded_over_two_devices(tmp_path) -> None:
    """A JAX array on two (CPU) devices has no one device for DLPack; JAX's own host copy
    (`__array__`, which gathers the shards) is used, in a process of its own with two devices."""
    pytest.importorskip("jax")
    script = textwrap.dedent(
        """
        import sys, jax, jax.numpy as jnp, numpy as np, waffle
        from jax.sharding import NamedSharding, PartitionSpec
        mesh = jax.make_mesh((2,), ("x",))
        a = jax.device_put(jnp.arange(8, dtype=jnp.bfloat16) - 3, NamedSharding(mesh, PartitionSpec("x")))
        assert len(a.sharding.device_set) == 2
        waffle.start(sys.argv[1], process_name="sharded")
        waffle.set_tensors(True)
        waffle.tensor("sharded", a)
        waffle.shutdown()
        """
    )
    path = tmp_path / "trace.bin"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    res = subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    d = Recording(path).stop()
    want = (np.arange(8, dtype=np.float32) - 3).astype(ml_dtypes.bfloat16)
    check(d.one("tensor"), expected("sharded", want, "bf16"))


SHORT = {
    "torch.bfloat16": "bf16",
    "torch.float16": "f16",
    "torch.float32": "f32",
    "torch.float64": "f64",
    "torch.int8": "i8",
    "torch.int64": "i64",
    "torch.uint8": "u8",
}


def test_pytorch_tensors(trec: Recording) -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (not in the test requirements: its wheel is large)")
    values = torch.tensor([[1.5, -4.0, float("nan")], [float("inf"), 0.0, 65280.0]])
    tensors = {
        "bf16": values.to(torch.bfloat16),
        "f16": values.to(torch.float16),
        "f32": values,
        "f64": values.double(),
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "i64": torch.tensor([-(2**40), 2**40]),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        # Strided views: transposed, every other column of rows 1.., a storage offset.
        "transposed": values.to(torch.bfloat16).T,
        "sliced": torch.arange(24, dtype=torch.float32).reshape(4, 6)[1:, ::2],
        # A parameter: requires grad, which PyTorch refuses to export; read detached.
        "parameter": torch.nn.Parameter(torch.linspace(-1, 1, 5)),
        "scalar": torch.tensor(2.5),
    }
    for name, t in tensors.items():
        waffle.tensor(name, t)
    with pytest.raises(TypeError, match=r"bool elements \(on cpu:0\)"):
        waffle.tensor("x", torch.tensor([True]))
    with pytest.raises(TypeError, match=r"complex64 elements \(on cpu:0\)"):
        waffle.tensor("x", torch.ones(2, dtype=torch.complex64))
    d = trec.stop()
    got = by_name(d)
    assert set(got) == set(tensors)
    for name, t in tensors.items():
        t = t.detach().contiguous()
        short = SHORT[str(t.dtype)]
        # NumPy has no bfloat16: its bits, seen as ml_dtypes' bfloat16.
        a = t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if short == "bf16" else t.numpy()
        check(got[name], expected(name, a, short))
    assert got["scalar"]["fields"]["tensor.shape"] == ""
