//! The JSON read as a stream: the top-level object's keys as they come, and `traceEvents` one
//! event at a time, each handed to the [`Collector`] and dropped. Nothing holds the document.

use crate::Form;
use crate::{
    collect::{Collector, RawEvent},
    values::lenient_u64,
};
use flate2::read::MultiGzDecoder;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::{
    cell::Cell,
    fmt,
    fs::File,
    io::{self, BufRead, BufReader, Read},
    path::Path,
    rc::Rc,
};

/// The message of the error that stops the parser when the collector has stopped.
pub(crate) const STOPPED: &str = "the conversion stopped";

/// The top level: an object (`traceEvents` and the profiler's keys) or a bare array of events.
pub(crate) struct Top<'c, 'a>(pub &'c mut Collector<'a>);

impl<'de> Visitor<'de> for Top<'_, '_> {
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
                "schemaVersion" => {
                    c.meta.kineto = true;
                    map.next_value::<IgnoredAny>()?;
                }
                "deviceProperties" => {
                    c.meta.kineto = true;
                    if let Value::Array(devices) = map.next_value::<Value>()? {
                        c.meta.devices = devices.len();
                    }
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
struct Events<'c, 'a>(&'c mut Collector<'a>);

impl<'de> DeserializeSeed<'de> for Events<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(ev) = seq.next_element::<RawEvent>()? {
            self.0.event(ev);
            if self.0.stop.is_some() {
                return Err(de::Error::custom(STOPPED));
            }
        }
        Ok(())
    }
}

/// What the reader reads: the file, or its gzip stream decompressed.
pub(crate) enum Source {
    Plain(File),
    Gzip(Box<MultiGzDecoder<BufReader<File>>>),
}

impl Source {
    pub(crate) fn open(path: &Path, form: Option<Form>) -> io::Result<Source> {
        let file = File::open(path)?;
        Ok(match form {
            Some(Form::Gzip) => Source::Gzip(Box::new(MultiGzDecoder::new(BufReader::new(file)))),
            _ => Source::Plain(file),
        })
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::Plain(f) => f.read(buf),
            Source::Gzip(g) => g.read(buf),
        }
    }
}

/// A reader that counts the bytes it has handed on (under the parser's `BufReader`, whose
/// byte-at-a-time reads the standard library serves from its buffer): at the end of a cut
/// file, the offset of the cut.
pub(crate) struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R> Counted<R> {
    pub(crate) fn new(inner: R) -> (Counted<R>, Rc<Cell<u64>>) {
        let read = Rc::new(Cell::new(0));
        (Counted { inner, read: Rc::clone(&read) }, read)
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// The byte offset of the parser's (1-based) `line` and `column` in what `source` yields,
/// found by reading it again (only when a file is bad).
pub(crate) fn offset_of(source: impl Read, line: usize, column: usize) -> io::Result<u64> {
    let (mut at, mut lines) = (0u64, 1usize);
    let mut input = BufReader::new(source);
    while lines < line {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let n = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                lines += 1;
                i + 1
            }
            None => buf.len(),
        };
        at += n as u64;
        input.consume(n);
    }
    Ok(at + (column as u64).saturating_sub(1))
}
