//! # waffle-wire
//!
//! The wire format of `trace.bin`: its one grammar, shared by every writer and reader.
//!
//! Everything both sides must agree on is defined here, once: the file magic and version, the
//! frame envelope ([`envelope`]), every frame payload as a typed value with its encode and
//! decode side by side ([`frames`]: HEADER, CALLSITES, STREAM, DATA's head, CLOCK, END,
//! TAIL's head), the head of a data chunk ([`chunk`]), record tags, field type codes and the
//! varint codec.
//! `docs/wire-format.md` specifies the same bytes in prose; a change here changes that
//! document, [`FORMAT_VERSION`] and the byte-level tests (`core/tests/frames.rs`,
//! `core/tests/encode.rs`) together.
//!
//! ```
//! use waffle_wire::{read_varint, write_varint, zigzag, unzigzag, MAX_VARINT_LEN};
//!
//! // A timestamp delta as the hot path writes it: zigzag, then a LEB128 varint.
//! let mut buf = [0u8; MAX_VARINT_LEN];
//! let n = write_varint(&mut buf, zigzag(-300));
//! assert_eq!(n, 2);
//! let (back, used) = read_varint(&buf[..n]).unwrap();
//! assert_eq!((unzigzag(back), used), (-300, 2));
//! ```
//!
//! Why a crate of its own: the producer (`waffle`, which re-exports it as `waffle::wire`)
//! writes through it, and the reader (`waffle-read`) reads through it without linking the
//! producer's macros, linker sections and queues. A bare-metal recorder that has only `waffle`
//! writes the same frames.
//!
//! Two encodings, by temperature. The cold frames (written once, or once per thread or per
//! callsite) are postcard, from serde derives, behind the `frames` feature (it needs `alloc`,
//! not `std`; without it the crate stays free of allocation). The hot record stream
//! (chunk heads and records, written on the user's thread) keeps hand-written LEB128 varints,
//! the same bytes postcard would write for those integers, without its machinery.

#![no_std]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "frames")]
extern crate alloc;

mod calibration;
pub mod chunk;
#[cfg(feature = "frames")]
pub mod envelope;
#[cfg(feature = "frames")]
mod frame_error;
#[cfg(feature = "frames")]
pub mod frames;
pub mod reserved;
#[cfg(feature = "frames")]
mod text;

pub use calibration::{Calibration, Converter};
pub use chunk::ChunkHead;
#[cfg(feature = "frames")]
pub use envelope::{FrameCrc, FrameHead};
#[cfg(feature = "frames")]
pub use frame_error::{FrameError, Problem};
#[cfg(feature = "frames")]
pub use frames::{
    CallsiteDesc, Callsites, Clock, DataHead, Drops, End, FieldDesc, FramePayload, Header, Stream, TailHead,
};

/// Whether a callsite opens spans or records events.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `span!` and `#[instrument]`.
    Span = 1,
    /// `event!`.
    Event = 2,
}

impl Kind {
    /// The kind for a code read from a file, if it is one.
    pub const fn from_code(code: u8) -> Option<Kind> {
        match code {
            1 => Some(Kind::Span),
            2 => Some(Kind::Event),
            _ => None,
        }
    }
}

/// The first eight bytes of every `trace.bin`. The high byte and the CR/LF pair catch files
/// that went through a text-mode transfer.
pub const MAGIC: [u8; 8] = *b"\x89WFL\r\n\x1a\n";

/// The version of the file format written by this crate, a little-endian `u16` after [`MAGIC`].
pub const FORMAT_VERSION: u16 = 1;

/// Bytes of a frame head: kind (`u8`) and payload length (`u32` LE).
pub const FRAME_HEAD_LEN: usize = 5;
/// Bytes of a frame tail: CRC-32 (IEEE) of head and payload, `u32` LE.
pub const FRAME_TAIL_LEN: usize = 4;
/// The largest payload a reader accepts; a larger length field is treated as corruption.
pub const MAX_FRAME_PAYLOAD: u32 = 16 << 20;

/// Kinds of frame in a `trace.bin`.
pub mod frame {
    /// Process header: pid, names, labels, clock calibration and wall-clock anchor.
    pub const HEADER: u8 = 0x01;
    /// A run of callsite descriptions (the string table).
    pub const CALLSITES: u8 = 0x02;
    /// A stream (thread) description: stream id, OS thread id, thread name.
    pub const STREAM: u8 = 0x03;
    /// A chunk of records from one stream.
    pub const DATA: u8 = 0x04;
    /// A refined clock calibration, written at shutdown; the last one wins.
    pub const CLOCK: u8 = 0x05;
    /// Per-stream totals written at a clean shutdown.
    pub const END: u8 = 0x06;
    /// A snapshot of a stream's staged, not yet pushed records, as one chunk with the head it
    /// will have; superseded by the DATA chunk that later holds them.
    pub const TAIL: u8 = 0x07;

    /// The kind's name, as the format names it ("unknown" for a kind it does not define).
    pub const fn name(kind: u8) -> &'static str {
        match kind {
            HEADER => "HEADER",
            CALLSITES => "CALLSITES",
            STREAM => "STREAM",
            DATA => "DATA",
            CLOCK => "CLOCK",
            END => "END",
            TAIL => "TAIL",
            _ => "unknown",
        }
    }
}

/// Record tags: the first byte of each record inside a data chunk.
pub mod tag {
    /// Span begin: callsite id, timestamp delta, field values. Takes the next id of the stream.
    pub const SPAN_BEGIN: u8 = 0x01;
    /// Span end (of the innermost open span of the stream): timestamp delta.
    pub const SPAN_END: u8 = 0x02;
    /// Event: callsite id, timestamp delta, field values. Takes the next id of the stream.
    pub const EVENT: u8 = 0x03;
    /// Causal link from the stream's latest span or event (the *source*, whose id is the
    /// stream's next id minus one) to a target in the same stream: varint `source - target`.
    pub const LINK_LOCAL: u8 = 0x04;
    /// Causal link from the source to any id: 8 bytes, little-endian.
    pub const LINK_FULL: u8 = 0x05;
    /// Correlation of the source: varint value; the key is the source callsite's
    /// correlation key.
    pub const CORRELATE: u8 = 0x06;
    /// The stream adopts a span (of any thread or process) as the parent of what it records
    /// next: 8-byte little-endian span id. Counts as one level of depth.
    pub const ENTER: u8 = 0x07;
    /// Ends the innermost `ENTER`.
    pub const EXIT: u8 = 0x08;
    /// Takes an open span off the stream's stack, to end later from any stream with
    /// `ASYNC_END`: 8-byte little-endian span id.
    pub const DETACH: u8 = 0x09;
    /// Ends a detached span: timestamp delta, then its 8-byte little-endian id.
    pub const ASYNC_END: u8 = 0x0a;
}

/// Largest encoding of a `u64` varint.
pub const MAX_VARINT_LEN: usize = 10;

/// Bytes of the header at the start of every data chunk after its length, at most: six varints
/// (owner generation, base timestamp, first id, open-span depth, dropped before, records).
pub(crate) const MAX_CHUNK_HEAD_LEN: usize = 6 * MAX_VARINT_LEN;

/// Longest string field value written; longer values are cut at a character boundary.
pub const MAX_STR_LEN: usize = 1024;

/// Type of a field value, as stored in a callsite's schema and, for [`FieldType::Dynamic`]
/// fields, in front of the value in each record.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// The value's type is written in the record, as one byte before the value.
    Dynamic = 0,
    /// Unsigned integer, varint.
    U64 = 1,
    /// Signed integer, zigzag varint.
    I64 = 2,
    /// `f64`, 8 bytes little-endian.
    F64 = 3,
    /// One byte, 0 or 1.
    Bool = 4,
    /// Varint byte length, then UTF-8 bytes.
    Str = 5,
}

impl FieldType {
    /// The type for a code read from a file, if it is one.
    pub const fn from_code(code: u8) -> Option<FieldType> {
        Some(match code {
            0 => FieldType::Dynamic,
            1 => FieldType::U64,
            2 => FieldType::I64,
            3 => FieldType::F64,
            4 => FieldType::Bool,
            5 => FieldType::Str,
            _ => return None,
        })
    }

    /// Lower-case name, as shown by tools.
    pub const fn name(self) -> &'static str {
        match self {
            FieldType::Dynamic => "dynamic",
            FieldType::U64 => "u64",
            FieldType::I64 => "i64",
            FieldType::F64 => "f64",
            FieldType::Bool => "bool",
            FieldType::Str => "str",
        }
    }
}

/// Zigzag-maps a signed value so that small magnitudes make short varints.
#[inline(always)]
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline(always)]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Why a varint could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended inside the varint.
    Truncated,
    /// More than ten bytes, or bits beyond 64.
    Overlong,
}

/// Reads a LEB128 varint from the front of `input`, returning it and the bytes it used.
#[inline]
pub fn read_varint(input: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut value: u64 = 0;
    for (i, &byte) in input.iter().enumerate().take(MAX_VARINT_LEN) {
        let bits = u64::from(byte & 0x7f);
        if i == MAX_VARINT_LEN - 1 && byte > 1 {
            return Err(VarintError::Overlong);
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    if input.len() >= MAX_VARINT_LEN {
        Err(VarintError::Overlong)
    } else {
        Err(VarintError::Truncated)
    }
}

/// Writes `value` as a LEB128 varint into `out`, returning the bytes used (at most 10).
///
/// `out` must hold at least [`MAX_VARINT_LEN`] bytes or the varint's length, whichever is less;
/// this is for cold paths (headers). The hot path writes through `encode::Writer`.
pub fn write_varint(out: &mut [u8], mut value: u64) -> usize {
    let mut i = 0;
    while value >= 0x80 {
        out[i] = (value as u8) | 0x80;
        value >>= 7;
        i += 1;
    }
    out[i] = value as u8;
    i + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_edges() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut buf = [0u8; MAX_VARINT_LEN];
            let n = write_varint(&mut buf, v);
            assert_eq!(read_varint(&buf[..n]), Ok((v, n)));
            assert_eq!(read_varint(&buf[..n - 1]), Err(VarintError::Truncated));
        }
    }

    #[test]
    fn varint_rejects_overlong() {
        assert_eq!(read_varint(&[0xff; 11]), Err(VarintError::Overlong));
        // Ten bytes whose last carries bits beyond 64.
        let mut bad = [0xffu8; 10];
        bad[9] = 0x02;
        assert_eq!(read_varint(&bad), Err(VarintError::Overlong));
    }

    #[test]
    fn zigzag_small_magnitudes_are_small() {
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
        for v in [i64::MIN, -5, 0, 5, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
