"""The OTLP exporter, read back by OpenTelemetry's own protobuf classes (PyPI `opentelemetry-proto`).

`waffle-decode ... -o out.otlp.pb` must parse as
`opentelemetry.proto.collector.trace.v1.trace_service_pb2.ExportTraceServiceRequest` with no
unknown fields, and `-o out.otlp.json` must parse into the same message with
`google.protobuf.json_format.Parse` once its ids are turned from OTLP/JSON's hex into proto3
JSON's base64 (the OTLP specification's rule: `traceId`, `spanId` and `parentSpanId` are hex in
OTLP/JSON, everything else follows proto3's JSON mapping). Both must say the same thing.

Checked on the real two-process `nan_allreduce` run (rank 1 feeds a NaN into an allreduce, rank 0
sees it) and on the `causal_pair` example (a link and a correlation across two files, a context
entered on another thread, an async span), and on the golden file of the Rust tests.

Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`) holds `waffle-decode` and
`examples/`.
"""

import base64
import json

import pytest
from google.protobuf import json_format
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from waffle_bins import REPO, BIN_DIR, binary, run

HEX_IDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
ROUNDS, BAD_ROUND = 4, 2


def assert_no_unknown_fields(msg, where):
    """A field number or wire type we got wrong would land here instead of in its field."""
    assert len(UnknownFieldSet(msg)) == 0, f"{where}: unknown fields in {msg.DESCRIPTOR.name}"
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        for sub in value if fd.is_repeated else [value]:
            assert_no_unknown_fields(sub, where)


def hex_ids_to_base64(node, where="$"):
    """OTLP/JSON → proto3 JSON: asserts the ids are lowercase hex of the right length and
    turns them into base64, in place."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            hex_ids_to_base64(item, f"{where}[{i}]")
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in HEX_IDS:
                assert isinstance(value, str) and value == value.lower(), f"{where}.{key}: {value!r}"
                raw = bytes.fromhex(value)
                assert len(raw) == HEX_IDS[key], f"{where}.{key}: {len(raw)} bytes"
                node[key] = base64.b64encode(raw).decode()
            else:
                hex_ids_to_base64(value, f"{where}.{key}")


def assert_json_encoding(node, where="$"):
    """OTLP/JSON's other rules: lowerCamelCase keys, 64-bit integers as decimal strings, enums
    as integers."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            assert_json_encoding(item, f"{where}[{i}]")
    elif isinstance(node, dict):
        for key, value in node.items():
            assert "_" not in key, f"{where}: key {key!r} is not lowerCamelCase"
            if key in ("startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "intValue"):
                assert isinstance(value, str) and value.lstrip("-").isdigit(), f"{where}.{key}: {value!r}"
            if key == "kind":
                assert isinstance(value, int), f"{where}.kind: {value!r}"
            assert_json_encoding(value, f"{where}.{key}")


def parse_json(text):
    """OTLP/JSON text → ExportTraceServiceRequest, by json_format with unknown keys refused."""
    doc = json.loads(text)
    assert_json_encoding(doc)
    hex_ids_to_base64(doc)
    return json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())


def attrs(item, where):
    """Attribute dict of a span, event, link or resource; asserts unique keys and set values."""
    out = {}
    for kv in item.attributes:
        assert kv.key not in out, f"{where}: attribute {kv.key!r} twice"
        kind = kv.value.WhichOneof("value")
        assert kind is not None, f"{where}: attribute {kv.key!r} without a value"
        out[kv.key] = getattr(kv.value, kind)
    return out


def check_rules(req):
    """The OTLP data model's rules; returns the spans as (resource attrs, span) pairs."""
    assert req.resource_spans, "no resource spans"
    trace_ids, span_ids, spans = set(), set(), []
    for n, rs in enumerate(req.resource_spans):
        resource = attrs(rs.resource, f"resource {n}")
        assert resource.get("service.name"), f"resource {n}: no service.name"
        assert isinstance(resource.get("process.pid"), int), f"resource {n}: no process.pid"
        assert len(rs.scope_spans) == 1 and rs.scope_spans[0].scope.name == "waffle"
        for s in rs.scope_spans[0].spans:
            where = f"span {s.name!r}"
            assert s.name, "a span without a name"
            assert len(s.trace_id) == 16 and any(s.trace_id), f"{where}: trace id {s.trace_id.hex()}"
            assert len(s.span_id) == 8 and any(s.span_id), f"{where}: span id {s.span_id.hex()}"
            assert s.span_id not in span_ids, f"{where}: span id {s.span_id.hex()} twice"
            assert s.parent_span_id == b"" or (len(s.parent_span_id) == 8 and any(s.parent_span_id)), where
            assert s.kind == Span.SPAN_KIND_INTERNAL, f"{where}: kind {s.kind}"
            assert s.start_time_unix_nano > 0 and s.end_time_unix_nano >= s.start_time_unix_nano, where
            assert not s.HasField("status"), f"{where}: a status waffle cannot know"
            attrs(s, where)
            for e in s.events:
                assert e.name and e.time_unix_nano > 0, f"{where}: event {e.name!r}"
                attrs(e, f"{where} event {e.name!r}")
            for link in s.links:
                assert len(link.trace_id) == 16 and len(link.span_id) == 8 and any(link.span_id), where
                assert link.span_id != s.span_id, f"{where}: links to itself"
                assert attrs(link, f"{where} link")["waffle.link"] in ("caused_by", "correlated")
            trace_ids.add(s.trace_id)
            span_ids.add(s.span_id)
            spans.append((resource, s))
    assert len(trace_ids) == 1, f"one decode is one trace: {[t.hex() for t in trace_ids]}"
    return spans


def decode_both(inputs, tmp, stem):
    """Runs waffle-decode to .otlp.pb and .otlp.json; returns the two parsed requests."""
    decode = binary("waffle-decode")
    pb, js = tmp / f"{stem}.otlp.pb", tmp / f"{stem}.otlp.json"
    run(decode, *inputs, "-o", pb)
    run(decode, *inputs, "-o", js)
    from_pb = ExportTraceServiceRequest.FromString(pb.read_bytes())
    assert_no_unknown_fields(from_pb, pb.name)
    from_json = parse_json(js.read_text())
    return from_pb, from_json


def same_message(a, b):
    """Equality that treats NaN doubles as equal (protobuf's == does not)."""
    return json_format.MessageToDict(a) == json_format.MessageToDict(b)


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("otlp-nan")
    out = run(binary("examples", "nan_allreduce"), tmp).stdout
    trace_id = out.split()[1].rstrip(":")
    assert out.startswith("trace ") and len(trace_id) == 32, out
    from_pb, from_json = decode_both([tmp / "rank0.bin", tmp / "rank1.bin"], tmp, "run")
    return trace_id, from_pb, from_json


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("otlp-pair")
    run(binary("examples", "causal_pair"), tmp)
    return decode_both([tmp / "a.bin", tmp / "b.bin"], tmp, "pair")


def test_golden_file_parses_as_otlp():
    req = parse_json((REPO / "std-runtime" / "decoder" / "tests" / "golden" / "otlp.json").read_text())
    spans = check_rules(req)
    names = {s.name for _, s in spans}
    assert {"allreduce", "orphan", "(begin lost: records dropped)"} <= names
    assert sum(len(s.links) for _, s in spans) >= 6


def test_nan_allreduce_protobuf_and_json_agree(nan_run):
    _, from_pb, from_json = nan_run
    check_rules(from_pb)
    assert same_message(from_pb, from_json), "the .otlp.pb and .otlp.json say different things"


def test_nan_allreduce_resources_and_trace_id(nan_run):
    trace_id, req, _ = nan_run
    spans = check_rules(req)
    assert {s.trace_id.hex() for _, s in spans} == {trace_id}, "the run's trace id, as printed"
    resources = [attrs(rs.resource, "resource") for rs in req.resource_spans]
    assert [r["waffle.rank"] for r in resources] == ["0", "1"]
    for r in resources:
        assert r["service.name"] == "nan_allreduce" and r["host.name"] and r["process.pid"] > 0
    assert resources[0]["process.pid"] != resources[1]["process.pid"]


def test_nan_allreduce_links_and_events(nan_run):
    _, req, _ = nan_run
    spans = check_rules(req)
    by_id = {s.span_id: (r, s) for r, s in spans}

    def rank(r):
        return int(r["waffle.rank"])

    def round_of(s):
        parent = by_id[s.parent_span_id][1] if s.name == "allreduce" else s
        assert parent.name == "train_step", f"allreduce's parent is {parent.name}"
        return attrs(parent, "train_step")["round"]

    allreduce = {(rank(r), round_of(s)): s for r, s in spans if s.name == "allreduce"}
    assert sorted(allreduce) == [(r, n) for r in (0, 1) for n in range(ROUNDS)]

    # The cause: an event of rank 1's train_step of the bad round, linked from that round's
    # allreduce with `waffle.cause_event` naming it.
    bad = allreduce[(1, BAD_ROUND)]
    step = by_id[bad.parent_span_id][1]
    [cause] = [e for e in step.events if e.name == "Input buffer contains NaN"]
    cause_attrs = attrs(cause, "cause")
    assert cause_attrs["rank"] == 1 and "data loading" in cause_attrs["suggestion"]
    caused_by = [(link, attrs(link, "link")) for link in bad.links]
    caused_by = [(link, a) for link, a in caused_by if a["waffle.link"] == "caused_by"]
    assert len(caused_by) == 1, caused_by
    link, a = caused_by[0]
    assert (link.trace_id, link.span_id) == (step.trace_id, step.span_id)
    assert a["waffle.cause_event"] == cause_attrs["waffle.id"]
    assert step.start_time_unix_nano <= cause.time_unix_nano <= step.end_time_unix_nano
    assert sum(e.name == "Input buffer contains NaN" for _, s in spans for e in s.events) == 1

    # The symptom: an event of rank 0's allreduce of the bad round.
    symptom = [(r, s) for r, s in spans for e in s.events if e.name == "Output buffer is NaN after AllReduce"]
    assert [(rank(r), s.span_id) for r, s in symptom] == [(0, allreduce[(0, BAD_ROUND)].span_id)]

    # Each round's two allreduces are correlated across the processes: the later links to the
    # earlier, the first of the group.
    for n in range(ROUNDS):
        first, later = sorted((allreduce[(r, n)] for r in (0, 1)), key=lambda s: (s.start_time_unix_nano, s.span_id))
        for me, peer in ((later, first), (first, None)):
            links = [attrs(link, "link") | {"to": link.span_id} for link in me.links]
            correlated = [a for a in links if a["waffle.link"] == "correlated"]
            want = [] if peer is None else [{"waffle.link": "correlated", "waffle.correlate": f"allreduce={n}",
                                              "to": peer.span_id}]
            assert correlated == want, (n, links)


def test_causal_pair(pair):
    from_pb, from_json = pair
    assert same_message(from_pb, from_json), "the .otlp.pb and .otlp.json say different things"
    spans = check_rules(from_pb)
    by_name = {}
    for r, s in spans:
        by_name.setdefault(s.name, []).append((r, s))

    def only(name):
        [(r, s)] = by_name[name]
        return r, s

    (ra, step), (rb, effect) = only("step"), only("effect")
    assert (ra["waffle.rank"], rb["waffle.rank"]) == ("0", "1")
    [cause] = step.events
    cause_attrs = attrs(cause, "cause")
    # A non-finite float is text (`NaN`), as in the Jaeger export: Jaeger cannot serve a trace
    # holding a NaN double (test_jaeger_server.py reads this example back from it).
    assert cause.name == "cause" and cause_attrs["residual"] == "NaN"
    links = {attrs(link, "link")["waffle.link"]: (link, attrs(link, "link")) for link in effect.links}
    assert sorted(links) == ["caused_by", "correlated"]
    link, a = links["caused_by"]
    assert link.span_id == step.span_id and a["waffle.cause_event"] == cause_attrs["waffle.id"]
    link, a = links["correlated"]
    assert link.span_id == step.span_id and a["waffle.correlate"] == "step=1"
    assert step.start_time_unix_nano <= effect.start_time_unix_nano and list(step.links) == [], \
        "the first of the group links to nothing"


    # A context entered on another thread: the worker's span is the request's child.
    (_, request), (_, handle) = only("request"), only("handle")
    assert handle.parent_span_id == request.span_id
    assert attrs(handle, "handle")["thread.name"] == "worker"
    # The async span: detached, child of setup, parent of both fetches on the executor.
    (_, task), (_, setup) = only("task"), only("setup")
    assert attrs(task, "task")["waffle.detached"] is True
    assert task.parent_span_id == setup.span_id
    fetches = by_name["fetch"]
    assert len(fetches) == 2 and all(f.parent_span_id == task.span_id for _, f in fetches)
    assert all(attrs(f, "fetch")["thread.name"] == "executor" for _, f in fetches)
