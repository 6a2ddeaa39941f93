//! The JSON read as a stream: the top-level object's keys as they come, and `traceEvents` one
//! event at a time, each handed to the [`Collector`] and dropped. Nothing holds the document.

use crate::{
    collect::{Collector, RawEvent},
    values::lenient_u64,
};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::{
    cell::Cell,
    fmt,
    io::{self, Read},
    rc::Rc,
};

/// The top level: an object (`traceEvents` and the profiler's keys) or a bare array of events.
pub(crate) struct Top<'c>(pub &'c mut Collector);

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Chrome trace: an object with \"traceEvents\", or an array of events")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let c = self.0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => map.next_value_seed(Events(c))?,
                "baseTimeNanoseconds" => c.meta.base_ns = lenient_u64(&map.next_value::<Value>()?),
                "distributedInfo" => {
                    let info = map.next_value::<Value>()?;
                    c.meta.rank = info.get("rank").and_then(lenient_u64);
                }
                "schemaVersion" | "deviceProperties" => {
                    c.meta.kineto = true;
                    map.next_value::<IgnoredAny>()?;
                }
                "traceName" | "trace_id" => {
                    if let Value::String(s) = map.next_value::<Value>()? {
                        c.meta.trace_name.get_or_insert(s);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Events(self.0).visit_seq(seq)
    }
}

/// `traceEvents`: each event handed over as it is parsed.
struct Events<'c>(&'c mut Collector);

impl<'de> DeserializeSeed<'de> for Events<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(ev) = seq.next_element::<RawEvent>()? {
            self.0.event(ev);
        }
        Ok(())
    }
}

/// Where the reading is: bytes handed on, lines begun, and where the last two lines began.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Position {
    pub read: u64,
    lines: u64,
    line_start: u64,
    previous_start: u64,
}

impl Position {
    /// The byte offset of the parser's (1-based) `line` and `column`: the parser reads a byte or
    /// two ahead, so the line is the current one or the one before; else what was read.
    pub(crate) fn offset(&self, line: usize, column: usize) -> u64 {
        let col = (column as u64).saturating_sub(1);
        match (line as u64).checked_sub(1) {
            Some(l) if l == self.lines => self.line_start + col,
            Some(l) if l + 1 == self.lines => self.previous_start + col,
            _ => self.read,
        }
    }
}

/// A reader that counts the bytes and lines it has handed on, so that an error can name its
/// byte offset.
pub(crate) struct Counted<R> {
    inner: R,
    at: Rc<Cell<Position>>,
}

impl<R> Counted<R> {
    pub(crate) fn new(inner: R) -> (Counted<R>, Rc<Cell<Position>>) {
        let at = Rc::new(Cell::new(Position::default()));
        (Counted { inner, at: Rc::clone(&at) }, at)
    }
}

impl<R: Read> Read for Counted<R> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut at = self.at.get();
        for (i, &b) in buf[..n].iter().enumerate() {
            if b == b'\n' {
                at.lines += 1;
                at.previous_start = at.line_start;
                at.line_start = at.read + i as u64 + 1;
            }
        }
        at.read += n as u64;
        self.at.set(at);
        Ok(n)
    }
}
