//! Why a frame payload did not decode, and where: postcard's errors carry no position and no
//! message (a serde error becomes a bare `SerdeDeCustom`), so payloads are decoded here through
//! a postcard deserializer whose remaining input gives the byte it stopped at.

use super::frame;
use core::fmt;
use serde::Deserialize;

/// Why a frame payload did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// The frame kind.
    pub kind: u8,
    /// The byte of the payload where decoding stopped, if the problem has a place.
    pub at: Option<usize>,
    /// What was wrong.
    pub problem: Problem,
}

/// What was wrong with a frame payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The payload ends inside a value, or a length or count claims more than the `left`
    /// bytes that remain.
    Ends {
        /// Bytes of the payload after the position.
        left: usize,
    },
    /// A varint longer than its type allows (a `u32` beyond 2^32, a `u64` beyond 10 bytes).
    BadVarint,
    /// A kind or type code that is none of the format's.
    BadCode(u8),
    /// A callsite kind that is neither span (1) nor event (2).
    UnknownKind {
        /// The callsite's id.
        callsite: u32,
        /// The code found.
        code: u8,
    },
    /// A field type code that is none of 0 to 5.
    UnknownFieldType {
        /// The callsite's id.
        callsite: u32,
        /// The code found.
        code: u8,
    },
    /// A clock calibration whose ticks or ns is 0.
    ZeroCalibration,
    /// Anything else postcard refuses.
    Malformed,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} payload", frame::name(self.kind))?;
        if let Some(at) = self.at {
            write!(f, " at byte {at}")?;
        }
        match self.problem {
            Problem::Ends { left } => {
                write!(f, ": ends inside a value (a length or count claims more than the {left} bytes left)")
            }
            Problem::BadVarint => f.write_str(": a varint too long for its type"),
            Problem::BadCode(code) => write!(f, ": unknown code {code}"),
            Problem::UnknownKind { callsite, code } => {
                write!(f, ": callsite {callsite} has unknown kind {code}")
            }
            Problem::UnknownFieldType { callsite, code } => {
                write!(f, ": a field of callsite {callsite} has unknown type code {code}")
            }
            Problem::ZeroCalibration => f.write_str(": clock calibration with a zero interval"),
            Problem::Malformed => f.write_str(": malformed"),
        }
    }
}

/// Decodes a `T` from the front of `payload` (which starts at byte `base` of the frame's
/// payload), returning it and the bytes after it.
pub(super) fn take<'a, T: Deserialize<'a>>(
    kind: u8,
    payload: &'a [u8],
    base: usize,
) -> Result<(T, &'a [u8]), FrameError> {
    let mut de = postcard::Deserializer::from_bytes(payload);
    let result = T::deserialize(&mut de);
    let rest = de.finalize().unwrap_or(&[]);
    let at = payload.len() - rest.len();
    let problem = match result {
        Ok(value) => return Ok((value, rest)),
        Err(postcard::Error::DeserializeUnexpectedEnd) => Problem::Ends { left: rest.len() },
        Err(postcard::Error::DeserializeBadVarint) => Problem::BadVarint,
        // Only the codes' `with` functions make serde errors; the code is the byte just read.
        Err(postcard::Error::SerdeDeCustom) if at > 0 => Problem::BadCode(payload[at - 1]),
        Err(_) => Problem::Malformed,
    };
    let at = if matches!(problem, Problem::BadCode(_)) { at - 1 } else { at };
    Err(FrameError { kind, at: Some(base + at), problem })
}
