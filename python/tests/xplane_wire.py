"""An XSpace (``.xplane.pb``) read straight from the protobuf wire format, with nothing of
JAX's or of waffle's: the tests' independent view of a ``jax.profiler`` profile.

Only what the tests need of ``xplane.proto``: XSpace.planes (1); XPlane.name (2), lines (3),
event_metadata (4, map id -> XEventMetadata.name 2), stat_metadata (5, map id ->
XStatMetadata.name 2), stats (6); XLine.name (2), timestamp_ns (3), events (4); XEvent
metadata_id (1), offset_ps (2), duration_ps (3), stats (4); XStat metadata_id (1) and its value
(double 2, uint64 3, int64 4, str 5, ref 7 naming a stat_metadata entry).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass
class Event:
    name: str
    begin_ns: float  # Unix ns once the profile's start is added (`Plane` times are relative)
    end_ns: float
    stats: dict[str, Any]


@dataclass
class Plane:
    name: str
    stats: dict[str, Any]
    lines: dict[str, list[Event]] = field(default_factory=dict)


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(b: bytes) -> Iterator[tuple[int, Any]]:
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(b, i)
        elif wire == 1:
            value, i = b[i : i + 8], i + 8
        elif wire == 2:
            n, i = _varint(b, i)
            value, i = b[i : i + n], i + n
        elif wire == 5:
            value, i = b[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire} at offset {i}")
        yield number, value


def _map(b: bytes) -> tuple[int, str]:
    entry = dict(_fields(b))
    name = dict(_fields(entry.get(2, b""))).get(2, b"").decode()
    return entry.get(1, 0), name


def _stats(raw: list[bytes], names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in raw:
        f = dict(_fields(r))
        name = names.get(f.get(1, 0), "")
        if 2 in f:
            out[name] = struct.unpack("<d", f[2])[0]
        elif 3 in f:
            out[name] = f[3]
        elif 4 in f:
            out[name] = f[4] - (1 << 64) if f[4] >= 1 << 63 else f[4]
        elif 5 in f:
            out[name] = f[5].decode()
        elif 7 in f:
            out[name] = names.get(f[7], "")
    return out


def read(data: bytes) -> list[Plane]:
    """The planes of an XSpace, their lines' events with times relative to the profile."""
    planes = []
    for number, raw_plane in _fields(data):
        if number != 1:
            continue
        parts: dict[int, list[Any]] = {}
        for n, v in _fields(raw_plane):
            parts.setdefault(n, []).append(v)
        events_md = dict(_map(m) for m in parts.get(4, []))
        stats_md = dict(_map(m) for m in parts.get(5, []))
        plane = Plane(parts.get(2, [b""])[0].decode(), _stats(parts.get(6, []), stats_md))
        for raw_line in parts.get(3, []):
            line: dict[int, list[Any]] = {}
            for n, v in _fields(raw_line):
                line.setdefault(n, []).append(v)
            base = line.get(3, [0])[0]
            events = plane.lines.setdefault(line.get(2, [b""])[0].decode(), [])
            for raw_event in line.get(4, []):
                ev: dict[int, list[Any]] = {}
                for n, v in _fields(raw_event):
                    ev.setdefault(n, []).append(v)
                begin = base + ev.get(2, [0])[0] / 1000
                end = begin + ev.get(3, [0])[0] / 1000
                name = events_md.get(ev.get(1, [0])[0], "")
                events.append(Event(name, begin, end, _stats(ev.get(4, []), stats_md)))
        planes.append(plane)
    return planes


def start_time(planes: list[Plane]) -> int:
    """The profile's start in Unix ns (``Task Environment``'s ``profile_start_time``)."""
    return next(p.stats["profile_start_time"] for p in planes if "profile_start_time" in p.stats)
