//! Zipkin exporter: `trace.bin` files or a [`Trace`] as Zipkin v2 JSON, the list of spans that
//! `POST /api/v2/spans` takes and Zipkin's UI opens from a file.
//!
//! The mapping (the shared rules for ids, events, causes and order are in [`super::spans`]):
//! - every span is a Zipkin span with `traceId` (32 lower-hex digits, the same for the whole
//!   decode), `id` and `parentId` (16 lower-hex digits; `parentId` only when the parent is in
//!   the trace), `name`, `timestamp` and `duration` in whole µs, floored (the duration is the
//!   floored end minus the floored start, so a child never pokes out of its parent; at least 1,
//!   as Zipkin requires), and no `kind`: waffle's spans are local work, and Zipkin has no
//!   `INTERNAL`;
//! - `localEndpoint.serviceName` is the process name, lowercased as the server would store it;
//!   span names keep their case (the server lowercases them, a file opened in the UI does not);
//! - tags (string to string): the span's fields, rendered as text (floats in their shortest
//!   exact form, `1e-9`); `host.name`, `process.pid`
//!   and the process's labels (such as `rank`), which Zipkin has no other place for;
//!   `thread.id` and `thread.name`; and waffle's own: `waffle.caused_by` (the linked ids,
//!   16 hex digits each, comma-separated, since v2 has no links), `waffle.unresolved_links`,
//!   `waffle.unresolved_parent`, `waffle.correlate` (`key=value`), `waffle.message_from` (the
//!   spans showing the causes of messages the span or its events received: the effects of
//!   directed correlations, see [`crate::correlation`]), `waffle.unfinished` and
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

use super::spans::{
    notation::{correlation, hex_list, message_from, own_links, service_name, us},
    Context, Log, OutSpan, Source, SpanWriter,
};
use crate::{
    decode::FieldValue,
    model::{Trace, Value},
};

/// Writes `trace` to `out` as Zipkin v2 JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_from(Source::Trace(trace), out)
}

/// Writes the spans of `source` to `out` as Zipkin v2 JSON.
pub(super) fn write_from(source: Source<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut w = FileWriter { out: BufWriter::new(out), spans: Spans::default(), first: true };
    source.write(&mut w)?;
    w.close()
}

/// Calls `each` with every span of `source`, as [`write`] writes them, one at a time, so that
/// a caller can send them in batches without holding the document; the first error stops the
/// walk and is returned.
pub(crate) fn for_each_span(source: Source<'_>, each: impl FnMut(Json) -> io::Result<()>) -> io::Result<()> {
    source.write(&mut Each { spans: Spans::default(), each })
}

/// The JSON array in a file.
struct FileWriter<W: Write> {
    out: W,
    spans: Spans,
    first: bool,
}

impl<W: Write> FileWriter<W> {
    fn close(mut self) -> io::Result<()> {
        self.out.write_all(if self.first { b"[\n]\n" } else { b"\n]\n" })?;
        self.out.flush()
    }
}

impl<W: Write> SpanWriter for FileWriter<W> {
    fn begin_process(&mut self, ctx: &Context, process: usize) -> io::Result<()> {
        self.spans.begin_process(ctx, process);
        Ok(())
    }

    fn span(&mut self, ctx: &Context, span: &OutSpan<'_>) -> io::Result<()> {
        self.out.write_all(if self.first { b"[\n" } else { b",\n" })?;
        self.first = false;
        serde_json::to_writer(&mut self.out, &self.spans.json(ctx, span)).map_err(io::Error::from)
    }
}

/// Each span to a closure.
struct Each<F> {
    spans: Spans,
    each: F,
}

impl<F: FnMut(Json) -> io::Result<()>> SpanWriter for Each<F> {
    fn begin_process(&mut self, ctx: &Context, process: usize) -> io::Result<()> {
        self.spans.begin_process(ctx, process);
        Ok(())
    }

    fn span(&mut self, ctx: &Context, span: &OutSpan<'_>) -> io::Result<()> {
        (self.each)(self.spans.json(ctx, span))
    }
}

/// One process's spans as Zipkin JSON, encoded one at a time as they end, for a sender that
/// makes its own requests from them (`follow`).
pub(crate) struct SpanJson(Spans);

impl SpanJson {
    /// The service and tags of `ctx`'s process `process`, as it is now.
    pub(crate) fn new(ctx: &Context, process: usize) -> SpanJson {
        let mut spans = Spans::default();
        spans.begin_process(ctx, process);
        SpanJson(spans)
    }

    /// `span` as one element of the JSON array `POST /api/v2/spans` takes.
    pub(crate) fn span(&self, ctx: &Context, span: &OutSpan<'_>) -> Vec<u8> {
        serde_json::to_vec(&self.0.json(ctx, span)).expect("JSON into memory")
    }
}

/// Spans as Zipkin JSON.
#[derive(Default)]
struct Spans {
    trace_id: String,
    /// The current process's service name and tags.
    service: String,
    tags: Vec<(String, String)>,
}

impl Spans {
    fn begin_process(&mut self, ctx: &Context, process: usize) {
        let p = &ctx.processes[process];
        self.trace_id = format!("{:032x}", ctx.trace_id);
        self.service = service_name(p).to_lowercase();
        let h = &p.header;
        self.tags.clear();
        if !h.host.is_empty() {
            self.tags.push(("host.name".to_owned(), h.host.clone()));
        }
        self.tags.push(("process.pid".to_owned(), h.pid.to_string()));
        self.tags.extend(h.labels.iter().cloned());
        if h.trace_id != ctx.trace_id {
            self.tags.push(("waffle.trace_id".to_owned(), format!("{:032x}", h.trace_id)));
        }
    }

    fn json(&self, ctx: &Context, span: &OutSpan<'_>) -> Json {
        let mut tags = Map::new();
        let mut tag = |key: &str, value: String| {
            tags.insert(key.to_owned(), Json::String(value));
        };
        for (key, value) in &self.tags {
            tag(key, value.clone());
        }
        let thread = &ctx.processes[span.process].threads[span.thread];
        tag("thread.id", thread.tid.to_string());
        if !thread.name.is_empty() {
            tag("thread.name", thread.name.clone());
        }
        for (name, value) in span.fields() {
            tag(name, value_text(&value.to_value()));
        }
        if !span.caused_by.is_empty() {
            tag("waffle.caused_by", hex_list(span.caused_by));
        }
        let unresolved = own_links(span.links).filter(|l| !l.resolved).count();
        if unresolved > 0 {
            tag("waffle.unresolved_links", unresolved.to_string());
        }
        if let Some(parent) = span.unresolved_parent {
            tag("waffle.unresolved_parent", format!("{parent:016x}"));
        }
        if let Some(c) = correlation(&span.callsite.correlate, span.correlation) {
            tag("waffle.correlate", c);
        }
        if let Some(from) = message_from(span.links) {
            tag("waffle.message_from", from);
        }
        if !span.ended {
            tag("waffle.unfinished", "true".to_owned());
        }
        if span.event {
            tag("waffle.event", "true".to_owned());
        }
        let (start_us, end_us) = (us(span.start_ns), us(span.end_ns));
        let mut json = json!({
            "traceId": self.trace_id,
            "id": format!("{:016x}", span.id),
            "name": span.callsite.name,
            "timestamp": start_us,
            "duration": (end_us - start_us).max(1),
            "localEndpoint": { "serviceName": self.service },
        });
        let obj = json.as_object_mut().expect("an object");
        if let Some(parent) = span.parent.filter(|&p| p != span.id) {
            obj.insert("parentId".to_owned(), Json::String(format!("{parent:016x}")));
        }
        if !span.logs.is_empty() {
            let mut logs: Vec<&Log> = span.logs.iter().collect();
            logs.sort_by_key(|l| l.ts_ns);
            // Zipkin keeps one of equal annotations: an event repeated within a µs keeps its
            // own by its id.
            let mut seen = HashSet::new();
            let annotations = logs.into_iter().map(|l| {
                let mut value = annotation(l);
                if !seen.insert((us(l.ts_ns), value.clone())) {
                    let _ = write!(value, " waffle.id={:016x}", l.id);
                }
                json!({ "timestamp": us(l.ts_ns), "value": value })
            });
            obj.insert("annotations".to_owned(), Json::Array(annotations.collect()));
        }
        obj.insert("tags".to_owned(), Json::Object(tags));
        json
    }
}

/// An event as an annotation's text: `name key=value ...`, strings quoted.
fn annotation(log: &Log) -> String {
    let mut text = log.callsite.name.clone();
    for (name, value) in log.fields() {
        let _ = match value {
            FieldValue::Str(s) => write!(text, " {name}={s:?}"),
            v => write!(text, " {name}={}", value_text(&v.to_value())),
        };
    }
    if log.linked {
        let _ = write!(text, " waffle.id={:016x}", log.id);
    }
    if !log.caused_by.is_empty() {
        let _ = write!(text, " waffle.caused_by={}", hex_list(&log.caused_by));
    }
    if let Some(c) = correlation(&log.callsite.correlate, log.correlation) {
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
