//! # waffle
//!
//! Causal tracing for compute kernels, simulators, ML runtimes and HPC codes, at a cost of a few
//! nanoseconds and a few bytes per span.
//!
//! This crate is the producer side: the macros, ids, callsites, the record encoding and the
//! per-thread buffers. It is `no_std` and never allocates. The `trace.bin` format it writes is
//! the crate `waffle-wire`, re-exported as [`wire`]: the reader depends on that grammar alone,
//! and a bare-metal recorder writes the same frames (the `frames` feature, which needs
//! `alloc`). Pair it with a runtime that drains
//! the buffers — `waffle-std` writes them to a `trace.bin` file that `waffle-decode` turns into
//! Perfetto, Jaeger, Zipkin or OpenTelemetry traces.
//!
//! ```
//! #[waffle::instrument]                     // a span "relax" with fields `sweep` and `omega`
//! fn relax(sweep: u64, omega: f64) {
//!     let _inner = waffle::span!("smooth", points = 1024u64);
//!     let _done: waffle::EventId = waffle::event!("converged", residual = 1e-9, ok = true);
//! }
//!
//! relax(3, 1.5); // with no runtime installed this records nothing and costs one load
//! ```
//!
//! How it stays cheap: every `span!`, `event!` and `#[instrument]` defines a `static`
//! [`Callsite`](callsite::Callsite) in a linker section at compile time, so a record is a tag,
//! the callsite's index, a timestamp delta and the field values, varint-encoded into a staging
//! area the thread owns. Whole chunks move to a lock-free SPSC queue that the runtime drains;
//! what is staged and not yet pushed is published (a fill word and a seqlock over the chunk
//! head, [`queue::StreamSlot::snapshot`]) so that the runtime can copy it from a thread that
//! blocks.
//!
//! ## Features
//! - `std` (default): thread-local buffers and the platform clock. Without it the recording
//!   streams are [`local::BareStream`]s that a bare-metal runtime (`waffle-metal`) defines
//!   per interrupt level, one main stream until it does, and [`clock::set_clock`] supplies
//!   timestamps.
//! - `compile-out`: every span and event compiles to nothing that runs.
//! - `frames`: the frame grammar of `trace.bin` in [`wire`] (typed HEADER, CALLSITES, STREAM,
//!   DATA and TAIL heads, CLOCK and END payloads encoded with postcard, and the frame envelope), shared
//!   by the recorder and the decoder. It needs `alloc`, not `std`, so a bare-metal recorder can
//!   write the same files; without it the crate never allocates.
//! - `half`: [`tensor!`] over slices of `half::f16` and `half::bf16`.
//!
//! ## Tensors and steps
//! [`tensor!`] records what a tensor is rather than its contents: its element count, an XXH3-64
//! hash of its bytes, RMS, min, max and NaN/Inf counts ([`tensor::Fingerprint`]), so that two
//! runs' traces say where their numbers first diverged. [`step!`] marks a training or
//! simulation step. Both are ordinary events and spans with the reserved fields of
//! [`wire::reserved`]; fingerprints are off unless the runtime turns them on.

#![no_std]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "frames")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod callsite;
pub mod clock;
mod context;
pub mod encode;
pub mod ids;
pub mod local;
pub mod queue;
pub mod runtime;
mod span;
mod task;
pub mod tensor;
mod track;
/// The `trace.bin` format: the crate `waffle-wire`, which the reader shares.
pub use waffle_wire as wire;

pub use context::{Context, ContextError, ContextGuard, Traceparent};
pub use encode::FieldValue;
pub use ids::{EventId, SpanId, TraceId};
pub use local::flush;
pub use runtime::{is_enabled, set_enabled};
pub use span::Span;
pub use span::{event_raw, link_raw, span_begin_raw, Causes};
pub use task::{Instrument, Instrumented};
pub use track::Track;

/// Opens a span; it ends when the returned [`Span`] guard is dropped.
///
/// `span!("name", key = value, ...)`: the name is a string literal; values are integers, floats,
/// `bool` or `&str` (see [`FieldValue`]). `key` alone stands for `key = key`.
///
/// Two keys say what caused it (they work alike in [`event!`] and `#[instrument]`):
/// `caused_by = id` or `caused_by = [id, ...]` names its causes (span and event ids of any
/// thread or process), and `correlate = ("key", value)` puts it in a correlation group: spans and
/// events with the same key and value, in any process, are one group, such as the same
/// allreduce on every rank. A key ending in `>` marks a cause and one ending in `<` an effect:
/// members whose keys have the same stem and the same value are a directed group, in which
/// every effect was caused by every cause (a send records `("msg>", h)` and its receive
/// `("msg<", h)`), and the decoder draws arrows from causes to effects only. The marker is a
/// rule of the decoder, not of the file format.
///
/// ```
/// let cells = 4096u64;
/// let s = waffle::span!("stencil", cells, dt = 0.01);
/// let _id: waffle::SpanId = s.id();
/// ```
pub use waffle_macros::span;

/// Records an instant event and returns its [`EventId`].
///
/// ```
/// let id: waffle::EventId = waffle::event!("converged", residual = 1e-9, ok = true);
/// # let _ = id;
/// ```
pub use waffle_macros::event;

/// Runs a function's body inside a span named after the function, with its arguments as fields.
///
/// Options: `name = "..."` (span name), `skip(a, b)` and `skip_all` (arguments left out),
/// `fields(key = expr, ...)` (extra fields, which may use the arguments).
///
/// ```
/// #[waffle::instrument(skip(grid), fields(cells = grid.len() as u64))]
/// fn sweep(grid: &[f64], step: u64) -> f64 {
///     grid.iter().sum()
/// }
/// # sweep(&[1.0], 0);
/// ```
pub use waffle_macros::instrument;

/// Records a tensor's fingerprint as one event and returns its [`EventId`] (null while
/// recording or tensor fingerprints are off).
///
/// `tensor!(name, &data, shape = [d0, d1, ...], key = value, ...)`: `data` is a slice (or
/// anything that slices: an array, a `Vec`) of `f32`, `f64`, `half::f16`, `half::bf16`
/// (feature `half`) or any integer type. The event carries the reserved fields of
/// [`wire::reserved::tensor`]: name, dtype, shape, element count, XXH3-64 hash of the
/// little-endian bytes, RMS, min and max of the finite elements, NaN/+Inf/-Inf counts (see
/// [`tensor::Fingerprint`]); `key = value` fields, `caused_by` and `correlate` follow as in
/// [`span!`]. The event is named after the tensor when `name` is a string literal; any other
/// `&str` expression works too (the event is then named `tensor`, the name is in `tensor.name`).
/// `shape` is an array of integers or a slice of `u64` or `usize`; without it the shape is the
/// element count.
///
/// Fingerprints are off unless the session turns them on (`WAFFLE_TENSORS=1`, or
/// `waffle_std::Config::tensors(true)`, through [`runtime::set_tensors`]): off, `tensor!` costs
/// what a disabled span costs and touches neither the name nor the data.
///
/// ```
/// let data = vec![0.5f32; 2560];
/// let id: waffle::EventId = waffle::tensor!("blk0/attn_norm", &data, shape = [1, 2560], layer = 0u64);
/// let name = format!("blk{}/out", 1);
/// waffle::tensor!(&name, &data[..16], caused_by = id);
/// ```
pub use waffle_macros::tensor;

/// Opens a step span: named `step`, its first field `step` the number (any integer, written as
/// `u64`), then any `key = value` fields; it ends when the guard is dropped. Exporters draw
/// steps on a track of their own (Perfetto) or as step markers (XSpace).
///
/// ```
/// for n in 0..3u32 {
///     let _step = waffle::step!(n, batch = 32u64);
/// }
/// ```
pub use waffle_macros::step;

/// Used by generated code; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::callsite::{Callsite, Field, Kind, CALLSITES};
    pub use crate::encode::{FieldValue, Writer};
    pub use crate::runtime::{state, tensors};
    pub use crate::span::{correlate, event, follow, link, span_begin, Causes};
    pub use crate::task::Instrument;
    pub use crate::tensor::{Fingerprint, Shape};
    pub use crate::wire::FieldType;
    pub use linkme;

    /// A step number as `step!` records it.
    #[inline(always)]
    pub fn step_number<N: StepNumber>(n: N) -> u64 {
        n.to_u64()
    }

    /// The integer types `step!` takes.
    pub trait StepNumber {
        /// The number as the `step` field's `u64`.
        fn to_u64(self) -> u64;
    }

    macro_rules! step_numbers {
        ($($t:ty),*) => {$(
            impl StepNumber for $t {
                #[inline(always)]
                fn to_u64(self) -> u64 {
                    self as u64
                }
            }
        )*};
    }
    step_numbers!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

    /// `false` with the `compile-out` feature: every record is then dead code.
    pub const COMPILED_IN: bool = !cfg!(feature = "compile-out");

    /// Writes a field whose type the macro read from the source, checking at compile time that
    /// the value really has it.
    #[inline(always)]
    pub fn encode_typed<const CODE: u8, T: FieldValue + ?Sized>(v: &T, w: &mut Writer<'_>) {
        const { assert!(T::TYPE as u8 == CODE, "field value type differs from its declared type") };
        v.encode(w);
    }
}
