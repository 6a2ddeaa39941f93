//! # waffle-tracing
//!
//! Records code instrumented with [`tracing`](https://docs.rs/tracing) through waffle, without
//! touching its instrumentation: one line of setup adds a layer to the subscriber.
//!
//! ```
//! use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt};
//!
//! fn main() -> Result<(), waffle_std::Error> {
//! #   let dir = std::env::temp_dir().join(format!("waffle-tracing-doc-{}", std::process::id()));
//! #   std::fs::create_dir_all(&dir).unwrap();
//! #   std::env::set_current_dir(&dir).unwrap();
//!     tracing_subscriber::registry().with(waffle_tracing::layer()).init();
//!     let _session = waffle_std::start("trace.bin")?; // or run with WAFFLE_OUTPUT=trace.bin
//!     let _step = tracing::info_span!("step", n = 3u64).entered();
//!     tracing::info!(loss = 0.25, "step done");
//!     Ok(())
//! }
//! ```
//!
//! Records go through the same per-thread buffers as `waffle::span!` (they interleave with
//! native waffle spans, which nest under `tracing` spans and the other way round), and land in
//! the session's file, whether the program starts it or `WAFFLE_OUTPUT` does. While no session
//! records, the layer costs a span a load and a branch per notification, a thread-local look-up
//! at exit and a probe of the table of live spans at close (`benches/README.md` has figures).
//!
//! ## How `tracing`'s model maps onto waffle's
//!
//! A `tracing` span is created, then entered and exited any number of times, on any threads,
//! and closed when its last handle drops. A waffle span begins and ends on one thread, unless
//! it is *detached*: then it ends by id from anywhere, and is entered (made the parent of what
//! a thread records) as often as needed — what `waffle::Instrument` does for a future. Every
//! `tracing` span is recorded as such a detached span:
//!
//! | `tracing` | waffle records |
//! |---|---|
//! | new span | `SPAN_BEGIN` (name, target as module, file, line, fields), then `DETACH` |
//! | its parent | the thread's current span when created (the `tracing` contextual parent, or a native waffle span opened inside it); an explicit `parent:` is entered around the begin |
//! | enter / exit | `ENTER` / `EXIT` of its id on the entering thread |
//! | close | `ASYNC_END` by id, on the thread that drops the last handle |
//! | event | `EVENT` (name, target as module) with `level` as first field |
//! | `Span::record` after creation | an `EVENT` named after the span, inside it, with the values recorded |
//! | `follows_from(a, b)` | a link `a caused_by b` when `a` is still its thread's latest record (right after creation, the usual case), else an event `follows_from` inside `a` caused by `b` |
//!
//! So a span's time runs from creation to close, on the thread that created it; its children
//! nest under it on whichever thread entered it. A span entered once on one thread
//! (`span.entered()`, `in_scope`) is the tree and times one expects; an `#[instrument]`ed async
//! fn's span is created at the call, entered on every poll on any worker thread (each poll's
//! spans and events are its children there) and ends when the future is dropped. A span
//! recorded in one session and closed in another (or after the session stopped) is left open
//! in its file, as a crashed program's span would be: its end is not written into another
//! session's file.
//!
//! Fields: `u64`, `i64`, `f64`, `bool` and `&str` values are recorded as those types; other
//! values (`Debug`, errors, an event's message) are formatted into a per-thread buffer, which
//! runs their `Debug` impl (see `fields.rs`). A field left out (`field::Empty`) is absent from
//! the record; each shape of present fields is its own waffle callsite.
//!
//! Limits: a span made with `parent: None` while another span is current on its thread nests
//! under that span (a waffle thread cannot record a root below an open span); an event made
//! while one of its own field values is being formatted is not recorded.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod callsites;
mod entered;
mod fields;
mod layer;
mod spans;

pub use layer::WaffleLayer;

/// The layer that records `tracing` spans and events through waffle:
/// `tracing_subscriber::registry().with(waffle_tracing::layer()).init()`.
pub fn layer() -> WaffleLayer {
    WaffleLayer::new()
}
