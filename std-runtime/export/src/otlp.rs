//! OTLP exporter: `trace.bin` files or a [`Trace`] as an OpenTelemetry
//! `ExportTraceServiceRequest`, in protobuf (`.otlp.pb`, what `POST /v1/traces` takes as
//! `application/x-protobuf`) or OTLP/JSON (`.otlp.json`, one request on one line, as the
//! collector's `otlpjsonfile` receiver reads). Each span's attributes, events and links are
//! gathered once (`parts`) and encoded from there as protobuf or JSON, so the two encodings
//! cannot disagree; both are written by hand, in the bytes prost and the rendering of prost's
//! messages (`proto`, `json`, still what batches for `send` are made of) give, which the tests
//! check. Spans stream (see `spans` for the shared rules of ids, events, causes and
//! order): nothing holds the whole request.
//!
//! The mapping:
//! - one decode is one trace: every span carries the trace id of `spans`. A process
//!   that recorded another trace id keeps it in the resource attribute `waffle.trace_id`;
//! - each process is a `ResourceSpans` with `service.name` (the process name),
//!   `process.pid`, `host.name`, and `waffle.<key>` for each header label (`waffle.rank`), plus
//!   `waffle.dropped_records` and `waffle.incomplete` when records were lost; it holds one
//!   `ScopeSpans`, scope `waffle`. In protobuf a process with more than
//!   [`PIECE_BYTES`] of spans is written as several `ResourceSpans` with the same resource, one
//!   after the other (a message's length comes before it, so a piece is held until it is
//!   written); receivers treat them as one;
//! - a span is a `SPAN_KIND_INTERNAL` span with its id, parent (also one outside the trace, a
//!   remote parent), times and fields as typed attributes (a `u64` above `i64::MAX` as a
//!   decimal string, a non-finite float as `NaN`, `inf` or `-inf`: Jaeger cannot show a trace
//!   with a non-finite double), with `thread.id` and `thread.name`; `waffle.detached` marks an async
//!   span, and a span that never ended has `waffle.unfinished = true` and its status left
//!   unset. A stand-in for a span whose begin was lost gets `waffle.stand_in = true`;
//! - an event shown on a span is a span event (its attributes: its fields, `waffle.id` (its id
//!   in hex), `waffle.caused_by` and `waffle.correlate`, and `thread.id` when it happened on
//!   another thread than the span's), in time order. An event that is a span of its own is
//!   zero-length, with `waffle.event = true`;
//! - every cause in `caused_by` is a native link, `waffle.link = "caused_by"`, from the span
//!   that shows the effect to the span that shows the cause. A cause that is an event links to
//!   the span showing it with `waffle.cause_event` naming the event; an effect that is a span
//!   event puts the link on its span, with `waffle.from_event`. A cause not in the trace is
//!   still linked, by its id, with `waffle.unresolved = true`;
//! - an effect of a directed correlation group (see [`crate::correlation`]) links to each of
//!   its causes, `waffle.link = "message"` and `waffle.correlate = "key=value"` (the
//!   effect's), with `waffle.cause_event` and `waffle.from_event` as for causes; a cause links
//!   to none of its effects;
//! - each member of a correlation group but the first links to the first (in time),
//!   `waffle.link = "correlated"` and `waffle.correlate = "key=value"`, with
//!   `waffle.peer_event` / `waffle.from_event` for members that are events. Links from a span
//!   to itself are left out.
//!
//! Attribute keys are unique per span, event, link and resource: a key already there (a field
//! named like one of ours) is dropped and counted in `dropped_attributes_count`.

use std::io::{self, Write};
use std::mem;

use prost::Message;
use serde_json::Value as Json;

use super::spans::{OutSpan, Source, SpanWriter, TraceInfo};
use crate::model::Trace;

mod attributes;
mod builder;
mod json;
mod parts;
mod proto;

use super::json_buf::JsonBuf;
use builder::Builder;
use parts::{Parts, Spare};
use proto::ExportTraceServiceRequest;

/// `Span.SpanKind.SPAN_KIND_INTERNAL`.
const SPAN_KIND_INTERNAL: i32 = 1;
/// The instrumentation scope of every span.
const SCOPE: &str = "waffle";
/// The most bytes of spans one `ResourceSpans` of a protobuf file holds.
pub const PIECE_BYTES: usize = 16 << 20;

/// What the span that ends a protobuf piece may add past [`PIECE_BYTES`] without the piece's
/// buffer growing again.
const PIECE_SLACK: usize = 1 << 20;

/// One protobuf `ExportTraceServiceRequest` ready to send.
#[derive(Clone, Debug)]
pub struct Batch {
    /// How many spans it holds.
    pub spans: usize,
    /// The encoded request.
    pub body: Vec<u8>,
}

/// Writes `trace` as a protobuf `ExportTraceServiceRequest`.
pub fn write_protobuf(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_protobuf_from(Source::Trace(trace), out)
}

/// Writes the spans of `source` as a protobuf `ExportTraceServiceRequest`.
pub(super) fn write_protobuf_from(source: Source<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut w = Protobuf::new(out);
    crate::spans::write_spans(source, &mut w)?;
    w.out.flush()
}

/// Writes `trace` as an OTLP/JSON `ExportTraceServiceRequest`, on one line.
pub fn write_json(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_json_from(Source::Trace(trace), out)
}

/// Writes the spans of `source` as an OTLP/JSON `ExportTraceServiceRequest`, on one line.
pub(super) fn write_json_from(source: Source<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut w = JsonWriter::new(out);
    crate::spans::write_spans(source, &mut w)?;
    w.close()
}

/// `trace` as an OTLP/JSON `ExportTraceServiceRequest`.
pub fn to_json(trace: &Trace) -> Json {
    let mut out = Vec::new();
    write_json(trace, &mut out).expect("writing to memory");
    serde_json::from_slice(&out).expect("our own JSON")
}

/// A protobuf `ExportTraceServiceRequest` (as [`write_protobuf`] writes it) rendered as
/// OTLP/JSON, for comparing the two encodings. Fields this exporter does not write are ignored.
pub fn protobuf_to_json(bytes: &[u8]) -> Result<Json, prost::DecodeError> {
    Ok(json::request(&ExportTraceServiceRequest::decode(bytes)?))
}

/// The requests [`write_protobuf`] would write, cut into requests of at most `max_spans`
/// spans each (for `POST /v1/traces` in batches): the same spans in the same order, each piece
/// with the resource and scope of its spans. A trace without spans gives no batch.
pub fn protobuf_batches(trace: &Trace, max_spans: usize) -> Vec<Batch> {
    let mut batches = Vec::new();
    for_each_batch(Source::Trace(trace), max_spans, |b| {
        batches.push(b);
        Ok(())
    })
    .expect("collecting in memory");
    batches
}

/// Calls `each` with the spans of `source` in batches of at most `max_spans`, as
/// [`protobuf_batches`] cuts them.
pub(crate) fn for_each_batch(
    source: Source<'_>,
    max_spans: usize,
    each: impl FnMut(Batch) -> io::Result<()>,
) -> io::Result<()> {
    let mut w = Batcher::new(max_spans, each);
    crate::spans::write_spans(source, &mut w)?;
    w.flush()
}

/// The protobuf request, a `ResourceSpans` (field 1) per piece of a process's spans.
struct Protobuf<'a> {
    out: io::BufWriter<&'a mut dyn Write>,
    build: Builder,
    /// The trace id as the spans carry it.
    trace_id: [u8; 16],
    /// The parts' buffers, used again span after span, and the attributes' sizes.
    spare: Spare,
    lens: Vec<u32>,
    /// The current piece's spans, each encoded as `ScopeSpans.spans` (field 2).
    spans: Vec<u8>,
    /// Whether the current process has written a piece.
    written: bool,
}

impl<'a> Protobuf<'a> {
    fn new(out: &'a mut dyn Write) -> Self {
        Protobuf {
            out: io::BufWriter::new(out),
            build: Builder::default(),
            trace_id: [0; 16],
            spare: Spare::default(),
            lens: Vec::new(),
            spans: Vec::new(),
            written: false,
        }
    }

    /// Writes the current piece: the resource and scope, and the spans gathered.
    fn piece(&mut self) -> io::Result<()> {
        let mut buf = Vec::new();
        piece_head(&self.build, self.spans.len(), &mut buf);
        self.out.write_all(&buf)?;
        self.out.write_all(&self.spans)?;
        self.spans.clear();
        self.written = true;
        Ok(())
    }
}

/// Appends the head of one `ResourceSpans` (request field 1) whose one scope holds `spans_len`
/// bytes of spans, each encoded as `ScopeSpans.spans` (field 2); the spans follow it.
fn piece_head(build: &Builder, spans_len: usize, buf: &mut Vec<u8>) {
    let mut head = build.resource_spans(Vec::new());
    // The spans go inside the scope as they were encoded.
    let scope = mem::take(&mut head.scope_spans[0]);
    let scope_len = scope.encoded_len() + spans_len;
    let resource = head.resource.as_ref().map_or(0, |r| prost::encoding::message::encoded_len(1, r));
    let scope_field =
        prost::encoding::key_len(2) + prost::encoding::encoded_len_varint(scope_len as u64) + scope_len;
    buf.reserve(32 + resource);
    prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, buf);
    prost::encoding::encode_varint((resource + scope_field) as u64, buf);
    if let Some(r) = &head.resource {
        prost::encoding::message::encode(1, r, buf);
    }
    prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, buf);
    prost::encoding::encode_varint(scope_len as u64, buf);
    scope.encode(buf).expect("a Vec grows");
}

#[cfg(feature = "send")] // used by `follow` and `send` only
/// One process's spans encoded one at a time as they end, for a sender that makes its own
/// requests from them (`follow`): a request is pieces of spans of one process each.
pub(crate) struct SpanPieces {
    build: Builder,
}

#[cfg(feature = "send")] // used by `follow` and `send` only
impl SpanPieces {
    /// The resource of `ctx`'s process `process`, as it is now.
    pub(crate) fn new(ctx: &TraceInfo, process: usize) -> SpanPieces {
        let mut build = Builder::default();
        build.begin_process(ctx, process);
        SpanPieces { build }
    }

    /// `span` encoded as one `ScopeSpans.spans` entry (field 2).
    pub(crate) fn span(&self, ctx: &TraceInfo, span: &OutSpan<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::message::encode(2, &self.build.span(ctx, span), &mut out);
        out
    }

    /// Appends to `request` (an `ExportTraceServiceRequest` being made) one `ResourceSpans`
    /// of this process holding `spans`, entries [`span`](Self::span) made.
    pub(crate) fn piece(&self, spans: &[&[u8]], request: &mut Vec<u8>) {
        piece_head(&self.build, spans.iter().map(|s| s.len()).sum(), request);
        for s in spans {
            request.extend_from_slice(s);
        }
    }
}

impl SpanWriter for Protobuf<'_> {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        self.build.begin_process(ctx, process);
        self.trace_id = ctx.trace_id.to_be_bytes();
        self.written = false;
        Ok(())
    }

    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()> {
        // Room for a piece and a last span past it, asked for once: grown by doubling, the
        // buffer would take twice a piece when the span that ends a piece crosses a power of two.
        if self.spans.len() > PIECE_BYTES / 2 {
            self.spans.reserve_exact((PIECE_BYTES + PIECE_SLACK).saturating_sub(self.spans.len()));
        }
        let parts = Parts::of(&mut self.spare, ctx, span);
        parts::protobuf_span(
            &parts,
            &mut self.lens,
            &self.trace_id,
            ids(span),
            (span.start_ns, span.end_ns),
            &mut self.spans,
        );
        parts.recycle(&mut self.spare);
        if self.spans.len() >= PIECE_BYTES {
            self.piece()?;
        }
        Ok(())
    }

    fn end_process(&mut self, _ctx: &TraceInfo, _process: usize) -> io::Result<()> {
        if !self.spans.is_empty() || !self.written {
            self.piece()?;
        }
        Ok(())
    }
}

/// A span's id and the parent it is written with (one outside the trace too).
fn ids(span: &OutSpan<'_>) -> (u64, Option<u64>) {
    (span.id, span.parent.or(span.unresolved_parent))
}

/// The OTLP/JSON request, a `ResourceSpans` per process, spans written as they come.
struct JsonWriter<'a> {
    out: &'a mut dyn Write,
    text: JsonBuf,
    build: Builder,
    spare: Spare,
    /// Whether a process, and a span of the current process, were written.
    any_process: bool,
    any_span: bool,
}

impl<'a> JsonWriter<'a> {
    fn new(out: &'a mut dyn Write) -> Self {
        JsonWriter {
            out,
            text: JsonBuf::default(),
            build: Builder::default(),
            spare: Spare::default(),
            any_process: false,
            any_span: false,
        }
    }

    fn close(mut self) -> io::Result<()> {
        self.text.raw(if self.any_process { b"]}\n" } else { b"{}\n" });
        self.text.flush(self.out)?;
        self.out.flush()
    }
}

impl SpanWriter for JsonWriter<'_> {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        self.build.begin_process(ctx, process);
        self.text.raw(if self.any_process { b"," } else { b"{\"resourceSpans\":[" });
        self.any_process = true;
        self.any_span = false;
        // The piece without spans, left open where the spans go.
        let head = json::resource_spans(&self.build.resource_spans(Vec::new()));
        let text = serde_json::to_string(&head)?;
        let open = text.strip_suffix("}]}").expect("a resource and a scope, as rendered");
        self.text.raw(open.as_bytes());
        Ok(())
    }

    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()> {
        self.text.raw(if self.any_span { b"," } else { b",\"spans\":[" });
        self.any_span = true;
        let parts = Parts::of(&mut self.spare, ctx, span);
        parts::json_span(&parts, ctx.trace_id, ids(span), (span.start_ns, span.end_ns), &mut self.text);
        parts.recycle(&mut self.spare);
        self.text.flush_block(self.out)
    }

    fn end_process(&mut self, _ctx: &TraceInfo, _process: usize) -> io::Result<()> {
        self.text.raw(if self.any_span { b"]}]}" } else { b"}]}" });
        Ok(())
    }
}

/// Requests of at most `max` spans, each with the resources and scopes of its spans.
struct Batcher<F> {
    build: Builder,
    max: usize,
    request: ExportTraceServiceRequest,
    count: usize,
    /// Whether the last `ResourceSpans` of `request` is the current process's.
    open: bool,
    each: F,
}

impl<F: FnMut(Batch) -> io::Result<()>> Batcher<F> {
    fn new(max: usize, each: F) -> Self {
        let request = ExportTraceServiceRequest::default();
        Batcher { build: Builder::default(), max: max.max(1), request, count: 0, open: false, each }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let body = mem::take(&mut self.request).encode_to_vec();
        (self.each)(Batch { spans: mem::take(&mut self.count), body })?;
        self.open = false;
        Ok(())
    }
}

impl<F: FnMut(Batch) -> io::Result<()>> SpanWriter for Batcher<F> {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        self.build.begin_process(ctx, process);
        self.open = false;
        Ok(())
    }

    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()> {
        let span = self.build.span(ctx, span);
        if !self.open {
            self.request.resource_spans.push(self.build.resource_spans(Vec::new()));
            self.open = true;
        }
        let rs = self.request.resource_spans.last_mut().expect("pushed");
        rs.scope_spans[0].spans.push(span);
        self.count += 1;
        if self.count == self.max {
            self.flush()?;
        }
        Ok(())
    }
}
