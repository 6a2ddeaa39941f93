"""Our spans in a real Jaeger v2, and our `.jaeger.json` against what Jaeger itself serves.

A Jaeger v2 all-in-one (in-memory storage, built from its Go module and cached, see
`jaeger_server.py`) runs once per test session (the `jaeger` fixture of `conftest.py`). Fresh runs
of two examples are sent to it with `waffle-decode --send`, and read back from its query API,
`GET /api/traces/{id}` (the JSON its UI reads):
- `nan_allreduce`: two processes (ranks), fields, events, a cause that is an event of the
  span's own parent, correlation groups across ranks;
- `causal_pair`: two files, a cause and a correlation across them to one span, a context entered
  on a worker thread, a detached span ending on another thread, a NaN field.

Sent by OTLP/HTTP, Jaeger's trace must be our `.jaeger.json` of the same files (written by the
same command), field by field, once what must differ is normalised; each normalisation says
why (`NORMALISED_*`, `compare_otlp`). Sent by Zipkin (which has no links and string tags only),
every span must be there with its name, parent, times, tags and annotations as our Zipkin JSON
says, the causes in `waffle.caused_by`.

Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`) holds `waffle-decode` and
`examples/`; `WAFFLE_JAEGER_BIN`, a Jaeger binary to use instead of building one.
"""

import json

import pytest

from jaeger_server import fetch_trace
from waffle_bins import REPO, BIN_DIR, binary, run

EXAMPLES = {"nan_allreduce": ["rank0.bin", "rank1.bin"], "causal_pair": ["a.bin", "b.bin"]}

# Span tags Jaeger adds from OTLP fields that are not attributes: the instrumentation scope
# (ours is `waffle`) and the span kind (ours are all INTERNAL).
JAEGER_SPAN_TAGS = {"otel.scope.name": ("string", "waffle"), "span.kind": ("string", "internal")}
# Span tags only our Jaeger JSON carries, because OTLP says the same natively: the causes
# (`waffle.caused_by`, ids of spans and events) are OTLP links, which Jaeger shows as
# FOLLOWS_FROM references; an unresolved link or parent is a link or parent id there.
JAEGER_ONLY_SPAN_TAGS = {"waffle.caused_by", "waffle.unresolved_links", "waffle.unresolved_parent"}
# Process tags: our Jaeger JSON names the file a process came from (`waffle.source`); OTLP's
# resource does not. The header's labels are bare in Jaeger JSON (`rank`, as Zipkin's tags)
# and namespaced in OTLP (`waffle.rank`), since OTel resource keys are semantic conventions;
# a lossy process is `waffle.complete = false` in one and `waffle.incomplete = true` in the other.
OWN_PROCESS_TAGS = {"host.name", "process.pid", "waffle.dropped_records", "waffle.trace_id"}
# Zipkin: tags Jaeger's Zipkin receiver moves from spans to the resource, which it makes once
# per service name and request from the first span it sees, so two ranks of one program (one
# service) share one process there, with one pid; `rank` and the rest stay span tags.
ZIPKIN_RESOURCE_TAGS = {"host.name", "process.pid"}


def recorded(example, tmp_path):
    """The files of a fresh run of `example` (each run is a trace of its own)."""
    run(binary("examples", example), tmp_path)
    return [tmp_path / f for f in EXAMPLES[example]]


def kv(items):
    return {t["key"]: (t["type"], t["value"]) for t in items}


def refs(span):
    return [(r["refType"], r["spanID"]) for r in span["references"]]


def process_tags_as_otlp(process):
    """Our Jaeger process tags as Jaeger shows our OTLP resource (see OWN_PROCESS_TAGS)."""
    out = {}
    for key, (kind, value) in kv(process["tags"]).items():
        if key in OWN_PROCESS_TAGS:
            out[key] = (kind, value)
        elif key == "waffle.complete":
            out["waffle.incomplete"] = ("bool", True)
        elif key != "waffle.source":
            out[f"waffle.{key}"] = (kind, value)
    return out


def compare_otlp(ours, theirs):
    """Our .jaeger.json trace against Jaeger's trace of the same spans sent by OTLP."""
    assert theirs["traceID"] == ours["traceID"]
    mine = {s["spanID"]: s for s in ours["spans"]}
    got = {s["spanID"]: s for s in theirs["spans"]}
    assert sorted(got) == sorted(mine), "Jaeger holds other spans than we wrote"
    for sid, s in mine.items():
        t, where = got[sid], f"span {sid} ({s['operationName']})"
        assert t["traceID"] == s["traceID"] and t["operationName"] == s["operationName"], where
        op, tp = ours["processes"][s["processID"]], theirs["processes"][t["processID"]]
        assert tp["serviceName"] == op["serviceName"], where
        assert kv(tp["tags"]) == process_tags_as_otlp(op), where
        assert t["startTime"] == s["startTime"], where
        # Both floor to whole µs; we take the end's µs minus the start's (a child never pokes
        # out of its parent), Jaeger the ns duration's µs: ours is 0 or 1 µs longer.
        assert s["duration"] - t["duration"] in (0, 1), f"{where}: {s['duration']} vs {t['duration']}"
        # References: the first (the UI's parent, FOLLOWS_FROM when the parent is also a cause,
        # as both Jaeger and we make it) is the same, and the same spans follow. Jaeger keeps one
        # reference per OTLP link, so a span linked twice to one span (a cause and a correlation
        # peer) has two FOLLOWS_FROM to it, where we write one.
        mine_refs, their_refs = refs(s), refs(t)
        assert their_refs[:1] == mine_refs[:1], f"{where}: {their_refs} vs {mine_refs}"
        assert set(their_refs) == set(mine_refs), f"{where}: {their_refs} vs {mine_refs}"
        assert all(r["traceID"] == ours["traceID"] for r in t["references"]), where
        want = {k: v for k, v in kv(s["tags"]).items() if k not in JAEGER_ONLY_SPAN_TAGS}
        tags = kv(t["tags"])
        for key, value in JAEGER_SPAN_TAGS.items():
            assert tags.pop(key) == value, f"{where}: {key}"
        assert tags == want, where
        # Logs, in time order: our OTLP names every event (`waffle.id`), our Jaeger JSON only
        # one a link points to; OTLP adds `thread.id` to an event of another thread than its
        # span's, which our Jaeger logs leave out.
        assert len(t["logs"]) == len(s["logs"]), where
        for ml, tl in zip(s["logs"], sorted(t["logs"], key=lambda log: log["timestamp"])):
            assert tl["timestamp"] == ml["timestamp"], where
            fields, mf = kv(tl["fields"]), kv(ml["fields"])
            event_id = fields.pop("waffle.id")
            assert mf.pop("waffle.id", event_id) == event_id, where
            fields.pop("thread.id", None)
            assert fields == mf, where
        # Jaeger's clock-skew adjuster is off (max_clock_skew_adjust 0) but notes the delta it
        # would have applied to a span under one of another process: the only warning allowed.
        for w in t["warnings"] or []:
            assert w.startswith("clock skew adjustment disabled"), f"{where}: {w}"


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_otlp_send_reads_back_as_our_jaeger_json(jaeger, example, tmp_path):
    files = recorded(example, tmp_path)
    out = tmp_path / "run.jaeger.json"
    run(binary("waffle-decode"), *files, "-o", out, "--send", f"otlp={jaeger.otlp}", "-q")
    ours = json.loads(out.read_text())["data"][0]
    theirs = fetch_trace(jaeger.query, ours["traceID"], len(ours["spans"]))
    compare_otlp(ours, theirs)
    # The causal story is there in Jaeger's own terms: every cause we name is a FOLLOWS_FROM
    # reference of the span, to the span that shows it.
    holder = {s["spanID"]: s["spanID"] for s in ours["spans"]}
    holder.update({kv(log["fields"])["waffle.id"][1]: s["spanID"] for s in ours["spans"] for log in s["logs"]
                   if "waffle.id" in kv(log["fields"])})
    got = {s["spanID"]: s for s in theirs["spans"]}
    causes = 0
    for s in ours["spans"]:
        for cause in filter(None, kv(s["tags"]).get("waffle.caused_by", ("", ""))[1].split(",")):
            assert ("FOLLOWS_FROM", holder[cause]) in refs(got[s["spanID"]]), s["spanID"]
            causes += 1
    assert causes > 0, "the example's causes reached no span"
    assert len({s["processID"] for s in theirs["spans"]}) == 2, "two processes"
    if example == "causal_pair":  # the task span followed its future onto the executor
        assert [s["operationName"] for s in theirs["spans"] if "waffle.detached" in kv(s["tags"])] == ["task"]
    print(f"{example} by OTLP: {len(ours['spans'])} spans, {causes} causes, as our .jaeger.json")


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_zipkin_send_reads_back_with_parents_tags_and_annotations(jaeger, example, tmp_path):
    files = recorded(example, tmp_path)
    jaeger_json, zipkin_json = tmp_path / "run.jaeger.json", tmp_path / "run.zipkin.json"
    run(binary("waffle-decode"), *files, "-o", jaeger_json, "--send", f"zipkin={jaeger.zipkin}", "-q")
    run(binary("waffle-decode"), *files, "-o", zipkin_json, "-q")
    ours = json.loads(jaeger_json.read_text())["data"][0]
    zipkin = {s["id"]: s for s in json.loads(zipkin_json.read_text())}
    theirs = fetch_trace(jaeger.query, ours["traceID"], len(ours["spans"]))
    got = {s["spanID"]: s for s in theirs["spans"]}
    assert sorted(got) == sorted(zipkin) == sorted(s["spanID"] for s in ours["spans"])
    pids = {kv(p["tags"])["process.pid"][1] for p in ours["processes"].values()}
    for s in ours["spans"]:
        t, z, where = got[s["spanID"]], zipkin[s["spanID"]], f"span {s['spanID']} ({s['operationName']})"
        process = theirs["processes"][t["processID"]]
        assert process["serviceName"] == z["localEndpoint"]["serviceName"], where
        assert int(kv(process["tags"])["process.pid"][1]) in pids, where
        assert t["operationName"] == z["name"] == s["operationName"], where
        # Zipkin has no links: the parent is the only reference, CHILD_OF, the causes are a tag.
        # It is our Jaeger JSON's first reference (FOLLOWS_FROM there when it is also a cause).
        child_of = [("CHILD_OF", z["parentId"])] if "parentId" in z else []
        assert refs(t) == child_of, f"{where}: {refs(t)} vs {child_of}"
        if child_of:
            assert refs(s)[0][1] == z["parentId"], where
        assert t["startTime"] == z["timestamp"] == s["startTime"], where
        assert t["duration"] == z["duration"], where
        tags = kv(t["tags"])
        assert all(kind == "string" for kind, _ in tags.values()), where
        want = {k: ("string", v) for k, v in z["tags"].items() if k not in ZIPKIN_RESOURCE_TAGS}
        assert tags == want, where
        if "waffle.caused_by" in kv(s["tags"]):
            assert tags["waffle.caused_by"] == kv(s["tags"])["waffle.caused_by"], where
        # An annotation is a log whose one field, `event`, is the annotation's text.
        logs = sorted((log["timestamp"], kv(log["fields"])) for log in t["logs"])
        want = sorted((a["timestamp"], {"event": ("string", a["value"])}) for a in z.get("annotations", []))
        assert logs == want, where
        assert len(logs) == len(s["logs"]), where
    print(f"{example} by Zipkin: {len(got)} spans, parents, tags and annotations as we wrote them")
