//! Turning `trace.bin` files into the [`model`](crate::model).
//!
//! Each data chunk is decodable on its own: its header gives the owner, the base timestamp,
//! the first id, the open-span depth and the records dropped before it. So a damaged or missing
//! chunk costs only itself; the depth lets the decoder close spans whose ends were lost and
//! stand in for spans whose begins were lost, keeping every later span correctly nested.

use crate::{
    clock::Calibration,
    error::Error,
    model::{Callsite, Event, Item, Process, Span, Thread, Trace, Value},
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

/// What a stream has open: its spans and the contexts it entered, innermost last.
#[derive(Clone, Copy)]
enum Open {
    /// Index into the thread's spans.
    Span(usize),
    /// A span entered as context (`ENTER`), by id.
    Adopted(u64),
}

struct StreamState {
    thread: usize,
    module: u32,
    stack: Vec<Open>,
    /// The latest span or event and its id: what links and correlations attach to.
    source: Option<(Item, u64)>,
    /// The id the stream's next chunk starts at if no record is lost in between; `None` before
    /// its first chunk and after a chunk that did not decode to its end.
    next_id: Option<u64>,
}

struct Decoder {
    path: PathBuf,
    process: Process,
    cal: Calibration,
    callsites: HashMap<(u32, u32), Arc<Callsite>>,
    streams: HashMap<(u32, u32), StreamState>,
    /// Last tick seen per thread, to end spans that never ended.
    last_ts: Vec<u64>,
    /// Ends of detached spans, applied once every stream is read: (span id, tick).
    async_ends: Vec<(u64, u64)>,
    dropped_end: u64,
    /// Stand-ins the decoder may still make: a fixed allowance plus one per byte of DATA read,
    /// so that chunk headers claiming deep stacks cannot make memory grow faster than the file.
    standin_budget: u64,
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
        let _salt = c.varint()?;
        let trace_id = u128::from_le_bytes(c.bytes(16)?.try_into().expect("16 bytes"));
        let parent_span = Some(c.varint()?).filter(|&p| p != 0);
        let process = Process {
            source: path.display().to_string(),
            pid,
            name,
            host,
            labels,
            trace_id,
            parent_span,
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
            correlate: String::new(),
        });
        Ok(Decoder {
            path: path.to_owned(),
            process,
            cal,
            callsites: HashMap::new(),
            streams: HashMap::new(),
            last_ts: Vec::new(),
            async_ends: Vec::new(),
            dropped_end: 0,
            standin_budget: STANDIN_ALLOWANCE,
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
                self.standin_budget = self.standin_budget.saturating_add(f.payload.len() as u64);
                let stream = c.varint_u32()?;
                while !c.is_empty() {
                    let body_at = f.offset + (FRAME_HEAD_LEN + c.pos()) as u64;
                    let len = c.varint()?;
                    let Some(body) = usize::try_from(len).ok().and_then(|n| c.bytes(n).ok()) else {
                        let left = f.payload.len() - c.pos();
                        let message = format!(
                            "chunk of stream {stream} says its body is {len} bytes but only {left} remain \
                             in the frame; the rest of the frame is skipped"
                        );
                        self.warnings.push(Warning { path: self.path.clone(), offset: body_at, message });
                        break;
                    };
                    if let Err(msg) = self.chunk(stream, body, body_at) {
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
                    self.dropped_end = self.dropped_end.saturating_add(dropped);
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
            let correlate = c.str()?;
            let cs = Callsite { name, module: module_path, file, line, kind, fields, correlate };
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
            StreamState {
                thread: threads.len() - 1,
                module: 0,
                stack: Vec::new(),
                source: None,
                next_id: None,
            }
        })
    }

    fn chunk(&mut self, stream: u32, body: &[u8], at: u64) -> Result<(), String> {
        let mut c = Cursor::new(body);
        let generation = c.varint_u32()?;
        let mut ts = c.varint()?;
        let mut next_id = c.varint()?;
        let depth = c.varint()?;
        let dropped = c.varint()?;
        let records = c.varint()?;
        let placeholder = self.placeholder.clone();
        let top_parent = self.process.parent_span;
        let s = self.stream(stream, generation);
        let (t, module) = (s.thread, s.module);
        let mut stack = std::mem::take(&mut s.stack);
        // Links after a gap would attach to the wrong item: keep the source only if it is
        // the item just before this chunk's first id.
        let mut source = s.source.take().filter(|&(_, id)| id.wrapping_add(1) == next_id);
        // How much of the stack is certainly still open. Each lost record moved the depth by at
        // most one, so the lost records (`dropped` of them) left the bottom `depth - dropped`
        // entries alone. If more ids are missing than records were dropped, something else was
        // lost (a damaged frame) and nothing on the stack can be trusted.
        let keep = match s.next_id.take() {
            Some(expected) if next_id.wrapping_sub(expected) <= dropped => depth.saturating_sub(dropped),
            _ => 0,
        };
        let thread = &mut self.process.threads[t];
        thread.dropped = thread.dropped.saturating_add(dropped);
        // Spans open before the chunk that may have ended in lost records: end them where the
        // chunk starts (not marked ended).
        while stack.len() as u64 > keep.min(depth) {
            if let Some(Open::Span(i)) = stack.pop() {
                thread.spans[i].end_ns = ts;
            }
        }
        // Spans begun in lost records and still open: stand-ins keep later nesting right.
        let wanted = depth.min(MAX_STANDINS_PER_CHUNK);
        let short = wanted.saturating_sub(stack.len() as u64).saturating_sub(self.standin_budget);
        if short > 0 {
            let message = format!(
                "chunk of stream {stream} claims {depth} open spans; {short} stand-ins for lost begins \
                 are not made (more than the file's size accounts for)"
            );
            self.warnings.push(Warning { path: self.path.clone(), offset: at, message });
        }
        while (stack.len() as u64) < wanted && self.standin_budget > 0 {
            self.standin_budget -= 1;
            let parent = parent_of(&stack, thread, top_parent);
            stack.push(Open::Span(thread.spans.len()));
            thread.spans.push(Span {
                id: 0,
                parent,
                links: Vec::new(),
                correlation: None,
                detached: false,
                depth: stack.len() as u32 - 1,
                callsite: placeholder.clone(),
                fields: Vec::new(),
                start_ns: ts,
                end_ns: ts,
                ended: false,
            });
        }
        let mut seen = 0u64;
        let async_ends = &mut self.async_ends;
        let callsites = &self.callsites;
        let result = (|| {
            while !c.is_empty() {
                let record_tag = c.byte()?;
                match record_tag {
                    tag::SPAN_BEGIN | tag::EVENT => {
                        let id = c.varint_u32()?;
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        let cs = callsites.get(&(module, id)).cloned().ok_or_else(|| {
                            format!(
                                "record {seen} names callsite {id}, which the string table does not describe"
                            )
                        })?;
                        let fields = read_fields(&mut c, &cs)?;
                        let parent = parent_of(&stack, thread, top_parent);
                        if record_tag == tag::SPAN_BEGIN {
                            let i = thread.spans.len();
                            stack.push(Open::Span(i));
                            let depth = stack.len() as u32 - 1;
                            thread.spans.push(Span {
                                id: next_id,
                                parent,
                                links: Vec::new(),
                                correlation: None,
                                detached: false,
                                depth,
                                callsite: cs,
                                fields,
                                start_ns: ts,
                                end_ns: ts,
                                ended: false,
                            });
                            source = Some((Item::Span(i), next_id));
                        } else {
                            source = Some((Item::Event(thread.events.len()), next_id));
                            thread.events.push(Event {
                                id: next_id,
                                parent,
                                links: Vec::new(),
                                correlation: None,
                                callsite: cs,
                                fields,
                                ts_ns: ts,
                            });
                        }
                        next_id = next_id.wrapping_add(1);
                    }
                    tag::SPAN_END => {
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        // The innermost open span; an entered context left open is abandoned.
                        while let Some(open) = stack.pop() {
                            if let Open::Span(i) = open {
                                thread.spans[i].end_ns = ts;
                                thread.spans[i].ended = true;
                                break;
                            }
                        }
                    }
                    tag::LINK_LOCAL | tag::LINK_FULL => {
                        let target = if record_tag == tag::LINK_LOCAL {
                            let delta = c.varint()?;
                            source.map_or(0, |(_, id)| id.wrapping_sub(delta))
                        } else {
                            u64::from_le_bytes(c.bytes(8)?.try_into().expect("8 bytes"))
                        };
                        match source {
                            Some((Item::Span(i), _)) => thread.spans[i].links.push(target),
                            Some((Item::Event(i), _)) => thread.events[i].links.push(target),
                            None => {}
                        }
                    }
                    tag::CORRELATE => {
                        let value = c.varint()?;
                        match source {
                            Some((Item::Span(i), _)) => thread.spans[i].correlation = Some(value),
                            Some((Item::Event(i), _)) => thread.events[i].correlation = Some(value),
                            None => {}
                        }
                    }
                    tag::ENTER => {
                        let id = u64::from_le_bytes(c.bytes(8)?.try_into().expect("8 bytes"));
                        stack.push(Open::Adopted(id));
                    }
                    tag::EXIT => {
                        if let Some(pos) = stack.iter().rposition(|o| matches!(o, Open::Adopted(_))) {
                            stack.remove(pos);
                        }
                    }
                    tag::DETACH => {
                        let id = u64::from_le_bytes(c.bytes(8)?.try_into().expect("8 bytes"));
                        let pos = stack
                            .iter()
                            .rposition(|o| matches!(o, Open::Span(i) if thread.spans[*i].id == id));
                        if let Some(pos) = pos {
                            if let Open::Span(i) = stack.remove(pos) {
                                thread.spans[i].detached = true;
                            }
                        }
                    }
                    tag::ASYNC_END => {
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        let id = u64::from_le_bytes(c.bytes(8)?.try_into().expect("8 bytes"));
                        async_ends.push((id, ts));
                    }
                    other => return Err(format!("record {seen} has unknown tag 0x{other:02x}")),
                }
                seen += 1;
            }
            Ok(())
        })();
        self.last_ts[t] = self.last_ts[t].max(ts);
        let s = self.streams.get_mut(&(stream, generation)).expect("stream exists");
        s.stack = stack;
        s.source = source;
        s.next_id = result.is_ok().then_some(next_id);
        result?;
        if seen != records {
            return Err(format!("header says {records} records but {seen} were read"));
        }
        Ok(())
    }

    fn finish(mut self) -> Process {
        for s in self.streams.values() {
            let last = self.last_ts[s.thread];
            for open in &s.stack {
                if let Open::Span(i) = *open {
                    let span = &mut self.process.threads[s.thread].spans[i];
                    span.end_ns = last.max(span.start_ns);
                }
            }
        }
        // Detached spans end wherever their future finished; unended ones end at their
        // thread's last record.
        let mut where_: HashMap<u64, (usize, usize)> = HashMap::new();
        for (t, th) in self.process.threads.iter_mut().enumerate() {
            for (i, span) in th.spans.iter_mut().enumerate().filter(|(_, s)| s.detached) {
                span.end_ns = self.last_ts[t].max(span.start_ns);
                where_.insert(span.id, (t, i));
            }
        }
        for &(id, ts) in &self.async_ends {
            if let Some(&(t, i)) = where_.get(&id) {
                let span = &mut self.process.threads[t].spans[i];
                span.end_ns = ts.max(span.start_ns);
                span.ended = true;
            }
        }
        let cal = self.cal;
        let mut thread_drops = 0;
        for t in &mut self.process.threads {
            thread_drops = t.dropped.saturating_add(thread_drops);
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

/// Stand-ins (spans whose begin was lost) one chunk header can ask for.
const MAX_STANDINS_PER_CHUNK: u64 = 1 << 16;

/// Stand-ins a file may ask for beyond one per byte of its DATA payloads.
const STANDIN_ALLOWANCE: u64 = 4096;

/// The parent of what a stream records next: its innermost open span or entered context, or
/// for top-level records the span the process was started under.
fn parent_of(stack: &[Open], thread: &Thread, top: Option<u64>) -> Option<u64> {
    match stack.last() {
        Some(Open::Span(i)) => Some(thread.spans[*i].id).filter(|&p| p != 0),
        Some(Open::Adopted(id)) => Some(*id),
        None => top,
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
