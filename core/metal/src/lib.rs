//! # waffle-metal
//!
//! waffle on bare metal: spans and events of a firmware's main loop and of its interrupt
//! handlers, each stream into its own lock-free queue, drained by the application to an output
//! it chooses (semihosting, a UART, RTT) as the frames of a `trace.bin`, which `waffle-decode`
//! reads like any other: `waffle-decode trace.bin -o run.pftrace`.
//!
//! What the firmware writes is a whole `trace.bin`: the file head, a HEADER (its name, the
//! clock's ticks per second), the CALLSITES of every `span!`/`event!` linked into it (the
//! names are in flash anyway, since the callsites point at them, and sending them once makes
//! the file stand alone: no ELF is needed to read it), a STREAM frame per stream recorded,
//! DATA frames of the queues' chunks as drained, and END at [`Trace::finish`]. The frames are
//! written by hand (`frames.rs`) without allocating, and tested byte for byte against
//! `waffle::wire`'s grammar.
//!
//! ```ignore
//! use waffle_metal::{cortex_m::exception_number, Config, Trace};
//!
//! // Two streams (the main loop, SysTick), each with a 1 KiB queue and 256 B of staging.
//! static TRACE: Trace<2, 1024, 256> = Trace::new();
//!
//! fn stream_of() -> usize {
//!     if exception_number() == 0 { 0 } else { 1 }
//! }
//!
//! #[cortex_m_rt::entry]
//! fn main() -> ! {
//!     let mut p = cortex_m::Peripherals::take().unwrap();
//!     waffle_metal::cortex_m::enable_cycle_counter(&mut p.DCB, &mut p.DWT);
//!     let config = Config::new("filter", &["main", "SysTick"], stream_of, waffle_metal::cortex_m::cycles, 64_000_000);
//!     TRACE.start(config).unwrap();
//!     let mut uart = |bytes: &[u8]| { /* write them */ };
//!     loop {
//!         let _s = waffle::span!("work", n = 3u32);
//!         TRACE.drain(&mut uart).ok();
//!     }
//! }
//! ```
//!
//! The same on a host, where each thread records a stream (a test harness, say), with an output
//! into memory:
//!
//! ```
//! use waffle_metal::{Config, Trace};
//!
//! static TRACE: Trace<1, 1024, 128> = Trace::new();
//!
//! TRACE.start(Config::new("host", &["main"], || 0, || 0, 1_000_000_000)).unwrap();
//! let sample = waffle::event!("sample", x = 7i64);
//! {
//!     let _s = waffle::span!("filter", caused_by = sample);
//! }
//! let mut bytes = Vec::new();
//! TRACE.finish(&mut |b: &[u8]| bytes.extend_from_slice(b)).unwrap();
//! assert_eq!(bytes[..8], waffle::wire::MAGIC); // a whole trace.bin, END included
//! ```
//!
//! Streams: code that may preempt the others records a stream of its own, so each interrupt
//! priority level that records has one (exceptions of one level never preempt each other),
//! and so has the main loop. `Config::stream_of` says which stream the running code records into,
//! from `cortex_m::exception_number`; code it maps past the last stream records nothing.
//! Each stream has a `waffle::local::BareStream` (its staging state) and a queue; the main
//! loop drains them all while the interrupts keep recording.
//!
//! Timestamps come from `Config::clock`, any `fn() -> u64` counting up at `ticks_per_second`:
//! `cortex_m::cycles` (the DWT cycle counter, made 64-bit) or a timer of the chip through
//! [`Extend32`].
//!
//! The Cortex-M pieces (`cortex_m` module, `SemihostingFile`) exist when building for
//! `target_os = "none"` on ARM; the rest builds anywhere, and on a host with `std` each thread
//! records a stream of its own (the tests use that).

#![no_std]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod clock;
mod crc;
mod frames;
mod output;
mod trace;

#[cfg(all(target_arch = "arm", target_os = "none"))]
pub mod cortex_m;

pub use clock::Extend32;
pub use output::Output;
#[cfg(all(target_arch = "arm", target_os = "none"))]
pub use output::{SemihostingError, SemihostingFile};
pub use trace::{StartError, Trace};

/// What a firmware's trace says about itself, and where its streams and ticks come from.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The name of the program (the process name in the trace).
    pub name: &'static str,
    /// The board or machine (the host name in the trace); "" by default.
    pub host: &'static str,
    /// The streams' names, by number (the thread names in the trace): the main loop first,
    /// then one per interrupt level that records. At most the trace's `N`.
    pub streams: &'static [&'static str],
    /// The number of the stream the running code records into (an index into `streams`); a number
    /// past the last records nothing. It runs on every record: keep it to a few instructions.
    pub stream_of: fn() -> usize,
    /// The clock every record reads.
    pub clock: fn() -> u64,
    /// The clock's ticks per second (the calibration written in HEADER).
    pub ticks_per_second: u64,
    /// The Unix time in ns at tick 0, if the firmware knows it; 0 by default.
    pub unix_ns_at_zero: u64,
    /// The salt in span and event ids (low 20 bits), to tell boots apart; 0 by default.
    pub salt: u64,
    /// The trace id the firmware records under; 0 (none) by default.
    pub trace_id: u128,
}

impl Config {
    /// A configuration with the given name, streams and clock, and defaults for the rest.
    pub const fn new(
        name: &'static str,
        streams: &'static [&'static str],
        stream_of: fn() -> usize,
        clock: fn() -> u64,
        ticks_per_second: u64,
    ) -> Config {
        Config {
            name,
            host: "",
            streams,
            stream_of,
            clock,
            ticks_per_second,
            unix_ns_at_zero: 0,
            salt: 0,
            trace_id: 0,
        }
    }
}

/// Runs `f` with interrupts masked (on a host, as it is).
#[inline(always)]
pub(crate) fn masked<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(all(target_arch = "arm", target_os = "none"))]
    return cortex_m::masked(f);
    #[cfg(not(all(target_arch = "arm", target_os = "none")))]
    return f();
}
