//! # waffle-decode
//!
//! The reading side of [`waffle`]: it decodes the `trace.bin` files that `waffle-std`
//! records, as a stream of records or into a [`model`], and turns one or many of them into
//! Perfetto, Jaeger, Zipkin, OTLP or Chrome traces, sends them to a collector, and answers
//! "what caused this?" ([`analysis`]) and "where is it stuck?" ([`analysis::hang`]). The `waffle-decode` binary is its command-line face.
//!
//! It shares nothing with the recorder but the file format, which `waffle::wire` defines for
//! both; a traced program never links this crate.
//!
//! ```no_run
//! fn main() -> Result<(), waffle_decode::Error> {
//!     // Two ranks of one run, merged on one time base into one Perfetto trace.
//!     let files = waffle_decode::export::Files::scan(
//!         &["rank0.bin", "rank1.bin"],
//!         waffle_decode::export::Format::Perfetto,
//!         &mut |_| {},
//!     )?;
//!     let out = std::path::Path::new("run.pftrace");
//!     waffle_decode::export::write_file(out, |w| files.write(w, &mut |_| {}))
//!         .map_err(|e| waffle_decode::Error::io(out, e))?;
//!     Ok(())
//! }
//! ```
//!
//! Modules: [`reader`] frames a file, [`decode`] reads its records (a stream the Perfetto
//! exporter writes as they come, or [`model`]), [`export`] writes the formats, [`send`] posts
//! them, [`follow`] sends the spans of files still being written as they end, [`correlation`]
//! says which side of a correlation group an item is on, [`matching`] and [`analysis`] follow
//! causes across processes, [`diff`] compares two runs.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod analysis;
pub mod correlation;
pub mod decode;
pub mod diff;
mod error;
pub mod export;
pub mod follow;
pub mod matching;
pub mod model;
pub mod reader;
pub mod send;

pub use error::Error;
