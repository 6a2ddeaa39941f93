"""`waffle.jax.step` and `waffle.jax.timed` on CPU JAX: step spans, dispatch spans, and each
compiled call's device time as a slice on the device's track, measured without blocking the
caller; and the example `python/examples/jax_steps.py` run and decoded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from conftest import consumer_module, device_tracks  # noqa: E402
import waffle  # noqa: E402
import xplane_wire  # noqa: E402
import waffle.jax as wj  # noqa: E402
from waffle import _native  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jax_steps.py"


@wj.timed
@jax.jit
def heavy(x):
    # Eight 512 x 512 matmuls: tens of milliseconds on a CPU, against microseconds to dispatch.
    for _ in range(8):
        x = jnp.tanh(x @ x)
    return x


def test_timed_records_dispatch_and_device_time_without_blocking(rec):
    x = jnp.full((512, 512), 0.01, jnp.float32)
    heavy(x).block_until_ready()  # compiles
    outs, ready_on_return = [], []
    for i in range(3):
        with wj.step(i):
            out = heavy(x)
            ready_on_return.append(out.is_ready())
            outs.append(out)
    jax.block_until_ready(outs)
    t = rec.stop()  # waits for the watcher's slices first

    # The caller got its outputs back before the device had finished them: nothing blocked.
    assert ready_on_return == [False, False, False]

    steps = sorted(t.named("step"), key=lambda s: s["start_ns"])
    assert [s["fields"]["step"] for s in steps] == [0, 1, 2]
    dispatches = [s for s in t.named("heavy") if "track" not in s["fields"]]
    assert len(dispatches) == 4
    by_step = {d["fields"].get("in_step"): d for d in dispatches}
    for i, s in enumerate(steps):
        d = by_step[i]
        assert d["parent"] == s["id"] and d["fields"] == {"fun_name": "heavy", "in_step": i}

    tracks, slices = device_tracks(t.doc)
    device = jax.devices()[0]
    assert [tr.name for tr in tracks.values()] == [f"{device.platform}:{device.id}"]
    mine = sorted((s for s in slices if s.name == "heavy"), key=lambda s: s.begin_ns)
    assert len(mine) == 4
    late = []
    for sl in mine:
        d = next(d for d in dispatches if d["id"] == sl.launched_by)  # the launcher's link
        assert sl.fields == {**d["fields"], "queued_ns": sl.fields["queued_ns"]}
        # The clock was read inside the dispatch span, just before the call; the slice begins
        # then, or when the call before it was ready if that is later (queued_ns after it).
        dispatched = sl.begin_ns - sl.fields["queued_ns"]
        assert d["start_ns"] - 1_000 <= dispatched <= d["end_ns"] + 1_000, (d, sl)
        # The device finished after the call returned.
        assert sl.end_ns > d["end_ns"]
        assert sl.parent is None
        late.append(sl.end_ns - d["end_ns"])
    # The device runs the calls in order; a track's slices follow each other (1 us for the
    # two clocks' mapping).
    for a, b in zip(mine, mine[1:]):
        assert a.end_ns - 1_000 <= b.begin_ns
    # The steps' calls were queued while the one before still ran.
    assert mine[2].fields["queued_ns"] > 0 and mine[3].fields["queued_ns"] > 0
    print(f"device end after dispatch end (ms): {[round(x / 1e6, 2) for x in late]}")


def test_wait_returns_once_the_slices_are_recorded_or_the_time_is_up(rec):
    x = jnp.full((512, 512), 0.01, jnp.float32)
    heavy(x).block_until_ready()
    assert wj.wait(timeout=30)
    out = heavy(x)
    assert wj.wait(timeout=0) is False  # the device is still at it
    assert wj.wait(timeout=30) is True and out.is_ready()
    t = rec.stop()
    assert len([s for s in t.spans if s["name"] == "heavy" and "track" in s["fields"]]) == 2


def test_not_recording_runs_the_function_and_records_nothing():
    waffle.shutdown()
    assert not waffle.is_recording()
    x = jnp.full((4, 4), 0.5, jnp.float32)
    assert (heavy(x) == heavy.__wrapped__(x)).all()


def test_step_outside_timed_calls_is_a_plain_step_span(rec):
    with wj.step(7) as s:
        waffle.event("inside")
    t = rec.stop()
    (step,) = t.named("step")
    assert step["fields"] == {"step": 7} and t.one("inside")["parent"] == step["id"]
    assert s is not None


TWO_DEVICES = """
import sys
import jax, jax.numpy as jnp, numpy as np
import waffle, waffle.jax as wj
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
waffle.start(sys.argv[1])
mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
step = wj.timed(jax.jit(lambda x: jnp.tanh(x @ x.T), out_shardings=NamedSharding(mesh, P("data"))))
x = jax.device_put(jnp.ones((256, 128)), NamedSharding(mesh, P("data")))
for i in range(2):
    with wj.step(i):
        y = step(x)
y.block_until_ready()
waffle.shutdown()
"""


def test_a_sharded_output_gets_a_slice_on_each_devices_track(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    path = tmp_path / "two.bin"
    res = subprocess.run([sys.executable, "-c", TWO_DEVICES, str(path)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = _native.decode([str(path)])
    tracks, slices = device_tracks(doc)
    assert sorted(t.name for t in tracks.values()) == ["cpu:0", "cpu:1"]
    spans = [s for t in doc["processes"][0]["threads"] for s in t["spans"] if s["name"] == "<lambda>"]
    dispatches = sorted((s for s in spans if "track" not in s["fields"]), key=lambda s: s["start_ns"])
    assert [d["fields"]["in_step"] for d in dispatches] == [0, 1]
    for d in dispatches:  # one slice a device, both launched by the dispatch span
        mine = sorted((s for s in slices if s.launched_by == d["id"]), key=lambda s: s.track)
        assert [s.track for s in mine] == ["cpu:0", "cpu:1"]
        assert all(s.end_ns > d["start_ns"] and s.fields["in_step"] == d["fields"]["in_step"] for s in mine)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    out = tmp_path_factory.mktemp("jax-steps")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    res = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(out), "--steps", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return out, res.stdout


def test_example_trace_holds_steps_ops_and_tracks(example):
    out, stdout = example
    doc = _native.decode([str(out / "jax-steps.bin")])
    assert doc["warnings"] == []
    assert len(doc["processes"]) == 1
    items = [x for t in doc["processes"][0]["threads"] for x in t["spans"] + t["events"]]
    names = {x["name"] for x in items}
    assert {"train", "step", "train_step", "jax.backend_compile", "loss"} <= names
    steps = sorted((x for x in items if x["name"] == "step"), key=lambda x: x["start_ns"])
    assert [s["fields"]["step"] for s in steps] == [0, 1, 2]
    tracks, slices = device_tracks(doc)
    track_names = {t.name for t in tracks.values()}
    assert "cpu:0" in track_names and any(n.startswith("cpu:0 / tf_") for n in track_names)
    mine = [s for s in slices if s.track == "cpu:0"]
    assert [s.name for s in mine] == ["train_step"] * 3
    ops = [s for s in slices if s.track.startswith("cpu:0 / ")]
    assert ops and all(s.fields["hlo_module"] == "jit_train_step" for s in ops)
    # Each step waited for its result: the step holds its ops, and only its own (one run_id).
    for s in steps:
        inside = {o.fields["run_id"] for o in ops if s["start_ns"] <= o.begin_ns <= o.end_ns <= s["end_ns"]}
        assert len(inside) == 1, (s, inside)
    assert stdout.startswith("3 steps, last loss ") and stdout.count("\nstep ") == 3


def test_example_in_xspace_puts_the_tracks_on_the_cpu_device_plane(example, tmp_path):
    out, _ = example
    _native.export([str(out / "jax-steps.bin")], str(tmp_path / "run.xplane.pb"), "xspace")
    planes = {p.name: p for p in xplane_wire.read((tmp_path / "run.xplane.pb").read_bytes())}
    lines = planes["/device:CPU:0"].lines
    assert len(lines["cpu:0"]) == 3
    # The step spans are xprof's steps (`_r`, `step_num`), and only they: a dispatch span and
    # its slice carry `in_step`, not the `step` field that makes a span a step marker.
    markers = [e for events in planes["/host:CPU"].lines.values() for e in events if "_r" in e.stats]
    assert sorted((e.name, e.stats["step_num"]) for e in markers) == [("step", 0), ("step", 1), ("step", 2)]
    assert any(name.startswith("cpu:0 / tf_") and events for name, events in lines.items())


def test_example_perfetto_output_draws_the_device_tracks(example):
    perfetto = consumer_module("test_perfetto")
    out, _ = example
    tracks = perfetto.read((out / "jax-steps.pftrace").read_bytes())
    by_name = {t.descriptor.name: t for t in tracks.values()}
    device = by_name["cpu:0"]
    assert [s.name for s in device.slices] == ["train_step"] * 3
    assert all(s.flow_in for s in device.slices)  # the arrow from the dispatch span
    executors = [t for n, t in by_name.items() if n.startswith("cpu:0 / ")]
    assert sum(len(t.slices) for t in executors) > 0
