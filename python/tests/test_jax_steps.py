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

import device_slices  # noqa: E402
import waffle  # noqa: E402
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
    dispatches = [s for s in t.named("heavy") if "start_ns" in s]
    assert len(dispatches) == 4
    by_step = {d["fields"].get("step"): d for d in dispatches}
    for i, s in enumerate(steps):
        d = by_step[i]
        assert d["parent"] == s["id"] and d["fields"] == {"fun_name": "heavy", "step": i}

    tracks, slices = device_slices.read(t.doc)
    device = jax.devices()[0]
    assert [tr.name for tr in tracks.values()] == [f"{device.platform}:{device.id}"]
    mine = sorted((s for s in slices if s.name == "heavy"), key=lambda s: s.begin_ns)
    assert len(mine) == 4
    late = []
    for sl in mine:
        d = next(d for d in dispatches if d["id"] == sl.launched_by)  # the launcher's link
        assert sl.fields == {k: v for k, v in d["fields"].items()}
        # Begins inside its dispatch span (the clock is read just before the call) and ends after
        # it: the device finished later than the call returned.
        assert d["start_ns"] <= sl.begin_ns <= d["end_ns"], (d, sl)
        assert sl.end_ns > d["end_ns"]
        late.append(sl.end_ns - d["end_ns"])
    # The device runs the calls in order: each ends after the one before.
    ends = [sl.end_ns for sl in mine]
    assert ends == sorted(ends)
    # The steps' calls were queued while the one before still ran: their slices overlap.
    assert mine[2].begin_ns < mine[1].end_ns and mine[3].begin_ns < mine[2].end_ns
    print(f"device end after dispatch end (ms): {[round(x / 1e6, 2) for x in late]}")


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


def test_example_runs_and_its_trace_holds_steps_ops_and_tracks(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    res = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(tmp_path), "--steps", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    doc = _native.decode([str(tmp_path / "jax-steps.bin")])
    assert doc["warnings"] == []
    assert len(doc["processes"]) == 1
    items = [x for t in doc["processes"][0]["threads"] for x in t["spans"] + t["events"]]
    names = {x["name"] for x in items}
    assert {"train", "step", "train_step", "jax.backend_compile"} <= names
    steps = sorted(x["fields"]["step"] for x in items if x["name"] == "step")
    assert steps == [0, 1, 2]
    tracks, slices = device_slices.read(doc)
    track_names = {t.name for t in tracks.values()}
    assert "cpu:0" in track_names
    assert any(n.startswith("/host:CPU / ") for n in track_names)
    assert len([s for s in slices if s.track == "cpu:0" and s.name == "train_step"]) == 3
    ops = [s for s in slices if s.track.startswith("/host:CPU / ")]
    assert ops and all(s.fields.get("hlo_module", "").startswith("jit_train_step") for s in ops)
    assert (tmp_path / "jax-steps.pftrace").stat().st_size > 0
    assert "steps" in res.stdout
