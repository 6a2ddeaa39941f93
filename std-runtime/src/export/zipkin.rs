//! Zipkin exporter: a [`Trace`] as Zipkin v2 JSON, the list of spans that `POST /api/v2/spans`
//! takes and Zipkin's UI opens from a file.
//!
//! The mapping (the shared rules for ids, times, events and causes are in [`flat`]):
//! - every span is a Zipkin span with `traceId` (32 lower-hex digits, the same for the whole
//!   decode), `id` and `parentId` (16 lower-hex digits; `parentId` only when the parent is in
//!   the trace), `name`, `timestamp` and `duration` in whole µs (`duration` at least 1, as
//!   Zipkin requires), and no `kind`: waffle's spans are local work, and Zipkin has no
//!   `INTERNAL`;
//! - `localEndpoint.serviceName` is the process name, lowercased as the server would store it;
//!   span names keep their case (the server lowercases them, a file opened in the UI does not);
//! - tags (string to string): the span's fields, rendered as text (floats in their shortest
//!   exact form, `1e-9`); `host.name`, `process.pid`
//!   and the process's labels (such as `rank`), which Zipkin has no other place for;
//!   `thread.id` and `thread.name`; and waffle's own: `waffle.caused_by` (the linked ids,
//!   16 hex digits each, comma-separated, since v2 has no links), `waffle.unresolved_links`,
//!   `waffle.unresolved_parent`, `waffle.correlate` (`key=value`), `waffle.unfinished` and
//!   `waffle.event` (`"true"`), and `waffle.trace_id` for a process recorded under another
//!   trace id. On a key clash the more specific wins: waffle's tags, then fields, then the
//!   thread's, then the process's;
//! - an event shown on its span is an annotation, `{timestamp, value}` with the value
//!   `name key=value ...` (strings quoted), followed by `waffle.id=<id>` when a link names the
//!   event, `waffle.caused_by=<ids>` and `waffle.correlate=<key=value>` when it has them. An
//!   event that is a span of its own is 1 µs long and tagged `waffle.event`. Zipkin keeps one
//!   of equal annotations, so an annotation equal to an earlier one of its span (the same
//!   event, fields and µs) gets `waffle.id` too.
//!
//! Output is a JSON array with one span per line.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};

use serde_json::{json, Map, Value as Json};

use crate::model::{Process, Trace, Value};

pub(super) mod flat;

use flat::{FlatSpan, Log};

/// Writes `trace` to `out` as Zipkin v2 JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    let mut out = BufWriter::new(out);
    out.write_all(b"[")?;
    let mut first = true;
    for_each_span(trace, |json| {
        out.write_all(if first { b"\n" } else { b",\n" })?;
        first = false;
        serde_json::to_writer(&mut out, &json).map_err(io::Error::from)
    })?;
    out.write_all(b"\n]\n")?;
    out.flush()
}

/// Calls `each` with every span of `trace` as [`write`] writes it, in the same order, one at a
/// time, so that a caller can send them in batches without holding the whole document; the
/// first error stops the walk and is returned.
pub fn for_each_span<E>(trace: &Trace, mut each: impl FnMut(Json) -> Result<(), E>) -> Result<(), E> {
    let flat = flat::flatten(trace);
    let trace_id = format!("{:032x}", flat.trace_id);
    let processes: Vec<ProcessInfo> =
        trace.processes.iter().map(|p| ProcessInfo::new(p, flat.trace_id)).collect();
    for span in &flat.spans {
        each(span_json(trace, span, &trace_id, &processes[span.process]))?;
    }
    Ok(())
}

/// What every span of one process carries.
struct ProcessInfo {
    service: String,
    tags: Vec<(String, String)>,
}

impl ProcessInfo {
    fn new(process: &Process, trace_id: u128) -> ProcessInfo {
        let mut tags = Vec::new();
        if !process.host.is_empty() {
            tags.push(("host.name".to_owned(), process.host.clone()));
        }
        tags.push(("process.pid".to_owned(), process.pid.to_string()));
        tags.extend(process.labels.iter().cloned());
        if process.trace_id != trace_id {
            tags.push(("waffle.trace_id".to_owned(), format!("{:032x}", process.trace_id)));
        }
        ProcessInfo { service: service_name(process).to_lowercase(), tags }
    }
}

/// The name a process goes by in Jaeger and Zipkin: its own, or `waffle` when it has none.
pub(super) fn service_name(process: &Process) -> &str {
    if process.name.is_empty() {
        "waffle"
    } else {
        &process.name
    }
}

fn span_json(trace: &Trace, span: &FlatSpan<'_>, trace_id: &str, process: &ProcessInfo) -> Json {
    let mut tags = Map::new();
    let mut tag = |key: &str, value: String| {
        tags.insert(key.to_owned(), Json::String(value));
    };
    for (key, value) in &process.tags {
        tag(key, value.clone());
    }
    let thread = &trace.processes[span.process].threads[span.thread];
    tag("thread.id", thread.tid.to_string());
    if !thread.name.is_empty() {
        tag("thread.name", thread.name.clone());
    }
    for (name, value) in span.fields() {
        tag(name, value_text(value));
    }
    if !span.caused_by.is_empty() {
        tag("waffle.caused_by", hex_list(span.caused_by));
    }
    if span.unresolved_links > 0 {
        tag("waffle.unresolved_links", span.unresolved_links.to_string());
    }
    if let Some(parent) = span.unresolved_parent {
        tag("waffle.unresolved_parent", format!("{parent:016x}"));
    }
    if let Some(c) = &span.correlation {
        tag("waffle.correlate", c.clone());
    }
    if span.unfinished {
        tag("waffle.unfinished", "true".to_owned());
    }
    if span.event {
        tag("waffle.event", "true".to_owned());
    }
    let mut json = json!({
        "traceId": trace_id,
        "id": format!("{:016x}", span.id),
        "name": span.name(),
        "timestamp": span.start_us,
        "duration": span.duration_us.max(1),
        "localEndpoint": { "serviceName": process.service },
    });
    let obj = json.as_object_mut().expect("an object");
    if let Some(parent) = span.parent.filter(|&p| p != span.id) {
        obj.insert("parentId".to_owned(), Json::String(format!("{parent:016x}")));
    }
    if !span.logs.is_empty() {
        // Zipkin keeps one of equal annotations: an event repeated within a µs keeps its own by
        // its id.
        let mut seen = HashSet::new();
        let annotations = span.logs.iter().map(|l| {
            let mut value = annotation(l);
            if !seen.insert((l.ts_us, value.clone())) {
                let _ = write!(value, " waffle.id={:016x}", l.id);
            }
            json!({ "timestamp": l.ts_us, "value": value })
        });
        obj.insert("annotations".to_owned(), Json::Array(annotations.collect()));
    }
    obj.insert("tags".to_owned(), Json::Object(tags));
    json
}

/// An event as an annotation's text: `name key=value ...`, strings quoted.
fn annotation(log: &Log<'_>) -> String {
    let mut text = log.name().to_owned();
    for (name, value) in log.fields() {
        let _ = match value {
            Value::Str(s) => write!(text, " {name}={s:?}"),
            v => write!(text, " {name}={}", value_text(v)),
        };
    }
    if log.is_cause {
        let _ = write!(text, " waffle.id={:016x}", log.id);
    }
    if !log.caused_by.is_empty() {
        let _ = write!(text, " waffle.caused_by={}", hex_list(log.caused_by));
    }
    if let Some(c) = &log.correlation {
        let _ = write!(text, " waffle.correlate={c}");
    }
    text
}

/// A field value as text; floats in their shortest exact form (`1e-9`, not `0.000000001`).
fn value_text(value: &Value) -> String {
    match value {
        Value::F64(v) => format!("{v:?}"),
        v => v.to_string(),
    }
}

/// Ids as 16 hex digits each, comma-separated.
pub(super) fn hex_list(ids: &[u64]) -> String {
    ids.iter().map(|id| format!("{id:016x}")).collect::<Vec<_>>().join(",")
}
