"""What `waffle.tensor` costs by the way it reads a tensor, in one process and one run.

Cases, each at a small, a cache-sized and a large size (1,024 elements, 1 MiB, 64 MiB of
float32, or as many bfloat16 elements):

- ``numpy buffer``: a NumPy array read in place through the buffer protocol (the baseline);
- ``numpy dlpack``: the same array behind an object with nothing but ``__dlpack__``: in place
  through a capsule;
- ``jax`` and ``torch`` (where installed): in place through their own capsules, float32 and
  bfloat16;
- ``torch .T``, a transposed (strided) tensor: copied in C order first;
- ``device copy``: a tensor that says it lives on a device (``__dlpack_device__`` is CUDA)
  and whose ``__dlpack__(dl_device=(kDLCPU, 0), copy=True)`` makes a host copy with NumPy: the
  route a CUDA tensor takes, less the transfer over the bus;
- on a machine with a GPU (PyTorch CUDA, CuPy or JAX on a GPU), the real thing: a tensor on
  the device, copied to the host by its framework;
- ``memcpy``: ``np.copyto`` of the same bytes, to put the copies in scale.

Each case runs ``--rounds`` rounds of enough calls for about 0.2 s; the table gives the best
and the median time per call and the tensor's bytes per second at the best.

    .venv/bin/python python/benches/bench_tensors.py          # about a minute
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import timeit

import numpy as np

import waffle

SIZES = {"4 KiB": 1024, "1 MiB": 1 << 18, "64 MiB": 1 << 24}  # float32 elements


class Capsules:
    """Nothing but the DLPack protocol, forwarded to `inner`."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.inner.__dlpack__(**kwargs)


class OnDevice:
    """Says it is on cuda:0; its host copy is a NumPy copy (what a device copy costs on the host
    side, with no bus in between)."""

    def __init__(self, inner: np.ndarray) -> None:
        self.inner = inner

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is None or tuple(dl_device) != (1, 0):
            raise BufferError("device memory")
        return self.inner.copy().__dlpack__(max_version=max_version)


def cases(n: int):
    """(name, bytes, zero-argument function) for `n` float32 elements' worth of bytes."""
    a = np.linspace(-1.0, 1.0, n, dtype=np.float32)
    yield "numpy buffer f32", a.nbytes, lambda: waffle.tensor("t", a)
    wrapped = Capsules(a)
    yield "numpy dlpack f32", a.nbytes, lambda: waffle.tensor("t", wrapped)
    device = OnDevice(a)
    yield "device copy f32 (simulated)", a.nbytes, lambda: waffle.tensor("t", device)
    out = np.empty_like(a)
    yield "memcpy (np.copyto)", a.nbytes, lambda: np.copyto(out, a)
    try:
        import jax
        import jax.numpy as jnp

        j = jnp.asarray(a)
        jb = j.astype(jnp.bfloat16).reshape(2, -1)
        jb = jnp.concatenate([jb, jb])  # twice the elements: the same bytes as the f32 case
        jax.block_until_ready((j, jb))
        yield "jax f32", a.nbytes, lambda: waffle.tensor("t", j)
        yield "jax bf16", jb.nbytes, lambda: waffle.tensor("t", jb)
        if jax.default_backend() != "cpu":
            yield f"jax {jax.default_backend()} f32 to host", a.nbytes, lambda: waffle.tensor("t", j)
    except ImportError:
        pass
    try:
        import torch

        t = torch.from_numpy(a.copy())
        tb = torch.linspace(-1, 1, 2 * n, dtype=torch.bfloat16)
        tt = tb.reshape(2, -1).T
        yield "torch f32", t.numel() * 4, lambda: waffle.tensor("t", t)
        yield "torch bf16", tb.numel() * 2, lambda: waffle.tensor("t", tb)
        yield "torch bf16 .T (strided)", tt.numel() * 2, lambda: waffle.tensor("t", tt)
        if torch.cuda.is_available():
            tc, tcb = t.cuda(), tb.cuda()
            torch.cuda.synchronize()
            yield "torch cuda f32 to host", t.numel() * 4, lambda: waffle.tensor("t", tc)
            yield "torch cuda bf16 to host", tb.numel() * 2, lambda: waffle.tensor("t", tcb)
    except ImportError:
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            c = cupy.asarray(a)
            yield "cupy f32 to host", a.nbytes, lambda: waffle.tensor("t", c)
    except Exception:
        pass


def fmt_time(s: float) -> str:
    return f"{s * 1e6:,.1f} µs" if s < 1e-2 else f"{s * 1e3:,.1f} ms"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        waffle.set_exporter()
        waffle.start(os.path.join(d, "bench.bin"), process_name="bench_tensors")
        waffle.set_tensors(True)
        print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, numpy {np.__version__}")
        print("| case | size | best | median | bytes/s (best) |")
        print("|---|---|---:|---:|---:|")
        for label, n in SIZES.items():
            for name, nbytes, f in cases(n):
                f()  # once before timing: imports, callsites, first touch
                t0 = timeit.timeit(f, number=1)
                number = max(1, int(0.2 / max(t0, 1e-7)))
                times = [timeit.timeit(f, number=number) / number for _ in range(args.rounds)]
                best, median = min(times), statistics.median(times)
                print(f"| {name} | {label} | {fmt_time(best)} | {fmt_time(median)} | {nbytes / best / 1e9:,.2f} GB/s |", flush=True)
        waffle.shutdown()


if __name__ == "__main__":
    main()
