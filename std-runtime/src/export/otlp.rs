//! OTLP exporter: a [`Trace`] as one OpenTelemetry `ExportTraceServiceRequest`, in protobuf
//! (`.otlp.pb`, what `POST /v1/traces` takes as `application/x-protobuf`) or OTLP/JSON
//! (`.otlp.json`, one request on one line, as the collector's `otlpjsonfile` receiver reads).
//! The message is built once from the model (`proto`); the JSON is rendered from that message
//! (`json`), so the two encodings cannot disagree.
//!
//! The mapping:
//! - one decode is one trace: every span carries the first non-zero trace id of the processes
//!   (in input order). If none has one, a non-zero id is hashed from the processes' pids, names
//!   and item ids, so the same files always give the same id. A process that recorded another
//!   trace id keeps it in the resource attribute `waffle.trace_id`;
//! - each [`Process`] is a `ResourceSpans` with `service.name` (the process name),
//!   `process.pid`, `host.name`, and `waffle.<key>` for each header label (`waffle.rank`), plus
//!   `waffle.dropped_records` and `waffle.incomplete` when records were lost; it holds one
//!   `ScopeSpans`, scope `waffle`;
//! - a span is a `SPAN_KIND_INTERNAL` span with its id, parent, times (end never before start)
//!   and fields as typed attributes (a `u64` above `i64::MAX` as a decimal string), with
//!   `thread.id` and `thread.name`; `waffle.detached` marks an async span, and a span that
//!   never ended has `waffle.unfinished = true` and its status left unset. A stand-in for a
//!   span whose begin was lost (id 0 in the model) gets `waffle.stand_in = true` and a fresh
//!   id: counting up from `0x5741_4646_0000_0001` ("WAFF"), skipping every id in the trace.
//!   Spans the model left without a parent because their parent was such a stand-in get it
//!   back from their nesting depth;
//! - an event is a span event of its parent span when that span is in the same process (its
//!   attributes: its fields, `waffle.id` (its id in hex), `waffle.caused_by` and
//!   `waffle.correlate`, and `thread.id` when it happened on another thread than the span's).
//!   An event without such a parent is a span of its own, zero-length, whose span id is the
//!   event's id (ids are unique over spans and events), with `waffle.event = true`;
//! - every cause in `caused_by` is a native link, `waffle.link = "caused_by"`, from the span
//!   that holds the effect to the span that holds the cause. A cause that is an event links to
//!   the span holding it (its parent, or its own zero-length span) with `waffle.cause_event`
//!   naming the event; an effect that is an event puts the link on the span holding it, with
//!   `waffle.from_event`. A cause not in the trace is still linked, by its id, with
//!   `waffle.unresolved = true`;
//! - a correlation group is a link from each member to every other member,
//!   `waffle.link = "correlated"` and `waffle.correlate = "key=value"`, with
//!   `waffle.peer_event` / `waffle.from_event` for members that are events. Links from a span
//!   to itself (an event and its own span) are left out.
//!
//! Attribute keys are unique per span, event, link and resource: a key already there (a field
//! named like one of ours) is dropped and counted in `dropped_attributes_count`.

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;
use serde_json::Value as Json;

use crate::model::{Event, Item, ItemRef, Process, Trace, Value};

mod attributes;
mod batch;
mod json;
mod proto;

pub use batch::Batch;

use attributes::Attributes;
use proto::{ExportTraceServiceRequest, Link, ResourceSpans, ScopeSpans, Span};

/// `Span.SpanKind.SPAN_KIND_INTERNAL`.
const SPAN_KIND_INTERNAL: i32 = 1;
/// The instrumentation scope of every span.
const SCOPE: &str = "waffle";
/// Fresh span ids for stand-ins count up from here ("WAFF").
const STAND_IN_BASE: u64 = 0x5741_4646_0000_0000;

/// Writes `trace` as a protobuf `ExportTraceServiceRequest`.
pub fn write_protobuf(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(&request(trace).encode_to_vec())?;
    out.flush()
}

/// The request [`write_protobuf`] writes, cut into requests of at most `max_spans` spans each
/// (for `POST /v1/traces` in batches): the same spans in the same order, each piece with the
/// resource and scope of its spans. A trace without spans gives no batch.
pub fn protobuf_batches(trace: &Trace, max_spans: usize) -> impl Iterator<Item = Batch> {
    batch::split(request(trace), max_spans).into_iter().map(|piece| batch::encode(&piece))
}

/// Writes `trace` as an OTLP/JSON `ExportTraceServiceRequest`, on one line.
pub fn write_json(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &to_json(trace))?;
    out.write_all(b"\n")?;
    out.flush()
}

/// `trace` as an OTLP/JSON `ExportTraceServiceRequest`.
pub fn to_json(trace: &Trace) -> Json {
    json::request(&request(trace))
}

/// A protobuf `ExportTraceServiceRequest` (as [`write_protobuf`] writes it) rendered as
/// OTLP/JSON, for comparing the two encodings. Fields this exporter does not write are ignored.
pub fn protobuf_to_json(bytes: &[u8]) -> Result<Json, prost::DecodeError> {
    Ok(json::request(&ExportTraceServiceRequest::decode(bytes)?))
}

fn request(trace: &Trace) -> ExportTraceServiceRequest {
    let mut m = Mapping::new(trace);
    let resource_spans = (0..trace.processes.len()).map(|p| m.resource_spans(p)).collect();
    ExportTraceServiceRequest { resource_spans }
}

/// What building the spans needs to know about the whole trace.
struct Mapping<'t> {
    trace: &'t Trace,
    trace_id: u128,
    index: HashMap<u64, ItemRef>,
    /// Fresh ids of stand-in spans, by (process, thread, span index).
    stand_ins: HashMap<(usize, usize, usize), u64>,
    /// Events that are span events, by the id of the span holding them, in trace order.
    events_on: HashMap<u64, Vec<ItemRef>>,
    /// Links, by the id of the span holding them.
    links: HashMap<u64, Vec<Link>>,
}

impl<'t> Mapping<'t> {
    fn new(trace: &'t Trace) -> Self {
        let index = trace.index();
        let trace_id = trace_id(trace);
        let mut next = STAND_IN_BASE;
        let mut stand_ins = HashMap::new();
        for (p, process) in trace.processes.iter().enumerate() {
            for (t, thread) in process.threads.iter().enumerate() {
                for (i, _) in thread.spans.iter().enumerate().filter(|(_, s)| s.id == 0) {
                    next = (next + 1..).find(|id| !index.contains_key(id)).unwrap_or(u64::MAX);
                    stand_ins.insert((p, t, i), next);
                }
            }
        }
        let (events_on, links) = (HashMap::new(), HashMap::new());
        let mut m = Mapping { trace, trace_id, index, stand_ins, events_on, links };
        for r in items(trace) {
            if let Item::Event(_) = r.item {
                if let Some(span) = m.carrier(r) {
                    m.events_on.entry(span).or_default().push(r);
                }
            }
            m.causal_links(r);
        }
        for group in trace.correlations() {
            let correlate = format!("{}={}", group.key, group.value);
            for &from in &group.members {
                for &to in group.members.iter().filter(|&&to| to != from) {
                    let mut attrs = Attributes::default();
                    attrs.str("waffle.link", "correlated");
                    attrs.str("waffle.correlate", &correlate);
                    let span = m.span_id(to);
                    m.link(from, span, Some(to), "waffle.peer_event", attrs);
                }
            }
        }
        m
    }

    /// Links for the causes `r` names.
    fn causal_links(&mut self, r: ItemRef) {
        let causes = self.trace.describe(r).links;
        for (k, &cause) in causes.iter().enumerate() {
            if cause == 0 || causes[..k].contains(&cause) {
                continue; // one link per cause, however often it is named
            }
            let mut attrs = Attributes::default();
            attrs.str("waffle.link", "caused_by");
            match self.index.get(&cause).copied() {
                Some(c) if c == r => {}
                Some(c) => {
                    let span = self.span_id(c);
                    self.link(r, span, Some(c), "waffle.cause_event", attrs);
                }
                None => {
                    attrs.flag("waffle.unresolved");
                    self.link(r, cause, None, "", attrs);
                }
            }
        }
    }

    /// A link from the span holding `from` to span `to`, which holds `target`; `target_key`
    /// names the target when it is an event.
    fn link(
        &mut self,
        from: ItemRef,
        to: u64,
        target: Option<ItemRef>,
        target_key: &str,
        mut attrs: Attributes,
    ) {
        let holder = self.span_id(from);
        if holder == to {
            return;
        }
        if let Some(t @ ItemRef { item: Item::Event(_), .. }) = target {
            attrs.id(target_key, self.trace.describe(t).id);
        }
        if let Item::Event(_) = from.item {
            attrs.id("waffle.from_event", self.trace.describe(from).id);
        }
        let (attributes, dropped_attributes_count) = attrs.done();
        let link = Link {
            trace_id: self.trace_id.to_be_bytes().to_vec(),
            span_id: to.to_be_bytes().to_vec(),
            attributes,
            dropped_attributes_count,
        };
        self.links.entry(holder).or_default().push(link);
    }

    /// The span an event is a span event of: its parent, if that is a span of its process.
    fn carrier(&self, r: ItemRef) -> Option<u64> {
        let Item::Event(e) = r.item else { return None };
        let parent = self.trace.thread(r).events[e].parent?;
        let at = self.index.get(&parent)?;
        (at.process == r.process && matches!(at.item, Item::Span(_))).then_some(parent)
    }

    /// The id of the OTLP span that holds an item.
    fn span_id(&self, r: ItemRef) -> u64 {
        match r.item {
            Item::Span(i) => match self.trace.thread(r).spans[i].id {
                0 => self.stand_ins.get(&(r.process, r.thread, i)).copied().unwrap_or(u64::MAX),
                id => id,
            },
            Item::Event(e) => self.carrier(r).unwrap_or(self.trace.thread(r).events[e].id),
        }
    }

    fn resource_spans(&mut self, p: usize) -> ResourceSpans {
        let trace = self.trace;
        let process = &trace.processes[p];
        let mut spans = Vec::new();
        for t in 0..process.threads.len() {
            spans.extend(self.thread_spans(p, t));
        }
        let (attributes, dropped_attributes_count) = self.resource_attributes(process).done();
        ResourceSpans {
            resource: Some(proto::Resource { attributes, dropped_attributes_count }),
            scope_spans: vec![ScopeSpans {
                scope: Some(proto::InstrumentationScope { name: SCOPE.into() }),
                spans,
            }],
        }
    }

    fn resource_attributes(&self, process: &Process) -> Attributes {
        let mut attrs = Attributes::default();
        let name = if process.name.is_empty() { "unknown_service" } else { &process.name };
        attrs.str("service.name", name);
        attrs.value("process.pid", &Value::U64(process.pid.into()));
        if !process.host.is_empty() {
            attrs.str("host.name", &process.host);
        }
        for (key, value) in &process.labels {
            attrs.str(&format!("waffle.{key}"), value);
        }
        if process.dropped > 0 {
            attrs.value("waffle.dropped_records", &Value::U64(process.dropped));
        }
        if !process.complete {
            attrs.flag("waffle.incomplete");
        }
        if process.trace_id != 0 && process.trace_id != self.trace_id {
            attrs.str("waffle.trace_id", &format!("{:032x}", process.trace_id));
        }
        attrs
    }

    /// One thread's spans, and its events that are spans of their own, by start time.
    fn thread_spans(&mut self, p: usize, t: usize) -> Vec<Span> {
        let trace = self.trace;
        let thread = &trace.processes[p].threads[t];
        let mut spans = Vec::with_capacity(thread.spans.len());
        // The last span begun at each depth, to give a stand-in's children their parent back.
        let mut at_depth: Vec<usize> = Vec::new();
        for (i, s) in thread.spans.iter().enumerate() {
            let r = ItemRef { process: p, thread: t, item: Item::Span(i) };
            let depth = s.depth as usize;
            let above = depth.checked_sub(1).and_then(|d| at_depth.get(d)).copied();
            let parent = s.parent.or_else(|| {
                above
                    .filter(|&a| thread.spans[a].id == 0)
                    .map(|a| self.span_id(ItemRef { item: Item::Span(a), ..r }))
            });
            at_depth.truncate(depth);
            at_depth.push(i);

            let mut attrs = Attributes::default();
            attrs.fields(s.fields());
            self.thread_attributes(&mut attrs, p, t);
            if s.detached {
                attrs.flag("waffle.detached");
            }
            if !s.ended {
                attrs.flag("waffle.unfinished");
            }
            if s.id == 0 {
                attrs.flag("waffle.stand_in");
            }
            attrs.correlate(&s.callsite.correlate, s.correlation);
            let id = self.span_id(r);
            let mut events: Vec<ItemRef> = self.events_on.remove(&id).unwrap_or_default();
            events.sort_by_key(|&e| (self.trace.describe(e).ts_ns, self.trace.describe(e).id));
            let events = events.into_iter().map(|e| self.event(e, t)).collect();
            spans.push(self.span(id, parent, s.name(), (s.start_ns, s.end_ns), attrs, events));
        }
        for (e, ev) in thread.events.iter().enumerate() {
            let r = ItemRef { process: p, thread: t, item: Item::Event(e) };
            if self.carrier(r).is_some() {
                continue;
            }
            let mut attrs = Attributes::default();
            attrs.fields(ev.fields());
            self.thread_attributes(&mut attrs, p, t);
            attrs.flag("waffle.event");
            attrs.correlate(&ev.callsite.correlate, ev.correlation);
            spans.push(self.span(ev.id, ev.parent, ev.name(), (ev.ts_ns, ev.ts_ns), attrs, Vec::new()));
        }
        // Stable: a span and an event at the same time keep their order above.
        spans.sort_by_key(|s| s.start_time_unix_nano);
        spans
    }

    fn span(
        &mut self,
        id: u64,
        parent: Option<u64>,
        name: &str,
        (start, end): (u64, u64),
        attrs: Attributes,
        events: Vec<proto::Event>,
    ) -> Span {
        let (attributes, dropped_attributes_count) = attrs.done();
        Span {
            trace_id: self.trace_id.to_be_bytes().to_vec(),
            span_id: id.to_be_bytes().to_vec(),
            parent_span_id: parent.filter(|&p| p != 0).map(|p| p.to_be_bytes().to_vec()).unwrap_or_default(),
            name: if name.is_empty() { "(unnamed)".into() } else { name.into() },
            kind: SPAN_KIND_INTERNAL,
            start_time_unix_nano: start,
            end_time_unix_nano: end.max(start),
            attributes,
            dropped_attributes_count,
            events,
            links: self.links.remove(&id).unwrap_or_default(),
        }
    }

    /// A span event; `span_thread` is the thread of the span holding it.
    fn event(&self, r: ItemRef, span_thread: usize) -> proto::Event {
        let Item::Event(e) = r.item else { unreachable!("only events are span events") };
        let ev: &Event = &self.trace.thread(r).events[e];
        let mut attrs = Attributes::default();
        attrs.fields(ev.fields());
        attrs.id("waffle.id", ev.id);
        if !ev.links.is_empty() {
            let ids: Vec<String> = ev.links.iter().map(|id| format!("{id:016x}")).collect();
            attrs.str("waffle.caused_by", &ids.join(", "));
        }
        attrs.correlate(&ev.callsite.correlate, ev.correlation);
        if r.thread != span_thread {
            attrs.value("thread.id", &Value::U64(self.trace.thread(r).tid));
        }
        let (attributes, dropped_attributes_count) = attrs.done();
        proto::Event {
            time_unix_nano: ev.ts_ns,
            name: ev.name().into(),
            attributes,
            dropped_attributes_count,
        }
    }

    fn thread_attributes(&self, attrs: &mut Attributes, p: usize, t: usize) {
        let thread = &self.trace.processes[p].threads[t];
        attrs.value("thread.id", &Value::U64(thread.tid));
        if !thread.name.is_empty() {
            attrs.str("thread.name", &thread.name);
        }
    }
}

/// The trace id of the export: the first non-zero one recorded, else one hashed from the
/// trace (FNV-1a, 128 bits), never zero.
fn trace_id(trace: &Trace) -> u128 {
    if let Some(id) = trace.processes.iter().map(|p| p.trace_id).find(|&id| id != 0) {
        return id;
    }
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u128::from(b)).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
        }
    };
    for p in &trace.processes {
        eat(&p.pid.to_le_bytes());
        eat(p.name.as_bytes());
        for th in &p.threads {
            th.spans.iter().for_each(|s| eat(&s.id.to_le_bytes()));
            th.events.iter().for_each(|e| eat(&e.id.to_le_bytes()));
        }
    }
    h.max(1)
}

/// Every span (stand-ins left out) and event of the trace, in order.
fn items(trace: &Trace) -> impl Iterator<Item = ItemRef> + '_ {
    trace.processes.iter().enumerate().flat_map(|(p, process)| {
        process.threads.iter().enumerate().flat_map(move |(t, thread)| {
            let spans =
                thread.spans.iter().enumerate().filter(|(_, s)| s.id != 0).map(|(i, _)| Item::Span(i));
            let events = (0..thread.events.len()).map(Item::Event);
            spans.chain(events).map(move |item| ItemRef { process: p, thread: t, item })
        })
    })
}
