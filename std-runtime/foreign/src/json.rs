//! The JSON read as a stream: the top-level object's keys as they come (`traceEvents`, and the
//! profiler's `baseTimeNanoseconds`, `distributedInfo`, `deviceProperties`...), and each
//! event of `traceEvents` parsed from its own bytes and handed to the [`Collector`]. Nothing
//! holds the document; an error names its byte.

use crate::{
    collect::Collector,
    parse,
    scan::{position, ScanError, Scanner},
    Form,
};
use flate2::read::MultiGzDecoder;
use serde_json::Value;
use std::{
    fs::File,
    io::{self, BufReader, Read},
    path::Path,
};

/// Where a trace's bytes are: a file, or memory.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Input<'a> {
    Path(&'a Path),
    Bytes(&'a [u8]),
}

impl<'a> Input<'a> {
    /// What the reader reads: the bytes, or their gzip stream decompressed.
    pub(crate) fn open(self, form: Option<Form>) -> io::Result<Box<dyn Read + 'a>> {
        let gzip = form == Some(Form::Gzip);
        Ok(match self {
            Input::Path(p) if gzip => Box::new(MultiGzDecoder::new(BufReader::new(File::open(p)?))),
            Input::Path(p) => Box::new(File::open(p)?),
            Input::Bytes(b) if gzip => Box::new(MultiGzDecoder::new(b)),
            Input::Bytes(b) => Box::new(b),
        })
    }
}

/// Reads the whole trace from `source` into `c`, stopping early when the collector does; the
/// offset reached.
pub(crate) fn read(source: impl Read, c: &mut Collector<'_>) -> Result<u64, ScanError> {
    let mut s = Scanner::new(source);
    match s.peek()? {
        Some(b'[') => {
            events(&mut s, c)?;
            if c.stop.is_some() {
                return Ok(s.offset());
            }
        }
        Some(b'{') => {
            s.expect(b"{", "`{`")?;
            if s.peek()? == Some(b'}') {
                s.expect(b"}", "`}`")?;
            } else {
                loop {
                    let (at, buf) = s.value()?;
                    let key: String = serde_json::from_slice(buf).map_err(|e| bad(at, buf, &e))?;
                    s.expect(b":", "`:`")?;
                    if key == "traceEvents" {
                        events(&mut s, c)?;
                        if c.stop.is_some() {
                            return Ok(s.offset());
                        }
                    } else {
                        let (at, buf) = s.value()?;
                        let value: Value = serde_json::from_slice(buf).map_err(|e| bad(at, buf, &e))?;
                        meta(c, &key, value);
                    }
                    if s.expect(b",}", "`,` or `}`")? == b'}' {
                        break;
                    }
                }
            }
        }
        Some(b) => {
            let what = format!(
                "expected an object with \"traceEvents\", or an array of events, found {:?}",
                b as char
            );
            return Err(ScanError::Bad { offset: s.offset(), what });
        }
        None => return Err(ScanError::Bad { offset: 0, what: "the file is empty".into() }),
    }
    match s.peek()? {
        None => Ok(s.offset()),
        Some(_) => Err(ScanError::Bad { offset: s.offset(), what: "data after the trace".into() }),
    }
}

/// `traceEvents`: each event parsed from its bytes and handed over.
fn events<R: Read>(s: &mut Scanner<R>, c: &mut Collector<'_>) -> Result<(), ScanError> {
    s.expect(b"[", "an array of trace events")?;
    if s.peek()? == Some(b']') {
        s.expect(b"]", "`]`")?;
        return Ok(());
    }
    loop {
        // Parsed where it lies in the buffer: an object ends itself, so the parser stops at
        // its close (the event's end), and says when the bytes read end inside it.
        s.parse(|text| parse::event(text, |ev| c.event(ev)))?;
        if c.stop.is_some() {
            return Ok(());
        }
        if s.expect(b",]", "`,` or `]`")? == b']' {
            return Ok(());
        }
    }
}

/// A parser's error in the value at `at`, whose bytes are `bytes`, at its byte.
fn bad(at: u64, bytes: &[u8], e: &serde_json::Error) -> ScanError {
    let msg = e.to_string();
    let what = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg,
    };
    ScanError::Bad { offset: at + position(bytes, e.line(), e.column()) as u64, what }
}

/// What a top-level key says of the whole trace.
fn meta(c: &mut Collector<'_>, key: &str, value: Value) {
    let u64_of = |v: &Value| v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64));
    match key {
        "baseTimeNanoseconds" => c.meta.base_ns = u64_of(&value),
        "distributedInfo" => c.meta.rank = value.get("rank").and_then(u64_of),
        "schemaVersion" => c.meta.kineto = true,
        "deviceProperties" => {
            c.meta.kineto = true;
            c.meta.devices = value.as_array().map_or(0, Vec::len);
        }
        "traceName" | "trace_id" => {
            if let Value::String(s) = value {
                c.meta.trace_name.get_or_insert(s);
            }
        }
        _ => {}
    }
}
