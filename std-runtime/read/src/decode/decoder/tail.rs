//! TAIL frames: copies of records a thread had staged and not pushed, held until the file says
//! whether a later chunk holds them.
//!
//! The recorder writes a TAIL for a thread that stopped recording (blocked, or still running at
//! stop) with the head its chunk will have. Later the thread may push that chunk after all —
//! the same records and more — or never (the process was killed, or the thread never woke). So
//! a TAIL of stream `s` is held, one per stream, and when the next thing about `s` arrives:
//!
//! - a DATA chunk of `s` with the same generation and first id supersedes it (that chunk holds
//!   the same records and more), and the TAIL is dropped unread;
//! - a newer TAIL of the same chunk replaces it;
//! - anything else (another chunk of `s`, a TAIL of another chunk, END, the end of the file)
//!   decodes it then, as a chunk, before what came.
//!
//! This happens where chunks are fed to the record decoding, once, so every sink (the model,
//! both passes of the streaming exporters) sees the same records.
//!
//! A sink that reads a file while it is written ([`Sink::EAGER_TAILS`], `follow`) cannot wait
//! for the thread to record again: a TAIL is decoded when it is read, and the chunk's later
//! copies (a newer TAIL, then the DATA chunk) are decoded only beyond the records already
//! decoded, which they hold first, byte for byte ([`Eager`]). A chunk that turns out not to
//! continue the copy is decoded whole, with a warning.

use super::{chunk::Resume, Decoder};
use crate::decode::stream::Sink;
use crate::reader::Warning;
use std::collections::BTreeMap;
use waffle_wire::{chunk::take_chunk, ChunkHead, TailHead, FRAME_HEAD_LEN};

/// A TAIL's chunk waiting for the file to say whether it is superseded.
#[derive(Clone)]
pub(in crate::decode) struct Held {
    /// The chunk body's offset in the file, for warnings.
    at: u64,
    /// Its owner generation and first id: what a superseding chunk has too.
    key: (u32, u64),
    /// The chunk body (head and records).
    body: Vec<u8>,
}

/// The held TAILs of a file, by stream.
pub(in crate::decode) type HeldTails = BTreeMap<u32, Held>;

/// A TAIL decoded when it was read (eager mode): its chunk's key, its records, where the
/// decoding stopped.
#[derive(Clone)]
pub(in crate::decode) struct Eager {
    key: (u32, u64),
    records: Vec<u8>,
    resume: Resume,
}

/// The eagerly decoded TAILs of a file, by stream.
pub(in crate::decode) type EagerTails = BTreeMap<u32, Eager>;

/// The records of a chunk body (after its head), if its head decodes.
fn records(body: &[u8]) -> Option<&[u8]> {
    ChunkHead::decode(body).ok().map(|(_, len)| &body[len..])
}

/// The owner generation and first id of a chunk body, if its head decodes.
fn key(body: &[u8]) -> Option<(u32, u64)> {
    ChunkHead::decode(body).ok().map(|(h, _)| (h.generation, h.first_id))
}

impl<T: Copy + Default> Decoder<T> {
    /// A TAIL frame at `offset`: hold its chunk, deciding the fate of the one held before.
    pub(in crate::decode) fn tail<S: Sink<Span = T>>(
        &mut self,
        offset: u64,
        payload: &[u8],
        sink: &mut S,
    ) -> Result<(), String> {
        let (TailHead { stream }, chunk) =
            TailHead::split(payload).map_err(|e| format!("{e}; the frame is skipped"))?;
        let at = offset + (FRAME_HEAD_LEN + payload.len() - chunk.len()) as u64;
        let body = match take_chunk(chunk) {
            Ok((body, _)) => body,
            Err(e) => return Err(format!("TAIL chunk of stream {stream} {e}; the frame is skipped")),
        };
        let Some(key) = key(body) else {
            // Decoding it now reports what is wrong with its head.
            self.settle(stream, None, sink);
            return self
                .chunk(stream, body, at, sink)
                .map_err(|m| format!("TAIL chunk of stream {stream}: {m}"));
        };
        self.standin_budget = self.standin_budget.saturating_add(payload.len() as u64);
        if S::EAGER_TAILS {
            return self.eager(stream, key, body, at, sink);
        }
        if self.held.get(&stream).is_some_and(|h| h.key == key) {
            self.held.remove(&stream); // replaced by this newer copy
        }
        self.settle(stream, None, sink);
        self.held.insert(stream, Held { at, key, body: body.to_vec() });
        Ok(())
    }

    /// Before a chunk of `stream` whose body is `next` (or, with `None`, before anything else
    /// about the stream): drops the held TAIL if `next` supersedes it, else decodes it now.
    pub(in crate::decode) fn settle<S: Sink<Span = T>>(
        &mut self,
        stream: u32,
        next: Option<&[u8]>,
        sink: &mut S,
    ) {
        let Some(held) = self.held.remove(&stream) else { return };
        if next.and_then(key) == Some(held.key) {
            return; // the chunk holds the same records and more
        }
        if let Err(msg) = self.chunk(stream, &held.body, held.at, sink) {
            let message = format!("TAIL chunk of stream {stream}: {msg}; the rest of the chunk is skipped");
            self.warnings.push(Warning { path: self.path.clone(), offset: held.at, message });
        }
    }

    /// Eager mode: decodes the TAIL chunk `body` of `stream` now, or only what it holds beyond
    /// an earlier copy of the same chunk.
    fn eager<S: Sink<Span = T>>(
        &mut self,
        stream: u32,
        key: (u32, u64),
        body: &[u8],
        at: u64,
        sink: &mut S,
    ) -> Result<(), String> {
        let from = match self.eager.remove(&stream) {
            Some(e) if e.key == key => match records(body) {
                Some(r) if r.starts_with(&e.records) => Some(e.resume),
                _ => {
                    self.eager.insert(stream, e);
                    return Err(format!(
                        "TAIL chunk of stream {stream} does not continue its earlier copy; skipped"
                    ));
                }
            },
            _ => None,
        };
        let resume = self
            .chunk_from(stream, body, at, from, sink)
            .map_err(|m| format!("TAIL chunk of stream {stream}: {m}"))?;
        let records = records(body).unwrap_or_default().to_vec();
        self.eager.insert(stream, Eager { key, records, resume });
        Ok(())
    }

    /// Eager mode, before the DATA chunk `body` of `stream`: if it is the chunk a TAIL copy was
    /// decoded from, decodes what it holds beyond the copy and returns true; otherwise forgets
    /// the copy (decoded already) and returns false.
    pub(in crate::decode) fn continue_tail<S: Sink<Span = T>>(
        &mut self,
        stream: u32,
        body: &[u8],
        at: u64,
        sink: &mut S,
    ) -> Result<bool, String> {
        let Some(e) = self.eager.remove(&stream) else { return Ok(false) };
        if key(body) != Some(e.key) {
            return Ok(false);
        }
        if !records(body).is_some_and(|r| r.starts_with(&e.records)) {
            let message = format!("chunk of stream {stream} does not continue its TAIL copy; decoded whole");
            self.warnings.push(Warning { path: self.path.clone(), offset: at, message });
            return Ok(false);
        }
        self.chunk_from(stream, body, at, Some(e.resume), sink).map(|_| true)
    }

    /// Decodes every held TAIL (at END, or the end of the file), in stream order.
    pub(in crate::decode) fn settle_all<S: Sink<Span = T>>(&mut self, sink: &mut S) {
        let streams: Vec<u32> = self.held.keys().copied().collect();
        for stream in streams {
            self.settle(stream, None, sink);
        }
        self.eager.clear();
    }
}
