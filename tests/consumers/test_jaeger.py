"""The Jaeger exporter, checked against the rules Jaeger's UI applies when it loads a trace.

A real Jaeger v2 runs in `test_jaeger_server.py`, but without its UI (the Go module carries no
UI assets), and a file opened in the UI never passes through Jaeger's server. So this test
re-implements what the UI does with an uploaded JSON file or an `/api/traces` answer (`transformTraceData` and `getTraceSpanIdsAsTree` in jaeger-ui's
`src/model/transform-trace-data.tsx` and `src/selectors/trace.tsx`), plus the JSON model of
Jaeger's query service (`model/json`), and checks our output against it:
- `{"data": [trace]}`; a trace is `{traceID, spans, processes, warnings}`, a span
  `{traceID, spanID, operationName, references, startTime, duration, tags, logs, processID,
  warnings}`;
- ids: trace `%032x`, spans `%016x`, unique (the UI renames repeats);
- times: integer µs since the Unix epoch, `startTime` non-zero (the UI drops spans without one),
  `duration` >= 0; every log's timestamp within its span, hence within the trace;
- references: `CHILD_OF` or `FOLLOWS_FROM`, each with the trace's `traceID` and a `spanID` in
  the trace; `CHILD_OF` only first; no span referenced twice (Jaeger keeps one reference per
  span). The UI makes the first reference a span's parent: that tree
  must reach every span (no loops);
- `processID` names an entry of `processes`, which has a `serviceName`;
- tags typed: `string`, `bool`, `int64` (integers within +-(2^53 - 1), so a browser holds them
  exactly), `float64` (finite numbers), `binary`; no tag repeated with the same value (the UI
  warns about those).

Checked on the golden trace (`std-runtime/decoder/tests/golden/jaeger.json`) and on a fresh two-process
run of the `nan_allreduce` example decoded by `waffle-decode -o run.jaeger.json`, whose causal
story must be readable from the output.

Environment: `WAFFLE_BIN_DIR`, where `waffle-decode` and `examples/nan_allreduce` are
(default `<repo>/target/debug`).
"""

import json
import re

import pytest
from waffle_bins import REPO, BIN_DIR, run

GOLDEN = REPO / "std-runtime" / "decoder" / "tests" / "golden" / "jaeger.json"
MAX_SAFE_INTEGER = 2**53 - 1
# 2001-09-09 .. 2286-11-20 in µs: a time in ns or ms would fall outside.
MIN_US, MAX_US = 10**15, 10**16
SPAN_KEYS = {"traceID", "spanID", "operationName", "references", "startTime", "duration", "tags",
             "logs", "processID", "warnings"}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_tag(tag, where):
    assert set(tag) == {"key", "type", "value"}, f"{where}: {tag}"
    assert isinstance(tag["key"], str) and tag["key"], f"{where}: {tag}"
    kind, value = tag["type"], tag["value"]
    if kind == "string":
        ok = isinstance(value, str)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int64":
        ok = is_int(value) and abs(value) <= MAX_SAFE_INTEGER
    elif kind == "float64":
        ok = (is_int(value) or isinstance(value, float)) and value == value and abs(value) != float("inf")
    elif kind == "binary":
        ok = isinstance(value, str)
    else:
        ok = False
    assert ok, f"{where}: badly typed tag {tag}"


def check_tags(tags, where):
    seen = set()
    for tag in tags:
        check_tag(tag, where)
        pair = (tag["key"], json.dumps(tag["value"]))
        assert pair not in seen, f"{where}: duplicate tag {tag} (the UI warns)"
        seen.add(pair)


def ui_tree(spans):
    """getTraceSpanIdsAsTree: each span hangs under the target of its first reference (the root
    when there is none, or it is not in the trace). Returns {spanID: parent spanID or None}."""
    ids = {s["spanID"] for s in spans}
    parent = {}
    for s in spans:
        refs = s["references"]
        first = refs[0]["spanID"] if refs else None
        parent[s["spanID"]] = first if first in ids else None
    return parent


def check_trace(doc):
    """Every rule of the module docs; returns the trace."""
    assert set(doc) == {"data"} and len(doc["data"]) == 1, "one trace in data"
    trace = doc["data"][0]
    assert set(trace) == {"traceID", "spans", "processes", "warnings"}
    trace_id = trace["traceID"]
    assert re.fullmatch(r"[0-9a-f]{32}", trace_id) and int(trace_id, 16) != 0, trace_id
    processes = trace["processes"]
    assert processes, "processes"
    for key, p in processes.items():
        assert isinstance(p["serviceName"], str) and p["serviceName"], key
        check_tags(p["tags"], f"process {key}")
    spans = trace["spans"]
    ids = [s["spanID"] for s in spans]
    assert len(set(ids)) == len(ids), "span ids are unique"
    trace_start = min(s["startTime"] for s in spans)
    trace_end = max(s["startTime"] + s["duration"] for s in spans)
    for s in spans:
        where = f"span {s.get('spanID')} ({s.get('operationName')})"
        assert set(s) == SPAN_KEYS, f"{where}: keys {sorted(s)}"
        assert re.fullmatch(r"[0-9a-f]{16}", s["spanID"]) and int(s["spanID"], 16) != 0, where
        assert s["traceID"] == trace_id, where
        assert isinstance(s["operationName"], str), where
        assert is_int(s["startTime"]) and MIN_US < s["startTime"] < MAX_US, f"{where}: µs start"
        assert is_int(s["duration"]) and s["duration"] >= 0, f"{where}: duration"
        assert s["processID"] in processes, where
        kinds = [r["refType"] for r in s["references"]]
        assert set(kinds) <= {"CHILD_OF", "FOLLOWS_FROM"}, f"{where}: {kinds}"
        assert "CHILD_OF" not in kinds[1:], f"{where}: CHILD_OF must come first: {kinds}"
        targets = [r["spanID"] for r in s["references"]]
        assert len(set(targets)) == len(targets), f"{where}: a span referenced twice (Jaeger keeps one)"
        for r in s["references"]:
            assert set(r) == {"refType", "traceID", "spanID"}, where
            assert r["traceID"] == trace_id, f"{where}: reference to another trace"
            assert r["spanID"] in ids and r["spanID"] != s["spanID"], f"{where}: reference {r}"
        check_tags(s["tags"], where)
        end = s["startTime"] + s["duration"]
        for log in s["logs"]:
            assert is_int(log["timestamp"]), where
            assert s["startTime"] <= log["timestamp"] <= end, f"{where}: log outside its span"
            assert trace_start <= log["timestamp"] <= trace_end, f"{where}: log outside the trace"
            assert log["fields"] and log["fields"][0]["key"] == "event", f"{where}: {log}"
            for f in log["fields"]:
                check_tag(f, where)
    parent = ui_tree(spans)
    for s in spans:
        at, seen = s["spanID"], set()
        while at is not None:
            assert at not in seen, f"span {s['spanID']} is on a loop of first references"
            seen.add(at)
            at = parent[at]
    return trace


def tags(item):
    return {t["key"]: t["value"] for t in item.get("tags", item.get("fields", []))}


def test_golden_trace_follows_the_ui_rules():
    trace = check_trace(json.loads(GOLDEN.read_text()))
    spans = {s["spanID"]: s for s in trace["spans"]}
    # The UI's parents are the model's: the CHILD_OF target where there is one.
    parent = ui_tree(trace["spans"])
    for s in trace["spans"]:
        child_of = [r["spanID"] for r in s["references"] if r["refType"] == "CHILD_OF"]
        if child_of:
            assert parent[s["spanID"]] == child_of[0]
        elif not s["references"]:
            assert parent[s["spanID"]] is None
    ar = {tags(s)["rank"]: s for s in spans.values() if s["operationName"] == "allreduce"}
    # Its parent holds its cause: referenced once, FOLLOWS_FROM, first (so still its parent).
    step1 = next(s for s in spans.values()
                 if s["operationName"] == "train_step" and s["processID"] == ar[1]["processID"])
    assert [(r["refType"], r["spanID"]) for r in ar[1]["references"]] == \
        [("FOLLOWS_FROM", step1["spanID"]), ("FOLLOWS_FROM", ar[0]["spanID"])], "parent, then the peer before it"
    symptom = ar[0]["logs"][0]
    types = {f["key"]: f["type"] for f in symptom["fields"]}
    assert types == {"event": "string", "count": "int64", "delta": "int64", "loss": "float64",
                     "ok": "bool", "note": "string", "big": "string", "low": "string",
                     "bad": "string", "waffle.id": "string", "waffle.caused_by": "string"}
    assert tags(symptom)["big"] == str(2**64 - 1) and tags(symptom)["bad"] == "NaN"
    p = trace["processes"]
    assert [tags(p[k])["rank"] for k in sorted(p)] == ["0", "1"]
    assert {v["serviceName"] for v in p.values()} == {"Trainer"}


@pytest.fixture(scope="module")
def nan_allreduce(tmp_path_factory):
    bin_dir = BIN_DIR
    example, decode = bin_dir / "examples" / "nan_allreduce", bin_dir / "waffle-decode"
    for b in (example, decode):
        if not b.is_file():
            pytest.fail(f"{b} not found: build with `cargo build -p waffle-std -p waffle-decode --examples --bins` "
                        "or set WAFFLE_BIN_DIR")
    out = tmp_path_factory.mktemp("nan")
    run(example, out)
    run(decode, out / "rank0.bin", out / "rank1.bin", "-o", out / "run.jaeger.json", "-q")
    return json.loads((out / "run.jaeger.json").read_text())


def test_nan_allreduce_follows_the_ui_rules(nan_allreduce):
    trace = check_trace(nan_allreduce)
    processes = trace["processes"]
    assert sorted(tags(p)["rank"] for p in processes.values()) == ["0", "1"]
    rank = {s["spanID"]: tags(processes[s["processID"]])["rank"] for s in trace["spans"]}
    spans = {s["spanID"]: s for s in trace["spans"]}
    parent = ui_tree(trace["spans"])
    # Each allreduce hangs under its rank's train_step; each train_step is a root.
    for s in trace["spans"]:
        up = parent[s["spanID"]]
        if s["operationName"] == "allreduce":
            assert spans[up]["operationName"] == "train_step" and rank[up] == rank[s["spanID"]]
        elif s["operationName"] == "train_step":
            assert up is None
    # The story of the NaN: rank 0 sees it in round 2's allreduce, which follows rank 1's
    # (correlated), which names the NaN input logged (with its id) on rank 1.
    symptom_span = next(s for s in trace["spans"] for log in s["logs"]
                        if tags(log)["event"] == "Output buffer is NaN after AllReduce")
    assert symptom_span["operationName"] == "allreduce" and rank[symptom_span["spanID"]] == "0"
    round2 = [s for s in trace["spans"] if tags(s).get("waffle.correlate") == "allreduce=2"]
    assert sorted(rank[s["spanID"]] for s in round2) == ["0", "1"]
    first, second = sorted(round2, key=lambda s: s["startTime"])
    assert {"refType": "FOLLOWS_FROM", "traceID": trace["traceID"], "spanID": first["spanID"]} \
        in second["references"], "the later of the pair follows the earlier"
    r1 = next(s for s in round2 if rank[s["spanID"]] == "1")
    cause_id = tags(r1)["waffle.caused_by"]
    cause = [(s, log) for s in trace["spans"] for log in s["logs"] if tags(log).get("waffle.id") == cause_id]
    assert len(cause) == 1, cause
    holder, log = cause[0]
    assert tags(log)["event"] == "Input buffer contains NaN" and rank[holder["spanID"]] == "1"
    assert holder["spanID"] in [r["spanID"] for r in r1["references"] if r["refType"] == "FOLLOWS_FROM"]
