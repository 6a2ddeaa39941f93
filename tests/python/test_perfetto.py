"""The Perfetto exporter, read back by an independent consumer: Perfetto's own protobuf classes.

The `skeleton` example (4 threads; thread t calls `step(t*1000 + i, 0.01)` for i in 0..1000, and
each `step` opens a `stencil` span and records a `converged` event) is traced, decoded with
`waffle-decode ... -o out.pftrace`, parsed with `perfetto_trace_pb2.Trace` from PyPI `perfetto`,
and checked against the rules trace_processor applies when it imports track events:
sequence flags, per-sequence interning, track descriptors, and slice nesting per track.

Environment:
- `WAFFLE_BIN_DIR`: where `waffle-decode` and `examples/skeleton` are (default
  `<repo>/target/debug`).
- `WAFFLE_PFTRACE`: check this existing .pftrace instead of running the binaries.
"""

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf.unknown_fields import UnknownFieldSet
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket, TrackEvent

REPO = Path(__file__).resolve().parents[2]
CLEARED = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
THREADS, STEPS = 4, 1000


@dataclass
class Instant:
    name: str
    ts: int
    args: dict


@dataclass
class Slice:
    name: str
    ts: int
    depth: int
    args: dict
    end: int | None = None
    children: list = field(default_factory=list)
    instants: list = field(default_factory=list)

    def all_instants(self):
        yield from self.instants
        for child in self.children:
            yield from child.all_instants()


@dataclass
class Track:
    descriptor: object
    slices: list = field(default_factory=list)  # every slice, in begin order
    instants: list = field(default_factory=list)  # top-level instants


def assert_no_unknown_fields(msg, where):
    """A field number or wire type we got wrong would land here instead of in its field."""
    assert len(UnknownFieldSet(msg)) == 0, f"{where}: unknown fields in {msg.DESCRIPTOR.name}"
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        for sub in value if fd.is_repeated else [value]:
            assert_no_unknown_fields(sub, where)


def annotation(a, names, where):
    if a.HasField("name_iid"):
        assert a.name_iid in names, f"{where}: annotation name iid {a.name_iid} not interned yet"
        name = names[a.name_iid]
    else:
        name = a.name
    kind = a.WhichOneof("value")
    assert kind is not None, f"{where}: annotation {name!r} without a value"
    return name, (kind, getattr(a, kind))


def read(data):
    """Parses a .pftrace, asserting the import rules; returns the tracks by uuid."""
    trace = Trace.FromString(data)
    assert trace.packet, "no packets"
    sequences = {}  # id -> {"names": {}, "annotation_names": {}, "ts": last timestamp}
    descriptors = {}
    events = []  # (track uuid, ts, type, name, args, where), in file order
    for n, p in enumerate(trace.packet):
        where = f"packet {n}"
        assert_no_unknown_fields(p, where)
        seq_id = p.trusted_packet_sequence_id
        assert seq_id != 0, f"{where}: no trusted_packet_sequence_id"
        flags = p.sequence_flags
        seq = sequences.get(seq_id)
        if seq is None:
            assert flags == CLEARED | NEEDS, f"{where}: first packet on {seq_id} has flags {flags}"
            assert p.first_packet_on_sequence, f"{where}: first packet lacks first_packet_on_sequence"
            seq = sequences[seq_id] = {"names": {}, "annotation_names": {}, "ts": 0}
        else:
            assert not p.first_packet_on_sequence, f"{where}: second first packet on {seq_id}"
            assert not flags & CLEARED, f"{where}: incremental state cleared again on {seq_id}"
        if p.HasField("interned_data"):
            assert flags & NEEDS, f"{where}: interned data without NEEDS_INCREMENTAL_STATE"
            for table, entries in [("names", p.interned_data.event_names),
                                   ("annotation_names", p.interned_data.debug_annotation_names)]:
                for e in entries:
                    assert e.iid != 0, f"{where}: iid 0"
                    old = seq[table].setdefault(e.iid, e.name)
                    assert old == e.name, f"{where}: iid {e.iid} redefined {old!r} -> {e.name!r}"
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid not in descriptors, f"{where}: track uuid {d.uuid} described twice"
            descriptors[d.uuid] = d
        if p.HasField("track_event"):
            ev = p.track_event
            assert p.HasField("timestamp"), f"{where}: track event without timestamp"
            # Ties keep file order only if each sequence's time never goes back.
            assert p.timestamp >= seq["ts"], f"{where}: time goes back on sequence {seq_id}"
            seq["ts"] = p.timestamp
            uses_iids = ev.HasField("name_iid") or any(a.HasField("name_iid") for a in ev.debug_annotations)
            if uses_iids:
                assert flags & NEEDS, f"{where}: uses iids without NEEDS_INCREMENTAL_STATE"
            if ev.HasField("name_iid"):
                assert ev.name_iid in seq["names"], f"{where}: name iid {ev.name_iid} not interned yet"
                name = seq["names"][ev.name_iid]
            else:
                name = ev.name if ev.HasField("name") else None
            args = dict(annotation(a, seq["annotation_names"], where) for a in ev.debug_annotations)
            assert len(args) == len(ev.debug_annotations), f"{where}: duplicate annotation names"
            events.append((ev.track_uuid, p.timestamp, ev.type, name, args, where))

    processes = {u: d for u, d in descriptors.items() if d.HasField("process")}
    assert len({d.process.pid for d in processes.values()}) == len(processes), "pids not unique"
    tids = set()
    for u, d in descriptors.items():
        if d.HasField("thread"):
            parent = processes.get(d.parent_uuid)
            assert parent is not None, f"thread track {u} not parented to a process track"
            assert d.thread.pid == parent.process.pid, f"thread track {u} has another pid"
            assert d.thread.tid not in tids, f"tid {d.thread.tid} on two thread tracks"
            tids.add(d.thread.tid)

    tracks = {u: Track(d) for u, d in descriptors.items()}
    stacks = {u: [] for u in descriptors}
    for uuid, ts, kind, name, args, where in events:
        assert uuid in tracks, f"{where}: event on undescribed track {uuid}"
        track, stack = tracks[uuid], stacks[uuid]
        if kind == TrackEvent.TYPE_SLICE_BEGIN:
            assert name, f"{where}: slice without a name"
            s = Slice(name, ts, len(stack), args)
            (stack[-1].children if stack else []).append(s)
            track.slices.append(s)
            stack.append(s)
        elif kind == TrackEvent.TYPE_SLICE_END:
            assert stack, f"{where}: slice end with no open slice"
            s = stack.pop()
            assert ts >= s.ts, f"{where}: {s.name} ends before it begins"
            s.end = ts
            s.args.update(args)
        elif kind == TrackEvent.TYPE_INSTANT:
            assert name, f"{where}: instant without a name"
            (stack[-1].instants if stack else track.instants).append(Instant(name, ts, args))
        else:
            raise AssertionError(f"{where}: unexpected track event type {kind}")
    for uuid, stack in stacks.items():
        assert not stack, f"track {uuid}: {[s.name for s in stack]} never end"
    return tracks


def run(*args):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module")
def pftrace(tmp_path_factory):
    given = os.environ.get("WAFFLE_PFTRACE")
    if given:
        return Path(given).read_bytes()
    bin_dir = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug"))
    skeleton, decode = bin_dir / "examples" / "skeleton", bin_dir / "waffle-decode"
    for b in (skeleton, decode):
        if not b.is_file():
            pytest.fail(f"{b} not found: build with `cargo build --workspace --examples` "
                        "or set WAFFLE_BIN_DIR")
    tmp = tmp_path_factory.mktemp("perfetto")
    run(skeleton, tmp / "trace.bin")
    run(decode, tmp / "trace.bin", "-o", tmp / "out.pftrace")
    return (tmp / "out.pftrace").read_bytes()


@pytest.fixture(scope="module")
def tracks(pftrace):
    return read(pftrace)


def test_import_rules(pftrace):
    read(pftrace)


def test_one_process_with_its_threads(tracks):
    processes = [u for u, t in tracks.items() if t.descriptor.HasField("process")]
    assert len(processes) == 1
    threads = [t for t in tracks.values() if t.descriptor.HasField("thread")]
    assert len(threads) in (THREADS, THREADS + 1), "the workers, and the main thread if it has data"
    assert all(t.descriptor.parent_uuid == processes[0] for t in threads)
    assert sum(any(s.name == "step" for s in t.slices) for t in threads) == THREADS


def test_steps_per_thread(tracks):
    seen = set()
    for track in tracks.values():
        steps = [s for s in track.slices if s.name == "step"]
        if not steps:
            continue
        assert len(steps) == STEPS, track.descriptor
        for s in steps:
            assert s.args["i"][0] == "uint_value", s.args
            assert s.args["dt"] == ("double_value", 0.01), s.args
        i = {s.args["i"][1] for s in steps}
        t = min(i) // STEPS
        assert i == set(range(t * STEPS, (t + 1) * STEPS)), f"thread {t}: wrong set of i"
        assert t not in seen, f"two tracks with thread {t}'s steps"
        seen.add(t)
    assert seen == set(range(THREADS))


def test_stencil_and_converged_inside_each_step(tracks):
    steps = [s for t in tracks.values() for s in t.slices if s.name == "step"]
    assert len(steps) == THREADS * STEPS
    for s in steps:
        assert [c.name for c in s.children] == ["stencil"], s
        stencil = s.children[0]
        assert stencil.depth == s.depth + 1
        assert s.ts <= stencil.ts <= stencil.end <= s.end
        assert stencil.args == {"cells": ("uint_value", 4096)}
        converged = [e for e in s.all_instants() if e.name == "converged"]
        assert len(converged) == 1, s
        e = converged[0]
        assert s.ts <= e.ts <= s.end
        assert e.args == {"residual": ("double_value", 1e-9), "ok": ("bool_value", True)}
