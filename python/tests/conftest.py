"""Fixtures: a recording session per test, decoded back into plain dicts by the native decoder
(`waffle._native.decode`, i.e. `waffle_decode::decode`), with helpers to walk the span tree and
to read device tracks back.

The consumer checks of the exporters' outputs live in `tests/consumers/` at the repository root
(Perfetto's protobuf classes, Jaeger UI rules, OTLP protos); `checkers()` imports them.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest

import waffle
from waffle import _native

REPO = Path(__file__).resolve().parents[2]
CONSUMER_TESTS = REPO / "tests" / "consumers"


def consumer_module(name: str):
    """A module of the repository's consumer tests (`tests/consumers/<name>.py`), or a skip."""
    if str(CONSUMER_TESTS) not in sys.path:
        sys.path.insert(0, str(CONSUMER_TESTS))
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.skip(f"tests/consumers/{name}.py cannot be imported: {e}")


class Decoded:
    """A decoded trace: every span and event with its thread, and lookups by name and id."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.warnings = doc["warnings"]
        self.spans: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        for p in doc["processes"]:
            for t in p["threads"]:
                for s in t["spans"]:
                    s["thread"] = t["tid"]
                    self.spans.append(s)
                for e in t["events"]:
                    e["thread"] = t["tid"]
                    self.events.append(e)
        self.by_id = {x["id"]: x for x in self.spans + self.events}

    def named(self, name: str) -> list[dict[str, Any]]:
        return [x for x in self.spans + self.events if x["name"] == name]

    def one(self, name: str) -> dict[str, Any]:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} items named {name!r}: {found}"
        return found[0]

    def parent(self, item: dict[str, Any]) -> Optional[dict[str, Any]]:
        return self.by_id.get(item["parent"]) if item["parent"] else None

    def parent_name(self, item: dict[str, Any]) -> Optional[str]:
        p = self.parent(item)
        return p["name"] if p else None

    def children(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        return [x for x in self.spans + self.events if x["parent"] == item["id"]]


@dataclass
class TrackSlice:
    """A slice of a device track."""

    name: str
    track: str
    begin_ns: int  # host time (the trace's Unix ns), as the decoder mapped it
    end_ns: int
    fields: dict[str, Any]  # the user's, without `track`
    launched_by: Optional[int]
    parent: Optional[int]  # the slice it lies in, on its track


@dataclass
class DeviceTrack:
    """A device track's definition and sync points."""

    id: int
    name: str
    rate: int
    syncs: list[tuple[int, int]] = field(default_factory=list)  # (device ticks, host ns)


def device_tracks(doc: dict[str, Any]) -> tuple[dict[int, DeviceTrack], list[TrackSlice]]:
    """The device tracks of a decoded trace, by id, and their slices: the decoder lists each
    process's `tracks`, and hands a track's slices over as the spans of a thread named after it
    (`thread`, an index into `threads`), each with the field `track` first and its launcher as
    first link, on the host's time base."""
    tracks: dict[int, DeviceTrack] = {}
    slices = []
    for p in doc["processes"]:
        for t in p["threads"]:
            for e in t["events"]:
                assert list(e["fields"])[:3] != ["track.id", "track.begin", "track.end"], f"a slice left as an event: {e}"
        for tr in p["tracks"]:
            tracks[tr["id"]] = DeviceTrack(tr["id"], tr["name"], tr["ticks_per_second"], list(tr["syncs"]))
            thread = p["threads"][tr["thread"]]
            assert thread["name"] == tr["name"] and thread["events"] == []
            for s in thread["spans"]:
                f = dict(s["fields"])
                assert f.pop("track") == tr["name"]
                links = s["links"]
                slices.append(TrackSlice(s["name"], tr["name"], s["start_ns"], s["end_ns"], f,
                                         links[0] if links else None, s["parent"]))
    return tracks, slices


class Recording:
    def __init__(self, path: Path) -> None:
        self.path = path

    def stop(self) -> Decoded:
        waffle.shutdown()
        decoded = Decoded(_native.decode([str(self.path)]))
        assert decoded.warnings == [], decoded.warnings
        for s in decoded.spans:
            assert s["ended"], f"span {s['name']} never ended"
        assert all(p["complete"] and p["dropped"] == 0 for p in decoded.doc["processes"])
        return decoded


@pytest.fixture
def rec(tmp_path: Path):
    """Starts recording to `tmp_path/trace.bin`; `rec.stop()` stops and decodes."""
    waffle.shutdown()
    waffle.set_exporter()
    path = tmp_path / "trace.bin"
    waffle.start(path, process_name="pytest")
    yield Recording(path)
    waffle.shutdown()
    waffle.set_exporter()


@pytest.fixture
def trec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A recording started with WAFFLE_TENSORS=1 in the environment: tensor fingerprints on."""
    waffle.shutdown()
    waffle.set_exporter()
    monkeypatch.setenv("WAFFLE_TENSORS", "1")
    path = tmp_path / "trace.bin"
    waffle.start(path, process_name="pytest")
    yield Recording(path)
    waffle.shutdown()
    waffle.set_exporter()
