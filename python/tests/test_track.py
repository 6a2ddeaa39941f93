"""waffle.Track: a device track in a clock of its own, its syncs and slices, decoded onto the
host's time on a thread named by the track, with the launching span as each slice's cause."""

from __future__ import annotations

import time

import pytest

import waffle
from waffle import _native


def device_now() -> int:
    """A device clock: 1 tick per µs of the host's monotonic clock, 3 s ahead."""
    return 3_000_000 + time.monotonic_ns() // 1000


def test_slices_land_on_their_track_after_their_launch(rec):
    gpu = waffle.Track("GPU 0", 1_000_000)
    assert gpu.is_recording and gpu.id
    assert gpu.sync(device_now())
    with waffle.span("launch") as launch:
        begin = device_now()
        time.sleep(0.002)
        end = device_now()
    slice_id = gpu.slice("kernel", begin, end, launched_by=launch.id, bytes=4096, kind="gemm")
    assert isinstance(slice_id, waffle.EventId) and slice_id
    other = waffle.event("other")
    gpu.slice("memcpy", end, end + 500, caused_by=[other])
    gpu.sync(device_now())
    t = rec.stop()

    (process,) = t.doc["processes"]
    (track,) = process["tracks"]
    assert (track["name"], track["ticks_per_second"], track["id"]) == ("GPU 0", 1_000_000, gpu.id)
    assert len(track["syncs"]) == 2
    thread = process["threads"][track["thread"]]
    assert thread["name"] == "GPU 0"
    kernel, memcpy = thread["spans"]
    assert kernel["id"] == int(slice_id) and kernel["name"] == "kernel"
    assert kernel["fields"] == {"track": "GPU 0", "bytes": 4096, "kind": "gemm"}
    assert kernel["links"] == [int(launch.id)]
    assert memcpy["links"] == [int(other)]
    span = t.one("launch")
    slack = 100_000  # ns: µs truncation, and the host reading taken after the device's
    assert span["start_ns"] - slack <= kernel["start_ns"] <= kernel["end_ns"] <= span["end_ns"] + slack
    assert 1_900_000 <= kernel["end_ns"] - kernel["start_ns"] <= 20_000_000
    assert memcpy["end_ns"] - memcpy["start_ns"] == pytest.approx(500_000, abs=2_000)
    # The definition and syncs stay events of the recording thread.
    assert [e["name"] for e in t.events if e["name"].startswith("track")] == ["track", "track.sync", "track.sync"]


def test_a_slice_and_an_event_of_one_name_keep_their_own_schemas(rec):
    gpu = waffle.Track("GPU 1", 1_000)
    gpu.sync(0)
    waffle.event("step", n=1)
    gpu.slice("step", 1, 2, n=2)
    waffle.event("step", n=3)
    t = rec.stop()
    events = [e for e in t.events if e["name"] == "step"]
    assert [e["fields"] for e in events] == [{"n": 1}, {"n": 3}]
    (slice_,) = [s for s in t.spans if s["name"] == "step"]
    assert slice_["fields"] == {"track": "GPU 1", "n": 2}


def test_without_a_session_a_track_records_nothing():
    waffle.shutdown()
    gpu = waffle.Track("idle", 1_000)
    assert not gpu.is_recording and gpu.id == 0
    assert not gpu.sync(1)
    assert not gpu.slice("x", 1, 2)
    with pytest.raises(TypeError):
        gpu.slice("x", 1, 2, bad=object())
    assert "Track" in _native.__dict__ and repr(gpu) == "Track(id=0x0000000000000000)"
