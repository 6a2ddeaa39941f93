//! # waffle-std
//!
//! The `std` runtime of [waffle](waffle): it drains every thread's buffer into a `trace.bin`
//! file on a collector thread, and decodes such files into a model that exporters turn into
//! Perfetto traces (and more). The `waffle-decode` binary is the command-line face of the
//! decoder.
//!
//! ```no_run
//! fn main() -> Result<(), waffle_std::Error> {
//!     let _session = waffle_std::start("trace.bin")?; // flushes and closes on drop
//!     std::thread::scope(|s| {
//!         for t in 0..4u64 {
//!             s.spawn(move || (0..1000).for_each(|i| step(t * 1000 + i, 0.01)));
//!         }
//!     });
//!     Ok(())
//! }
//!
//! #[waffle::instrument]
//! fn step(i: u64, dt: f64) {
//!     let _s = waffle::span!("stencil", cells = 4096u64);
//!     let _e: waffle::EventId = waffle::event!("converged", residual = 1e-9, ok = true);
//! }
//! ```
//!
//! Then `waffle-decode trace.bin -o trace.pftrace` and open the result in ui.perfetto.dev.
//!
//! A program that never starts a session records when run with `WAFFLE_OUTPUT=trace-%p.bin`
//! set: see [`autostart`] (a Rust program that uses only `waffle`'s macros names this crate
//! once, `use waffle_std as _;`, so that it is linked).
//!
//! Modules: [`session`] and the collector write files, [`decode`] reads them as a stream of
//! records (which the Perfetto exporter writes as they come) or into [`model`],
//! [`export`] writes other formats from the model.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod analysis;
pub mod autostart;
pub mod clock;
mod collector;
mod crash;
pub mod decode;
pub mod dynamic;
mod error;
pub mod export;
pub mod frames;
mod header;
pub mod launcher;
pub mod matching;
pub mod model;
pub mod reader;
mod registry;
pub mod send;
pub mod session;

pub use collector::Stats;
pub use error::Error;
pub use session::{Config, Session};

/// What [`no_autostart!`] expands to refers to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use linkme;
}

/// Starts recording to `path` with default settings (see [`Config`]).
pub fn start(path: impl AsRef<std::path::Path>) -> Result<Session, Error> {
    Config::new(path).start()
}
