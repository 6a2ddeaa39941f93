//! A span's parts as OTLP/JSON (see `otlp/json.rs` for the mapping's rules), written as text:
//! keys in the order the rendering of the decoded messages sorts them, fields at their proto3
//! default left out.

use super::{Parts, Value};
use crate::json_buf::JsonBuf;

/// An `AnyValue`: a one-of case is written even at its default value, as that tells the case.
fn any_value(out: &mut JsonBuf, p: &Parts<'_>, v: Value<'_>) {
    match v {
        Value::Str(s) => {
            out.raw(b"{\"stringValue\":");
            out.str(s);
        }
        Value::Made(a, b) => {
            out.raw(b"{\"stringValue\":");
            out.str(p.made(a, b));
        }
        Value::Bool(b) => {
            out.raw(b"{\"boolValue\":");
            out.bool(b);
        }
        Value::Int(i) => {
            out.raw(b"{\"intValue\":\"");
            out.i64(i);
            out.raw(b"\"");
        }
        // Non-finite doubles are never made (they are strings in this mapping).
        Value::Double(d) => {
            out.raw(b"{\"doubleValue\":");
            out.f64(d);
        }
    }
    out.raw(b"}");
}

/// `"attributes":[...],` (when there are any) and `"droppedAttributesCount":N,` (when not 0).
fn list(out: &mut JsonBuf, p: &Parts<'_>, list: &super::List) {
    let attrs = &p.attrs[list.start as usize..list.end as usize];
    if !attrs.is_empty() {
        out.raw(b"\"attributes\":[");
        for (k, a) in attrs.iter().enumerate() {
            out.raw(if k == 0 { b"{" } else { b",{" });
            if !a.key.is_empty() {
                out.raw(b"\"key\":");
                out.str(a.key);
                out.raw(b",");
            }
            out.raw(b"\"value\":");
            any_value(out, p, a.value);
            out.raw(b"}");
        }
        out.raw(b"],");
    }
    if list.dropped != 0 {
        out.raw(b"\"droppedAttributesCount\":");
        out.u64(list.dropped.into());
        out.raw(b",");
    }
}

/// Writes `p`'s span as an OTLP/JSON object: id `id`, parent `parent`, times, under trace
/// `trace_id`.
pub(in crate::otlp) fn span(
    p: &Parts<'_>,
    trace_id: u128,
    (id, parent): (u64, Option<u64>),
    (start, end): (u64, u64),
    out: &mut JsonBuf,
) {
    out.raw(b"{");
    list(out, p, &p.span_attrs);
    if end != 0 {
        out.raw(b"\"endTimeUnixNano\":");
        out.u64_str(end);
        out.raw(b",");
    }
    if !p.events.is_empty() {
        out.raw(b"\"events\":[");
        for (k, e) in p.events.iter().enumerate() {
            out.raw(if k == 0 { b"{" } else { b",{" });
            list(out, p, &e.attrs);
            if !e.name.is_empty() {
                out.raw(b"\"name\":");
                out.str(e.name);
                out.raw(b",");
            }
            if e.time != 0 {
                out.raw(b"\"timeUnixNano\":");
                out.u64_str(e.time);
                out.raw(b",");
            }
            close(out);
        }
        out.raw(b"],");
    }
    out.raw(b"\"kind\":");
    out.u64(super::super::SPAN_KIND_INTERNAL as u64);
    out.raw(b",");
    if !p.links.is_empty() {
        out.raw(b"\"links\":[");
        for (k, l) in p.links.iter().enumerate() {
            out.raw(if k == 0 { b"{" } else { b",{" });
            list(out, p, &l.attrs);
            out.raw(b"\"spanId\":");
            out.hex(l.span);
            out.raw(b",\"traceId\":");
            out.hex128(trace_id);
            out.raw(b"}");
        }
        out.raw(b"],");
    }
    out.raw(b"\"name\":");
    out.str(p.name);
    if let Some(parent) = parent {
        out.raw(b",\"parentSpanId\":");
        out.hex(parent);
    }
    out.raw(b",\"spanId\":");
    out.hex(id);
    if start != 0 {
        out.raw(b",\"startTimeUnixNano\":");
        out.u64_str(start);
    }
    out.raw(b",\"traceId\":");
    out.hex128(trace_id);
    out.raw(b"}");
}

/// Closes an object whose last member was followed by a comma (or that has none).
fn close(out: &mut JsonBuf) {
    match out.bytes.last() {
        Some(b',') => *out.bytes.last_mut().expect("a comma") = b'}',
        _ => out.raw(b"}"),
    }
}
