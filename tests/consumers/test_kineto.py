"""A PyTorch profiler trace (Kineto's Chrome JSON) exported to Perfetto, read back by Perfetto's
own protobuf classes with the import rules of `test_perfetto.py`.

The profile is written here in the dialect's shape (the facts are in the crate docs of
`waffle-foreign`): a host thread runs three steps of ops, each launching a kernel through
`cudaLaunchKernel` on one of two GPU streams (a `correlation` argument on both, an `ac2g` flow
between them, the op's `External id` on the kernel), a copy, a forward-backward flow, and the
profiler's metadata naming the processes and threads. It is gzipped, as the profiler writes it.

Checked: every kernel and copy is a slice on its stream's own device track, at the time and for
the duration the profile gives (to the nanosecond); each has exactly one arrow into it, from
the runtime call that launched it; the backward op's flow comes from inside the forward op; the
steps are slices of the host thread holding their ops.
"""

import gzip
import json
import os
from pathlib import Path

import pytest
from test_perfetto import flow_arrows, parse, run

REPO = Path(__file__).resolve().parents[2]
BASE_NS = 1_764_000_000_000_000_000
STEPS = 3
KERNELS = [("aten::mm", "sm90_xmma_gemm_f32f32", 7, 40.25), ("aten::gelu", "gelu_kernel", 13, 6.5),
           ("aten::layer_norm", "layer_norm_fwd", 7, 9.0)]


def profile():
    """The events, and what each device op must become: (stream, name, start ns, dur ns)."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": 321, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 321, "tid": 322, "args": {"name": "trainer"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    device, corr = [], 1
    for step in range(STEPS):
        t0 = 10.0 + step * 1000.0
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 321,
                   "tid": 322, "ts": t0, "dur": 900.0})
        host, gpu = t0 + 5.0, t0 + 100.0
        for op, kernel, stream, us in KERNELS + [("aten::copy_", "Memcpy DtoH (Device -> Pinned)", 7, 3.125)]:
            ext = corr
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 321, "tid": 322, "ts": host,
                       "dur": 30.0, "args": {"External id": ext, "Input Dims": [[8, 16]]}})
            launch = "cudaMemcpyAsync" if op == "aten::copy_" else "cudaLaunchKernel"
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": 321, "tid": 322,
                       "ts": host + 10.0, "dur": 5.0, "args": {"correlation": corr, "External id": ext}})
            cat = "gpu_memcpy" if op == "aten::copy_" else "kernel"
            ev.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": stream, "ts": gpu,
                       "dur": us, "args": {"correlation": corr, "External id": ext, "stream": stream}})
            ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 321, "tid": 322,
                       "ts": host + 10.0})
            ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": stream,
                       "ts": gpu, "bp": "e"})
            device.append((stream, kernel, BASE_NS + round(gpu * 1000), round(us * 1000)))
            host += 40.0
            gpu += us + 2.0
            corr += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm_backward", "pid": 321, "tid": 322,
                   "ts": host, "dur": 50.0})
        ev.append({"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": step, "pid": 321, "tid": 322,
                   "ts": t0 + 6.0})
        ev.append({"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": step, "pid": 321, "tid": 322,
                   "ts": host + 1.0, "bp": "e"})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
           "baseTimeNanoseconds": BASE_NS, "traceEvents": ev}
    return doc, device


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    decode = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug")) / "waffle-decode"
    if not decode.is_file():
        pytest.fail(f"{decode} not found: build with `cargo build --workspace` or set WAFFLE_BIN_DIR")
    tmp = tmp_path_factory.mktemp("kineto")
    doc, device = profile()
    (tmp / "run.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    run(decode, tmp / "run.json.gz", "-o", tmp / "run.pftrace")
    tracks, flowing = parse((tmp / "run.pftrace").read_bytes())
    return tracks, flowing, device


def named(tracks, name):
    """The track of a thread named `name`, or of a device timeline (a named track under its
    process, not a thread's)."""
    def name_of(d):
        return d.thread.thread_name if d.HasField("thread") else d.name
    found = [t for t in tracks.values() if name_of(t.descriptor) == name]
    assert len(found) == 1, f"one track named {name!r}: {[t.descriptor for t in tracks.values()]}"
    return found[0]


def test_kernels_on_their_streams_at_their_times(converted):
    tracks, _, device = converted
    for stream in (7, 13):
        # A device track: a named track under the process, as a recorded `waffle::Track` is.
        track = named(tracks, f"GPU 0 / stream {stream}")
        assert not track.descriptor.HasField("thread")
        assert tracks[track.descriptor.parent_uuid].descriptor.process.pid == 321
        got = [(s.name, s.ts, s.end - s.ts) for s in track.slices]
        want = [(name, ts, dur) for (st, name, ts, dur) in device if st == stream]
        assert got == want


def test_each_kernel_has_one_arrow_from_its_launch(converted):
    tracks, flowing, device = converted
    arrows = flow_arrows(flowing)
    gpu = {u for u, t in tracks.items() if t.descriptor.name.startswith("GPU 0")}
    into = {}
    for a, b in arrows:
        if getattr(b, "track", None) in gpu:
            into.setdefault((b.name, b.ts), []).append(a)
    assert len(into) == len(device)
    for (name, ts), sources in into.items():
        assert len(sources) == 1, f"{name} at {ts}: {len(sources)} arrows"
        want = "cudaMemcpyAsync" if name.startswith("Memcpy") else "cudaLaunchKernel"
        assert sources[0].name == want


def test_steps_hold_their_ops_and_the_backward_flow(converted):
    tracks, flowing, _ = converted
    host = named(tracks, "trainer")
    steps = [s for s in host.slices if s.depth == 0]
    assert [(s.name, s.args.get("step")) for s in steps] == [("ProfilerStep", ("uint_value", n)) for n in range(STEPS)]
    for s in steps:
        assert [c.name for c in s.children] == [k[0] for k in KERNELS] + ["aten::copy_", "aten::mm_backward"]
    arrows = [(a, b) for a, b in flow_arrows(flowing) if a.name == "fwdbwd"]
    assert len(arrows) == STEPS
    for step, (a, b) in zip(steps, arrows):
        mm, bwd = step.children[0], step.children[-1]
        assert any(i is a for i in mm.instants) and any(i is b for i in bwd.instants)
