"""Real MPI programs traced by `libwaffle_mpi.so`, with nothing of waffle in their code: LAMMPS
(a Lennard-Jones melt at 2 and 4 ranks), NetPIPE (a ping-pong), HPC Challenge and an mpi4py
program, run as their users run them (see `real_programs.py`). For each:

- every MPI call of every rank is a span in its file: per rank and per function, the spans of
  the trace (read from the OTLP export by OpenTelemetry's own protobuf classes) are exactly as
  many as the calls a PMPI counter (`mpi_counter.c`) counted. LAMMPS and NetPIPE call MPI the
  same way on every run of an input (LAMMPS rebuilds its neighbour lists on a fixed schedule;
  NetPIPE repeats each size a fixed number of times), so they are counted in a second run with
  the plain counter preloaded instead of the library. HPCC polls (MPI_Test, MPI_Testany,
  MPI_Iprobe) and times its loops, so most of its counts differ between runs: it is counted in
  the traced run itself, by the counter chained in front of the library;
- every receive that completed records one event "MPI message received", in its own span or
  in the Wait or Test that completed its request (a receive the program cancelled may have
  none), and that event is linked to its send span on the rank the message came from (a
  native OTLP link from the span showing the event), with the send's destination, tag, size
  and communicator; every send is received once (but one the program cancelled);
- `waffle-decode hang --json` says nothing is stuck;
- every format tells the same story: exported to each, read back by each format's own
  consumer's rules and compared pair by pair (`story.check_formats_agree`); all but HPCC,
  whose 300,000 spans a rank are more than the Python readers get through in the test
  command's time.

Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`) holds `waffle-decode` and
`libwaffle_mpi.so`; the programs come from Debian (`lammps`, `netpipe-openmpi`, `hpcc`): without them
these tests are skipped, or fail when `WAFFLE_REQUIRE_MPI` is set or `CI=true`.
"""

import json
from collections import Counter
from dataclasses import dataclass, field

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import story
from real_programs import PROGRAMS
from waffle_bins import binary, run

RECEIVED = "MPI message received"
# Receives that complete in their own span (their event is inside it), and those that start a
# request a Wait or Test completes later (the event is inside that call's span, and names the
# request). A persistent receive's MPI_Start starts one too: an MPI_Start with a request and no
# message of its own.
BLOCKING_RECEIVES = {"MPI_Recv", "MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Mrecv"}
STARTED_RECEIVES = {"MPI_Irecv", "MPI_Imrecv"}
# The calls whose span carries `mpi.message>` (docs/mpi.md), MPI_Start of a persistent send too.
SENDS = {"MPI_Send", "MPI_Bsend", "MPI_Ssend", "MPI_Rsend", "MPI_Isend", "MPI_Ibsend", "MPI_Issend", "MPI_Irsend",
         "MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Start"}
# The spans whose fields the checks read (reading every span's would take seconds for HPCC's
# hundreds of thousands of MPI_Testany spans).
READ = BLOCKING_RECEIVES | STARTED_RECEIVES | SENDS | {"MPI_Cancel"}


def attrs(item):
    """The attributes of an OTLP span, event, link or resource as a dict of plain values."""
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in item.attributes}


def numbers(text):
    """The request numbers of a `requests` field ("3,4", or "")."""
    return {int(n) for n in text.split(",") if n}


@dataclass
class Rank:
    """What one rank's process holds in the OTLP export."""

    calls: Counter = field(default_factory=Counter)  # MPI calls by name, from their spans
    received: list = field(default_factory=list)  # (span, event) of each receive event
    blocking: set = field(default_factory=set)  # ids of blocking receives' spans
    started: set = field(default_factory=set)  # request numbers of started receives
    cancelled: set = field(default_factory=set)  # request numbers MPI_Cancel was called on


@dataclass
class Trace:
    ranks: dict  # rank → Rank
    spans: dict  # span id → (rank, span)
    sends: dict  # span id → (rank, span, its attributes) of each span with `mpi.message>`


def read_otlp(request):
    """The ranks and spans of an OTLP export. A span named `MPI_Start` inside `MPI_Startall` is
    not a call of the program's: the library records each request Startall starts as such a
    span (docs/mpi.md), so it is not counted as one. Receives from MPI_PROC_NULL (`peer` -2)
    carry no message and are left out of `blocking` and `started`."""
    ranks, spans, sends, pids = {}, {}, {}, {}
    for rs in request.resource_spans:
        # A large process comes in several ResourceSpans with the same resource.
        resource = attrs(rs.resource)
        rank = int(resource["waffle.rank"])
        assert "waffle.dropped_records" not in resource and "waffle.incomplete" not in resource, resource
        pid = pids.setdefault(rank, resource["process.pid"])
        assert pid == resource["process.pid"], f"rank {rank} is two processes"
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans[s.span_id] = (rank, s)
        ranks[rank] = Rank()
    for rank, s in spans.values():
        r = ranks[rank]
        r.received += [(s, e) for e in s.events if e.name == RECEIVED]
        parent = spans.get(s.parent_span_id)
        if not (s.name == "MPI_Start" and parent and parent[1].name == "MPI_Startall"):
            r.calls[s.name] += 1
        if s.name not in READ:
            continue
        a = attrs(s)
        if a.get("waffle.correlate", "").startswith("mpi.message>="):
            sends[s.span_id] = (rank, s, a)
        persistent_receive = s.name == "MPI_Start" and "request" in a and "waffle.correlate" not in a
        if a.get("peer") != -2 and s.name in BLOCKING_RECEIVES:
            r.blocking.add(s.span_id)
        if a.get("peer") != -2 and (s.name in STARTED_RECEIVES or persistent_receive):
            r.started.add(a["request"])
        if s.name == "MPI_Cancel":
            r.cancelled |= numbers(a["requests"])
    return Trace(ranks, spans, sends)


_decoded = {}  # (runs root, name) → Trace


def decoded(real_runs, name):
    """`PROGRAMS[name]`'s traced run exported by `waffle-decode -o trace.otlp.pb` and read back
    with OpenTelemetry's classes (once per session)."""
    key = (real_runs.root, name)
    if key not in _decoded:
        files = real_runs.traced(name)
        out = files[0].parent / "trace.otlp.pb"
        proc = run(binary("waffle-decode"), *files, "-o", out)
        assert "warning" not in proc.stderr.lower() and "dropped" not in proc.stderr.lower(), proc.stderr
        _decoded[key] = read_otlp(ExportTraceServiceRequest.FromString(out.read_bytes()))
    return _decoded[key]


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_mpi_call_of_every_rank_is_a_span(real_runs, name):
    counted = real_runs.counted(name)
    trace = decoded(real_runs, name)
    assert sorted(trace.ranks) == list(range(PROGRAMS[name].ranks))
    for rank, counts in enumerate(counted):
        # What every MPI program calls, so that two empty counts cannot pass for equal ones.
        assert counts["MPI_Init"] + counts["MPI_Init_thread"] == 1, f"rank {rank}: {counts}"
        assert counts["MPI_Finalize"] == 1 and sum(counts.values()) > 2, f"rank {rank}: {counts}"
        traced = trace.ranks[rank].calls
        differ = {f: (traced[f], counts[f]) for f in traced.keys() | counts.keys() if traced[f] != counts[f]}
        assert not differ, f"rank {rank}: (spans, calls counted) per function: {differ}"


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_receive_records_its_event_once(real_runs, name):
    """A blocking receive's event is inside its span; a started one's is inside the Wait or Test
    that completed it and names its request; a receive cancelled (MPI_Cancel) may have none."""
    trace = decoded(real_runs, name)
    for rank, r in trace.ranks.items():
        in_span, of_request = Counter(), Counter()
        for span, event in r.received:
            request = attrs(event)["request"]
            if request == 0:
                assert span.span_id in r.blocking, f"rank {rank}: a blocking receive's event in {span.name}"
                in_span[span.span_id] += 1
            else:
                assert request in r.started, f"rank {rank}: an event for request {request}, never started"
                assert span.name.startswith(("MPI_Wait", "MPI_Test")), f"rank {rank}: request {request} in {span.name}"
                of_request[request] += 1
        assert in_span == Counter(dict.fromkeys(r.blocking, 1)), f"rank {rank}: a blocking receive without one event"
        assert max(of_request.values(), default=1) == 1, f"rank {rank}: a request completed twice"
        missing = r.started - of_request.keys()
        assert missing <= r.cancelled, f"rank {rank}: receives {sorted(missing - r.cancelled)[:10]} never completed"


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_receive_is_linked_to_its_send_and_each_send_is_received_once(real_runs, name):
    trace = decoded(real_runs, name)
    received = Counter()
    for rank, r in trace.ranks.items():
        for span, event in r.received:
            e = attrs(event)
            links = [link for link in span.links if attrs(link).get("waffle.from_event") == e["waffle.id"]]
            assert len(links) == 1, f"rank {rank}: {span.name}'s receive from {e['peer']} has {len(links)} links"
            link = attrs(links[0])
            assert link["waffle.link"] == "message" and link["waffle.correlate"] == e["waffle.correlate"]
            assert links[0].span_id in trace.spans, f"rank {rank}: a receive linked to a span not in the trace"
            target = trace.spans[links[0].span_id][1].name
            assert links[0].span_id in trace.sends, f"rank {rank}: a receive linked to {target}, not a send"
            sender, send, s = trace.sends[links[0].span_id]
            value = e["waffle.correlate"].removeprefix("mpi.message<=")
            assert s["waffle.correlate"] == f"mpi.message>={value}", f"{send.name}: {s}, {e}"
            # The send half of MPI_Sendrecv(_replace) is in dest, send_tag and send_bytes.
            dest, tag, size = ("dest", "send_tag", "send_bytes") if "dest" in s else ("peer", "tag", "bytes")
            assert (sender, s[dest], s[tag], s[size], s["comm"]) == (e["peer"], rank, e["tag"], e["bytes"], e["comm"])
            received[links[0].span_id] += 1
    assert trace.sends and max(received.values()) == 1, "a send received twice"
    # Every send is received but one the program cancelled (its message may never arrive).
    never = [f"{send.name} on rank {rank}" for i, (rank, send, s) in trace.sends.items()
             if i not in received and s.get("request") not in trace.ranks[rank].cancelled]
    assert not never, f"{len(never)} sends never received: {never[:10]}"


@pytest.mark.parametrize("name", PROGRAMS)
def test_hang_says_nothing_is_stuck(real_runs, name):
    files = real_runs.traced(name)
    report = json.loads(run(binary("waffle-decode"), "hang", *files, "--json").stdout)
    assert report["stuck"] is False, report
    assert [p["rank"] for p in report["processes"]] == list(range(len(files)))
    assert all(p["complete"] for p in report["processes"]), report["processes"]
    assert all(not t["open"] for t in report["threads"]), report["threads"]
    for key in ("waits", "unmatched_sends", "unmatched_receives", "deadlocks"):
        assert report[key] == [], f"{key}: {report[key]}"


# HPCC's trace holds some 300,000 spans per rank (most of them MPI_Testany polls): reading it
# back from seven formats in Python takes longer than the whole test command may, and NetPIPE
# stands for the message-heavy case.
STORIES = [name for name in PROGRAMS if name != "hpcc"]


@pytest.mark.parametrize("name", STORIES)
def test_every_format_tells_the_same_story(name, real_runs, tmp_path):
    """The formats agree on the program's trace: the same spans, events, parents and
    cause->effect pairs read back from each by its own consumer's rules (`story.py`)."""
    stories = story.check_formats_agree(real_runs.traced(name), tmp_path)
    for s in stories.values():
        assert s.spans(), f"{s.format}: no spans read"
        assert s.pairs, f"{s.format}: no cause->effect pairs read"
