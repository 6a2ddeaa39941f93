//! Jaeger exporter: a [`Trace`] as the JSON that Jaeger's query API returns from
//! `/api/traces` and its UI opens from a file: `{"data": [trace]}`.
//!
//! The mapping (the shared rules for ids, times, events and causes are in
//! [`super::zipkin::flat`]):
//! - one decode is one Jaeger trace, `traceID` 32 hex digits; `spanID`s are 16 hex digits,
//!   `startTime` and `duration` whole µs;
//! - one Jaeger process per waffle process (per file, per rank): `p1`, `p2`, ... in file order,
//!   with `serviceName` the process name, so the ranks of one program are instances of one
//!   service, and tags `host.name`, `process.pid`, the header's labels (`rank`, ...),
//!   `waffle.source` (the file), and `waffle.dropped_records`, `waffle.complete = false` and
//!   `waffle.trace_id` when they have something to say;
//! - `references`: `CHILD_OF` the parent first, then one `FOLLOWS_FROM` per span showing a
//!   cause (`caused_by`), then `FOLLOWS_FROM` the correlation peer before it. Jaeger's UI makes
//!   the first reference a span's parent in the tree, so a span without a parent hangs under
//!   its first cause; a reference that would close a loop in that tree is not put first (and
//!   dropped if nothing else can be), so every span stays reachable;
//! - tags, typed: fields as `string`, `bool`, `int64` or `float64`, except integers beyond
//!   ±(2^53 − 1), which a browser cannot hold exactly, and non-finite floats, which JSON cannot
//!   write, go as `string`; `thread.id`, `thread.name`; and waffle's own:
//!   `waffle.caused_by` (every linked id, comma-separated, events too), `waffle.unresolved_links`,
//!   `waffle.unresolved_parent`, `waffle.correlate` (`key=value`), `waffle.unfinished`,
//!   `waffle.event`;
//! - an event shown on its span is a log: `event` (its name), its fields, then `waffle.id` when
//!   a link names it, `waffle.caused_by` and `waffle.correlate`. An event that is a span of its
//!   own is zero-length and tagged `waffle.event = true`, with its fields as tags.

use std::io::{self, BufWriter, Write};

use serde_json::{json, Value as Json};

use super::zipkin::flat::{self, Flat, FlatSpan, Log, MAX_SAFE_INTEGER};
use super::zipkin::{hex_list, service_name};
use crate::model::{Process, Trace, Value};

/// Writes `trace` to `out` as Jaeger JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    let flat = flat::flatten(trace);
    let trace_id = format!("{:032x}", flat.trace_id);
    let references = References::assign(&flat);
    let mut out = BufWriter::new(out);
    write!(out, "{{\"data\":[{{\"traceID\":\"{trace_id}\",\"spans\":[")?;
    for (k, span) in flat.spans.iter().enumerate() {
        out.write_all(if k == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut out, &span_json(trace, span, &trace_id, &references.of[k]))?;
    }
    out.write_all(b"\n],\"processes\":")?;
    let processes: serde_json::Map<String, Json> = trace
        .processes
        .iter()
        .enumerate()
        .map(|(p, process)| (process_key(p), process_json(process, flat.trace_id)))
        .collect();
    serde_json::to_writer(&mut out, &processes)?;
    out.write_all(b",\"warnings\":null}]}\n")?;
    out.flush()
}

fn process_key(p: usize) -> String {
    format!("p{}", p + 1)
}

fn process_json(process: &Process, trace_id: u128) -> Json {
    let mut tags = Vec::new();
    if !process.host.is_empty() {
        tags.push(tag("host.name", &Value::Str(process.host.clone())));
    }
    tags.push(tag("process.pid", &Value::U64(process.pid.into())));
    for (key, value) in &process.labels {
        tags.push(tag(key, &Value::Str(value.clone())));
    }
    tags.push(tag("waffle.source", &Value::Str(process.source.clone())));
    if process.dropped > 0 {
        tags.push(tag("waffle.dropped_records", &Value::U64(process.dropped)));
    }
    if !process.complete {
        tags.push(tag("waffle.complete", &Value::Bool(false)));
    }
    if process.trace_id != trace_id {
        tags.push(tag("waffle.trace_id", &Value::Str(format!("{:032x}", process.trace_id))));
    }
    json!({ "serviceName": service_name(process), "tags": tags })
}

fn span_json(trace: &Trace, span: &FlatSpan<'_>, trace_id: &str, refs: &[(&str, u64)]) -> Json {
    let thread = &trace.processes[span.process].threads[span.thread];
    let mut tags: Vec<Json> = span.fields().map(|(name, value)| tag(name, value)).collect();
    tags.push(tag("thread.id", &Value::U64(thread.tid)));
    if !thread.name.is_empty() {
        tags.push(tag("thread.name", &Value::Str(thread.name.clone())));
    }
    tags.extend(waffle_tags(span.caused_by, span.correlation.as_deref()));
    if span.unresolved_links > 0 {
        tags.push(tag("waffle.unresolved_links", &Value::U64(span.unresolved_links)));
    }
    if let Some(parent) = span.unresolved_parent {
        tags.push(tag("waffle.unresolved_parent", &Value::Str(format!("{parent:016x}"))));
    }
    if span.unfinished {
        tags.push(tag("waffle.unfinished", &Value::Bool(true)));
    }
    if span.event {
        tags.push(tag("waffle.event", &Value::Bool(true)));
    }
    let references: Vec<Json> = refs
        .iter()
        .map(|&(kind, id)| json!({ "refType": kind, "traceID": trace_id, "spanID": format!("{id:016x}") }))
        .collect();
    json!({
        "traceID": trace_id,
        "spanID": format!("{:016x}", span.id),
        "operationName": span.name(),
        "references": references,
        "startTime": span.start_us,
        "duration": span.duration_us,
        "tags": tags,
        "logs": span.logs.iter().map(log_json).collect::<Vec<_>>(),
        "processID": process_key(span.process),
        "warnings": null,
    })
}

fn log_json(log: &Log<'_>) -> Json {
    let mut fields = vec![tag("event", &Value::Str(log.name().to_owned()))];
    fields.extend(log.fields().map(|(name, value)| tag(name, value)));
    if log.is_cause {
        fields.push(tag("waffle.id", &Value::Str(format!("{:016x}", log.id))));
    }
    fields.extend(waffle_tags(log.caused_by, log.correlation.as_deref()));
    json!({ "timestamp": log.ts_us, "fields": fields })
}

/// `waffle.caused_by` and `waffle.correlate`, when there is something to say.
fn waffle_tags(caused_by: &[u64], correlation: Option<&str>) -> Vec<Json> {
    let mut tags = Vec::new();
    if !caused_by.is_empty() {
        tags.push(tag("waffle.caused_by", &Value::Str(hex_list(caused_by))));
    }
    if let Some(c) = correlation {
        tags.push(tag("waffle.correlate", &Value::Str(c.to_owned())));
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

/// Every span's references, in the order that makes Jaeger's UI build the right tree.
struct References {
    of: Vec<Vec<(&'static str, u64)>>,
}

impl References {
    /// The UI's tree takes each span's first reference as its parent. Spans are decided in
    /// order, each adding the edge to its first reference; a span not yet decided is the root
    /// of its part of the tree, so an edge from it to a span below it would close a loop,
    /// which union-find (with each part named by its root) detects.
    fn assign(flat: &Flat<'_>) -> References {
        let index: std::collections::HashMap<u64, usize> =
            flat.spans.iter().enumerate().map(|(k, s)| (s.id, k)).collect();
        let mut root: Vec<usize> = (0..flat.spans.len()).collect();
        let find = |root: &mut Vec<usize>, mut k: usize| {
            while root[k] != k {
                root[k] = root[root[k]];
                k = root[k];
            }
            k
        };
        let mut of = Vec::with_capacity(flat.spans.len());
        for (k, span) in flat.spans.iter().enumerate() {
            let mut refs = Vec::with_capacity(1 + span.follows.len());
            let safe = |root: &mut Vec<usize>, id: u64| index.get(&id).is_some_and(|&c| find(root, c) != k);
            if let Some(parent) = span.parent.filter(|&p| safe(&mut root, p)) {
                refs.push(("CHILD_OF", parent));
            }
            let mut follows = span.follows.iter().copied();
            if refs.is_empty() {
                // The first cause that does not loop leads; causes before it come after it.
                let lead = span.follows.iter().position(|&id| safe(&mut root, id));
                if let Some(lead) = lead {
                    refs.push(("FOLLOWS_FROM", span.follows[lead]));
                    refs.extend(span.follows[..lead].iter().map(|&id| ("FOLLOWS_FROM", id)));
                    follows = span.follows[lead + 1..].iter().copied();
                } else {
                    follows = [].iter().copied();
                }
            }
            refs.extend(follows.map(|id| ("FOLLOWS_FROM", id)));
            if let Some(&(_, first)) = refs.first() {
                let up = find(&mut root, index[&first]);
                root[k] = up;
            }
            of.push(refs);
        }
        References { of }
    }
}

#[cfg(test)]
mod tests;
