"""The Perfetto exporter, read back by an independent consumer: Perfetto's own protobuf classes.

The `skeleton` example (4 threads; thread t calls `step(t*1000 + i, 0.01)` for i in 0..1000, and
each `step` opens a `stencil` span and records a `converged` event) is traced, decoded with
`waffle-decode ... -o out.pftrace`, parsed with `perfetto_trace_pb2.Trace` from PyPI `perfetto`,
and checked against the rules trace_processor applies when it imports track events:
sequence flags, per-sequence interning, sequence defaults (a track event without a track is on
its sequence's default track), clocks (a timestamp is on the packet's clock, else its
sequence's default clock; a sequence-scoped clock, id 64 to 127, is known from a clock
snapshot on that sequence, and an incremental one adds each timestamp to its last value),
track descriptors, and slice nesting per track.

The `causal_pair` example (two sessions of one process, `a.bin` and `b.bin`, see its docs) is
decoded into one trace and its causality checked as trace_processor turns flow ids into arrows:
a link and a correlation across the two processes, a context entered on another thread, and an
async span on a track of its own.

Environment:
- `WAFFLE_BIN_DIR`: where `waffle-decode`, `examples/skeleton` and `examples/causal_pair` are
  (default `<repo>/target/debug`).
- `WAFFLE_PFTRACE`: check this existing .pftrace instead of running `skeleton` (the causal pair
  is then checked only if the binaries are there).

Over 400 lines because it carries its own statement of trace_processor's import rules (above),
which every check here reads.
"""

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf.unknown_fields import UnknownFieldSet
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket, TrackEvent

REPO = Path(__file__).resolve().parents[2]
CLEARED = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
BOOTTIME = 6  # BuiltinClock.BUILTIN_CLOCK_BOOTTIME: trace_processor's trace time by default
THREADS, STEPS = 4, 1000
RUN_WINDOW = None  # (before, after) the skeleton ran, in Unix ns


@dataclass
class Instant:
    name: str
    ts: int
    args: dict
    track: int = 0
    flow_out: list = field(default_factory=list)  # flow_ids
    flow_in: list = field(default_factory=list)  # terminating_flow_ids


@dataclass
class Slice:
    name: str
    ts: int
    depth: int
    args: dict
    end: int | None = None
    children: list = field(default_factory=list)
    instants: list = field(default_factory=list)
    track: int = 0
    flow_out: list = field(default_factory=list)  # flow_ids on its begin
    flow_in: list = field(default_factory=list)  # terminating_flow_ids on its begin

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
    return parse(data)[0]


def parse(data):
    """Parses a .pftrace, asserting the import rules; returns the tracks by uuid and, in file
    order, the slices and instants that carry flow ids."""
    trace = Trace.FromString(data)
    assert trace.packet, "no packets"
    sequences = {}  # id -> {"names": {}, "annotation_names": {}, "ts": last timestamp, "clocks": {}, ...}
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
            seq = sequences[seq_id] = {"names": {}, "annotation_names": {}, "ts": 0, "clocks": {},
                                       "clock": None, "track": None}
        else:
            assert not p.first_packet_on_sequence, f"{where}: second first packet on {seq_id}"
            assert not flags & CLEARED, f"{where}: incremental state cleared again on {seq_id}"
        if p.HasField("trace_packet_defaults"):
            # Read after the flags: with SEQ_INCREMENTAL_STATE_CLEARED in the same packet, the
            # defaults belong to the state that starts there.
            d = p.trace_packet_defaults
            seq["clock"] = d.timestamp_clock_id if d.HasField("timestamp_clock_id") else None
            te = d.track_event_defaults
            seq["track"] = te.track_uuid if d.HasField("track_event_defaults") and te.HasField("track_uuid") else None
        if p.HasField("clock_snapshot"):
            # trace_processor reads a clock snapshot and nothing else of its packet.
            others = [f.name for f, _ in p.ListFields()
                      if f.name not in ("clock_snapshot", "trusted_packet_sequence_id")]
            assert not others, f"{where}: a clock snapshot shares its packet with {others}"
            readings = {c.clock_id: c for c in p.clock_snapshot.clocks}
            assert BOOTTIME in readings, f"{where}: a snapshot that does not reach BOOTTIME"
            boot = readings[BOOTTIME].timestamp
            for clock_id, c in readings.items():
                if 64 <= clock_id < 128:
                    unit = c.unit_multiplier_ns or 1
                    seq["clocks"][clock_id] = {"incremental": c.is_incremental, "unit": unit,
                                               "now": c.timestamp * unit, "offset": boot - c.timestamp * unit}
                else:
                    assert not c.is_incremental, f"{where}: only a sequence's own clock may be incremental"
            continue
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
            ts = resolve_time(p, seq, where)
            # Ties keep file order only if each sequence's time never goes back.
            assert ts >= seq["ts"], f"{where}: time goes back on sequence {seq_id}"
            seq["ts"] = ts
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
            flows = (list(ev.flow_ids), list(ev.terminating_flow_ids))
            track = ev.track_uuid if ev.HasField("track_uuid") else seq["track"]
            assert track is not None, f"{where}: track event without a track, and no default"
            events.append((track, ts, ev.type, name, args, flows, where))

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
    flowing = []
    for uuid, ts, kind, name, args, (out, into), where in events:
        assert uuid in tracks, f"{where}: event on undescribed track {uuid}"
        track, stack = tracks[uuid], stacks[uuid]
        if kind == TrackEvent.TYPE_SLICE_BEGIN:
            assert name, f"{where}: slice without a name"
            s = Slice(name, ts, len(stack), args, track=uuid, flow_out=out, flow_in=into)
            (stack[-1].children if stack else []).append(s)
            track.slices.append(s)
            stack.append(s)
            if out or into:
                flowing.append(s)
        elif kind == TrackEvent.TYPE_SLICE_END:
            assert not out and not into, f"{where}: flow ids on a slice end"
            assert stack, f"{where}: slice end with no open slice"
            s = stack.pop()
            assert ts >= s.ts, f"{where}: {s.name} ends before it begins"
            s.end = ts
            s.args.update(args)
        elif kind == TrackEvent.TYPE_INSTANT:
            assert name, f"{where}: instant without a name"
            i = Instant(name, ts, args, track=uuid, flow_out=out, flow_in=into)
            (stack[-1].instants if stack else track.instants).append(i)
            if out or into:
                flowing.append(i)
        else:
            raise AssertionError(f"{where}: unexpected track event type {kind}")
    for uuid, stack in stacks.items():
        assert not stack, f"track {uuid}: {[s.name for s in stack]} never end"
    return tracks, flowing


def resolve_time(p, seq, where):
    """A packet's timestamp in trace time (BOOTTIME; Unix ns in waffle's traces), as
    trace_processor converts it: on the packet's clock, else on its sequence's default clock,
    else already BOOTTIME."""
    clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else seq["clock"]
    if clock is None or clock == BOOTTIME:
        return p.timestamp
    assert 64 <= clock < 128, f"{where}: timestamps on global clock {clock}"
    c = seq["clocks"].get(clock)
    assert c is not None, f"{where}: clock {clock} used before its snapshot on the sequence"
    if c["incremental"]:
        c["now"] += p.timestamp * c["unit"]
    else:
        c["now"] = p.timestamp * c["unit"]
    return c["now"] + c["offset"]


def flow_arrows(flowing):
    """The arrows trace_processor draws from flow ids, as (from, to) pairs of slices/instants.

    It reads events in timestamp order: a `flow_ids` id not in flight starts a flow, one in
    flight draws an arrow from the flow's last slice; a `terminating_flow_ids` id in flight draws
    the last arrow and frees the id, one not in flight is ignored. Asserts that no freed id is
    used again, that every id is on at least two events and that every flow ends, except the
    chains through spans matched by order across ranks (`waffle.matched_by_order`), which are
    stepped through and never terminated."""
    uses = {}
    for s in flowing:
        for f in s.flow_out + s.flow_in:
            uses[f] = uses.get(f, 0) + 1
    lonely = [f for f, n in uses.items() if n < 2]
    assert not lonely, f"flow ids on a single event draw nothing: {lonely}"
    active, freed, arrows = {}, set(), []
    for s in sorted(flowing, key=lambda s: s.ts):  # stable: ties keep file order
        for f in s.flow_out:
            assert f not in freed, f"flow {f} used again at {s.name} after it ended"
            if f in active:
                arrows.append((active[f], s))
            active[f] = s
        for f in s.flow_in:
            assert f not in freed, f"flow {f} ended twice"
            assert f in active, f"flow {f} ends at {s.name} before it starts: no arrow"
            arrows.append((active.pop(f), s))
            freed.add(f)
    active = {f: s for f, s in active.items() if "waffle.matched_by_order" not in s.args}
    assert not active, f"flows never terminated: {sorted(active)}"
    return arrows


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
    global RUN_WINDOW
    before = time.time_ns()
    run(skeleton, tmp / "trace.bin")
    RUN_WINDOW = (before, time.time_ns())
    run(decode, tmp / "trace.bin", "-o", tmp / "out.pftrace")
    return (tmp / "out.pftrace").read_bytes()


@pytest.fixture(scope="module")
def tracks(pftrace):
    return read(pftrace)


def test_import_rules(pftrace):
    read(pftrace)


def test_times_are_when_it_ran(tracks):
    """Every slice and instant lands inside the wall-clock window of the run, in Unix ns: the
    sequences' incremental clocks resolve to absolute times."""
    if RUN_WINDOW is None:
        pytest.skip("an existing .pftrace (WAFFLE_PFTRACE): its run's window is not known")
    start, end = RUN_WINDOW
    slices = [s for t in tracks.values() for s in t.slices]
    instants = [i for t in tracks.values() for s in t.slices for i in s.all_instants()]
    assert slices and instants
    for x in slices + instants:
        assert start <= x.ts <= end, (x.name, x.ts, RUN_WINDOW)
    for s in slices:
        assert start <= s.ts <= s.end <= end, (s.name, s.ts, s.end, RUN_WINDOW)


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


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The causal_pair example's two files decoded into one trace: (tracks, flowing)."""
    bin_dir = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug"))
    example, decode = bin_dir / "examples" / "causal_pair", bin_dir / "waffle-decode"
    for b in (example, decode):
        if not b.is_file():
            if os.environ.get("WAFFLE_PFTRACE"):
                pytest.skip(f"{b} not found")
            pytest.fail(f"{b} not found: build with `cargo build --workspace --examples` "
                        "or set WAFFLE_BIN_DIR")
    tmp = tmp_path_factory.mktemp("pair")
    run(example, tmp)
    run(decode, tmp / "a.bin", tmp / "b.bin", "-o", tmp / "pair.pftrace")
    return parse((tmp / "pair.pftrace").read_bytes())


def test_causal_pair(pair):
    tracks, flowing = pair
    processes = {u: t for u, t in tracks.items() if t.descriptor.HasField("process")}
    assert len(processes) == 2, "one process track per file"
    rank = {t.descriptor.name.split(" (")[0]: u for u, t in processes.items()}
    assert set(rank) == {"rank 0", "rank 1"}, [t.descriptor.name for t in processes.values()]
    a, b = rank["rank 0"], rank["rank 1"]

    def process_of(item):
        d = tracks[item.track].descriptor
        return item.track if d.HasField("process") else d.parent_uuid

    def thread_name(item):
        d = tracks[item.track].descriptor
        return d.thread.thread_name if d.HasField("thread") else None

    def only(name, kind=Slice):
        if kind is Instant:
            lists = [t.instants for t in tracks.values()]
            lists += [s.instants for t in tracks.values() for s in t.slices]
        else:
            lists = [t.slices for t in tracks.values()]
        found = [x for xs in lists for x in xs if x.name == name]
        assert len(found) == 1, f"{len(found)} {name!r}"
        return found[0]

    arrows = flow_arrows(flowing)
    into = {}
    for src, dst in arrows:
        into.setdefault(id(dst), []).append(src)

    def sources(item):
        return sorted(s.name for s in into.get(id(item), []))

    # The link, across processes: an id the cause starts and the effect's begin terminates.
    cause, effect, step = only("cause", Instant), only("effect"), only("step")
    assert (process_of(cause), process_of(step), process_of(effect)) == (a, a, b)
    link = set(cause.flow_out) & set(effect.flow_in)
    assert len(link) == 1, (cause.flow_out, effect.flow_in)
    assert cause.args["waffle.id"] == ("string_value", effect.args["waffle.caused_by"][1])
    # The correlation, across processes: step -> effect.
    assert step.args["waffle.correlate"] == effect.args["waffle.correlate"] == ("string_value", "step=1")
    assert set(step.flow_out) & set(effect.flow_in), "the correlation pair is one flow"
    assert sources(effect) == ["cause", "step"]

    # A context entered on another thread: the worker's span has an arrow from its parent.
    request, handle = only("request"), only("handle")
    assert (process_of(request), thread_name(request)) == (b, "main")
    assert (process_of(handle), thread_name(handle)) == (b, "worker")
    assert handle.depth == 0, "its parent is not on its thread"
    assert sources(handle) == ["request"]

    # The async span has a track of its own under its process, and its children, on the
    # executor thread inside `drive`, arrows from it.
    task = only("task")
    d = tracks[task.track].descriptor
    assert not d.HasField("thread") and not d.HasField("process")
    assert (d.name, d.parent_uuid, len(tracks[task.track].slices)) == ("task", b, 1)
    setup = only("setup")
    assert thread_name(setup) == "main"
    assert setup.ts <= task.ts <= setup.end < task.end, "on main's track it would not nest"
    assert sources(task) == ["setup"], "begun inside setup"
    fetches = [s for t in tracks.values() for s in t.slices if s.name == "fetch"]
    assert len(fetches) == 2
    for f in fetches:
        assert thread_name(f) == "executor"
        assert [p.name for p in tracks[f.track].slices if any(c is f for c in p.children)] == ["drive"]
        assert sources(f) == ["task"]
    assert len(arrows) == 6, "link, correlation, handle, task and two fetches; nothing else"


@pytest.mark.parametrize("example", ["nan_allreduce", "dispatch", "device_queue"])
def test_example_outputs(example, tmp_path):
    """The other causal examples, streamed into a .pftrace by `waffle-decode`: the import rules
    and the flow rules hold, and every arrow joins two slices or instants; `device_queue`'s
    kernels on their device track, an arrow from each launch."""
    bin_dir = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug"))
    binary, decode = bin_dir / "examples" / example, bin_dir / "waffle-decode"
    for b in (binary, decode):
        if not b.is_file():
            if os.environ.get("WAFFLE_PFTRACE"):
                pytest.skip(f"{b} not found")
            pytest.fail(f"{b} not found: build with `cargo build --workspace --examples` "
                        "or set WAFFLE_BIN_DIR")
    if example == "nan_allreduce":
        run(binary, tmp_path / "run")
        inputs = [tmp_path / "run" / "rank0.bin", tmp_path / "run" / "rank1.bin"]
    else:
        run(binary, tmp_path / "trace.bin")
        inputs = [tmp_path / "trace.bin"]
    run(decode, *inputs, "-o", tmp_path / "out.pftrace")
    tracks, flowing = parse((tmp_path / "out.pftrace").read_bytes())
    arrows = flow_arrows(flowing)
    assert arrows, "causality shows as arrows"
    if example == "device_queue":
        # The device track is a named track under the process, not a thread; each kernel on it
        # has an arrow from the launch span that queued it, and begins after it.
        (process,) = [t for t in tracks.values() if t.descriptor.HasField("process")]
        (gpu,) = [t for t in tracks.values() if t.descriptor.name == "GPU 0"]
        assert not gpu.descriptor.HasField("thread")
        assert gpu.descriptor.parent_uuid == process.descriptor.uuid
        assert [s.name for s in gpu.slices[:3]] == ["gemm", "softmax", "allreduce"]
        assert len(gpu.slices) == 60
        launched = [(s, d) for s, d in arrows if s.name == "launch" and d.track == gpu.descriptor.uuid]
        assert len(launched) == 60, [(s.name, d.name) for s, d in arrows]
        assert all(s.ts <= d.ts for s, d in launched)
    elif example == "dispatch":
        # Each worker's span has an arrow from the dispatcher's span that sent its task.
        handled = [d for s, d in arrows if s.name == "dispatch_task" and d.name == "process_task"]
        assert len(handled) == 12, [(s.name, d.name) for s, d in arrows]
    else:
        processes = [t for t in tracks.values() if t.descriptor.HasField("process")]
        assert len(processes) == 2
        # Nothing ties the ranks' train_step spans together but their order: the k-th on each
        # rank is one operation, an arrow between the two processes with the same k.
        matched = [(s, d) for s, d in arrows if "waffle.matched_by_order" in d.args]
        assert sorted(d.args["waffle.matched_by_order"][1] for s, d in matched) == [0, 1, 2, 3]
        for s, d in matched:
            assert s.name == d.name == "train_step"
            assert s.args["waffle.matched_by_order"] == d.args["waffle.matched_by_order"]
            assert s.ts <= d.ts
