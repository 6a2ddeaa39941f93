//! # waffle-read
//!
//! The first layer of waffle's reader: it frames the `trace.bin` files that `waffle-std`
//! records ([`reader`]), decodes their records as a stream ([`decode::run`]) or into a
//! [`model`] of processes, threads, spans and events ([`decode`]), and says how items of
//! several files belong together: which side of a correlation group an item is on
//! ([`correlation`]) and which spans are one operation on every rank ([`matching`]).
//!
//! It depends on the file format (`waffle-wire`) and nothing else of waffle: a program that
//! reads traces links neither the recorder nor the exporters. The formats are written by
//! `waffle-export`, the questions answered by `waffle-analyze`, and `waffle-decode` is the
//! command line over all three.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("waffle-read-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let path = dir.join("run.bin");
//! {
//!     let _session = waffle_std::start(&path)?;
//!     let _outer = waffle::span!("solve", n = 3u64);
//!     let _inner = waffle::span!("relax");
//! } // the spans end, then the session writes the file
//!
//! let (process, warnings) = waffle_read::decode::decode_file(&path)?;
//! assert!(warnings.is_empty());
//! let spans = &process.threads[0].spans;
//! let names: Vec<&str> = spans.iter().map(|s| &*s.callsite.name).collect();
//! assert_eq!(names, ["solve", "relax"]);
//! assert_eq!(spans[1].parent, Some(spans[0].id)); // "relax" ran inside "solve"
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod correlation;
pub mod decode;
mod error;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod id_hash;
pub mod matching;
pub mod model;
pub mod reader;
pub mod threads;

pub use error::Error;
