//! Jaeger exporter: `trace.bin` files or a [`Trace`] as the JSON that Jaeger's query API
//! returns from `/api/traces` and its UI opens from a file: `{"data": [trace]}`.
//!
//! The mapping (the shared rules for ids, events, causes and order are in `spans`):
//! - one decode is one Jaeger trace, `traceID` 32 hex digits; `spanID`s are 16 hex digits,
//!   `startTime` and `duration` whole µs, floored as Zipkin's are;
//! - one Jaeger process per waffle process (per file, per rank): `p1`, `p2`, ... in file order,
//!   with `serviceName` the process name, so the ranks of one program are instances of one
//!   service, and tags `host.name`, `process.pid`, the header's labels (`rank`, ...),
//!   `waffle.source` (the file), and `waffle.dropped_records`, `waffle.complete = false` and
//!   `waffle.trace_id` when they have something to say;
//! - `references`: `CHILD_OF` the parent first, then one `FOLLOWS_FROM` per span showing a
//!   cause (`caused_by`) of the span or of one of its events, then one per span showing a cause
//!   of a message the span or one of its events received (an effect of a directed correlation,
//!   see [`crate::correlation`]), then `FOLLOWS_FROM` the first member of its (or its events')
//!   correlation groups. A span is referenced once: a parent that is also one of those is
//!   `FOLLOWS_FROM`, first, as Jaeger itself makes it of the same span sent by OTLP (a link to
//!   the parent turns its parent reference into `FOLLOWS_FROM`); the UI's tree and Jaeger's
//!   parent rule (the first `CHILD_OF`, else the first `FOLLOWS_FROM`) still find the parent.
//!   Jaeger's UI makes the first reference that resolves a span's parent in the tree, and a
//!   span on a loop of first references is reachable from no root, so the UI does not show it.
//!   A span without a parent hangs under its first cause that is earlier than it (by time, then
//!   id), the causes before that one coming after it: such a reference points back in time.
//!   Failing that, under its first cause that is a root referencing nothing itself (a send that
//!   a receive posted earlier waits for: `TraceInfo::quiet_roots`), where every path of first
//!   references ends. Either way no loop can form. A span without a parent whose causes are all
//!   later and have references of their own (two ranks' `MPI_Sendrecv` with each other) would
//!   risk one: it has no references, and names the spans it follows from in the tag
//!   `waffle.follows_from`;
//! - tags, typed: fields as `string`, `bool`, `int64` or `float64`, except integers beyond
//!   ±(2^53 − 1), which a browser cannot hold exactly, and non-finite floats, which JSON cannot
//!   write, go as `string`; `thread.id`, `thread.name`; and waffle's own:
//!   `waffle.caused_by` (every linked id, comma-separated, events too), `waffle.follows_from`
//!   (above), `waffle.unresolved_links`,
//!   `waffle.unresolved_parent`, `waffle.correlate` (`key=value`), `waffle.unfinished`,
//!   `waffle.event`, `waffle.detached` (a span that followed a future across threads) and
//!   `waffle.stand_in` (a span whose begin was lost), as the OTLP export says them;
//! - an event shown on its span is a log: `event` (its name), its fields, then `waffle.id` when
//!   a link names it, `waffle.caused_by` and `waffle.correlate`. An event that is a span of its
//!   own is zero-length and tagged `waffle.event = true`, with its fields as tags.

use std::io::{self, Write};
use std::mem;

use serde_json::{json, Map, Value as Json};

use super::json_buf::JsonBuf;
use super::spans::notation::{follows, own_links, service_name, us};
use super::spans::{Link, OutSpan, ProcessInfo, Source, SpanWriter, TraceInfo};
use crate::decode::FieldValue;
use crate::model::Trace;

/// The largest integer a JavaScript number (and so a JSON reader in a browser) holds exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Writes `trace` to `out` as Jaeger JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_from(Source::Trace(trace), out)
}

/// Writes the spans of `source` to `out` as Jaeger JSON.
pub(super) fn write_from(source: Source<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut w = JaegerWriter {
        out,
        text: JsonBuf::default(),
        first: true,
        any: false,
        processes: Map::new(),
        scratch: Scratch::default(),
    };
    crate::spans::write_spans(source, &mut w)?;
    w.close()
}

struct JaegerWriter<'a> {
    out: &'a mut dyn Write,
    /// The text not yet handed to `out`.
    text: JsonBuf,
    /// Whether the document is still to be opened (by the first process).
    first: bool,
    /// Whether a span was written.
    any: bool,
    /// The processes seen, by key, written after the spans.
    processes: Map<String, Json>,
    scratch: Scratch,
}

/// Buffers a span's text is made with, kept for the next span.
#[derive(Default)]
struct Scratch {
    /// The spans it follows from (see [`references`]), and the references.
    follows: Vec<u64>,
    refs: Vec<(&'static [u8], u64)>,
    /// Its logs' order.
    logs: Vec<usize>,
}

impl JaegerWriter<'_> {
    fn close(mut self) -> io::Result<()> {
        if self.first {
            // No span: the trace is still written, so that the file says what it read.
            self.open(0);
        }
        self.text.raw(b"\n],\"processes\":");
        serde_json::to_writer(&mut self.text.bytes, &self.processes)?;
        self.text.raw(b",\"warnings\":null}]}\n");
        self.text.flush(self.out)?;
        self.out.flush()
    }

    /// Opens the document, up to its first span.
    fn open(&mut self, trace_id: u128) {
        self.text.raw(b"{\"data\":[{\"traceID\":");
        self.text.hex128(trace_id);
        self.text.raw(b",\"spans\":[");
    }
}

impl SpanWriter for JaegerWriter<'_> {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        if self.first {
            self.open(ctx.trace_id);
            self.first = false;
        }
        self.processes.insert(process_key(process), process_json(&ctx.processes[process], ctx.trace_id));
        Ok(())
    }

    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()> {
        self.text.raw(if self.any { b",\n" } else { b"\n" });
        self.any = true;
        span_text(ctx, span, &mut self.scratch, &mut self.text);
        self.text.flush_block(self.out)
    }
}

fn process_key(p: usize) -> String {
    format!("p{}", p + 1)
}

fn process_json(process: &ProcessInfo, trace_id: u128) -> Json {
    let h = &process.header;
    let mut text = JsonBuf::default();
    let tags = &mut Tags::new(&mut text);
    if !h.host.is_empty() {
        tags.field("host.name", FieldValue::Str(&h.host));
    }
    tags.field("process.pid", FieldValue::U64(h.pid.into()));
    for (key, value) in &h.labels {
        tags.field(key, FieldValue::Str(value));
    }
    tags.field("waffle.source", FieldValue::Str(&process.source));
    if process.dropped > 0 {
        tags.field("waffle.dropped_records", FieldValue::U64(process.dropped));
    }
    if !process.complete {
        tags.field("waffle.complete", FieldValue::Bool(false));
    }
    if h.trace_id != trace_id {
        tags.text("waffle.trace_id", |out| {
            out.hex_contents((h.trace_id >> 64) as u64);
            out.hex_contents(h.trace_id as u64);
        });
    }
    let mut list = b"[".to_vec();
    list.extend_from_slice(&text.bytes);
    list.push(b']');
    let tags: Json = serde_json::from_slice(&list).expect("our own JSON");
    json!({ "serviceName": service_name(process), "tags": tags })
}

/// Writes `span` as one element of the trace's `spans`, its keys in the order serde_json's
/// maps sort them.
fn span_text(ctx: &TraceInfo, span: &OutSpan<'_>, scratch: &mut Scratch, out: &mut JsonBuf) {
    let (start_us, end_us) = (us(span.start_ns), us(span.end_ns));
    out.raw(b"{\"duration\":");
    out.u64(end_us - start_us);
    out.raw(b",\"logs\":[");
    let order = &mut scratch.logs;
    order.clear();
    order.extend(0..span.logs.len());
    order.sort_by_key(|&k| span.logs[k].ts_ns);
    for (n, &k) in order.iter().enumerate() {
        let log = &span.logs[k];
        out.raw(if n == 0 { b"{\"fields\":[" } else { b",{\"fields\":[" });
        let tags = &mut Tags::new(out);
        tags.field("event", FieldValue::Str(&log.callsite.name));
        for (name, value) in log.fields() {
            tags.field(name, value);
        }
        if log.linked {
            tags.text("waffle.id", |out| out.hex_contents(log.id));
        }
        waffle_tags(tags, &log.caused_by, &log.callsite.correlate, log.correlation);
        out.raw(b"],\"timestamp\":");
        out.u64(us(log.ts_ns));
        out.raw(b"}");
    }
    out.raw(b"],\"operationName\":");
    out.str(&span.callsite.name);
    out.raw(b",\"processID\":\"p");
    out.u64(span.process as u64 + 1);
    out.raw(b"\",\"references\":[");
    let unreferenced = references(span, scratch);
    for (n, &(kind, id)) in scratch.refs.iter().enumerate() {
        out.raw(if n == 0 { b"{\"refType\":\"" } else { b",{\"refType\":\"" });
        out.raw(kind);
        out.raw(b"\",\"spanID\":");
        out.hex(id);
        out.raw(b",\"traceID\":");
        out.hex128(ctx.trace_id);
        out.raw(b"}");
    }
    out.raw(b"],\"spanID\":");
    out.hex(span.id);
    out.raw(b",\"startTime\":");
    out.u64(start_us);
    out.raw(b",\"tags\":[");
    let tags = &mut Tags::new(out);
    for (name, value) in span.fields() {
        tags.field(name, value);
    }
    let thread = &ctx.processes[span.process].threads[span.thread];
    tags.field("thread.id", FieldValue::U64(thread.tid));
    if !thread.name.is_empty() {
        tags.field("thread.name", FieldValue::Str(&thread.name));
    }
    waffle_tags(tags, span.caused_by, &span.callsite.correlate, span.correlation);
    let unresolved = own_links(span.links).filter(|l| !l.resolved).count();
    if unresolved > 0 {
        tags.field("waffle.unresolved_links", FieldValue::U64(unresolved as u64));
    }
    if let Some(parent) = span.unresolved_parent {
        tags.text("waffle.unresolved_parent", |out| out.hex_contents(parent));
    }
    for (key, on) in [
        ("waffle.unfinished", !span.ended),
        ("waffle.event", span.event),
        ("waffle.detached", span.detached),
        ("waffle.stand_in", span.stand_in),
    ] {
        if on {
            tags.field(key, FieldValue::Bool(true));
        }
    }
    if unreferenced {
        tags.text("waffle.follows_from", |out| hex_list(out, &scratch.follows));
    }
    out.raw(b"],\"traceID\":");
    out.hex128(ctx.trace_id);
    out.raw(b",\"warnings\":null}");
}

const CHILD_OF: &[u8] = b"CHILD_OF";
const FOLLOWS_FROM: &[u8] = b"FOLLOWS_FROM";

/// Makes `scratch.refs` a span's references, in the order that makes Jaeger's UI build the
/// right tree (see the module docs); true when the spans it follows from (`scratch.follows`)
/// cannot be references, and there are some.
fn references(span: &OutSpan<'_>, scratch: &mut Scratch) -> bool {
    let (follows_buf, refs) = (&mut scratch.follows, &mut scratch.refs);
    follows(span.links, follows_buf);
    let follows = &*follows_buf;
    refs.clear();
    if let Some(parent) = span.parent.filter(|&p| p != span.id) {
        // One reference per span: a parent that is also a cause is FOLLOWS_FROM, still first.
        let kind = if follows.contains(&parent) { FOLLOWS_FROM } else { CHILD_OF };
        refs.push((kind, parent));
        refs.extend(follows.iter().filter(|&&id| id != parent).map(|&id| (FOLLOWS_FROM, id)));
        return false;
    }
    // The first cause earlier than the span leads, else the first that references nothing;
    // those before it follow it.
    let earlier = |id: &u64| {
        let key = (span.start_ns, span.id);
        span.links.iter().any(|l: &Link| l.span == *id && l.anchor.is_some_and(|a| (a.ts_ns, *id) < key))
    };
    let lead = follows
        .iter()
        .position(earlier)
        .or_else(|| follows.iter().position(|id| span.links.iter().any(|l| l.span == *id && l.quiet)));
    let Some(lead) = lead else { return !follows.is_empty() };
    refs.push((FOLLOWS_FROM, follows[lead]));
    refs.extend(follows.iter().enumerate().filter(|&(k, _)| k != lead).map(|(_, &id)| (FOLLOWS_FROM, id)));
    false
}

/// Ids as 16 hex digits each, comma-separated (a string's contents).
fn hex_list(out: &mut JsonBuf, ids: &[u64]) {
    for (k, &id) in ids.iter().enumerate() {
        if k > 0 {
            out.raw(b",");
        }
        out.hex_contents(id);
    }
}

/// `waffle.caused_by` and `waffle.correlate`, when there is something to say.
fn waffle_tags(tags: &mut Tags<'_>, caused_by: &[u64], key: &str, value: Option<u64>) {
    if !caused_by.is_empty() {
        tags.text("waffle.caused_by", |out| hex_list(out, caused_by));
    }
    if let (Some(value), false) = (value, key.is_empty()) {
        tags.text("waffle.correlate", |out| {
            out.str_contents(key);
            out.raw(b"=");
            out.u64(value);
        });
    }
}

/// A list of typed key-values being written, `{"key":..,"type":..,"value":..}` each.
struct Tags<'b> {
    out: &'b mut JsonBuf,
    first: bool,
}

impl<'b> Tags<'b> {
    fn new(out: &'b mut JsonBuf) -> Self {
        Tags { out, first: true }
    }

    fn open(&mut self, key: &str, kind: &[u8]) {
        self.out.raw(if mem::take(&mut self.first) { b"{\"key\":" } else { b",{\"key\":" });
        self.out.str(key);
        self.out.raw(b",\"type\":\"");
        self.out.raw(kind);
        self.out.raw(b"\",\"value\":");
    }

    /// A value, typed: integers a browser cannot hold exactly and non-finite floats as text.
    fn field(&mut self, key: &str, value: FieldValue<'_>) {
        match value {
            FieldValue::Str(s) => {
                self.open(key, b"string");
                self.out.str(s);
            }
            FieldValue::Bool(b) => {
                self.open(key, b"bool");
                self.out.bool(b);
            }
            FieldValue::U64(v) if v <= MAX_SAFE_INTEGER => {
                self.open(key, b"int64");
                self.out.u64(v);
            }
            FieldValue::I64(v) if v.unsigned_abs() <= MAX_SAFE_INTEGER => {
                self.open(key, b"int64");
                self.out.i64(v);
            }
            FieldValue::F64(v) if v.is_finite() => {
                self.open(key, b"float64");
                self.out.f64(v);
            }
            FieldValue::U64(v) => {
                self.open(key, b"string");
                self.out.u64_str(v);
            }
            FieldValue::I64(v) => {
                self.open(key, b"string");
                self.out.raw(b"\"");
                self.out.i64(v);
                self.out.raw(b"\"");
            }
            FieldValue::F64(v) => {
                self.open(key, b"string");
                self.out.str(&v.to_string());
            }
        }
        self.out.raw(b"}");
    }

    /// A string made by `contents` (escaped text, without quotes).
    fn text(&mut self, key: &str, contents: impl FnOnce(&mut JsonBuf)) {
        self.open(key, b"string");
        self.out.raw(b"\"");
        contents(self.out);
        self.out.raw(b"\"}");
    }
}

#[cfg(test)]
mod tests;
