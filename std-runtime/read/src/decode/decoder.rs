//! The decoder's state for one file: its callsites, its streams, its detached spans; and what
//! each kind of frame does to it. One chunk's records are in `chunk.rs`.

use super::{
    fields::Fields,
    stream::{FileEnd, Hand, Sink},
    stream_state::{Open, StreamState},
};
use crate::{model::Callsite, reader::Warning};
use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    sync::Arc,
};
use waffle_wire::{
    self as wire, chunk::take_chunk, frame, CallsiteDesc, Clock, DataHead, End, FieldType, FrameError,
    FramePayload, Kind, Stream, FRAME_HEAD_LEN,
};

mod chunk;
mod tail;

use tail::{EagerTails, HeldTails};

/// Callsite ids below this are looked up in a vector; higher ones (never written by waffle's
/// runtimes, which count from 0) in a map, so that a hostile id cannot size the vector.
const DENSE_CALLSITES: u32 = 1 << 16;

/// The callsites of a file, by `(module, id)`, as indexes into [`Decoder::sites`].
#[derive(Clone, Default)]
pub(super) struct Callsites {
    dense: Vec<(u32, Vec<u32>)>,
    sparse: HashMap<(u32, u32), u32>,
}

impl Callsites {
    /// The callsites of `module`, for the records of one stream.
    #[inline]
    pub(super) fn module(&self, module: u32) -> ModuleSites<'_> {
        let dense = self.dense.iter().find(|(m, _)| *m == module).map_or(&[][..], |(_, ids)| &ids[..]);
        ModuleSites { dense, module, all: self }
    }

    fn insert(&mut self, module: u32, id: u32, index: u32) {
        if id >= DENSE_CALLSITES {
            self.sparse.insert((module, id), index);
            return;
        }
        let pos = match self.dense.iter().position(|(m, _)| *m == module) {
            Some(pos) => pos,
            None => {
                self.dense.push((module, Vec::new()));
                self.dense.len() - 1
            }
        };
        let ids = &mut self.dense[pos].1;
        if ids.len() <= id as usize {
            ids.resize(id as usize + 1, 0);
        }
        ids[id as usize] = index;
    }
}

/// The callsites of one module.
pub(super) struct ModuleSites<'a> {
    dense: &'a [u32],
    module: u32,
    all: &'a Callsites,
}

impl ModuleSites<'_> {
    /// The index of callsite `id`, if the file described it.
    #[inline]
    pub(super) fn get(&self, id: u32) -> Option<u32> {
        match self.dense.get(id as usize) {
            Some(&i) if i != 0 => Some(i),
            _ if id < DENSE_CALLSITES => None,
            _ => self.all.sparse.get(&(self.module, id)).copied(),
        }
    }
}

/// A detached span waiting for its ASYNC_END.
#[derive(Clone)]
pub(super) struct Detached<T> {
    pub(super) thread: usize,
    pub(super) start: u64,
    pub(super) span: T,
}

/// Ends of detached spans read before the span was detached (its stream's chunk came later),
/// kept at most this many; a file whose ASYNC_END records name spans that are never detached
/// cannot make them pile up.
pub(super) const MAX_EARLY_ENDS: usize = 1 << 16;

/// The state of one file's decoding.
pub(super) struct Decoder<T> {
    pub(super) path: PathBuf,
    /// The header's parent span: the parent of top-level records.
    pub(super) top_parent: Option<u64>,
    pub(super) callsites: Callsites,
    /// Callsites by index; 0 is the stand-ins'.
    pub(super) sites: Vec<Arc<Callsite>>,
    /// Each callsite's field types, by index like `sites`: read for every record, so kept
    /// next to each other rather than behind each callsite's pointer.
    pub(super) schemas: Vec<Box<[FieldType]>>,
    /// Which items of each callsite the sink is handed, by index like `sites` (only for a
    /// sink not handed every item).
    pub(super) hands: Vec<Hand>,
    /// Whether any callsite's items are handed otherwise than [`Hand::Referring`]: when none
    /// is (most traces), the record loop does not look.
    pub(super) hands_any: bool,
    /// Thread index by `(stream, generation)`.
    streams: HashMap<(u32, u32), usize>,
    pub(super) threads: Vec<StreamState<T>>,
    /// Detached spans not yet ended, by id (ordered, so that the end of the file ends them in a
    /// fixed order).
    pub(super) detached: BTreeMap<u64, Detached<T>>,
    /// ASYNC_END ticks by span id, for spans not detached yet.
    pub(super) early_ends: HashMap<u64, u64>,
    /// Whether the file was told that `early_ends` is full.
    pub(super) early_ends_warned: bool,
    /// TAIL chunks not yet superseded or decoded, by stream (`tail.rs`).
    pub(super) held: HeldTails,
    /// TAIL chunks decoded when read, for a sink that asks ([`Sink::EAGER_TAILS`]).
    pub(super) eager: EagerTails,
    dropped_end: u64,
    complete: bool,
    /// Stand-ins the decoder may still make: a fixed allowance plus one per byte of DATA read,
    /// so that chunk headers claiming deep stacks cannot make memory grow faster than the file.
    pub(super) standin_budget: u64,
    /// The fields of a stand-in: none.
    pub(super) no_fields: Fields,
    pub(super) warnings: Vec<Warning>,
}

/// Stand-ins a file may ask for beyond one per [`DATA_BYTES_PER_STANDIN`] bytes of its DATA
/// payloads.
///
/// Under the fuzzer (`cfg(fuzzing)`, set by cargo-fuzz) both are smaller: the budget's logic is
/// the same, but a mutated chunk head no longer costs thousands of stand-in spans a run, which
/// held the targets that decode to a few hundred runs a second.
const STANDIN_ALLOWANCE: u64 = if cfg!(fuzzing) { 64 } else { 4096 };
const DATA_BYTES_PER_STANDIN: u64 = if cfg!(fuzzing) { 16 } else { 1 };

impl<T: Copy + Default> Decoder<T> {
    pub(super) fn new(path: &Path, top_parent: Option<u64>) -> Self {
        let placeholder = Arc::new(Callsite {
            name: "(begin lost: records dropped)".into(),
            module: "".into(),
            file: "".into(),
            line: 0,
            kind: Kind::Span,
            fields: Vec::new(),
            correlate: "".into(),
        });
        Decoder {
            path: path.to_owned(),
            top_parent,
            callsites: Callsites::default(),
            sites: vec![placeholder],
            schemas: vec![Box::new([])],
            hands: vec![Hand::Referring],
            hands_any: false,
            streams: HashMap::new(),
            threads: Vec::new(),
            detached: BTreeMap::new(),
            early_ends: HashMap::new(),
            early_ends_warned: false,
            held: HeldTails::new(),
            eager: EagerTails::new(),
            dropped_end: 0,
            complete: false,
            standin_budget: STANDIN_ALLOWANCE,
            no_fields: Fields::new(),
            warnings: Vec::new(),
        }
    }

    /// A copy of the whole state, but the warnings so far: decoding the rest of the file from
    /// the copy hands a sink what decoding it from `self` would (`resume.rs`).
    pub(super) fn snapshot(&self) -> Decoder<T> {
        Decoder {
            path: self.path.clone(),
            top_parent: self.top_parent,
            callsites: self.callsites.clone(),
            sites: self.sites.clone(),
            schemas: self.schemas.clone(),
            hands: self.hands.clone(),
            hands_any: self.hands_any,
            streams: self.streams.clone(),
            threads: self.threads.clone(),
            detached: self.detached.clone(),
            early_ends: self.early_ends.clone(),
            early_ends_warned: self.early_ends_warned,
            held: self.held.clone(),
            eager: self.eager.clone(),
            dropped_end: self.dropped_end,
            complete: self.complete,
            standin_budget: self.standin_budget,
            no_fields: Fields::new(),
            warnings: Vec::new(),
        }
    }

    /// The id of the item `thread` holds back for its links, if it holds one (`resume.rs`).
    pub(super) fn pending_id(&self, thread: usize) -> Option<u64> {
        let p = &self.threads.get(thread)?.pending;
        p.active.then_some(p.id)
    }

    /// Threads (streams) met so far.
    pub(super) fn thread_count(&self) -> usize {
        self.threads.len()
    }

    pub(super) fn frame<S: Sink<Span = T>>(
        &mut self,
        kind: u8,
        offset: u64,
        payload: &[u8],
        sink: &mut S,
    ) -> Result<(), String> {
        match kind {
            frame::CALLSITES => self.read_callsites(payload, sink),
            frame::STREAM => {
                let st = Stream::decode(payload).map_err(skipped)?;
                let t = self.thread(st.stream, st.generation, sink);
                self.threads[t].module = st.module;
                sink.thread_named(t, st.tid, &st.name);
                Ok(())
            }
            frame::DATA => {
                self.standin_budget =
                    self.standin_budget.saturating_add(payload.len() as u64 / DATA_BYTES_PER_STANDIN);
                let (DataHead { stream }, mut chunks) = DataHead::split(payload).map_err(skipped)?;
                while !chunks.is_empty() {
                    let body_at = offset + (FRAME_HEAD_LEN + payload.len() - chunks.len()) as u64;
                    let body = match take_chunk(chunks) {
                        Ok((body, rest)) => {
                            chunks = rest;
                            body
                        }
                        Err(e) => {
                            let message =
                                format!("chunk of stream {stream} {e}; the rest of the frame is skipped");
                            self.warnings.push(Warning { path: self.path.clone(), offset: body_at, message });
                            break;
                        }
                    };
                    let continued = match S::EAGER_TAILS {
                        true => self.continue_tail(stream, body, body_at, sink),
                        false => Ok(false),
                    };
                    self.settle(stream, Some(body), sink);
                    if let Err(msg) = continued.and_then(|done| match done {
                        true => Ok(()),
                        false => self.chunk(stream, body, body_at, sink),
                    }) {
                        let message =
                            format!("chunk of stream {stream}: {msg}; the rest of the chunk is skipped");
                        self.warnings.push(Warning { path: self.path.clone(), offset: body_at, message });
                    }
                }
                Ok(())
            }
            frame::CLOCK => {
                let clock = Clock::decode(payload).map_err(|e| format!("{e}; ignored"))?;
                sink.calibration(clock.calibration);
                Ok(())
            }
            frame::TAIL => self.tail(offset, payload, sink),
            frame::END => {
                self.settle_all(sink);
                let end = End::decode(payload).map_err(skipped)?;
                self.dropped_end = self.dropped_end.saturating_add(end.total());
                self.complete = true;
                Ok(())
            }
            frame::HEADER => Err("a second header frame; ignored".into()),
            k => Err(format!("unknown frame kind {k}; skipped")),
        }
    }

    /// Takes the callsites of a CALLSITES frame up to the first that does not decode.
    fn read_callsites<S: Sink<Span = T>>(&mut self, payload: &[u8], sink: &mut S) -> Result<(), String> {
        let (frame, error) = wire::Callsites::decode_prefix(payload);
        for (i, desc) in frame.callsites.into_iter().enumerate() {
            let id = frame.first.saturating_add(i as u32);
            let cs = model_callsite(desc);
            self.callsites.insert(frame.module, id, self.sites.len() as u32);
            self.schemas.push(cs.fields.iter().map(|f| f.ty).collect());
            let cs = Arc::new(cs);
            let index = self.sites.len() as u32;
            // A sink handed every item with its values needs no say; one that steps over values may
            // want them for some callsites (device tracks' events, `track.rs`).
            let hand = if S::EVERY_ITEM && S::FIELDS { Hand::Referring } else { sink.hand(index, &cs) };
            self.hands_any |= hand != Hand::Referring;
            self.hands.push(hand);
            self.sites.push(cs);
        }
        match error {
            None => Ok(()),
            Some(e) => {
                Err(format!("{e}; the callsites before it are kept, the rest of the frame is ignored"))
            }
        }
    }

    /// The thread of `(stream, generation)`, made (and announced) on first sight.
    pub(super) fn thread<S: Sink<Span = T>>(&mut self, stream: u32, generation: u32, sink: &mut S) -> usize {
        let threads = &mut self.threads;
        *self.streams.entry((stream, generation)).or_insert_with(|| {
            threads.push(StreamState::new());
            sink.thread(threads.len() - 1, stream);
            threads.len() - 1
        })
    }

    /// Ends what is still open: pending items are handed over, spans left on the stacks end at
    /// their thread's last tick, and detached spans never ended end there too.
    pub(super) fn finish<S: Sink<Span = T>>(&mut self, sink: &mut S) {
        self.settle_all(sink);
        for t in 0..self.threads.len() {
            self.threads[t].flush(t, &self.sites, sink);
        }
        for (t, s) in self.threads.iter_mut().enumerate() {
            while let Some(open) = s.stack.pop() {
                match open {
                    Open::Span { start, span, .. } if S::EVERY_ITEM => {
                        sink.span_end(t, span, s.last_ts.max(start), false)
                    }
                    _ => {}
                }
            }
        }
        for d in std::mem::take(&mut self.detached).into_values() {
            sink.detached_end(d.thread, d.span, self.threads[d.thread].last_ts.max(d.start), false);
        }
        for (t, s) in self.threads.iter().enumerate() {
            let counts = s.begins.iter().enumerate().filter(|&(_, &n)| n > 0);
            counts.for_each(|(index, &n)| sink.counted(t, index as u32, n));
        }
        sink.finish(&FileEnd { dropped: self.dropped_end, complete: self.complete });
    }
}

/// A frame's payload that did not decode: the frame is skipped.
fn skipped(e: FrameError) -> String {
    format!("{e}; the frame is skipped")
}

/// The model's callsite of a CALLSITES entry.
fn model_callsite(d: CallsiteDesc<'_>) -> Callsite {
    d.into_owned()
}
