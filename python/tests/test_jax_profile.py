"""`waffle.jax.merge_profile` and `profile` on CPU JAX: a jitted function called in a few
steps under both waffle and `jax.profiler.trace`; the profile's XLA ops merged as slices on
device tracks and checked against the `.xplane.pb` read independently (`xplane_wire`), on
waffle's time base; a profile with a GPU plane built from text; bad input."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from conftest import device_tracks  # noqa: E402
import waffle  # noqa: E402
import waffle.jax as wj  # noqa: E402
import xplane_wire  # noqa: E402
from waffle import _native  # noqa: E402

#: How far an op may lie outside the span that called it and waited for it: the error of the
#: time base (the profiler's Unix clock against waffle's, paired once at the merge). Measured:
#: the profiler's `PjitFunction` events fall inside waffle's dispatch spans with about 1 to 13
#: microseconds to spare at each end, and no op has stuck out of its call (printed below), so
#: 50 us is several times what is seen.
TOLERANCE_NS = 50_000


@jax.jit
def model(x, w):
    h = jnp.tanh(x @ w)
    return jnp.sum(h * h, axis=1), jnp.max(h)


def _profiled_steps(tmp_path: Path, rec) -> tuple[object, list[xplane_wire.Plane], Path]:
    x = jnp.full((256, 256), 0.01, jnp.float32)
    w = jnp.full((256, 256), 0.02, jnp.float32)
    timed = wj.timed(model)
    jax.block_until_ready(model(x, w))  # compiled before the profile
    logdir = tmp_path / "profile"
    with jax.profiler.trace(str(logdir)):
        for i in range(3):
            with wj.step(i), waffle.span("call", i=i):
                jax.block_until_ready(timed(x, w))
    counts = wj.merge_profile(logdir)
    (pb,) = wj.profile_files(logdir)
    planes = xplane_wire.read(pb.read_bytes())
    assert sum(counts.values()) > 0, counts
    return rec.stop(), planes, pb


def test_merged_ops_are_the_profiles_and_lie_inside_their_calls(rec, tmp_path):
    t, planes, _ = _profiled_steps(tmp_path, rec)
    base = xplane_wire.start_time(planes)

    # The profile's XLA ops, read independently: events with an `hlo_op` stat on the host plane.
    want = sorted(
        (f"cpu:{e.stats['device_ordinal']} / {line}", e.name, base + round(e.begin_ns), base + round(e.end_ns))
        for p in planes
        if p.name == "/host:CPU"
        for line, events in p.lines.items()
        for e in events
        if "hlo_op" in e.stats
    )
    assert len(want) >= 3  # at least one op a call
    tracks, slices = device_tracks(t.doc)
    ops = [s for s in slices if s.track.startswith("cpu:0 / ")]
    assert sorted((s.track, s.name) for s in ops) == [(tr, n) for tr, n, _, _ in want]
    for s in ops:
        assert s.fields["hlo_module"] == "jit_model" and s.fields["hlo_op"] == s.name
        assert not any(k.startswith("_") for k in s.fields)

    # One time base: each call ran one program (one run_id), and every op of the k-th run lies
    # inside the k-th `call` span, which waited for it.
    calls = sorted(t.named("call"), key=lambda c: c["start_ns"])
    assert len(calls) == 3
    runs: dict[int, list] = {}
    for s in ops:
        runs.setdefault(s.fields["run_id"], []).append(s)
    assert len(runs) == 3
    outside = []
    for run, call in zip(sorted(runs.values(), key=lambda r: min(o.begin_ns for o in r)), calls):
        for s in run:
            assert call["start_ns"] - TOLERANCE_NS <= s.begin_ns <= s.end_ns <= call["end_ns"] + TOLERANCE_NS, (s, call)
            outside.append(max(call["start_ns"] - s.begin_ns, s.end_ns - call["end_ns"], 0))
    print(f"ops outside their call span by at most {max(outside)} ns")

    # The offset, checked on what both recorded: the profiler's `PjitFunction(model)` (the
    # dispatch, Unix ns) against waffle's dispatch span `model` around the same call.
    (cpu,) = [p for p in planes if p.name == "/host:CPU"]
    pjit = sorted(
        (e for e in cpu.lines["python"] if e.name == "PjitFunction(model)"), key=lambda e: e.begin_ns
    )
    dispatches = sorted((s for s in t.named("model") if "track" not in s["fields"]), key=lambda s: s["start_ns"])
    assert len(dispatches) == 3
    # PjitFunction nests (an outer and an inner event a call); the outer one of each call.
    outer = [e for e in pjit if not any(o is not e and o.begin_ns <= e.begin_ns and e.end_ns <= o.end_ns for o in pjit)]
    assert len(outer) == 3
    slack = []
    for e, d in zip(outer, dispatches):
        begin, end = base + round(e.begin_ns), base + round(e.end_ns)
        assert d["start_ns"] - TOLERANCE_NS <= begin <= end <= d["end_ns"] + TOLERANCE_NS
        slack.append((begin - d["start_ns"], d["end_ns"] - end))
    print(f"PjitFunction inside waffle's dispatch span by (begin, end) ns: {slack}")

    # Python spans, the device track of `timed` and the XLA ops are one trace, one process.
    assert len(t.doc["processes"]) == 1
    assert {"cpu:0"} | {s.track for s in ops} == {tr.name for tr in tracks.values()}
    timed_slices = [s for s in slices if s.track == "cpu:0"]
    assert len(timed_slices) == 3
    for sl in timed_slices:  # dispatch to ready holds that call's ops
        dispatched = sl.begin_ns - sl.fields["queued_ns"]
        mine = [s for s in ops if dispatched - TOLERANCE_NS <= s.begin_ns and s.end_ns <= sl.end_ns + TOLERANCE_NS]
        assert mine, sl


def test_merge_takes_a_file_and_refuses_what_is_not_a_profile(rec, tmp_path):
    _, _, pb = _profiled_steps(tmp_path, rec)
    waffle.start(tmp_path / "again.bin")
    counts = wj.merge_profile(pb)  # the file itself, in a second session: tracks defined anew
    assert counts and all(n > 0 for n in counts.values())
    waffle.shutdown()
    tracks, slices = device_tracks(_native.decode([str(tmp_path / "again.bin")]))
    assert sorted(t.name for t in tracks.values()) == sorted(counts)
    assert {t: sum(s.track == t for s in slices) for t in counts} == counts

    waffle.start(tmp_path / "third.bin")

    with pytest.raises(FileNotFoundError, match="missing"):
        wj.merge_profile(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no .xplane.pb"):
        wj.merge_profile(empty)
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\xff" * 40)
    with pytest.raises(ValueError, match="bad.xplane.pb: not an XSpace profile"):
        wj.merge_profile(bad)
    waffle.shutdown()
    with pytest.raises(RuntimeError, match="no waffle session is recording"):
        wj.merge_profile(pb)


def test_profile_block_is_merged_when_it_ends(rec, tmp_path):
    x = jnp.full((128, 128), 0.01, jnp.float32)
    timed = wj.timed(model)
    jax.block_until_ready(model(x, x))
    with wj.profile(tmp_path / "logdir") as counts:
        with waffle.span("call"):
            jax.block_until_ready(timed(x, x))
        assert counts == {}  # filled when the block ends
    assert counts and all(name.startswith("cpu:0 / ") for name in counts)
    t = rec.stop()
    _, slices = device_tracks(t.doc)
    call = t.one("call")
    ops = [s for s in slices if s.track in counts]
    assert len(ops) == sum(counts.values())
    assert all(call["start_ns"] - TOLERANCE_NS <= s.begin_ns <= s.end_ns <= call["end_ns"] + TOLERANCE_NS for s in ops)
    assert len([s for s in slices if s.track == "cpu:0"]) == 1


def _xspace(start: int, absolute: int) -> bytes:
    """A profile as a GPU run would write it, built from text: a device plane (`XLA Ops`, `XLA
    Modules`), a host plane whose executor line has an op of no known device, one of CPU
    device 1 and a bookkeeping event, and which has an `XLA Ops` line of its own, and
    `Task Environment` with the profile's start. Times are offsets from `start`, except the
    line `Stream #7`, whose `timestamp_ns` is the Unix time `absolute` (a profile whose times
    were not made relative)."""
    text = f"""
    planes {{
      name: "/device:GPU:0"
      lines {{ name: "XLA Ops" timestamp_ns: 1000
        events {{ metadata_id: 1 offset_ps: 2000000 duration_ps: 3000000 stats {{ metadata_id: 1 str_value: "jit_step" }} }}
        events {{ metadata_id: 2 offset_ps: 6000000 duration_ps: 500000 stats {{ metadata_id: 2 int64_value: 5 }} }} }}
      lines {{ name: "XLA Modules" timestamp_ns: 1000
        events {{ metadata_id: 3 offset_ps: 1000000 duration_ps: 6000000 }} }}
      lines {{ name: "Stream #7" timestamp_ns: {absolute}
        events {{ metadata_id: 1 offset_ps: 0 duration_ps: 1000000 }} }}
      event_metadata {{ key: 1 value {{ id: 1 name: "fusion.1" }} }}
      event_metadata {{ key: 2 value {{ id: 2 name: "copy.2" }} }}
      event_metadata {{ key: 3 value {{ id: 3 name: "jit_step(1)" }} }}
      stat_metadata {{ key: 1 value {{ id: 1 name: "hlo_module" }} }}
      stat_metadata {{ key: 2 value {{ id: 2 name: "_internal" }} }}
    }}
    planes {{
      name: "/host:CPU"
      lines {{ name: "python" timestamp_ns: 0 events {{ metadata_id: 1 offset_ps: 0 duration_ps: 9000000 }} }}
      lines {{ name: "executor" timestamp_ns: 0
        events {{ metadata_id: 2 offset_ps: 1000000 duration_ps: 1000000 stats {{ metadata_id: 1 str_value: "add" }} }}
        events {{ metadata_id: 3 offset_ps: 3000000 duration_ps: 1000000 }}
        events {{ metadata_id: 2 offset_ps: 5000000 duration_ps: 1000000
                  stats {{ metadata_id: 1 str_value: "add" }} stats {{ metadata_id: 2 int64_value: 1 }} }} }}
      lines {{ name: "XLA Ops" timestamp_ns: 0 events {{ metadata_id: 2 offset_ps: 4000000 duration_ps: 2000000 }} }}
      event_metadata {{ key: 1 value {{ id: 1 name: "$train.py:12 step" }} }}
      event_metadata {{ key: 2 value {{ id: 2 name: "add" }} }}
      event_metadata {{ key: 3 value {{ id: 3 name: "ThunkExecutor::Execute" }} }}
      stat_metadata {{ key: 1 value {{ id: 1 name: "hlo_op" }} }}
      stat_metadata {{ key: 2 value {{ id: 2 name: "device_ordinal" }} }}
    }}
    planes {{
      name: "Task Environment"
      stats {{ metadata_id: 1 uint64_value: {start} }}
      stat_metadata {{ key: 1 value {{ id: 1 name: "profile_start_time" }} }}
    }}
    """
    return jax.profiler.ProfileData.text_proto_to_serialized_xspace(text)


def test_device_planes_and_unix_times_land_where_the_profile_says(rec, tmp_path):
    start = time.time_ns() - 5_000_000  # a profile that began 5 ms ago
    absolute = start + 8_000
    pb = tmp_path / "gpu.xplane.pb"
    pb.write_bytes(_xspace(start, absolute))
    counts = wj.merge_profile(pb)
    assert counts == {
        "gpu:0 / XLA Ops": 2,
        "gpu:0 / XLA Modules": 1,
        "gpu:0 / Stream #7": 1,
        "/host:CPU / executor": 1,
        "cpu:1 / executor": 1,
        "/host:CPU / XLA Ops": 1,
    }
    t = rec.stop()
    _, slices = device_tracks(t.doc)
    got = {(s.track, s.name): s for s in slices}
    want = {  # (track, name): (begin, end) in Unix ns, from the text above
        ("gpu:0 / XLA Ops", "fusion.1"): (start + 3_000, start + 6_000),
        ("gpu:0 / XLA Ops", "copy.2"): (start + 7_000, start + 7_500),
        ("gpu:0 / XLA Modules", "jit_step(1)"): (start + 2_000, start + 8_000),
        ("gpu:0 / Stream #7", "fusion.1"): (absolute, absolute + 1_000),
        ("/host:CPU / executor", "add"): (start + 1_000, start + 2_000),
        ("cpu:1 / executor", "add"): (start + 5_000, start + 6_000),
        ("/host:CPU / XLA Ops", "add"): (start + 4_000, start + 6_000),
    }
    assert sorted(got) == sorted(want)
    # One sync at the merge pairs time.time_ns() with waffle's clock: the slices land where the
    # profile says, within what separates those two readings.
    for key, (begin, end) in want.items():
        s = got[key]
        assert abs(s.begin_ns - begin) < TOLERANCE_NS and abs(s.end_ns - end) < TOLERANCE_NS, (key, s)
        # Durations are exact, but for the line of Unix times: jaxlib's reader gives times as
        # doubles, 256 ns apart at today's Unix ns.
        exact = 2 if key[0] != "gpu:0 / Stream #7" else 256
        assert s.end_ns - s.begin_ns == pytest.approx(end - begin, abs=exact), (key, s)
    assert got[("gpu:0 / XLA Ops", "fusion.1")].fields == {"hlo_module": "jit_step"}
    assert got[("gpu:0 / XLA Ops", "copy.2")].fields == {}  # `_internal` left out
    assert got[("/host:CPU / executor", "add")].fields == {"hlo_op": "add"}
