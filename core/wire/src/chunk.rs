//! The head of a data chunk, and its length prefix: hand-written varints, like the records
//! after them (this is the hot stream, written without allocation by every thread that
//! records; the varints are LEB128, the same bytes postcard would write).
//!
//! ```text
//! body length  varint    bytes after it (the head fields below and the records)
//! generation   varint32  owner generation of the slot
//! base ts      varint    the tick the first record's delta is taken from
//! first id     varint    the id the chunk's first span or event takes
//! depth        varint    spans open on the stream before the first record
//! dropped      varint    records lost since the previous chunk that reached the queue
//! records      varint    records in the chunk
//! ```

use super::{read_varint, write_varint, VarintError, MAX_CHUNK_HEAD_LEN, MAX_VARINT_LEN};
use core::fmt;

/// Bytes of a chunk's length prefix and head, at most.
pub const MAX_CHUNK_PREFIX_LEN: usize = MAX_VARINT_LEN + MAX_CHUNK_HEAD_LEN;

/// What a chunk carries for a decoder to continue counting on its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkHead {
    /// The owner generation of the slot that wrote the chunk.
    pub generation: u32,
    /// The tick count the first record's delta is taken from.
    pub base_ts: u64,
    /// The id the chunk's first span or event takes.
    pub first_id: u64,
    /// Spans (and entered contexts) open on the stream before the first record.
    pub depth: u64,
    /// Records lost since the previous chunk that reached the queue.
    pub dropped: u64,
    /// Records in the chunk.
    pub records: u64,
}

impl ChunkHead {
    /// Writes into `out` the body length (this head's bytes plus `records_len`) and the head,
    /// and returns them: what goes before the records.
    #[inline]
    pub fn encode<'o>(&self, records_len: usize, out: &'o mut [u8; MAX_CHUNK_PREFIX_LEN]) -> &'o [u8] {
        // The head goes after room for the longest length; the length is then written right
        // before it.
        let mut n = MAX_VARINT_LEN;
        let fields =
            [u64::from(self.generation), self.base_ts, self.first_id, self.depth, self.dropped, self.records];
        for v in fields {
            n += write_varint(&mut out[n..], v);
        }
        let mut len = [0u8; MAX_VARINT_LEN];
        let len_len = write_varint(&mut len, (n - MAX_VARINT_LEN + records_len) as u64);
        let start = MAX_VARINT_LEN - len_len;
        out[start..MAX_VARINT_LEN].copy_from_slice(&len[..len_len]);
        &out[start..n]
    }

    /// The head at the start of a chunk's `body`, and the bytes it took.
    pub fn decode(body: &[u8]) -> Result<(ChunkHead, usize), ChunkError> {
        let mut pos = 0;
        let mut next = || -> Result<u64, ChunkError> {
            let (v, n) = read_varint(&body[pos..]).map_err(|error| ChunkError::Varint { at: pos, error })?;
            pos += n;
            Ok(v)
        };
        let generation = next()?;
        let generation = u32::try_from(generation).map_err(|_| ChunkError::Generation(generation))?;
        let head = ChunkHead {
            generation,
            base_ts: next()?,
            first_id: next()?,
            depth: next()?,
            dropped: next()?,
            records: next()?,
        };
        Ok((head, pos))
    }
}

/// The next chunk of a DATA payload's chunks: its body (head and records) and the chunks
/// after it.
pub fn take_chunk(chunks: &[u8]) -> Result<(&[u8], &[u8]), ChunkError> {
    let (len, n) = read_varint(chunks).map_err(|error| ChunkError::Varint { at: 0, error })?;
    let rest = &chunks[n..];
    match usize::try_from(len).ok().filter(|&l| l <= rest.len()) {
        Some(l) => Ok(rest.split_at(l)),
        None => Err(ChunkError::Body { claimed: len, left: rest.len() }),
    }
}

/// Why a chunk's length or head did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// A bad varint at this byte of the head.
    Varint {
        /// Byte of the body (or of the chunks, for the length).
        at: usize,
        /// What was wrong with it.
        error: VarintError,
    },
    /// A generation beyond `u32`.
    Generation(u64),
    /// A body length beyond the bytes left in the frame.
    Body {
        /// The length the chunk claims.
        claimed: u64,
        /// Bytes after the length.
        left: usize,
    },
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkError::Varint { at, error } => write!(f, "bad varint at byte {at} ({error:?})"),
            ChunkError::Generation(g) => write!(f, "generation {g} is out of range"),
            ChunkError::Body { claimed, left } => {
                write!(f, "says its body is {claimed} bytes but only {left} remain in the frame")
            }
        }
    }
}
