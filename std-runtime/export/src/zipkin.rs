//! Zipkin exporter: `trace.bin` files or a [`Trace`] as Zipkin v2 JSON, the list of spans that
//! `POST /api/v2/spans` takes and Zipkin's UI opens from a file.
//!
//! The mapping (the shared rules for ids, events, causes and order are in `spans`):
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
use std::io::{self, Write};

#[cfg(feature = "send")]
use serde_json::Value as Json;

use super::json_buf::{push_hex, push_u64, JsonBuf};
use super::spans::{
    notation::{correlation, hex_list, message_from, own_links, service_name, us},
    Log, OutSpan, Source, SpanWriter, TraceInfo,
};
use crate::{decode::FieldValue, model::Trace};

/// Writes `trace` to `out` as Zipkin v2 JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_from(Source::Trace(trace), out)
}

/// Writes the spans of `source` to `out` as Zipkin v2 JSON.
pub(super) fn write_from(source: Source<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut w = FileWriter {
        out,
        text: JsonBuf::default(),
        spans: Spans::default(),
        scratch: Scratch::default(),
        first: true,
    };
    crate::spans::write_spans(source, &mut w)?;
    w.close()
}

#[cfg(feature = "send")] // used by `follow` and `send` only
/// Calls `each` with every span of `source`, as [`write`] writes them, one at a time, so that
/// a caller can send them in batches without holding the document; the first error stops the
/// walk and is returned.
pub(crate) fn for_each_span(source: Source<'_>, each: impl FnMut(Json) -> io::Result<()>) -> io::Result<()> {
    let (spans, scratch, text) = (Spans::default(), Scratch::default(), JsonBuf::default());
    crate::spans::write_spans(source, &mut Each { spans, scratch, text, each })
}

/// The JSON array in a file.
struct FileWriter<'a> {
    out: &'a mut dyn Write,
    /// The text not yet handed to `out`.
    text: JsonBuf,
    spans: Spans,
    scratch: Scratch,
    first: bool,
}

impl FileWriter<'_> {
    fn close(mut self) -> io::Result<()> {
        self.text.raw(if self.first { b"[\n]\n" } else { b"\n]\n" });
        self.text.flush(self.out)?;
        self.out.flush()
    }
}

impl SpanWriter for FileWriter<'_> {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        self.spans.begin_process(ctx, process);
        Ok(())
    }

    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()> {
        self.text.raw(if self.first { b"[\n" } else { b",\n" });
        self.first = false;
        self.spans.text(ctx, span, &mut self.scratch, &mut self.text);
        self.text.flush_block(self.out)
    }
}

#[cfg(feature = "send")] // used by `follow` and `send` only
/// Each span to a closure.
struct Each<F> {
    spans: Spans,
    scratch: Scratch,
    text: JsonBuf,
    each: F,
}

#[cfg(feature = "send")] // used by `follow` and `send` only
impl<F: FnMut(Json) -> io::Result<()>> SpanWriter for Each<F> {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        self.spans.begin_process(ctx, process);
        Ok(())
    }

    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()> {
        self.text.bytes.clear();
        self.spans.text(ctx, span, &mut self.scratch, &mut self.text);
        (self.each)(serde_json::from_slice(&self.text.bytes)?)
    }
}

#[cfg(feature = "send")] // used by `follow` and `send` only
/// One process's spans as Zipkin JSON, encoded one at a time as they end, for a sender that
/// makes its own requests from them (`follow`).
pub(crate) struct SpanJson(Spans);

#[cfg(feature = "send")] // used by `follow` and `send` only
impl SpanJson {
    /// The service and tags of `ctx`'s process `process`, as it is now.
    pub(crate) fn new(ctx: &TraceInfo, process: usize) -> SpanJson {
        let mut spans = Spans::default();
        spans.begin_process(ctx, process);
        SpanJson(spans)
    }

    /// `span` as one element of the JSON array `POST /api/v2/spans` takes.
    pub(crate) fn span(&self, ctx: &TraceInfo, span: &OutSpan<'_>) -> Vec<u8> {
        let mut text = JsonBuf::default();
        self.0.text(ctx, span, &mut Scratch::default(), &mut text);
        text.bytes
    }
}

/// Spans as Zipkin JSON.
#[derive(Default)]
struct Spans {
    trace_id: u128,
    /// The current process's service name and tags.
    service: String,
    tags: Vec<(String, String)>,
}

/// Buffers a span's text is made with, kept for the next span.
#[derive(Default)]
struct Scratch {
    /// The tags' keys and values, one after the other, ...
    tag_text: String,
    /// ... and where each is: key from `.0` to `.1`, value from `.1` to `.2`.
    tags: Vec<(u32, u32, u32)>,
    /// The logs' order.
    logs: Vec<usize>,
    /// The annotations written, by time and text.
    seen: HashSet<(u64, String)>,
}

impl Scratch {
    /// Adds a tag whose value `value` writes.
    fn tag(&mut self, key: &str, value: impl FnOnce(&mut String)) {
        let start = self.tag_text.len() as u32;
        self.tag_text.push_str(key);
        let mid = self.tag_text.len() as u32;
        value(&mut self.tag_text);
        self.tags.push((start, mid, self.tag_text.len() as u32));
    }
}

impl Spans {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) {
        let p = &ctx.processes[process];
        self.trace_id = ctx.trace_id;
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

    /// Writes `span` as one element of the array, its keys (and its tags') in the order
    /// serde_json's maps sort them; of tags with the same key, the last added is kept.
    fn text(&self, ctx: &TraceInfo, span: &OutSpan<'_>, scratch: &mut Scratch, out: &mut JsonBuf) {
        scratch.tag_text.clear();
        scratch.tags.clear();
        for (key, value) in &self.tags {
            scratch.tag(key, |t| t.push_str(value));
        }
        let thread = &ctx.processes[span.process].threads[span.thread];
        scratch.tag("thread.id", |t| push_u64(t, thread.tid));
        if !thread.name.is_empty() {
            scratch.tag("thread.name", |t| t.push_str(&thread.name));
        }
        for (name, value) in span.fields() {
            scratch.tag(name, |t| value_text(t, value));
        }
        if !span.caused_by.is_empty() {
            scratch.tag("waffle.caused_by", |t| t.push_str(&hex_list(span.caused_by)));
        }
        let unresolved = own_links(span.links).filter(|l| !l.resolved).count();
        if unresolved > 0 {
            scratch.tag("waffle.unresolved_links", |t| push_u64(t, unresolved as u64));
        }
        if let Some(parent) = span.unresolved_parent {
            scratch.tag("waffle.unresolved_parent", |t| push_hex(t, parent));
        }
        if let (Some(value), false) = (span.correlation, span.callsite.correlate.is_empty()) {
            scratch.tag("waffle.correlate", |t| {
                t.push_str(&span.callsite.correlate);
                t.push('=');
                push_u64(t, value);
            });
        }
        if let Some(from) = message_from(span.links) {
            scratch.tag("waffle.message_from", |t| t.push_str(&from));
        }
        if !span.ended {
            scratch.tag("waffle.unfinished", |t| t.push_str("true"));
        }
        if span.event {
            scratch.tag("waffle.event", |t| t.push_str("true"));
        }
        let (start_us, end_us) = (us(span.start_ns), us(span.end_ns));
        out.raw(b"{");
        if !span.logs.is_empty() {
            out.raw(b"\"annotations\":[");
            let order = &mut scratch.logs;
            order.clear();
            order.extend(0..span.logs.len());
            order.sort_by_key(|&k| span.logs[k].ts_ns);
            // Zipkin keeps one of equal annotations: an event repeated within a µs keeps its
            // own by its id.
            scratch.seen.clear();
            for (n, &k) in order.iter().enumerate() {
                let l = &span.logs[k];
                let mut value = annotation(l);
                if !scratch.seen.insert((us(l.ts_ns), value.clone())) {
                    let _ = write!(value, " waffle.id={:016x}", l.id);
                }
                out.raw(if n == 0 { b"{\"timestamp\":" } else { b",{\"timestamp\":" });
                out.u64(us(l.ts_ns));
                out.raw(b",\"value\":");
                out.str(&value);
                out.raw(b"}");
            }
            out.raw(b"],");
        }
        out.raw(b"\"duration\":");
        out.u64((end_us - start_us).max(1));
        out.raw(b",\"id\":");
        out.hex(span.id);
        out.raw(b",\"localEndpoint\":{\"serviceName\":");
        out.str(&self.service);
        out.raw(b"},\"name\":");
        out.str(&span.callsite.name);
        if let Some(parent) = span.parent.filter(|&p| p != span.id) {
            out.raw(b",\"parentId\":");
            out.hex(parent);
        }
        out.raw(b",\"tags\":{");
        let tags = &mut scratch.tags;
        let text = &scratch.tag_text;
        tags.sort_by(|&a, &b| text[a.0 as usize..a.1 as usize].cmp(&text[b.0 as usize..b.1 as usize]));
        let mut written = 0;
        for (k, &t) in tags.iter().enumerate() {
            let key = scratch_key(text, t);
            // Of equal keys (together, in the order added), the last.
            if tags.get(k + 1).is_some_and(|&next| scratch_key(text, next) == key) {
                continue;
            }
            out.raw(if written == 0 { b"" } else { b"," });
            written += 1;
            out.str(key);
            out.raw(b":");
            out.str(&text[t.1 as usize..t.2 as usize]);
        }
        out.raw(b"},\"timestamp\":");
        out.u64(start_us);
        out.raw(b",\"traceId\":");
        out.hex128(self.trace_id);
        out.raw(b"}");
    }
}

/// A tag's key in the scratch text.
fn scratch_key(text: &str, t: (u32, u32, u32)) -> &str {
    &text[t.0 as usize..t.1 as usize]
}

/// An event as an annotation's text: `name key=value ...`, strings quoted.
fn annotation(log: &Log) -> String {
    let mut text = log.callsite.name.to_string();
    for (name, value) in log.fields() {
        match value {
            FieldValue::Str(s) => {
                let _ = write!(text, " {name}={s:?}");
            }
            v => {
                let _ = write!(text, " {name}=");
                value_text(&mut text, v);
            }
        }
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
fn value_text(text: &mut String, value: FieldValue<'_>) {
    match value {
        FieldValue::F64(v) => {
            let _ = write!(text, "{v:?}");
        }
        FieldValue::U64(v) => push_u64(text, v),
        FieldValue::I64(v) => text.push_str(itoa::Buffer::new().format(v)),
        FieldValue::Bool(v) => text.push_str(if v { "true" } else { "false" }),
        FieldValue::Str(v) => text.push_str(v),
    }
}
