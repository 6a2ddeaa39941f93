"""One run exported to every format must tell one story: this module reads each format back by
its own consumer's rules, makes each into a `Story`, and compares every pair of them.

Over 400 lines because the comparison is one set of rules: which formats may differ in what,
and how each pair of formats is matched item by item, kept together so that a rule is read
beside the others it must agree with.

API (for any test with trace.bin files, a real program's or an example's):

    import story
    stories = story.check_formats_agree(trace_files, workdir)

`check_formats_agree(trace_files, workdir, formats=story.FORMATS, extra_args=())` exports
`trace_files` with `waffle-decode` into `workdir` in each of `formats` (`perfetto`, `jaeger`,
`zipkin`, `otlp-json`, `otlp`, `chrome`, `xspace`), reads each back (`story_read.py`) and compares
every pair (`compare`); it fails with a readable report (per pair of formats, counts and the first
differences) when any two disagree, and returns the stories by format otherwise, for a caller's own
checks (`Story.spans()`, `Story.events()`, `Story.parent`, `Story.pairs`). `export(...)` and
`read(...)` are the two halves; `compare(a, b)` lists the differences of two stories.

The story (what every format is normalised to):
- **items**: spans and events, each with its name, process, thread, start and end (an event's
  end is its start), and its `waffle.correlate` (`key=value`, or None). Items are known by their
  waffle id (16 hex digits) where the format writes it; otherwise (Perfetto's slices, Jaeger's and
  Zipkin's logs that no link names) by a key of the reader's, and matched across formats by name,
  time, process and thread.
- **processes**: each as what the format says of it (`index` in input order, `name`, recorded
  `pid`, `host`, `rank`); two formats compare an item's process on the attributes both carry
  for every process (a format's stand-in for no name, OTLP's `unknown_service`, Jaeger's and
  Zipkin's `waffle`, is none).
- **parents**: each item's parent item (an event's is the span it belongs to), or None.
- **pairs**: cause -> effect pairs `(effect, cause, kind)`: `cause` (a recorded link),
  `message` (an effect of a directed correlation to each of its group's causes: an MPI message),
  `correlated` (each member of an undirected correlation group to its first member in time: a
  collective). Each kind is read at the granularity the format carries (`Story.level`): `item`
  (from and to the very span or event) or `span` (from and to the span an event belongs to).
  Two formats compare each kind both carry, at the coarser level, an event taken to its parent;
  a pair whose two ends are one span (a link within a span) is left out, as every exporter does.

What each format carries, and what by design it cannot (the justified exceptions; each is
applied in `compare` and nowhere else):
- OTLP (JSON and protobuf, through OpenTelemetry's own classes): everything, at item level:
  links with `waffle.link` for the kind, `waffle.from_event`/`waffle.cause_event`/
  `waffle.peer_event` for the events at either end. The reference for the others.
- Perfetto (Perfetto's protobuf classes, `test_perfetto.parse`, and the trace processor's flow
  rules, `test_perfetto.flow_arrows`): parents are the nesting on a track; arrows are flows and
  carry no kind, so each is told by the annotations at its ends: `cause` when the effect's
  `waffle.caused_by` names the start's `waffle.id`, `message`/`correlated` when both ends carry
  one group's `waffle.correlate`, else the parent of a slice its track does not nest (a context
  entered elsewhere). *Exceptions*: an undirected group is one flow through its members in time
  order, taken to the star form (each member to the first); Perfetto alone joins spans matched
  by order across ranks (a guess, not a record; `--no-match` turns it off): those arrows, between
  ends that both carry `waffle.matched_by_order`, are left out. Slices and instants carry no
  ids: each takes the id of the one OTLP item of the same kind, name, process, thread and start
  in ns (`read`), else is matched by name, time, process and thread. A detached span is on a
  track of its own, and so are device tracks and step spans (a `Steps` track): their thread is
  not compared; and a step's children, left on their thread's track, nest under nothing there:
  Perfetto has no parent for them.
- Jaeger (its UI's rules): parents by the UI's rule, the first reference that resolves in the
  trace; pairs are the `FOLLOWS_FROM` references, span to span, without a kind (Jaeger keeps one
  reference per span pair), plus the tag `waffle.follows_from`. *Exceptions*: the UI makes any
  first reference the parent, so a span that is a root elsewhere hangs under one of its causes:
  where Jaeger's first reference is `FOLLOWS_FROM` to a span that the other format has as a cause
  and not as the parent, the parent the other format has must be none. A root span whose causes
  all began after it, none of them a root without references of its own, cannot hang under one
  without risking a loop of first references (two ranks' `MPI_Sendrecv` with each other), which
  would hide both from the UI: those causes are in the tag `waffle.follows_from`. Times are whole
  µs; a log carries its waffle id only when a link names it, and no thread of its own.
- Zipkin v2 (through `parentId` and its tags): no links in v2: `waffle.caused_by` (item level, in
  span tags and annotation text) and `waffle.message_from` (span level). *Exception*: no
  correlated pairs: its correlations are the `waffle.correlate` tags, compared on every item.
  Whole µs; an event span lasts 1 µs, a span at least 1 µs (Zipkin's rule); service names are
  lowercased; process and thread as tags.
- Chrome trace-event JSON (the trace-event rules: `X`/`B`/`E` nesting per row, instants, flows
  `s`/`f` bound to the enclosing slice): parents by nesting, or the `parent` flow where a parent
  does not enclose; pairs are the `caused_by`/`message`/`correlated` flows, at span level (a
  flow binds to a slice). *Exceptions*: a detached span is on a row of its own (its thread is not
  compared), a slice stretched to keep its row nested (`waffle.stretched`) keeps no times of its
  own; an event that takes part in a flow and has no enclosing parent is a zero-length slice
  (`waffle.event`), whose flows bind to the slice around it, if any.
- XSpace (through its stats, read with protobuf classes built here from `xplane.proto`'s field
  numbers): parents from `waffle.parent`, causes from `waffle.caused_by`, messages and
  correlations from `waffle.correlate` by the shared rules (every effect to every cause of a
  directed group; every member to the first of an undirected one). *Exceptions*: a process is
  known by its name and pid only (a line's prefix), none when there is one; a line's id is not
  the recorded tid where another line had it; a detached span is on a `detached spans` line.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from waffle_bins import binary, run

FORMATS = ("perfetto", "jaeger", "zipkin", "otlp-json", "otlp", "chrome", "xspace")
EXTENSIONS = {"perfetto": ".pftrace", "jaeger": ".jaeger.json", "zipkin": ".zipkin.json",
              "otlp-json": ".otlp.json", "otlp": ".otlp.pb", "chrome": ".chrome.json",
              "xspace": ".xplane.pb"}
KINDS = ("cause", "message", "correlated")
# Formats whose own display keeps a detached span (or a device track's, or a step's) on a row
# of its own: the thread of such an item is theirs, not the recording thread.
OWN_ROWS = {"perfetto", "chrome", "xspace"}
SHOWN = 12  # differences shown per kind of difference


@dataclass(eq=False)
class Item:
    """A span or an event as one format shows it."""
    key: str  # unique in its story: the waffle id where known
    kind: str  # "span" or "event"
    name: str
    process: int  # index into Story.processes
    thread: str | None
    start: int
    end: int
    unit: str = "ns"  # of start and end: "ns" or "us"
    id: str | None = None  # waffle id, 16 hex digits
    tid: int | None = None  # the recorded OS thread id, where the format keeps it
    correlate: str | None = None
    own_row: bool = False  # on a row, line or track of its own (detached, device, step)
    exact_times: bool = True  # false: the format moved its times (a stretched slice)
    min_duration: int = 0  # Zipkin's: durations are at least 1 µs


@dataclass
class Story:
    """What one format says: see the module docs."""
    format: str
    items: dict = field(default_factory=dict)  # key -> Item
    processes: list = field(default_factory=list)  # dicts: index, name, pid, host, rank
    parent: dict = field(default_factory=dict)  # key -> parent key (or absent)
    # Jaeger: spans whose parent is a FOLLOWS_FROM first reference (a parent or a cause).
    parent_is_reference: set = field(default_factory=set)
    # Perfetto: step spans, on a track of their own whose nesting holds none of their children.
    steps: set = field(default_factory=set)
    pairs: set = field(default_factory=set)  # (effect key, cause key, kind or None)
    level: dict = field(default_factory=dict)  # kind (None: any kind) -> "item" or "span"
    notes: list = field(default_factory=list)  # what the reader found wrong on its own
    # Indexes made once the story is read (`lifted_pairs`, `undirected`), for the comparisons.
    _lifted: set | None = field(default=None, repr=False, compare=False)
    _undirected: dict | None = field(default=None, repr=False, compare=False)

    def add(self, item):
        assert item.key not in self.items, f"{self.format}: {item.key} twice"
        self.items[item.key] = item
        return item

    def spans(self):
        return [i for i in self.items.values() if i.kind == "span"]

    def events(self):
        return [i for i in self.items.values() if i.kind == "event"]

    def by_id(self):
        return {i.id: i for i in self.items.values() if i.id is not None}

    def lift(self, key):
        """The span an item belongs to: itself, or an event's parent."""
        item = self.items.get(key)
        if item is not None and item.kind == "event" and self.parent.get(key) is not None:
            return self.parent[key]
        return key

    def lifted_pairs(self):
        """Every cause->effect pair as (effect's span, cause's span), of any kind."""
        if self._lifted is None:
            self._lifted = {(self.lift(e), self.lift(c)) for e, c, _ in self.pairs}
        return self._lifted

    def undirected(self):
        """Each span's undirected `waffle.correlate` values (its events' included)."""
        if self._undirected is None:
            group = defaultdict(set)
            for item in self.items.values():
                if item.correlate and not item.correlate.split("=")[0].endswith((">", "<")):
                    group[self.lift(item.key)].add(item.correlate)
            self._undirected = group
        return self._undirected

    def star(self, members):
        """Pairs of an undirected group: each member to the first, as the exporters choose it
        (earliest in time; at the same time, the process given first, then the lower id), so
        that a tie in time gives every format the same first member."""
        order = lambda k: (self.items[k].start, self.items[k].process, k)
        members = sorted(members, key=order)
        return {(m, members[0], "correlated") for m in members[1:]}

    def describe(self, key):
        item = self.items.get(key)
        if item is None:
            return f"<{key}>"
        p = self.processes[item.process] if item.process < len(self.processes) else {}
        where = p.get("rank", p.get("name", item.process))
        thread = item.thread or item.tid
        return f"{item.kind} {item.name!r} (process {where}, {thread}, {item.start} {item.unit})"


def export(trace_files, workdir, formats=FORMATS, extra_args=()):
    """Writes `trace_files` in each of `formats` under `workdir`; returns the paths by format."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out = {}
    for fmt in formats:
        path = workdir / f"trace{EXTENSIONS[fmt]}"
        run(binary("waffle-decode"), *trace_files, "-o", path, "-q", *extra_args)
        out[fmt] = path
    return out


def read(paths):
    """Each exported file as a story, by format; Perfetto's items take OTLP's ids (`name`)."""
    from story_read import READERS  # which builds on this module's types
    stories = {fmt: READERS[fmt](Path(path)) for fmt, path in paths.items()}
    reference = stories.get("otlp-json") or stories.get("otlp")
    if reference is not None and "perfetto" in stories:
        name(stories["perfetto"], reference)
    return stories


def name(s, reference):
    """Gives the items of `s` without a waffle id the id of the one item of `reference` (a
    format with ids and times in ns) of the same kind, name, process, thread and start; a row
    of its own is no thread here. Those without one are matched as `match` says."""
    def key(story, item, own):
        return item.kind, item.name, item.process, item.start, None if own else item.thread or item.tid
    found = defaultdict(list)
    for item in reference.items.values():
        for own in (False, True):
            found[key(reference, item, own)].append(item.id)
    for item in s.items.values():
        ids = found[key(s, item, item.own_row and s.format in OWN_ROWS)]
        if item.id is None and len(ids) == 1:
            item.id = ids[0]


def check_formats_agree(trace_files, workdir, formats=FORMATS, extra_args=()):
    """Exports, reads and compares (see the module docs); returns the stories by format."""
    stories = read(export(trace_files, workdir, formats, extra_args))
    report = []
    for s in stories.values():
        report += [f"{s.format}: {n}" for n in s.notes[:SHOWN]]
    names = list(stories)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            diffs = compare(stories[a], stories[b])
            if diffs:
                report.append(f"== {a} vs {b}:")
                report += ["   " + d for d in diffs]
    assert not report, "the formats tell different stories:\n" + "\n".join(report)
    return stories


def same_time(a, ua, b, ub):
    if ua == ub:
        return a == b
    return (a // 1000 if ua == "ns" else a) == (b // 1000 if ub == "ns" else b)


def us(t, unit):
    return t // 1000 if unit == "ns" else t


def match(a, b):
    """Items of `a` to items of `b`: by waffle id, then by name, time (in whole µs, the coarsest
    any format keeps), process and thread, in order of time where several share those."""
    out, b_ids = {}, b.by_id()
    for item in a.items.values():
        if item.id is not None and item.id in b_ids:
            out[item.key] = b_ids[item.id].key
    fields = process_fields(a, b)
    # By thread first; then without, for items a format shows on a row of their own.
    for with_thread in (True, False):
        taken = set(out.values())
        buckets = defaultdict(lambda: ([], []))
        for side, story, skip in ((0, a, out), (1, b, taken)):
            for item in story.items.values():
                if item.key not in skip:
                    key = (item.name, us(item.start, item.unit), item.kind == "span",
                           process_label(story, item.process, fields))
                    buckets[key + ((thread_key(story, item),) if with_thread else ())][side].append(item)
        for xs, ys in buckets.values():
            # Several alike: in the order of what each still says (end, correlation, parent id).
            def order(story):
                def key(i):
                    parent = story.items.get(story.parent.get(i.key))
                    return us(i.end, i.unit), i.correlate or "", (parent.id or "") if parent else ""
                return key
            for x, y in zip(sorted(xs, key=order(a)), sorted(ys, key=order(b))):
                out[x.key] = y.key
    return out


def thread_key(story, item):
    """What every format says of an item's thread: its name, or its recorded id when unnamed;
    nothing for an item on a row of its own (see `OWN_ROWS`)."""
    if item.own_row and story.format in OWN_ROWS:
        return None
    return item.thread or item.tid


def process_fields(a, b):
    """The process attributes both stories carry for every process."""
    def carried(s):
        return set.intersection(*[{k for k, v in p.items() if v is not None} for p in s.processes]) \
            if s.processes else set()
    return sorted(carried(a) & carried(b))


def process_label(story, index, fields):
    p = story.processes[index]
    return tuple(str(p[f]).lower() if f == "name" else p[f] for f in fields)


def compare(a, b):
    """The differences between two stories, as lines of text (empty when they agree)."""
    m = match(a, b)
    back = {v: k for k, v in m.items()}
    diffs = []

    def section(title, lines):
        if lines:
            diffs.append(f"{title}: {len(lines)}")
            diffs.extend("  " + line for line in lines[:SHOWN])

    section(f"items only in {a.format}", [a.describe(k) for k in a.items if k not in m])
    section(f"items only in {b.format}", [b.describe(k) for k in b.items if k not in back])

    fields = process_fields(a, b)
    attrs = []
    for ka, kb in m.items():
        x, y = a.items[ka], b.items[kb]
        problems = []
        if x.kind != y.kind:
            problems.append(f"kind {x.kind} / {y.kind}")
        if x.name != y.name:
            problems.append(f"name {x.name!r} / {y.name!r}")
        pa, pb = process_label(a, x.process, fields), process_label(b, y.process, fields)
        if pa != pb:
            problems.append(f"process {pa} / {pb}")
        own_row = (x.own_row and a.format in OWN_ROWS) or (y.own_row and b.format in OWN_ROWS)
        if not own_row and thread_key(a, x) != thread_key(b, y):
            problems.append(f"thread {x.thread or x.tid!r} / {y.thread or y.tid!r}")
        if x.tid is not None and y.tid is not None and x.tid != y.tid and not own_row:
            problems.append(f"tid {x.tid} / {y.tid}")
        if x.exact_times and y.exact_times:
            if not same_time(x.start, x.unit, y.start, y.unit):
                problems.append(f"start {x.start} {x.unit} / {y.start} {y.unit}")
            if "event" not in (x.kind, y.kind) and not same_duration(x, y):
                problems.append(f"duration {x.end - x.start} {x.unit} / {y.end - y.start} {y.unit}")
        if x.correlate != y.correlate:
            problems.append(f"correlate {x.correlate} / {y.correlate}")
        if problems:
            attrs.append(f"{a.describe(ka)}: " + "; ".join(problems))
    section("items that differ", attrs)

    parents = []
    for ka, kb in m.items():
        pa, pb = a.parent.get(ka), b.parent.get(kb)
        if (m.get(pa) if pa is not None else None) == pb:
            continue
        if reference_parent_ok(a, b, ka, kb, m) or reference_parent_ok(b, a, kb, ka, back):
            continue
        if (pa is None and back.get(pb) in a.steps) or (pb is None and m.get(pa) in b.steps):
            continue
        parents.append(f"{a.describe(ka)}: parent {a.describe(pa) if pa else None} in {a.format}, "
                       f"{b.describe(pb) if pb else None} in {b.format}")
    section("parents that differ", parents)

    for kind, only_a, only_b in compare_pairs(a, b, m):
        label = kind or "cause->effect"
        section(f"{label} pairs only in {a.format}",
                [f"{a.describe(e)} <- {a.describe(c)}" for e, c in only_a])
        section(f"{label} pairs only in {b.format}",
                [f"{b.describe(e)} <- {b.describe(c)}" for e, c in only_b])
    return diffs


def same_duration(x, y):
    dx, dy = x.end - x.start, y.end - y.start
    if x.unit == y.unit == "ns":
        return dx == dy
    # Whole µs: each format floors start and end (Zipkin then makes it at least 1).
    ex, ey = us(x.end, x.unit) - us(x.start, x.unit), us(y.end, y.unit) - us(y.start, y.unit)
    return max(ex, x.min_duration, y.min_duration) == max(ey, x.min_duration, y.min_duration)


def reference_parent_ok(j, o, kj, ko, m):
    """Jaeger's exception (module docs): `j`'s parent of `kj` is a FOLLOWS_FROM first reference
    and `o` has no parent for `ko` but has that span among its causes."""
    if kj not in j.parent_is_reference or o.parent.get(ko) is not None:
        return False
    target = m.get(j.parent[kj])
    if target is None:
        return False
    if (o.lift(ko), o.lift(target)) in o.lifted_pairs():
        return True
    # A format without correlated pairs (Zipkin): the two share an undirected correlation.
    return "correlated" not in o.level and bool(correlated_within(o, {(o.lift(ko), o.lift(target))}))


def compare_pairs(a, b, m):
    """Per kind both carry: (kind, pairs only in a, pairs only in b), in a's and b's keys."""
    def kinds(s):
        return set(s.level)
    ka, kb = kinds(a), kinds(b)
    out = []
    if None in ka or None in kb:
        # A format without kinds (Jaeger): all pairs together, span to span.
        carried = [k for k in KINDS if (k in ka or None in ka) and (k in kb or None in kb)]
        pa, pb = project(a, carried, True), project(b, carried, True)
        if "correlated" not in carried:
            # The other has no correlated pairs: Jaeger's extra pairs must join members of one
            # undirected correlation group.
            pa -= correlated_within(a, pa - mapped(pb, {v: k for k, v in m.items()}))
            pb -= correlated_within(b, pb - mapped(pa, m))
        out.append(diff_sets(None, pa, pb, m))
    else:
        for kind in KINDS:
            if kind not in ka or kind not in kb:
                continue
            span = "span" in (a.level[kind], b.level[kind])
            out.append(diff_sets(kind, project(a, [kind], span), project(b, [kind], span), m))
    return [d for d in out if d[1] or d[2]]


def project(s, kinds, span):
    """The story's pairs of `kinds` (and its kindless ones), as (effect, cause) keys, events
    taken to their parents when `span`, links within one span left out."""
    out = set()
    for e, c, k in s.pairs:
        if k is not None and k not in kinds:
            continue
        le, lc = s.lift(e), s.lift(c)
        if le == lc:
            continue
        out.add((le, lc) if span else (e, c))
    return out


def mapped(pairs, m):
    return {(m[e], m[c]) for e, c in pairs if e in m and c in m}


def correlated_within(s, pairs):
    """Those of `pairs` whose two ends (as spans) share an undirected `waffle.correlate`."""
    group = s.undirected()
    return {(e, c) for e, c in pairs if group.get(e, set()) & group.get(c, set())}


def diff_sets(kind, pa, pb, m):
    back = {v: k for k, v in m.items()}
    only_a = sorted(p for p in pa if (m.get(p[0]), m.get(p[1])) not in pb)
    only_b = sorted(p for p in pb if (back.get(p[0]), back.get(p[1])) not in pa)
    return kind, only_a, only_b
