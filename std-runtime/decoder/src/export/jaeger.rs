//! Jaeger exporter: `trace.bin` files or a [`Trace`] as the JSON that Jaeger's query API
//! returns from `/api/traces` and its UI opens from a file: `{"data": [trace]}`.
//!
//! The mapping (the shared rules for ids, events, causes and order are in [`super::spans`]):
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
//!   a receive posted earlier waits for: `Context::quiet_roots`), where every path of first
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

use std::io::{self, BufWriter, Write};

use serde_json::{json, Map, Value as Json};

use super::spans::notation::{correlation, follows, hex_list, own_links, service_name, us};
use super::spans::{Context, Log, OutSpan, ProcessInfo, Source, SpanWriter};
use crate::model::{Trace, Value};

/// The largest integer a JavaScript number (and so a JSON reader in a browser) holds exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Writes `trace` to `out` as Jaeger JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_from(Source::Trace(trace), out)
}

/// Writes the spans of `source` to `out` as Jaeger JSON.
pub(super) fn write_from(source: Source<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut w = Writer { out: BufWriter::new(out), first: true, any: false, processes: Map::new() };
    source.write(&mut w)?;
    w.close()
}

struct Writer<W: Write> {
    out: W,
    /// Whether the document is still to be opened (by the first process).
    first: bool,
    /// Whether a span was written.
    any: bool,
    /// The processes seen, by key, written after the spans.
    processes: Map<String, Json>,
}

impl<W: Write> Writer<W> {
    fn close(mut self) -> io::Result<()> {
        if self.first {
            // No span: the trace is still written, so that the file says what it read.
            write!(self.out, "{{\"data\":[{{\"traceID\":\"{:032x}\",\"spans\":[", 0u128)?;
        }
        self.out.write_all(b"\n],\"processes\":")?;
        serde_json::to_writer(&mut self.out, &self.processes)?;
        self.out.write_all(b",\"warnings\":null}]}\n")?;
        self.out.flush()
    }
}

impl<W: Write> SpanWriter for Writer<W> {
    fn begin_process(&mut self, ctx: &Context, process: usize) -> io::Result<()> {
        if self.first {
            write!(self.out, "{{\"data\":[{{\"traceID\":\"{:032x}\",\"spans\":[", ctx.trace_id)?;
            self.first = false;
        }
        self.processes.insert(process_key(process), process_json(&ctx.processes[process], ctx.trace_id));
        Ok(())
    }

    fn span(&mut self, ctx: &Context, span: &OutSpan<'_>) -> io::Result<()> {
        self.out.write_all(if self.any { b",\n" } else { b"\n" })?;
        self.any = true;
        serde_json::to_writer(&mut self.out, &span_json(ctx, span)).map_err(io::Error::from)
    }
}

fn process_key(p: usize) -> String {
    format!("p{}", p + 1)
}

fn process_json(process: &ProcessInfo, trace_id: u128) -> Json {
    let h = &process.header;
    let mut tags = Vec::new();
    if !h.host.is_empty() {
        tags.push(tag("host.name", &Value::Str(h.host.clone())));
    }
    tags.push(tag("process.pid", &Value::U64(h.pid.into())));
    for (key, value) in &h.labels {
        tags.push(tag(key, &Value::Str(value.clone())));
    }
    tags.push(tag("waffle.source", &Value::Str(process.source.clone())));
    if process.dropped > 0 {
        tags.push(tag("waffle.dropped_records", &Value::U64(process.dropped)));
    }
    if !process.complete {
        tags.push(tag("waffle.complete", &Value::Bool(false)));
    }
    if h.trace_id != trace_id {
        tags.push(tag("waffle.trace_id", &Value::Str(format!("{:032x}", h.trace_id))));
    }
    json!({ "serviceName": service_name(process), "tags": tags })
}

fn span_json(ctx: &Context, span: &OutSpan<'_>) -> Json {
    let thread = &ctx.processes[span.process].threads[span.thread];
    let mut tags: Vec<Json> = span.fields().map(|(name, value)| tag(name, &value.to_value())).collect();
    tags.push(tag("thread.id", &Value::U64(thread.tid)));
    if !thread.name.is_empty() {
        tags.push(tag("thread.name", &Value::Str(thread.name.clone())));
    }
    tags.extend(waffle_tags(span.caused_by, correlation(&span.callsite.correlate, span.correlation)));
    let unresolved = own_links(span.links).filter(|l| !l.resolved).count();
    if unresolved > 0 {
        tags.push(tag("waffle.unresolved_links", &Value::U64(unresolved as u64)));
    }
    if let Some(parent) = span.unresolved_parent {
        tags.push(tag("waffle.unresolved_parent", &Value::Str(format!("{parent:016x}"))));
    }
    if !span.ended {
        tags.push(tag("waffle.unfinished", &Value::Bool(true)));
    }
    if span.event {
        tags.push(tag("waffle.event", &Value::Bool(true)));
    }
    if span.detached {
        tags.push(tag("waffle.detached", &Value::Bool(true)));
    }
    if span.stand_in {
        tags.push(tag("waffle.stand_in", &Value::Bool(true)));
    }
    let (references, unreferenced) = references(span);
    if !unreferenced.is_empty() {
        tags.push(tag("waffle.follows_from", &Value::Str(hex_list(&unreferenced))));
    }
    let trace_id = format!("{:032x}", ctx.trace_id);
    let references: Vec<Json> = references
        .into_iter()
        .map(|(kind, id)| json!({ "refType": kind, "traceID": trace_id, "spanID": format!("{id:016x}") }))
        .collect();
    let mut logs: Vec<&Log> = span.logs.iter().collect();
    logs.sort_by_key(|l| l.ts_ns);
    let (start_us, end_us) = (us(span.start_ns), us(span.end_ns));
    json!({
        "traceID": trace_id,
        "spanID": format!("{:016x}", span.id),
        "operationName": span.callsite.name,
        "references": references,
        "startTime": start_us,
        "duration": end_us - start_us,
        "tags": tags,
        "logs": logs.into_iter().map(log_json).collect::<Vec<_>>(),
        "processID": process_key(span.process),
        "warnings": null,
    })
}

/// A span's references, in the order that makes Jaeger's UI build the right tree (see the
/// module docs), and the spans it follows from that cannot be references.
fn references(span: &OutSpan<'_>) -> (Vec<(&'static str, u64)>, Vec<u64>) {
    let follows = follows(span.links);
    let mut refs = Vec::with_capacity(1 + follows.len());
    if let Some(parent) = span.parent.filter(|&p| p != span.id) {
        // One reference per span: a parent that is also a cause is FOLLOWS_FROM, still first.
        let kind = if follows.contains(&parent) { "FOLLOWS_FROM" } else { "CHILD_OF" };
        refs.push((kind, parent));
        refs.extend(follows.iter().filter(|&&id| id != parent).map(|&id| ("FOLLOWS_FROM", id)));
        return (refs, Vec::new());
    }
    // The first cause earlier than the span leads, else the first that references nothing;
    // those before it follow it.
    let earlier = |id: &u64| {
        let key = (span.start_ns, span.id);
        span.links.iter().any(|l| l.span == *id && l.anchor.is_some_and(|a| (a.ts_ns, *id) < key))
    };
    let lead = follows
        .iter()
        .position(earlier)
        .or_else(|| follows.iter().position(|id| span.links.iter().any(|l| l.span == *id && l.quiet)));
    let Some(lead) = lead else { return (refs, follows) };
    refs.push(("FOLLOWS_FROM", follows[lead]));
    refs.extend(follows.iter().enumerate().filter(|&(k, _)| k != lead).map(|(_, &id)| ("FOLLOWS_FROM", id)));
    (refs, Vec::new())
}

fn log_json(log: &Log) -> Json {
    let mut fields = vec![tag("event", &Value::Str(log.callsite.name.clone()))];
    fields.extend(log.fields().map(|(name, value)| tag(name, &value.to_value())));
    if log.linked {
        fields.push(tag("waffle.id", &Value::Str(format!("{:016x}", log.id))));
    }
    fields.extend(waffle_tags(&log.caused_by, correlation(&log.callsite.correlate, log.correlation)));
    json!({ "timestamp": us(log.ts_ns), "fields": fields })
}

/// `waffle.caused_by` and `waffle.correlate`, when there is something to say.
fn waffle_tags(caused_by: &[u64], correlation: Option<String>) -> Vec<Json> {
    let mut tags = Vec::new();
    if !caused_by.is_empty() {
        tags.push(tag("waffle.caused_by", &Value::Str(hex_list(caused_by))));
    }
    if let Some(c) = correlation {
        tags.push(tag("waffle.correlate", &Value::Str(c)));
    }
    tags
}

/// A typed key-value: integers a browser cannot hold exactly and non-finite floats as text.
fn tag(key: &str, value: &Value) -> Json {
    let (kind, value) = match value {
        Value::Str(s) => ("string", json!(s)),
        Value::Bool(b) => ("bool", json!(b)),
        Value::U64(v) if *v <= MAX_SAFE_INTEGER => ("int64", json!(v)),
        Value::I64(v) if v.unsigned_abs() <= MAX_SAFE_INTEGER => ("int64", json!(v)),
        Value::F64(v) if v.is_finite() => ("float64", json!(v)),
        other => ("string", json!(other.to_string())),
    };
    json!({ "key": key, "type": kind, "value": value })
}

#[cfg(test)]
mod tests;
