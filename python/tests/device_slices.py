"""Device tracks read back from a decoded trace (``waffle._native.decode``): each track's
definition, sync points and slices, and every slice's begin and end placed on the host's time
base by the tests' own reading of ``docs/device-tracks.md``: piecewise linear between
consecutive syncs, the nominal rate before the first and after the last."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Slice:
    name: str
    track: str
    begin_ns: float  # host time (the trace's Unix ns)
    end_ns: float
    fields: dict[str, Any]
    launched_by: int | None
    thread: int


@dataclass
class Track:
    id: int
    name: str
    rate: int
    syncs: list[tuple[int, int]] = field(default_factory=list)  # (device ticks, host ns)

    def host_ns(self, ticks: int) -> float:
        assert self.syncs, f"track {self.name!r} has no sync point"
        s = sorted(self.syncs)
        i = bisect.bisect_right([t for t, _ in s], ticks)
        if 0 < i < len(s):
            (t0, h0), (t1, h1) = s[i - 1], s[i]
            return h0 + (ticks - t0) * (h1 - h0) / (t1 - t0)
        t0, h0 = s[0] if i == 0 else s[-1]
        return h0 + (ticks - t0) * 1e9 / self.rate


def read(doc: dict[str, Any]) -> tuple[dict[int, Track], list[Slice]]:
    """The tracks of every process (by id) and their slices."""
    tracks: dict[int, Track] = {}
    raw = []
    for p in doc["processes"]:
        for t in p["threads"]:
            for e in t["events"]:
                f = e["fields"]
                if e["name"] == "track" and list(f)[:2] == ["track.name", "track.rate"]:
                    tracks[e["id"]] = Track(e["id"], f["track.name"], f["track.rate"])
                elif e["name"] == "track.sync" and list(f) == ["track.id", "track.ticks"]:
                    raw.append(("sync", e, t["tid"]))
                elif list(f)[:3] == ["track.id", "track.begin", "track.end"]:
                    raw.append(("slice", e, t["tid"]))
    slices = []
    for kind, e, tid in raw:
        track = tracks[e["fields"]["track.id"]]
        if kind == "sync":
            track.syncs.append((e["fields"]["track.ticks"], e["ts_ns"]))
    for kind, e, tid in raw:
        if kind != "slice":
            continue
        f = dict(e["fields"])
        track = tracks[f.pop("track.id")]
        begin, end = f.pop("track.begin"), f.pop("track.end")
        links = e["links"]
        slices.append(
            Slice(e["name"], track.name, track.host_ns(begin), track.host_ns(end), f, links[0] if links else None, tid)
        )
    return tracks, slices
