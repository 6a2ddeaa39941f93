"""The formats that lay items out on rows (Chrome's rows, Perfetto's tracks, XSpace's lines)
read back by their consumers' rules into a `story.Story`, and what the readers share: ids in
text, correlation keys, rows' thread names. `story_read.py` has the span-list formats and the
table of readers."""

from __future__ import annotations

import json
import re
from collections import defaultdict

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.unknown_fields import UnknownFieldSet

from story import Item, Story
from test_perfetto import flow_arrows, parse

PID_IN_NAME = re.compile(r"\(pid (\d+)\)")  # a Perfetto process track's name
LINE_PREFIX = re.compile(r"^(.*) \(pid (\d+)\): (.*)$")  # an XSpace line's, with several processes
UNNAMED = re.compile(r"^thread (\d+)$")  # a thread without a name, as Chrome and XSpace show it
# Ids above Linux's largest pid are fresh ones a format gave a thread (a repeated tid, a row of
# its own), not the recorded one.
MAX_TID = 1 << 22


def row(name, tid=None):
    """(thread name, recorded tid) of a row, line or track shown as `name`."""
    m = UNNAMED.match(name or "")
    if m:
        return None, int(m.group(1))
    return name or None, tid if tid is not None and tid < MAX_TID else None


def named(name, placeholder=""):
    """A process's name, or None where the format shows its stand-in for no name (OTLP's
    `unknown_service`, Jaeger's and Zipkin's `waffle`): a name then goes uncompared."""
    return None if name in (None, "", placeholder) else name


def ids(text):
    """A `waffle.caused_by` list: ids separated by commas (and spaces)."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


def directed(correlate):
    """(stem, value, '>' or '<') of a directed `key=value`, else None."""
    key, _, value = correlate.rpartition("=")
    if key.endswith((">", "<")):
        return key[:-1], value, key[-1]
    return None


def derived_pairs(s):
    """Messages and correlations by the shared rules, from the items' `waffle.correlate`."""
    groups = defaultdict(lambda: ([], []))
    for item in s.items.values():
        if not item.correlate:
            continue
        d = directed(item.correlate)
        if d is None:
            groups[item.correlate][0].append(item.key)
        else:
            groups[("message", d[0], d[1])][0 if d[2] == ">" else 1].append(item.key)
    for key, (first, second) in groups.items():
        if isinstance(key, tuple):
            s.pairs |= {(e, c, "message") for e in second for c in first}
        elif len(first) > 1:
            s.pairs |= s.star(first)


# -------------------------------------------------------------------------------------- Chrome

def read_chrome(path):
    doc = json.loads(path.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    origin = int(doc.get("otherData", {}).get("waffle_origin_unix_ns", 0)) if isinstance(doc, dict) else 0
    s = Story("chrome", level={"cause": "span", "message": "span", "correlated": "span"})
    names, labels, order, rows = {}, {}, {}, {}
    slices, instants, flows, begun = [], [], defaultdict(list), defaultdict(list)
    ns = lambda t: origin + round(t * 1000)
    for n, e in enumerate(events):
        ph = e.get("ph")
        if ph == "M":
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"]["name"]
            elif e["name"] == "process_labels":
                labels[e["pid"]] = dict(x.split("=", 1) for x in e["args"]["labels"].split(", "))
            elif e["name"] == "process_sort_index":
                order[e["pid"]] = e["args"]["sort_index"]
            elif e["name"] == "thread_name":
                rows[(e["pid"], e["tid"])] = e["args"]["name"]
        elif ph == "X":
            slices.append((e, ns(e["ts"]), ns(e["ts"]) + round(e["dur"] * 1000)))
        elif ph == "B":
            begun[(e["pid"], e["tid"])].append(e)
        elif ph == "E":
            # An end closes the row's innermost begin; the pair is one slice.
            b = begun[(e["pid"], e["tid"])].pop()
            slices.append((b, ns(b["ts"]), ns(e["ts"])))
        elif ph in ("i", "I"):
            instants.append((e, ns(e["ts"])))
        elif ph in ("s", "t", "f"):
            flows[(e["id"], e["cat"], e["name"])].append((ph, (e["pid"], e["tid"]), ns(e["ts"]), e.get("bp")))
        else:
            raise AssertionError(f"chrome: event {n} has phase {ph!r}, which waffle does not write")
    if any(begun.values()):
        s.notes.append(f"B events never ended: {[b['name'] for bs in begun.values() for b in bs]}")
    for pid in sorted(names, key=lambda p: order.get(p, 0)):
        l = labels.get(pid, {})
        s.processes.append({"index": order.get(pid),
                            "name": named(re.sub(r" \(rank [^)]*\)$", "", names[pid])),
                            "pid": None, "host": l.get("host"), "rank": l.get("rank")})
    index = {pid: k for k, pid in enumerate(sorted(names, key=lambda p: order.get(p, 0)))}

    by_row = defaultdict(list)  # row -> [(start, end, key)]
    for e, start, end in slices:
        a, at = e.get("args", {}), (e["pid"], e["tid"])
        thread, tid = row(rows.get(at), e["tid"])
        kind = "event" if a.get("waffle.event") else "span"
        item = s.add(Item(a["waffle.id"], kind, e["name"], index[e["pid"]],
                          thread, start, end, id=a["waffle.id"], tid=tid, correlate=a.get("waffle.correlate"),
                          own_row=bool(a.get("waffle.detached")), exact_times=not a.get("waffle.stretched")))
        by_row[at].append((start, end, item.key))
    nesting = {}  # key -> parent key, by nesting on its row
    starts = {}
    for at, xs in by_row.items():
        xs.sort(key=lambda x: (x[0], -(x[1] - x[0])))
        stack = []
        for start, end, key in xs:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                if end > stack[-1][1]:
                    s.notes.append(f"{s.describe(key)} crosses the end of {s.describe(stack[-1][2])}")
                nesting[key] = stack[-1][2]
            stack.append((start, end, key))
        starts[at] = [x[0] for x in xs]

    def binding(at, ts, inclusive=False):
        """The innermost slice of row `at` with start <= ts < end (<= end if `inclusive`), else
        a zero-length one at ts."""
        xs = by_row.get(at, [])
        k = bisect(starts.get(at, []), ts)
        if k == 0:
            return None
        key = xs[k - 1][2]
        zero = key if xs[k - 1][0] == xs[k - 1][1] == ts else None
        while key is not None:
            it = s.items[key]
            if it.start <= ts < it.end or (inclusive and it.start <= ts <= it.end and it.end > it.start):
                return key
            key = nesting.get(key)
        return zero

    for e, ts in instants:
        a, at = e.get("args", {}), (e["pid"], e["tid"])
        thread, tid = row(rows.get(at), e["tid"])
        item = s.add(Item(a["waffle.id"], "event", e["name"], index[e["pid"]], thread, ts, ts,
                          id=a["waffle.id"], tid=tid, correlate=a.get("waffle.correlate")))
        holder = binding(at, ts, inclusive=True)
        if holder is not None:
            nesting[item.key] = holder
    s.parent = dict(nesting)
    for (fid, _, name), steps in flows.items():
        phases = [ph for ph, *_ in steps]
        if phases[0] != "s" or phases[-1] != "f" or any(p != "t" for p in phases[1:-1]):
            s.notes.append(f"flow {fid} {name}: phases {phases}")
            continue
        ends = [binding(at, ts) for _, at, ts, _ in steps]
        if None in ends or steps[-1][3] != "e":
            s.notes.append(f"flow {fid} {name} binds to no slice (or its f lacks bp=e)")
            continue
        if name == "parent":
            s.parent[ends[-1]] = ends[0]
        else:
            kind = {"caused_by": "cause"}.get(name, name)
            s.pairs.add((ends[-1], ends[0], kind))
    return s


def bisect(xs, x):
    """How many of the sorted `xs` are <= x."""
    lo, hi = 0, len(xs)
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------------------------ Perfetto

def read_perfetto(path):
    tracks, flowing = parse(path.read_bytes())
    s = Story("perfetto", level={"cause": "item", "message": "item", "correlated": "item"})
    process_of = {}
    for uuid, t in tracks.items():
        d = t.descriptor
        if d.HasField("process"):
            pid = PID_IN_NAME.search(d.name)
            l = dict(x.split("=", 1) for x in d.process.process_labels if "=" in x)
            process_of[uuid] = len(s.processes)
            s.processes.append({"index": len(s.processes), "name": named(d.process.process_name),
                                "pid": int(pid.group(1)) if pid else None, "host": l.get("host"),
                                "rank": l.get("rank")})
    keys = {}  # id(slice or instant) -> key

    def add(x, uuid, kind, end):
        d = tracks[uuid].descriptor
        own = not d.HasField("thread") and not d.HasField("process")
        thread, tid = row(d.thread.thread_name, d.thread.tid) if d.HasField("thread") else (d.name, None)
        process = process_of[uuid] if d.HasField("process") else process_of[d.parent_uuid]
        arg = lambda name: x.args[name][1] if name in x.args else None
        key = f"pf{len(keys)}"
        keys[id(x)] = key
        item = s.add(Item(key, kind, x.name, process, thread, x.ts, end, id=arg("waffle.id"), tid=tid,
                          correlate=arg("waffle.correlate"), own_row=own))
        if own and d.name == "Steps":
            s.steps.add(key)
        return key

    for uuid, t in tracks.items():
        for x in t.slices:
            add(x, uuid, "span", x.end)
        for x in t.slices:
            for c in x.children:
                s.parent[keys[id(c)]] = keys[id(x)]
            for i in x.instants:
                s.parent[add(i, uuid, "event", i.ts)] = keys[id(x)]
        for i in t.instants:
            add(i, uuid, "event", i.ts)
    arrows = defaultdict(int)
    for src, dst in flow_arrows(flowing):
        arrows[(keys[id(src)], keys[id(dst)])] += 1
    args = {keys[id(x)]: x.args for x in flowing}
    correlated, explained = [], set()
    for (src, dst), n in arrows.items():
        a, b = s.items[src], s.items[dst]
        kinds = []
        if a.id is not None and a.id in ids(args[dst].get("waffle.caused_by", ("", ""))[1]):
            kinds.append("cause")
        da, db = directed(a.correlate or "="), directed(b.correlate or "=")
        if da and db and da[:2] == db[:2] and (da[2], db[2]) == (">", "<"):
            kinds.append("message")
        elif a.correlate and a.correlate == b.correlate and not da:
            kinds.append("correlated")
        matched = "waffle.matched_by_order" in args[src] and "waffle.matched_by_order" in args[dst]
        for kind in kinds[:n]:
            if kind == "correlated":
                correlated.append((src, dst))
            else:
                s.pairs.add((dst, src, kind))
        for _ in range(n - len(kinds)):
            # Otherwise the arrow is the parent of a slice its track does not nest under it
            # (a slice may still nest under a span of its own thread that is not its parent).
            if matched:
                continue
            if dst in explained:
                s.notes.append(f"two arrows into {s.describe(dst)} that no link or correlation explains")
            explained.add(dst)
            s.parent[dst] = src
    # One flow through each undirected group: its members, then each to the first.
    group = {}
    for src, dst in correlated:
        g = group.get(src) or group.get(dst) or set()
        g |= {src, dst}
        for k in g:
            group[k] = g
    for g in {id(g): g for g in group.values()}.values():
        s.pairs |= s.star(g)
    return s


# -------------------------------------------------------------------------------------- XSpace

def xplane_classes():
    """XSpace's messages, built from `xplane.proto`'s field numbers (the project's format notes)
    with the official protobuf runtime."""
    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="waffle_story_xplane.proto", package="xplane",
                                           syntax="proto3")

    def message(name, *fields, parent=None, oneof=None):
        m = (parent.nested_type if parent else f.message_type).add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for fname, number, ftype, *rest in fields:
            repeated = rest[0] if rest else False
            fd = m.field.add(name=fname, number=number, type=ftype,
                             label=T.LABEL_REPEATED if repeated else T.LABEL_OPTIONAL)
            if ftype == T.TYPE_MESSAGE:
                fd.type_name = rest[1]
            if oneof and number > 1:
                fd.oneof_index = 0
        return m

    message("XStat", ("metadata_id", 1, T.TYPE_INT64), ("double_value", 2, T.TYPE_DOUBLE),
            ("uint64_value", 3, T.TYPE_UINT64), ("int64_value", 4, T.TYPE_INT64),
            ("str_value", 5, T.TYPE_STRING), ("bytes_value", 6, T.TYPE_BYTES),
            ("ref_value", 7, T.TYPE_UINT64), oneof="value")
    message("XEvent", ("metadata_id", 1, T.TYPE_INT64), ("offset_ps", 2, T.TYPE_INT64),
            ("num_occurrences", 5, T.TYPE_INT64), ("duration_ps", 3, T.TYPE_INT64),
            ("stats", 4, T.TYPE_MESSAGE, True, ".xplane.XStat"))
    message("XLine", ("id", 1, T.TYPE_INT64), ("display_id", 10, T.TYPE_INT64), ("name", 2, T.TYPE_STRING),
            ("display_name", 11, T.TYPE_STRING), ("timestamp_ns", 3, T.TYPE_INT64),
            ("duration_ps", 9, T.TYPE_INT64), ("events", 4, T.TYPE_MESSAGE, True, ".xplane.XEvent"))
    message("XEventMetadata", ("id", 1, T.TYPE_INT64), ("name", 2, T.TYPE_STRING),
            ("display_name", 4, T.TYPE_STRING), ("metadata", 3, T.TYPE_BYTES),
            ("stats", 5, T.TYPE_MESSAGE, True, ".xplane.XStat"), ("child_id", 6, T.TYPE_INT64, True))
    message("XStatMetadata", ("id", 1, T.TYPE_INT64), ("name", 2, T.TYPE_STRING),
            ("description", 3, T.TYPE_STRING))
    plane = message("XPlane", ("id", 1, T.TYPE_INT64), ("name", 2, T.TYPE_STRING),
                    ("lines", 3, T.TYPE_MESSAGE, True, ".xplane.XLine"),
                    ("event_metadata", 4, T.TYPE_MESSAGE, True, ".xplane.XPlane.EventMetadataEntry"),
                    ("stat_metadata", 5, T.TYPE_MESSAGE, True, ".xplane.XPlane.StatMetadataEntry"),
                    ("stats", 6, T.TYPE_MESSAGE, True, ".xplane.XStat"))
    for name, value in (("EventMetadataEntry", ".xplane.XEventMetadata"),
                        ("StatMetadataEntry", ".xplane.XStatMetadata")):
        entry = message(name, ("key", 1, T.TYPE_INT64), ("value", 2, T.TYPE_MESSAGE, False, value),
                        parent=plane)
        entry.options.map_entry = True
    message("XSpace", ("planes", 1, T.TYPE_MESSAGE, True, ".xplane.XPlane"),
            ("errors", 2, T.TYPE_STRING, True), ("warnings", 3, T.TYPE_STRING, True),
            ("hostnames", 4, T.TYPE_STRING, True))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xplane.XSpace"))


XSpace = xplane_classes()


def stat(st, names):
    """A stat's value; a reference is the name it refers to."""
    kind = st.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(st, kind)
    return names.get(value, "") if kind == "ref_value" else value


def read_xspace(path):
    space = XSpace.FromString(path.read_bytes())
    assert len(UnknownFieldSet(space)) == 0, "xspace: unknown fields"
    s = Story("xspace", level={"cause": "item", "message": "item", "correlated": "item"})
    index, causes, parents = {}, [], {}
    for plane in space.planes:
        events = {k: v.name for k, v in plane.event_metadata.items()}
        stats = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            m = LINE_PREFIX.match(line.name)
            label, name = ((m.group(1), int(m.group(2))), m.group(3)) if m else ((None, None), line.name)
            thread, tid = row(name)  # a line's id is the tid only where no other line had it
            if label not in index:
                index[label] = len(s.processes)
                s.processes.append({"index": None, "name": named(label[0]), "pid": label[1],
                                    "host": None, "rank": None})
            own = name.startswith("detached spans") or plane.name != "/host:CPU"
            for ev in line.events:
                st = {stats.get(x.metadata_id, ""): stat(x, stats) for x in ev.stats}
                if ev.offset_ps % 1000 or ev.duration_ps % 1000:
                    s.notes.append(f"{events[ev.metadata_id]}: times not whole ns")
                start = line.timestamp_ns + ev.offset_ps // 1000
                key = st["waffle.id"]
                s.add(Item(key, "event" if st.get("waffle.event") else "span", events[ev.metadata_id],
                           index[label], thread, start, start + ev.duration_ps // 1000, id=key,
                           tid=None if own else tid, correlate=st.get("waffle.correlate"), own_row=own))
                if st.get("waffle.parent"):
                    parents[key] = st["waffle.parent"]
                causes += [(key, c) for c in ids(st.get("waffle.caused_by"))]
    s.parent = {k: p for k, p in parents.items() if p in s.items}
    s.pairs |= {(e, c, "cause") for e, c in causes if c in s.items}
    derived_pairs(s)
    return s
