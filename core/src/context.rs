//! Carrying "what am I part of" across threads, tasks and processes.
//!
//! A [`Context`] is a trace id and a span id. [`Context::current`] takes the innermost open span
//! of this thread; [`Context::enter`] in another thread makes that span the parent of what the
//! thread records until the guard drops. Between processes a context travels as a W3C
//! `traceparent` header ([`Context::write_traceparent`], [`Context::from_traceparent`]) or as 25
//! bytes ([`Context::to_bytes`]).
//!
//! A context whose span was dropped by head sampling holds a sampled-out id
//! ([`SpanId::is_sampled_out`]): its `traceparent` has the sampled flag clear, entering it drops
//! what is recorded inside, and a `traceparent` read with the flag clear gives such a context
//! (the span id's lower 32 bits are then zeroed), so that the receiving process follows the
//! decision made where the trace started.

use crate::{
    ids::{SpanId, TraceId},
    local::with_local,
    runtime,
};
use core::{fmt, marker::PhantomData};

/// A trace id and the span that work done elsewhere belongs to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Context {
    trace_id: TraceId,
    span_id: SpanId,
}

/// Why a serialised context could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextError {
    /// Too short, or the wrong length for its version.
    Length,
    /// An unknown or invalid version (`ff`, or not hex).
    Version,
    /// The trace id is not 32 lower-case hex digits, or is all zeros.
    TraceId,
    /// The span id is not 16 lower-case hex digits, or is all zeros.
    SpanId,
    /// The flags are not 2 hex digits.
    Flags,
    /// A separator is missing.
    Format,
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContextError::Length => "traceparent has the wrong length",
            ContextError::Version => "traceparent version is invalid",
            ContextError::TraceId => "traceparent trace id is not 32 lower-case hex digits or is all zero",
            ContextError::SpanId => "traceparent parent id is not 16 lower-case hex digits or is all zero",
            ContextError::Flags => "traceparent flags are not 2 hex digits",
            ContextError::Format => "traceparent fields must be separated by '-'",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ContextError {}

/// The bytes of a `traceparent` header: `00-<trace id>-<span id>-01`.
#[derive(Clone, Copy)]
pub struct Traceparent([u8; 55]);

impl Traceparent {
    /// The header text.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits and '-' are ever written.
        core::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl fmt::Display for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Traceparent({})", self.as_str())
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn put_hex(out: &mut [u8], v: u128, digits: usize) {
    for (i, slot) in out[..digits].iter_mut().enumerate() {
        *slot = HEX[((v >> (4 * (digits - 1 - i))) & 0xf) as usize];
    }
}

fn parse_hex(s: &[u8]) -> Option<u128> {
    s.iter().try_fold(0u128, |acc, &c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        Some(acc << 4 | u128::from(d))
    })
}

impl Context {
    /// A context naming `span_id` in trace `trace_id`.
    pub const fn new(trace_id: TraceId, span_id: SpanId) -> Context {
        Context { trace_id, span_id }
    }

    /// This thread's context: the session's trace id and the innermost open span (or entered
    /// context). Its span id is null outside any span.
    pub fn current() -> Context {
        let span = with_local(|l| l.current()).unwrap_or(0);
        Context { trace_id: runtime::trace_id(), span_id: SpanId::from_u64(span) }
    }

    /// The trace id.
    pub const fn trace_id(&self) -> TraceId {
        self.trace_id
    }

    /// The span id.
    pub const fn span_id(&self) -> SpanId {
        self.span_id
    }

    /// Whether it names no span.
    pub const fn is_null(&self) -> bool {
        self.span_id.is_null()
    }

    /// Whether its span is recorded (or may be): `false` if head sampling left it out, here
    /// or in the process the context came from (`traceparent`'s sampled flag clear).
    pub const fn is_sampled(&self) -> bool {
        !self.span_id.is_sampled_out()
    }

    /// Makes this context's span the parent of what this thread records until the guard drops.
    /// A null context changes nothing.
    pub fn enter(&self) -> ContextGuard {
        let state = runtime::state();
        let prev =
            if state == 0 { None } else { with_local(|l| l.enter(state, self.span_id.to_u64())).flatten() };
        ContextGuard { prev, _not_send: PhantomData }
    }

    /// The W3C `traceparent` header for this context: the sampled flag (`01`) is set unless
    /// the span was sampled out (`00`).
    pub fn write_traceparent(&self) -> Traceparent {
        let mut b = [b'-'; 55];
        b[0] = b'0';
        b[1] = b'0';
        put_hex(&mut b[3..35], self.trace_id.to_u128(), 32);
        put_hex(&mut b[36..52], u128::from(self.span_id.to_u64()), 16);
        b[53] = b'0';
        b[54] = if self.is_sampled() { b'1' } else { b'0' };
        Traceparent(b)
    }

    /// The W3C `traceparent` header for this context, as a `String`.
    #[cfg(feature = "std")]
    pub fn to_traceparent(&self) -> std::string::String {
        std::string::String::from(self.write_traceparent().as_str())
    }

    /// Reads a W3C `traceparent` header (version 00, or a later version's first four fields).
    /// With the sampled flag clear, the span id becomes a sampled-out id (its lower 32 bits
    /// zeroed, see [`SpanId::is_sampled_out`]), so that this process drops what it does for
    /// that span.
    pub fn from_traceparent(header: &str) -> Result<Context, ContextError> {
        let b = header.trim().as_bytes();
        if b.len() < 55 {
            return Err(ContextError::Length);
        }
        let version = parse_hex(&b[0..2]).ok_or(ContextError::Version)?;
        if version == 0xff || (version == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
            return Err(if version == 0xff { ContextError::Version } else { ContextError::Length });
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return Err(ContextError::Format);
        }
        let trace = parse_hex(&b[3..35]).filter(|&t| t != 0).ok_or(ContextError::TraceId)?;
        let span = parse_hex(&b[36..52]).filter(|&s| s != 0).ok_or(ContextError::SpanId)?;
        let flags = parse_hex(&b[53..55]).ok_or(ContextError::Flags)?;
        let span = span as u64;
        let span = if flags & 1 == 0 { crate::ids::sampled_out(span) } else { span };
        Ok(Context { trace_id: TraceId::from_u128(trace), span_id: SpanId::from_u64(span) })
    }

    /// The compact binary form: a version byte (0), the trace id (16 bytes) and the span id
    /// (8 bytes), big-endian as in `traceparent`.
    pub fn to_bytes(&self) -> [u8; 25] {
        let mut b = [0u8; 25];
        b[1..17].copy_from_slice(&self.trace_id.to_u128().to_be_bytes());
        b[17..25].copy_from_slice(&self.span_id.to_u64().to_be_bytes());
        b
    }

    /// Reads [`Context::to_bytes`]'s form.
    pub fn from_bytes(b: &[u8]) -> Result<Context, ContextError> {
        let b: &[u8; 25] = b.try_into().map_err(|_| ContextError::Length)?;
        if b[0] != 0 {
            return Err(ContextError::Version);
        }
        let trace = u128::from_be_bytes(b[1..17].try_into().map_err(|_| ContextError::Length)?);
        let span = u64::from_be_bytes(b[17..25].try_into().map_err(|_| ContextError::Length)?);
        Ok(Context { trace_id: TraceId::from_u128(trace), span_id: SpanId::from_u64(span) })
    }
}

/// Returned by [`Context::enter`]; the thread leaves the context when it drops.
#[must_use = "the context is left when this guard is dropped"]
pub struct ContextGuard {
    prev: Option<u64>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        if let Some(prev) = self.prev {
            let state = runtime::state();
            with_local(|l| l.exit(state, prev));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_bad_input() {
        let c = Context::new(
            TraceId::from_u128(0x4bf92f3577b34da6a3ce929d0e0e4736),
            SpanId::from_u64(0x00f067aa0ba902b7),
        );
        let tp = c.write_traceparent();
        assert_eq!(tp.as_str(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(Context::from_traceparent(tp.as_str()), Ok(c));
        assert_eq!(Context::from_bytes(&c.to_bytes()), Ok(c));
        let bad = [
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", ContextError::Length),
            ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ContextError::Version),
            ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", ContextError::TraceId),
            ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ContextError::TraceId),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ContextError::SpanId),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", ContextError::Flags),
            ("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ContextError::Format),
        ];
        for (s, e) in bad {
            assert_eq!(Context::from_traceparent(s), Err(e), "{s}");
        }
        // A later version may append fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert_eq!(
            Context::from_traceparent(later).map(|c| c.span_id()),
            Ok(SpanId::from_u64(0x00f067aa0ba902b7))
        );
        assert_eq!(Context::from_bytes(&[0; 3]), Err(ContextError::Length));
    }

    #[test]
    fn the_sampled_flag_follows_the_span_id() {
        let trace = TraceId::from_u128(0x4bf92f3577b34da6a3ce929d0e0e4736);
        let dropped = Context::new(trace, SpanId::from_u64(0xabcde001_00000000));
        assert!(!dropped.is_sampled());
        let tp = dropped.write_traceparent();
        assert_eq!(tp.as_str(), "00-4bf92f3577b34da6a3ce929d0e0e4736-abcde00100000000-00");
        assert_eq!(Context::from_traceparent(tp.as_str()), Ok(dropped));
        // Another tracer's unsampled parent becomes a sampled-out id of the same upper bits.
        let foreign = Context::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert_eq!(foreign.map(|c| c.span_id()), Ok(SpanId::from_u64(0x00f067aa_00000000)));
        assert!(!foreign.unwrap().is_sampled());
        let kept = Context::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert!(kept.unwrap().is_sampled());
    }
}
