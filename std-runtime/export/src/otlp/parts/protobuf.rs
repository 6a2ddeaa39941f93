//! A span's parts as an OTLP `Span` message, encoded by hand: lengths are computed first, so
//! the message is written in one pass with no copy, in the bytes prost writes for the same
//! message (fields in number order, those at their default left out, minimal varints). The
//! module's tests decode it with the prost messages and compare it with prost's encoding.

use super::{Attr, LinkPart, List, Parts, Value};

/// Wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

fn varint_len(v: u64) -> usize {
    // 1 byte per 7 bits, at least one.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn key(out: &mut Vec<u8>, field: u8, wire: u8) {
    out.push(field << 3 | wire);
}

/// A length-delimited field's size beyond its one-byte key: the length and the bytes.
fn delimited(len: usize) -> usize {
    varint_len(len as u64) + len
}

fn bytes_field(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    key(out, field, LEN);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn fixed64_field(out: &mut Vec<u8>, field: u8, v: u64) {
    key(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

impl Parts<'_> {
    fn value_bytes<'s>(&'s self, v: Value<'s>) -> &'s [u8] {
        match v {
            Value::Str(s) => s.as_bytes(),
            Value::Made(a, b) => self.made(a, b).as_bytes(),
            _ => &[],
        }
    }

    /// An `AnyValue`'s size.
    fn any_value_len(&self, v: Value<'_>) -> usize {
        match v {
            Value::Str(_) | Value::Made(..) => 1 + delimited(self.value_bytes(v).len()),
            Value::Bool(_) => 2,
            Value::Int(i) => 1 + varint_len(i as u64),
            Value::Double(_) => 9,
        }
    }

    /// A `KeyValue`'s size.
    fn key_value_len(&self, a: &Attr<'_>) -> usize {
        let key = if a.key.is_empty() { 0 } else { 1 + delimited(a.key.len()) };
        key + 1 + delimited(self.any_value_len(a.value))
    }

    /// The size of a list's entries as repeated `KeyValue` fields, and of its dropped count;
    /// `lens` holds each attribute's `KeyValue` size.
    fn list_len(&self, lens: &[u32], list: &List, dropped_field: bool) -> usize {
        let entries: usize =
            lens[list.start as usize..list.end as usize].iter().map(|&len| 1 + delimited(len as usize)).sum();
        let dropped =
            if dropped_field && list.dropped != 0 { 1 + varint_len(list.dropped.into()) } else { 0 };
        entries + dropped
    }

    fn write_list(&self, lens: &[u32], out: &mut Vec<u8>, list: &List, field: u8, dropped_field: u8) {
        let range = list.start as usize..list.end as usize;
        for (a, &len) in self.attrs[range.clone()].iter().zip(&lens[range]) {
            key(out, field, LEN);
            varint(out, len.into());
            if !a.key.is_empty() {
                bytes_field(out, 1, a.key.as_bytes());
            }
            key(out, 2, LEN);
            varint(out, self.any_value_len(a.value) as u64);
            match a.value {
                Value::Str(_) | Value::Made(..) => bytes_field(out, 1, self.value_bytes(a.value)),
                Value::Bool(b) => {
                    key(out, 2, VARINT);
                    out.push(u8::from(b));
                }
                Value::Int(i) => {
                    key(out, 3, VARINT);
                    varint(out, i as u64);
                }
                Value::Double(d) => fixed64_field(out, 4, d.to_bits()),
            }
        }
        if list.dropped != 0 {
            key(out, dropped_field, VARINT);
            varint(out, list.dropped.into());
        }
    }

    fn event_len(&self, lens: &[u32], e: &super::Event<'_>) -> usize {
        let time = if e.time != 0 { 9 } else { 0 };
        let name = if e.name.is_empty() { 0 } else { 1 + delimited(e.name.len()) };
        time + name + self.list_len(lens, &e.attrs, true)
    }

    fn link_len(&self, lens: &[u32], l: &LinkPart) -> usize {
        (1 + delimited(16)) + (1 + delimited(8)) + self.list_len(lens, &l.attrs, true)
    }
}

/// Appends `p`'s span as one `ScopeSpans.spans` entry (field 2): id `id`, parent `parent`,
/// times, under trace `trace_id`. `lens` is a buffer for the attributes' sizes, each computed
/// once.
pub(in crate::otlp) fn span(
    p: &Parts<'_>,
    lens: &mut Vec<u32>,
    trace_id: &[u8; 16],
    (id, parent): (u64, Option<u64>),
    (start, end): (u64, u64),
    out: &mut Vec<u8>,
) {
    lens.clear();
    lens.extend(p.attrs.iter().map(|a| p.key_value_len(a) as u32));
    let lens = &lens[..];
    let events: usize = p.events.iter().map(|e| 1 + delimited(p.event_len(lens, e))).sum();
    let links: usize = p.links.iter().map(|l| 1 + delimited(p.link_len(lens, l))).sum();
    let len = (1 + delimited(16))
        + (1 + delimited(8))
        + parent.map_or(0, |_| 1 + delimited(8))
        + (1 + delimited(p.name.len()))
        + 2
        + if start != 0 { 9 } else { 0 }
        + if end != 0 { 9 } else { 0 }
        + p.list_len(lens, &p.span_attrs, true)
        + events
        + links;
    out.reserve(1 + 10 + len);
    key(out, 2, LEN);
    varint(out, len as u64);
    bytes_field(out, 1, trace_id);
    bytes_field(out, 2, &id.to_be_bytes());
    if let Some(parent) = parent {
        bytes_field(out, 4, &parent.to_be_bytes());
    }
    bytes_field(out, 5, p.name.as_bytes());
    key(out, 6, VARINT);
    out.push(super::super::SPAN_KIND_INTERNAL as u8);
    if start != 0 {
        fixed64_field(out, 7, start);
    }
    if end != 0 {
        fixed64_field(out, 8, end);
    }
    p.write_list(lens, out, &p.span_attrs, 9, 10);
    for e in &p.events {
        key(out, 11, LEN);
        varint(out, p.event_len(lens, e) as u64);
        if e.time != 0 {
            fixed64_field(out, 1, e.time);
        }
        if !e.name.is_empty() {
            bytes_field(out, 2, e.name.as_bytes());
        }
        p.write_list(lens, out, &e.attrs, 3, 4);
    }
    for l in &p.links {
        key(out, 13, LEN);
        varint(out, p.link_len(lens, l) as u64);
        bytes_field(out, 1, trace_id);
        bytes_field(out, 2, &l.span.to_be_bytes());
        p.write_list(lens, out, &l.attrs, 4, 5);
    }
}
