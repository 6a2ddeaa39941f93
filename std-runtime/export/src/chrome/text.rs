//! The trace events the exporter writes per span, as text straight into the output buffer:
//! the keys in the order serde_json's maps sort them, values as [`super::value`] and
//! [`super::us`] make them, so the bytes are those of the `Value` trees the live output
//! (`follow`) still builds. Of args with the same key, the first added is kept, as
//! `entry().or_insert()` keeps it.

use std::mem;

use super::{flows::Flow, rows::Point, FLOW_CAT, MAX_SAFE_INT};
use crate::{decode::FieldValue, json_buf::JsonBuf, spans::OutSpan};

/// An arg's value.
#[derive(Clone, Copy)]
pub(super) enum Arg<'a> {
    Field(FieldValue<'a>),
    /// An id, 16 hex digits.
    Hex(u64),
    /// The ids the item's `caused_by` names, `", "`-separated.
    CausedBy,
    /// `key=value` of the item's correlation.
    Correlate,
    True,
}

/// A span's or an event's args, in a buffer kept for the next one.
#[derive(Default)]
pub(super) struct Args {
    list: Vec<(&'static str, Arg<'static>)>,
}

/// An empty vector of another lifetime, with `v`'s memory (the standard library collects a
/// mapped `IntoIter` into its own allocation when the layouts agree; if it did not, this would
/// allocate, never misbehave).
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

/// The args being gathered for one item.
pub(super) struct ArgList<'a> {
    list: Vec<(&'a str, Arg<'a>)>,
}

impl Args {
    /// The args of `s`: its fields, then its causal `waffle.*` args.
    pub(super) fn of<'a>(&mut self, s: &'a OutSpan<'a>) -> ArgList<'a> {
        let mut args = ArgList { list: recycle(mem::take(&mut self.list)) };
        for (name, v) in s.fields() {
            args.add(name, Arg::Field(v));
        }
        args.add("waffle.id", Arg::Hex(s.id));
        if let Some(parent) = s.parent.or(s.unresolved_parent) {
            args.add("waffle.parent", Arg::Hex(parent));
        }
        if !s.caused_by.is_empty() {
            args.add("waffle.caused_by", Arg::CausedBy);
        }
        if let (Some(_), false) = (s.correlation, s.callsite.correlate.is_empty()) {
            args.add("waffle.correlate", Arg::Correlate);
        }
        args
    }

    /// Takes the buffer back.
    pub(super) fn done(&mut self, args: ArgList<'_>) {
        self.list = recycle(args.list);
    }
}

impl<'a> ArgList<'a> {
    pub(super) fn add(&mut self, key: &'a str, value: Arg<'a>) {
        self.list.push((key, value));
    }
}

/// Where and when a record is, and its phase's own keys.
pub(super) struct Place {
    pub(super) pid: i64,
    pub(super) tid: i64,
    /// `ts`, ns after the origin.
    pub(super) ts: u64,
    /// `dur`, ns, for a slice (`X`); else an instant on its thread (`i`, `"s":"t"`).
    pub(super) dur: Option<u64>,
}

/// Writes `s`'s record: `args` (sorted here, the first of equal keys kept), `cat`, `dur`,
/// `name`, `ph`, `pid`, `s`, `tid`, `ts`.
pub(super) fn record(out: &mut JsonBuf, s: &OutSpan<'_>, args: &mut ArgList<'_>, at: Place) {
    out.raw(b"{\"args\":{");
    args.list.sort_by(|a, b| a.0.cmp(b.0));
    let mut previous: Option<&str> = None;
    for &(key, value) in &args.list {
        if previous == Some(key) {
            continue;
        }
        out.raw(if previous.is_none() { b"" } else { b"," });
        previous = Some(key);
        out.str(key);
        out.raw(b":");
        match value {
            Arg::Field(v) => field(out, v),
            Arg::Hex(id) => out.hex(id),
            Arg::CausedBy => {
                out.raw(b"\"");
                for (k, &id) in s.caused_by.iter().enumerate() {
                    out.raw(if k == 0 { b"" } else { b", " });
                    out.hex_contents(id);
                }
                out.raw(b"\"");
            }
            Arg::Correlate => {
                out.raw(b"\"");
                out.str_contents(&s.callsite.correlate);
                out.raw(b"=");
                out.u64(s.correlation.unwrap_or(0));
                out.raw(b"\"");
            }
            Arg::True => out.bool(true),
        }
    }
    out.raw(b"},\"cat\":");
    let cat = if s.callsite.module.is_empty() { "waffle" } else { &s.callsite.module };
    out.str(cat);
    if let Some(dur) = at.dur {
        out.raw(b",\"dur\":");
        us(out, dur);
    }
    out.raw(b",\"name\":");
    out.str(&s.callsite.name);
    out.raw(if at.dur.is_some() { b",\"ph\":\"X\",\"pid\":" } else { b",\"ph\":\"i\",\"pid\":" });
    out.i64(at.pid);
    if at.dur.is_none() {
        out.raw(b",\"s\":\"t\"");
    }
    out.raw(b",\"tid\":");
    out.i64(at.tid);
    out.raw(b",\"ts\":");
    us(out, at.ts);
    out.raw(b"}");
}

/// A flow event: `ph` `s` at `p` (the arrow's start) or `f` (its end, bound to the enclosing
/// slice); `ts` is ns after the origin.
pub(super) fn flow(out: &mut JsonBuf, id: u64, f: &Flow, end: bool, p: Point, ts: u64) {
    out.raw(if end { b"{\"bp\":\"e\",\"cat\":" } else { b"{\"cat\":" });
    out.str(FLOW_CAT);
    out.raw(b",\"id\":");
    out.u64(id);
    out.raw(b",\"name\":");
    out.str(f.name);
    out.raw(if end { b",\"ph\":\"f\",\"pid\":" } else { b",\"ph\":\"s\",\"pid\":" });
    out.i64(p.pid);
    out.raw(b",\"tid\":");
    out.i64(p.tid);
    out.raw(b",\"ts\":");
    us(out, ts);
    out.raw(b"}");
}

/// A field's value, as [`super::value`] makes it.
fn field(out: &mut JsonBuf, v: FieldValue<'_>) {
    match v {
        FieldValue::U64(v) if v <= MAX_SAFE_INT => out.u64(v),
        FieldValue::I64(v) if v.unsigned_abs() <= MAX_SAFE_INT => out.i64(v),
        FieldValue::F64(v) if v.is_finite() => out.f64(v),
        FieldValue::F64(v) if v.is_nan() => out.str("NaN"),
        FieldValue::F64(v) if v > 0.0 => out.str("Infinity"),
        FieldValue::F64(_) => out.str("-Infinity"),
        FieldValue::Bool(v) => out.bool(v),
        FieldValue::Str(v) => out.str(v),
        FieldValue::U64(v) => out.u64_str(v),
        FieldValue::I64(v) => {
            out.raw(b"\"");
            out.i64(v);
            out.raw(b"\"");
        }
    }
}

/// The largest `ns` written digit by digit: below it a double holds every µs value with three
/// decimals to within a quarter of their spacing, so the shortest text that reads back as the
/// double [`super::us`] parses is the decimal text itself, trailing zeros dropped.
const DIRECT_NS: u64 = 1 << 50;

/// `ns` as µs with three decimals, as [`super::us`] writes it.
pub(super) fn us(out: &mut JsonBuf, ns: u64) {
    if ns >= DIRECT_NS {
        let text = serde_json::to_string(&super::us(ns)).expect("a number");
        return out.raw(text.as_bytes());
    }
    out.u64(ns / 1000);
    let frac = ns % 1000;
    let digits = [b'.', b'0' + (frac / 100) as u8, b'0' + (frac / 10 % 10) as u8, b'0' + (frac % 10) as u8];
    let keep = match frac {
        0 => 2,
        _ if frac % 10 != 0 => 4,
        _ if frac % 100 != 0 => 3,
        _ => 2,
    };
    out.raw(&digits[..keep]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Times come out as the parsed double prints.
    #[test]
    fn us_is_the_parsed_doubles_text() {
        let mut ns: Vec<u64> =
            vec![0, 1, 10, 100, 999, 1000, 1001, 1010, 1100, 123_456_789, DIRECT_NS - 1, DIRECT_NS];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ns.push(x >> (x % 40 + 14));
        }
        for ns in ns {
            let mut out = JsonBuf::default();
            us(&mut out, ns);
            assert_eq!(
                String::from_utf8(out.bytes).unwrap(),
                serde_json::to_string(&super::super::us(ns)).unwrap(),
                "{ns}"
            );
        }
    }
}
