"""Each format read back by its own consumer's rules into a `story.Story` (see `story.py`'s
docs for what each carries): one reader per format, `READERS[format](path)`. The span-list
formats (OTLP, Jaeger, Zipkin) are here; those with rows (Chrome, Perfetto, XSpace) in
`story_rows.py`."""

from __future__ import annotations

import json
import re
from collections import defaultdict

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from story import Item, Story
from story_rows import ids, named, read_chrome, read_perfetto, read_xspace
from test_otlp import assert_no_unknown_fields, attrs, parse_json

# ---------------------------------------------------------------------------------------- OTLP

def read_otlp(req, fmt):
    s = Story(fmt, level={"cause": "item", "message": "item", "correlated": "item"})
    last, parents, threads = None, {}, defaultdict(dict)
    for rs in req.resource_spans:
        res = attrs(rs.resource, "resource")
        if sorted(res.items()) != last:
            last = sorted(res.items())
            s.processes.append({"index": len(s.processes),
                                "name": named(res.get("service.name"), "unknown_service"),
                                "pid": res.get("process.pid"), "host": res.get("host.name"),
                                "rank": res.get("waffle.rank")})
        process = len(s.processes) - 1
        for scope in rs.scope_spans:
            for sp in scope.spans:
                a = attrs(sp, sp.name)
                sid = sp.span_id.hex()
                threads[process][a.get("thread.id")] = a.get("thread.name")
                s.add(Item(sid, "event" if a.get("waffle.event") else "span", sp.name, process,
                           a.get("thread.name"), sp.start_time_unix_nano, sp.end_time_unix_nano,
                           id=sid, tid=a.get("thread.id"), correlate=a.get("waffle.correlate"),
                           own_row=bool(a.get("waffle.detached"))))
                if sp.parent_span_id:
                    parents[sid] = sp.parent_span_id.hex()
                for ev in sp.events:
                    e = attrs(ev, ev.name)
                    tid = e.get("thread.id", a.get("thread.id"))
                    s.add(Item(e["waffle.id"], "event", ev.name, process, None, ev.time_unix_nano,
                               ev.time_unix_nano, id=e["waffle.id"], tid=tid,
                               correlate=e.get("waffle.correlate")))
                    parents[e["waffle.id"]] = sid
                for link in sp.links:
                    la = attrs(link, "link")
                    if la.get("waffle.unresolved"):
                        continue
                    kind = {"caused_by": "cause"}.get(la["waffle.link"], la["waffle.link"])
                    effect = la.get("waffle.from_event", sid)
                    cause = la.get("waffle.cause_event", la.get("waffle.peer_event", link.span_id.hex()))
                    s.pairs.add((effect, cause, kind))
    for item in s.items.values():
        if item.thread is None:
            item.thread = threads[item.process].get(item.tid)
    s.parent = {k: p for k, p in parents.items() if p in s.items}
    return s


def read_otlp_json(path):
    return read_otlp(parse_json(path.read_text()), "otlp-json")


def read_otlp_pb(path):
    req = ExportTraceServiceRequest.FromString(path.read_bytes())
    assert_no_unknown_fields(req, path.name)
    return read_otlp(req, "otlp")


# -------------------------------------------------------------------------------------- Jaeger

def tags(items):
    return {t["key"]: t["value"] for t in items}


def read_jaeger(path):
    trace = json.loads(path.read_text())["data"][0]
    s = Story("jaeger", level={None: "span"})
    keys = sorted(trace["processes"], key=lambda k: int(k[1:]))
    for k in keys:
        t = tags(trace["processes"][k]["tags"])
        s.processes.append({"index": int(k[1:]) - 1,
                            "name": named(trace["processes"][k]["serviceName"], "waffle"),
                            "pid": t.get("process.pid"), "host": t.get("host.name"),
                            "rank": t.get("rank")})
    spans = {sp["spanID"] for sp in trace["spans"]}
    for sp in trace["spans"]:
        t, sid = tags(sp["tags"]), sp["spanID"]
        process = int(sp["processID"][1:]) - 1
        s.add(Item(sid, "event" if t.get("waffle.event") else "span", sp["operationName"], process,
                   t.get("thread.name"), sp["startTime"], sp["startTime"] + sp["duration"], "us",
                   id=sid, tid=t.get("thread.id"), correlate=t.get("waffle.correlate")))
        # The UI's rule: the first reference that resolves in the trace is the parent.
        resolving = [r for r in sp["references"] if r["spanID"] in spans]
        if resolving:
            s.parent[sid] = resolving[0]["spanID"]
            if resolving[0]["refType"] == "FOLLOWS_FROM":
                s.parent_is_reference.add(sid)
        for r in resolving:
            if r["refType"] == "FOLLOWS_FROM":
                s.pairs.add((sid, r["spanID"], None))
        s.pairs |= {(sid, c, None) for c in ids(t.get("waffle.follows_from")) if c in spans}
        for n, log in enumerate(sp["logs"]):
            f = tags(log["fields"])
            key = f.get("waffle.id", f"{sid}~{n}")
            s.add(Item(key, "event", f["event"], process, t.get("thread.name"), log["timestamp"],
                       log["timestamp"], "us", id=f.get("waffle.id"), tid=t.get("thread.id"),
                       correlate=f.get("waffle.correlate")))
            s.parent[key] = sid
    return s


# -------------------------------------------------------------------------------------- Zipkin

# `key=value` at the end of an annotation: a quoted string (Rust's escapes) or a bare token.
ANNOTATION_FIELD = re.compile(r' ([^\s=]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)$')


def annotation(text):
    """An annotation's text (`name key=value ...`) as (name, fields)."""
    fields = {}
    while (m := ANNOTATION_FIELD.search(text)) is not None:
        fields.setdefault(m.group(1), m.group(2))
        text = text[:m.start()]
    return text, fields


def read_zipkin(path):
    s = Story("zipkin", level={"cause": "item", "message": "span"})
    spans = json.loads(path.read_text())
    index, causes = {}, []
    for sp in spans:
        t, sid = sp.get("tags", {}), sp["id"]
        pid = int(t["process.pid"]) if "process.pid" in t else None
        label = (sp["localEndpoint"]["serviceName"], pid, t.get("host.name"))
        if label not in index:
            index[label] = len(s.processes)
            s.processes.append({"index": None, "name": named(label[0], "waffle"), "pid": pid,
                                "host": label[2], "rank": None})
        process, thread = index[label], t.get("thread.name")
        tid = int(t["thread.id"]) if "thread.id" in t else None
        s.add(Item(sid, "event" if t.get("waffle.event") == "true" else "span", sp["name"], process, thread,
                   sp["timestamp"], sp["timestamp"] + sp["duration"], "us", id=sid, tid=tid,
                   correlate=t.get("waffle.correlate"), min_duration=1))
        if "parentId" in sp:
            s.parent[sid] = sp["parentId"]
        causes += [(sid, c) for c in ids(t.get("waffle.caused_by"))]
        s.pairs |= {(sid, c, "message") for c in ids(t.get("waffle.message_from"))}
        for n, a in enumerate(sp.get("annotations", [])):
            name, f = annotation(a["value"])
            key = f.get("waffle.id", f"{sid}~{n}")
            s.add(Item(key, "event", name, process, thread, a["timestamp"], a["timestamp"], "us",
                       id=f.get("waffle.id"), tid=tid, correlate=f.get("waffle.correlate")))
            s.parent[key] = sid
            causes += [(key, c) for c in ids(f.get("waffle.caused_by"))]
    s.pairs |= {(e, c, "cause") for e, c in causes if c in s.items}
    s.pairs = {p for p in s.pairs if p[1] in s.items}
    s.parent = {k: p for k, p in s.parent.items() if p in s.items}
    return s


READERS = {"perfetto": read_perfetto, "jaeger": read_jaeger, "zipkin": read_zipkin,
           "otlp-json": read_otlp_json, "otlp": read_otlp_pb, "chrome": read_chrome,
           "xspace": read_xspace}
