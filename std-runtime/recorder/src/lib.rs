//! # waffle-std
//!
//! The recorder of [`waffle`]: it drains every thread's buffer into a `trace.bin` file on
//! a collector thread, registers callsites made at run time (by C and Python), and keeps what
//! was recorded through panics, signals and `exit`. Reading the file is another crate's work,
//! `waffle-decode`; the two share only the format, `waffle::wire`.
//!
//! ```
//! fn main() -> Result<(), waffle_std::Error> {
//! #   let dir = std::env::temp_dir().join(format!("waffle-std-doc-{}", std::process::id()));
//! #   std::fs::create_dir_all(&dir).unwrap();
//! #   std::env::set_current_dir(&dir).unwrap();
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
//! What a killed or blocked program keeps: a thread that blocks (in an MPI call, on a lock, in a
//! sleep) right after beginning a span never records again, but the collector copies what it
//! staged into the file within about two drain intervals (TAIL frames), so even a `SIGKILL`
//! then keeps that span. While a session records, `SIGTERM` and `SIGINT` (unless the program or
//! a runtime handles them) close the file — last records, END — before the process dies of
//! the signal. `docs/reliability.md` lists what each kind of ending keeps.
//!
//! Long runs can keep a sample: [`Config::sample`] (or `WAFFLE_SAMPLE=0.1`) keeps a fraction
//! of root spans, each whole, decided once per root (a root naming causes follows them; no
//! recorded link names a dropped item) and followed across processes through `traceparent`'s
//! sampled flag (`docs/sampling.md`).
//!
//! Modules: [`session`] starts and stops recording, the collector writes the file, [`clock`]
//! calibrates ticks, [`dynamic`] holds run-time callsites, [`autostart`] and [`launcher`] start
//! a recording from the environment.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod autostart;
pub mod clock;
mod collector;
mod config;
mod crash;
pub mod dynamic;
mod error;
pub mod frames;
mod header;
mod hub;
pub mod launcher;
mod live;
mod random;
mod registry;
pub mod session;
mod signals;
mod tails;

pub use collector::Stats;
pub use config::Config;
pub use error::Error;
pub use session::{current_path, recording_elsewhere, set_enabled, Session};

/// What [`no_autostart!`] expands to refers to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use linkme;
}

/// Starts recording to `path` with default settings (see [`Config`]).
pub fn start(path: impl AsRef<std::path::Path>) -> Result<Session, Error> {
    Config::new(path).start()
}
