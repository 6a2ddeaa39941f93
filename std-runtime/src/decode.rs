//! Turning `trace.bin` files into the [`model`](crate::model).
//!
//! Each data chunk is decodable on its own: its header gives the owner, the base timestamp,
//! the first id, the open-span depth and the records dropped before it. So a damaged or missing
//! chunk costs only itself; the depth lets the decoder close spans whose ends were lost and
//! stand in for spans whose begins were lost, keeping every later span correctly nested.

use crate::{
    clock::Calibration,
    error::Error,
    model::{Callsite, Event, Process, Span, Thread, Trace, Value},
    reader::{Cursor, Frame, FrameReader, Warning},
};
use std::{
    collections::HashMap,
    io::Read,
    path::{Path, PathBuf},
    sync::Arc,
};
use waffle::{
    callsite::Kind,
    wire::{frame, tag, unzigzag, FieldType, FRAME_HEAD_LEN},
};

/// A decoded trace and what was wrong on the way.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The trace, one process per file.
    pub trace: Trace,
    /// Problems that were worked around (damaged frames, unknown records, cut files).
    pub warnings: Vec<Warning>,
}

/// Decodes several files into one trace, in the order given.
pub fn decode_files<P: AsRef<Path>>(paths: &[P]) -> Result<Decoded, Error> {
    let mut out = Decoded::default();
    for p in paths {
        let (process, warnings) = decode_file(p.as_ref())?;
        out.trace.processes.push(process);
        out.warnings.extend(warnings);
    }
    Ok(out)
}

/// Decodes one file.
pub fn decode_file(path: &Path) -> Result<(Process, Vec<Warning>), Error> {
    let reader = FrameReader::open(path)?;
    decode_frames(reader, path)
}

/// Decodes a trace from any reader; `path` names it in messages.
pub fn decode_reader<R: Read>(input: R, path: &Path) -> Result<(Process, Vec<Warning>), Error> {
    decode_frames(FrameReader::new(input, path)?, path)
}

fn decode_frames<R: Read>(mut reader: FrameReader<R>, path: &Path) -> Result<(Process, Vec<Warning>), Error> {
    let mut warnings = Vec::new();
    let first = reader.next_frame(&mut warnings);
    let Some(first) = first.filter(|f| f.kind == frame::HEADER) else {
        let what = warnings.first().map_or("the file has no header frame".to_owned(), |w| w.message.clone());
        return Err(Error::Corrupt { path: path.to_owned(), offset: 10, what });
    };
    let mut d = Decoder::new(path, &first).map_err(|what| Error::Corrupt {
        path: path.to_owned(),
        offset: first.offset,
        what,
    })?;
    while let Some(f) = reader.next_frame(&mut warnings) {
        if let Err(msg) = d.frame(&f) {
            warnings.push(Warning { path: path.to_owned(), offset: f.offset, message: msg });
        }
    }
    warnings.append(&mut d.warnings);
    Ok((d.finish(), warnings))
}

struct StreamState {
    thread: usize,
    module: u32,
    /// Indices (into the thread's spans) of open spans, innermost last.
    stack: Vec<usize>,
}

struct Decoder {
    path: PathBuf,
    process: Process,
    cal: Calibration,
    callsites: HashMap<(u32, u32), Arc<Callsite>>,
    streams: HashMap<(u32, u32), StreamState>,
    /// Last tick seen per thread, to end spans that never ended.
    last_ts: Vec<u64>,
    dropped_end: u64,
    placeholder: Arc<Callsite>,
    warnings: Vec<Warning>,
}

impl Decoder {
    fn new(path: &Path, header: &Frame) -> Result<Decoder, String> {
        let mut c = Cursor::new(&header.payload);
        let pid = c.varint_u32()?;
        let name = c.str()?;
        let host = c.str()?;
        let n_labels = c.varint()?;
        let mut labels = Vec::new();
        for _ in 0..n_labels.min(1024) {
            labels.push((c.str()?, c.str()?));
        }
        let _clock_source = c.str()?;
        let cal = read_calibration(&mut c)?;
        let process = Process {
            source: path.display().to_string(),
            pid,
            name,
            host,
            labels,
            threads: Vec::new(),
            dropped: 0,
            complete: false,
        };
        let placeholder = Arc::new(Callsite {
            name: "(begin lost: records dropped)".into(),
            module: String::new(),
            file: String::new(),
            line: 0,
            kind: Kind::Span,
            fields: Vec::new(),
        });
        Ok(Decoder {
            path: path.to_owned(),
            process,
            cal,
            callsites: HashMap::new(),
            streams: HashMap::new(),
            last_ts: Vec::new(),
            dropped_end: 0,
            placeholder,
            warnings: Vec::new(),
        })
    }

    fn frame(&mut self, f: &Frame) -> Result<(), String> {
        let mut c = Cursor::new(&f.payload);
        match f.kind {
            frame::CALLSITES => self.callsites(&mut c),
            frame::STREAM => {
                let (stream, generation, module) = (c.varint_u32()?, c.varint_u32()?, c.varint_u32()?);
                let (tid, name) = (c.varint()?, c.str()?);
                let s = self.stream(stream, generation);
                s.module = module;
                let t = s.thread;
                self.process.threads[t].tid = tid;
                self.process.threads[t].name = name;
                Ok(())
            }
            frame::DATA => {
                let stream = c.varint_u32()?;
                while !c.is_empty() {
                    let body_at = f.offset + (FRAME_HEAD_LEN + c.pos()) as u64;
                    let len = c.varint()?;
                    let body = c.bytes(usize::try_from(len).unwrap_or(usize::MAX))?;
                    if let Err(msg) = self.chunk(stream, body) {
                        let message =
                            format!("chunk of stream {stream}: {msg}; the rest of the chunk is skipped");
                        self.warnings.push(Warning { path: self.path.clone(), offset: body_at, message });
                    }
                }
                Ok(())
            }
            frame::CLOCK => {
                self.cal = read_calibration(&mut c)?;
                Ok(())
            }
            frame::END => {
                let n = c.varint()?;
                for _ in 0..n.min(1 << 20) {
                    let (_stream, dropped) = (c.varint()?, c.varint()?);
                    self.dropped_end += dropped;
                }
                self.process.complete = true;
                Ok(())
            }
            frame::HEADER => Err("a second header frame; ignored".into()),
            k => Err(format!("unknown frame kind {k}; skipped")),
        }
    }

    fn callsites(&mut self, c: &mut Cursor<'_>) -> Result<(), String> {
        let module = c.varint_u32()?;
        let first = c.varint_u32()?;
        let count = c.varint_u32()?;
        for i in 0..count {
            let kind = c.byte()?;
            let kind = Kind::from_code(kind)
                .ok_or_else(|| format!("callsite {} has unknown kind {kind}", first + i))?;
            let (name, module_path, file, line) = (c.str()?, c.str()?, c.str()?, c.varint_u32()?);
            let n = c.varint()?;
            let mut fields = Vec::new();
            for _ in 0..n {
                let fname = c.str()?;
                let code = c.byte()?;
                let ty = FieldType::from_code(code)
                    .ok_or_else(|| format!("field {fname} has unknown type code {code}"))?;
                fields.push((fname, ty));
            }
            let cs = Callsite { name, module: module_path, file, line, kind, fields };
            self.callsites.insert((module, first.saturating_add(i)), Arc::new(cs));
        }
        Ok(())
    }

    fn stream(&mut self, stream: u32, generation: u32) -> &mut StreamState {
        let threads = &mut self.process.threads;
        let last_ts = &mut self.last_ts;
        self.streams.entry((stream, generation)).or_insert_with(|| {
            threads.push(Thread {
                stream,
                tid: 0,
                name: String::new(),
                spans: Vec::new(),
                events: Vec::new(),
                dropped: 0,
            });
            last_ts.push(0);
            StreamState { thread: threads.len() - 1, module: 0, stack: Vec::new() }
        })
    }

    fn chunk(&mut self, stream: u32, body: &[u8]) -> Result<(), String> {
        let mut c = Cursor::new(body);
        let generation = c.varint_u32()?;
        let mut ts = c.varint()?;
        let mut next_id = c.varint()?;
        let depth = c.varint()?;
        let dropped = c.varint()?;
        let records = c.varint()?;
        let placeholder = self.placeholder.clone();
        let s = self.stream(stream, generation);
        let (t, module) = (s.thread, s.module);
        let mut stack = std::mem::take(&mut s.stack);
        let thread = &mut self.process.threads[t];
        thread.dropped += dropped;
        // Spans open before the chunk but ended in lost records: end them where the chunk starts.
        while stack.len() as u64 > depth {
            let i = stack.pop().expect("stack is longer than depth");
            thread.spans[i].end_ns = ts;
        }
        // Spans begun in lost records and still open: stand-ins keep later nesting right.
        while (stack.len() as u64) < depth.min(1 << 16) {
            let parent = stack.last().map(|&i| thread.spans[i].id);
            stack.push(thread.spans.len());
            thread.spans.push(Span {
                id: 0,
                parent,
                depth: stack.len() as u32 - 1,
                callsite: placeholder.clone(),
                fields: Vec::new(),
                start_ns: ts,
                end_ns: ts,
                ended: false,
            });
        }
        let mut seen = 0u64;
        let result = (|| {
            while !c.is_empty() {
                let record_tag = c.byte()?;
                match record_tag {
                    tag::SPAN_BEGIN | tag::EVENT => {
                        let id = c.varint_u32()?;
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        let cs = self.callsites.get(&(module, id)).cloned().ok_or_else(|| {
                            format!(
                                "record {seen} names callsite {id}, which the string table does not describe"
                            )
                        })?;
                        let fields = read_fields(&mut c, &cs)?;
                        let parent = stack.last().map(|&i| thread.spans[i].id).filter(|&p| p != 0);
                        if record_tag == tag::SPAN_BEGIN {
                            stack.push(thread.spans.len());
                            let depth = stack.len() as u32 - 1;
                            let span = Span {
                                id: next_id,
                                parent,
                                depth,
                                callsite: cs,
                                fields,
                                start_ns: ts,
                                end_ns: ts,
                                ended: false,
                            };
                            thread.spans.push(span);
                        } else {
                            thread.events.push(Event {
                                id: next_id,
                                parent,
                                callsite: cs,
                                fields,
                                ts_ns: ts,
                            });
                        }
                        next_id += 1;
                    }
                    tag::SPAN_END => {
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        if let Some(i) = stack.pop() {
                            thread.spans[i].end_ns = ts;
                            thread.spans[i].ended = true;
                        }
                    }
                    other => return Err(format!("record {seen} has unknown tag 0x{other:02x}")),
                }
                seen += 1;
            }
            Ok(())
        })();
        self.last_ts[t] = self.last_ts[t].max(ts);
        self.streams.get_mut(&(stream, generation)).expect("stream exists").stack = stack;
        result?;
        if seen != records {
            return Err(format!("header says {records} records but {seen} were read"));
        }
        Ok(())
    }

    fn finish(mut self) -> Process {
        for s in self.streams.values() {
            let last = self.last_ts[s.thread];
            for &i in &s.stack {
                let span = &mut self.process.threads[s.thread].spans[i];
                span.end_ns = last.max(span.start_ns);
            }
        }
        let cal = self.cal;
        let mut thread_drops = 0;
        for t in &mut self.process.threads {
            thread_drops += t.dropped;
            for s in &mut t.spans {
                s.start_ns = cal.to_unix_ns(s.start_ns);
                s.end_ns = cal.to_unix_ns(s.end_ns).max(s.start_ns);
            }
            for e in &mut t.events {
                e.ts_ns = cal.to_unix_ns(e.ts_ns);
            }
        }
        self.process.dropped = thread_drops.max(self.dropped_end);
        self.process
    }
}

fn read_calibration(c: &mut Cursor<'_>) -> Result<Calibration, String> {
    let cal = Calibration {
        anchor_ticks: c.varint()?,
        anchor_unix_ns: c.varint()?,
        ticks: c.varint()?,
        ns: c.varint()?,
    };
    if cal.ticks == 0 || cal.ns == 0 {
        return Err("clock calibration with a zero interval".into());
    }
    Ok(cal)
}

fn read_fields(c: &mut Cursor<'_>, cs: &Callsite) -> Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(cs.fields.len());
    for (name, ty) in &cs.fields {
        let ty = match *ty {
            FieldType::Dynamic => {
                let code = c.byte()?;
                match FieldType::from_code(code) {
                    Some(FieldType::Dynamic) | None => {
                        return Err(format!("field `{name}` has unknown type code {code}"))
                    }
                    Some(t) => t,
                }
            }
            t => t,
        };
        out.push(match ty {
            FieldType::U64 => Value::U64(c.varint()?),
            FieldType::I64 => Value::I64(unzigzag(c.varint()?)),
            FieldType::F64 => Value::F64(f64::from_le_bytes(c.bytes(8)?.try_into().expect("8 bytes"))),
            FieldType::Bool => Value::Bool(c.byte()? != 0),
            FieldType::Str => Value::Str(c.str()?),
            FieldType::Dynamic => unreachable!("resolved above"),
        });
    }
    Ok(out)
}
