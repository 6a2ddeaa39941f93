//! Identifiers of spans, events and traces.
//!
//! A [`SpanId`] or [`EventId`] is 64 bits: the upper 32 name the stream that made it (a process
//! salt and the stream's index, given by the runtime when the stream starts), the lower 32 count
//! the spans and events of that stream. The producer never writes an id into a record: each data
//! chunk carries the stream's counter at its start, and the decoder counts along, deriving the
//! same numbers. Zero is the null id, which links and parents ignore. An id
//! whose counter is zero (and that is not null) is *sampled out*: it names a span or event that
//! head sampling did not record (see [`crate::local::sample`]).

use core::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(u64);

        impl $name {
            /// The null id: refers to nothing.
            pub const NULL: $name = $name(0);

            /// The id with this numeric value.
            #[inline(always)]
            pub const fn from_u64(v: u64) -> $name {
                $name(v)
            }

            /// The numeric value (0 for the null id).
            #[inline(always)]
            pub const fn to_u64(self) -> u64 {
                self.0
            }

            /// Whether this is the null id.
            #[inline(always)]
            pub const fn is_null(self) -> bool {
                self.0 == 0
            }

            /// Whether head sampling left this span or event out of the trace (its lower 32
            /// bits are zero, which no recorded id's are; see [`crate::local::sample`]).
            #[inline(always)]
            pub const fn is_sampled_out(self) -> bool {
                is_sampled_out(self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:016x})"), self.0)
            }
        }

        /// Lower-case hex, 16 digits: the form Jaeger and Zipkin use.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:016x}", self.0)
            }
        }
    };
}

id_type! {
    /// Identifies one span, unique within a trace.
    SpanId
}

id_type! {
    /// Identifies one event, unique within a trace. `event!` returns it so that later spans and
    /// events can name it as their cause.
    EventId
}

/// Identifies a whole trace (all processes of one run): 128 bits, zero is null.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TraceId(u128);

impl TraceId {
    /// The null trace id.
    pub const NULL: TraceId = TraceId(0);

    /// The trace id with this numeric value.
    pub const fn from_u128(v: u128) -> TraceId {
        TraceId(v)
    }

    /// The numeric value.
    pub const fn to_u128(self) -> u128 {
        self.0
    }

    /// Whether this is the null id.
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({:032x})", self.0)
    }
}

/// Lower-case hex, 32 digits.
impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// The first id of a stream: `salt` names the process (20 bits kept), `stream` the stream within
/// it (12 bits kept). Counting starts at 1 so that no id is null.
pub const fn stream_id_base(salt: u32, stream: u32) -> u64 {
    (((salt & 0xF_FFFF) as u64) << 44) | (((stream & 0xFFF) as u64) << 32) | 1
}

/// Whether `id` names a span or event that sampling left out: non-null, lower 32 bits zero.
#[inline(always)]
pub const fn is_sampled_out(id: u64) -> bool {
    id != 0 && id as u32 == 0
}

/// The sampled-out id standing for `id`: its upper 32 bits (the process salt and stream), or,
/// if those are zero, `1 << 32`, so that it is never null.
pub const fn sampled_out(id: u64) -> u64 {
    let high = id & !0xFFFF_FFFF;
    if high == 0 {
        1 << 32
    } else {
        high
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_out_ids_are_never_null_nor_recorded_ids() {
        assert!(!is_sampled_out(0));
        assert!(is_sampled_out(sampled_out(0)));
        assert!(is_sampled_out(sampled_out(0x0000_0000_0000_0007)));
        let first = stream_id_base(0xABCDE, 3);
        assert!(!is_sampled_out(first));
        assert_eq!(sampled_out(first + 41), first & !0xFFFF_FFFF);
    }

    #[test]
    fn ids_have_a_null_and_hex_forms() {
        assert!(SpanId::NULL.is_null());
        assert!(!EventId::from_u64(7).is_null());
        extern crate std;
        use std::format;
        assert_eq!(format!("{}", SpanId::from_u64(0xab)), "00000000000000ab");
        assert_eq!(format!("{}", TraceId::from_u128(1)), "00000000000000000000000000000001");
    }

    #[test]
    fn stream_bases_do_not_overlap() {
        let a = stream_id_base(0xABCDE, 1);
        let b = stream_id_base(0xABCDE, 2);
        assert_ne!(a >> 32, b >> 32);
        assert_eq!(a & 0xFFFF_FFFF, 1);
        assert_eq!(stream_id_base(0xFFFF_FFFF, 0xFFFF) >> 44, 0xF_FFFF);
    }
}
