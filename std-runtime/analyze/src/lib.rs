//! # waffle-analyze
//!
//! The questions waffle answers about a run, on top of the reader (`waffle-read`): what caused
//! this event ([`why`]), where the run is stuck ([`hang`]), and how two runs differ ([`diff`]).
//! It links no exporter, protobuf or HTTP code.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("waffle-analyze-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let path = dir.join("run.bin");
//! {
//!     let _session = waffle_std::start(&path)?;
//!     let bad = waffle::event!("bad input", row = 7u64);
//!     let _s = waffle::span!("solve");
//!     waffle::event!("residual is NaN", caused_by = [bad]);
//! }
//!
//! // Read the file once into an index, then walk back from the symptom.
//! let symptom = waffle_analyze::why::Selector::name("residual is NaN", 0);
//! let (answer, _warnings) =
//!     waffle_analyze::why::why_files(&[&path], &symptom, &Default::default())?;
//! let roots: Vec<&str> = answer.root_causes.iter().map(|r| r.name.as_str()).collect();
//! assert_eq!(roots, ["bad input"]);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

// The reader's modules, under the names the analyses use for them.
use waffle_read::{correlation, decode, matching, model, reader, Error};

pub mod critical_path;
pub mod diff;
pub mod hang;
mod json_out;
#[cfg(test)]
mod mpi_fixtures;
mod page;
pub mod profile;
#[cfg(test)]
mod recorded;
mod timeline;
mod units;
pub mod waits;
pub mod why;

pub use timeline::{read_run, RunError};
