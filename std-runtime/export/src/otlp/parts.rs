//! One span as the mapping of the module docs makes it: its attributes, events and links, in
//! buffers used again for the next span (nothing is allocated per span once they have grown).
//! `protobuf` and `json` encode the same parts, so the two encodings cannot disagree.

use std::fmt::Write as _;

use crate::{
    decode::FieldValue,
    json_buf::{push_hex, push_u64},
    spans::{Link, LinkKind, Log, OutSpan, TraceInfo},
};

mod json;
mod protobuf;

pub(super) use json::span as json_span;
pub(super) use protobuf::span as protobuf_span;

/// An attribute's value. Text made for it (ids in hex, `key=value`, numbers that are strings)
/// is a range of [`Parts::text`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Value<'a> {
    Str(&'a str),
    Made(u32, u32),
    Bool(bool),
    Int(i64),
    Double(f64),
}

/// A key and its value.
#[derive(Clone, Copy, Debug)]
pub(super) struct Attr<'a> {
    pub(super) key: &'a str,
    pub(super) value: Value<'a>,
}

/// A list of attributes: a range of [`Parts::attrs`], and how many were dropped (keys already
/// in the list).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct List {
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) dropped: u32,
}

/// A span event.
pub(super) struct Event<'a> {
    pub(super) time: u64,
    pub(super) name: &'a str,
    pub(super) attrs: List,
}

/// A link.
pub(super) struct LinkPart {
    pub(super) span: u64,
    pub(super) attrs: List,
}

/// One span's parts.
pub(super) struct Parts<'a> {
    pub(super) name: &'a str,
    pub(super) attrs: Vec<Attr<'a>>,
    pub(super) span_attrs: List,
    pub(super) events: Vec<Event<'a>>,
    pub(super) links: Vec<LinkPart>,
    pub(super) text: String,
}

/// The parts' buffers between spans.
#[derive(Default)]
pub(super) struct Spare {
    attrs: Vec<Attr<'static>>,
    events: Vec<Event<'static>>,
    links: Vec<LinkPart>,
    text: String,
    logs: Vec<usize>,
}

/// An empty vector of another lifetime, with `v`'s memory (the standard library collects a
/// mapped `IntoIter` into its own allocation when the layouts agree; if it did not, this would
/// allocate, never misbehave).
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

impl<'a> Parts<'a> {
    /// The parts of `s`, in `spare`'s buffers.
    pub(super) fn of(spare: &mut Spare, ctx: &'a TraceInfo, s: &'a OutSpan<'a>) -> Parts<'a> {
        let mut p = Parts {
            name: if s.callsite.name.is_empty() { "(unnamed)" } else { &s.callsite.name },
            attrs: recycle(std::mem::take(&mut spare.attrs)),
            span_attrs: List::default(),
            events: recycle(std::mem::take(&mut spare.events)),
            links: std::mem::take(&mut spare.links),
            text: std::mem::take(&mut spare.text),
        };
        p.links.clear();
        p.text.clear();
        let process = &ctx.processes[s.process];
        let mut list = p.begin();
        for (name, v) in s.fields() {
            p.field(&mut list, name, v);
        }
        let thread = &process.threads[s.thread];
        p.int(&mut list, "thread.id", thread.tid);
        if !thread.name.is_empty() {
            p.put(&mut list, "thread.name", Value::Str(&thread.name));
        }
        for (key, on) in [
            ("waffle.event", s.event),
            ("waffle.detached", s.detached),
            ("waffle.unfinished", !s.ended),
            ("waffle.stand_in", s.stand_in),
        ] {
            if on {
                p.put(&mut list, key, Value::Bool(true));
            }
        }
        p.correlate(&mut list, &s.callsite.correlate, s.correlation);
        p.span_attrs = list;
        // Events in time order (then id).
        let mut order = std::mem::take(&mut spare.logs);
        order.clear();
        order.extend(0..s.logs.len());
        order.sort_by_key(|&k| (s.logs[k].ts_ns, s.logs[k].id));
        for &k in &order {
            p.event(s, &s.logs[k], process.threads.get(s.logs[k].thread).map_or(0, |t| t.tid));
        }
        spare.logs = order;
        for l in s.links {
            p.link(s, l);
        }
        p
    }

    /// Gives the buffers back for the next span.
    pub(super) fn recycle(self, spare: &mut Spare) {
        spare.attrs = recycle(self.attrs);
        spare.events = recycle(self.events);
        spare.links = self.links;
        spare.text = self.text;
    }

    /// The text of a made value.
    pub(super) fn made(&self, start: u32, end: u32) -> &str {
        &self.text[start as usize..end as usize]
    }

    fn begin(&self) -> List {
        let at = self.attrs.len() as u32;
        List { start: at, end: at, dropped: 0 }
    }

    /// Adds `key = value` to `list` (the last list begun), unless the key is there already.
    fn put(&mut self, list: &mut List, key: &'a str, value: Value<'a>) {
        if self.attrs[list.start as usize..].iter().any(|a| a.key == key) {
            list.dropped += 1;
        } else {
            self.attrs.push(Attr { key, value });
            list.end += 1;
        }
    }

    /// Text made by `f` in the parts' text.
    fn make(&mut self, f: impl FnOnce(&mut String)) -> Value<'a> {
        let start = self.text.len() as u32;
        f(&mut self.text);
        Value::Made(start, self.text.len() as u32)
    }

    /// An unsigned integer: OTLP's integers are signed 64-bit, so one above `i64::MAX` is its
    /// decimal string.
    fn int(&mut self, list: &mut List, key: &'a str, v: u64) {
        let value = match i64::try_from(v) {
            Ok(v) => Value::Int(v),
            Err(_) => self.make(|t| {
                let _ = write!(t, "{v}");
            }),
        };
        self.put(list, key, value);
    }

    /// A field value (see `attributes::value` for the mapping's reasons).
    fn field(&mut self, list: &mut List, name: &'a str, v: FieldValue<'a>) {
        let value = match v {
            FieldValue::U64(v) => return self.int(list, name, v),
            FieldValue::I64(v) => Value::Int(v),
            FieldValue::F64(v) if v.is_finite() => Value::Double(v),
            FieldValue::F64(v) => self.make(|t| {
                let _ = write!(t, "{v}");
            }),
            FieldValue::Bool(v) => Value::Bool(v),
            FieldValue::Str(s) => Value::Str(s),
        };
        self.put(list, name, value);
    }

    /// An id as 16 lowercase hex digits.
    fn id(&mut self, list: &mut List, key: &'a str, id: u64) {
        let value = self.make(|t| push_hex(t, id));
        self.put(list, key, value);
    }

    /// `waffle.correlate = "key=value"`, if the item is correlated.
    fn correlate(&mut self, list: &mut List, key: &str, value: Option<u64>) {
        if let (Some(value), false) = (value, key.is_empty()) {
            let made = self.make(|t| {
                t.push_str(key);
                t.push('=');
                push_u64(t, value);
            });
            self.put(list, "waffle.correlate", made);
        }
    }

    /// An event shown on `s`, which happened on thread `tid`.
    fn event(&mut self, s: &'a OutSpan<'a>, l: &'a Log, tid: u64) {
        let mut list = self.begin();
        for (name, v) in l.fields() {
            self.field(&mut list, name, v);
        }
        self.id(&mut list, "waffle.id", l.id);
        if !l.caused_by.is_empty() {
            let ids = self.make(|t| {
                for (k, &id) in l.caused_by.iter().enumerate() {
                    t.push_str(if k == 0 { "" } else { ", " });
                    push_hex(t, id);
                }
            });
            self.put(&mut list, "waffle.caused_by", ids);
        }
        self.correlate(&mut list, &l.callsite.correlate, l.correlation);
        if l.thread != s.thread {
            self.int(&mut list, "thread.id", tid);
        }
        self.events.push(Event { time: l.ts_ns, name: &l.callsite.name, attrs: list });
    }

    fn link(&mut self, s: &'a OutSpan<'a>, l: &Link) {
        let mut list = self.begin();
        match l.kind {
            LinkKind::Cause => self.put(&mut list, "waffle.link", Value::Str("caused_by")),
            LinkKind::Correlated | LinkKind::Message => {
                let message = l.kind == LinkKind::Message;
                self.put(
                    &mut list,
                    "waffle.link",
                    Value::Str(if message { "message" } else { "correlated" }),
                );
                // The key and value are those of the item the link is from.
                let from = l.from_event.and_then(|e| s.logs.iter().find(|log| log.id == e));
                let (key, value) = match from {
                    Some(log) => (&log.callsite.correlate, log.correlation),
                    None => (&s.callsite.correlate, s.correlation),
                };
                self.correlate(&mut list, key, value);
            }
        }
        if !l.resolved {
            self.put(&mut list, "waffle.unresolved", Value::Bool(true));
        }
        if let Some(target) = l.target_event {
            let key = if l.kind == LinkKind::Correlated { "waffle.peer_event" } else { "waffle.cause_event" };
            self.id(&mut list, key, target);
        }
        if let Some(from) = l.from_event {
            self.id(&mut list, "waffle.from_event", from);
        }
        self.links.push(LinkPart { span: l.span, attrs: list });
    }
}

#[cfg(test)]
mod tests;
