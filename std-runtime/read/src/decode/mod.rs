//! Turning `trace.bin` files into the [`model`](crate::model), or into a stream of records.
//!
//! [`stream`] reads a file frame by frame and hands its records to a [`Sink`]; its memory grows
//! with open spans, not with records. [`decode_file`] and friends build the whole model with
//! one such sink (`build.rs`), for the exporters and analyses that need every span at once.
//! The decoder's per-file state and frames are in `decoder.rs`, the chunk logic (ids, parents,
//! depth reconciliation after drops, stand-ins, detached spans) in `chunk.rs` over the state
//! each stream carries between chunks (`stream_state.rs`), shared by both. TAIL frames (records a
//! thread had staged and not pushed) are held until a later chunk supersedes them or decoded
//! as chunks then (`tail.rs`), also for every sink alike. Device tracks' slices are taken off
//! the threads that recorded them and handed over at the end of the file as threads of their
//! own, on the host's clock ([`track`]), for every sink alike too. A file read once with
//! checkpoints ([`run::decode_checkpointed`]) can be decoded again from any of them
//! ([`resume`]), for analyses that keep positions rather than records.

use crate::{
    error::Error,
    model::{Process, Trace},
    reader::{FrameReader, Warning},
};
use std::{io::Read, path::Path};

mod build;
mod decoder;
mod fields;
pub mod resume;
pub mod run;
pub mod stream;
mod stream_state;
pub mod track;

pub use fields::{FieldValue, Fields};
pub use stream::{Hand, Header, Item, Sink};

/// A decoded trace and what was wrong on the way.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The trace, one process per file.
    pub trace: Trace,
    /// Problems that were worked around (damaged frames, unknown records, cut files).
    pub warnings: Vec<Warning>,
}

/// Decodes several files into one trace, in the order given.
pub fn decode_files<P: AsRef<Path>>(paths: &[P]) -> Result<Decoded, Error> {
    let mut out = Decoded::default();
    for p in paths {
        let (process, warnings) = decode_file(p.as_ref())?;
        out.trace.processes.push(process);
        out.warnings.extend(warnings);
    }
    Ok(out)
}

/// Decodes one file.
pub fn decode_file(path: &Path) -> Result<(Process, Vec<Warning>), Error> {
    decode_frames(FrameReader::open(path)?, path)
}

/// Decodes a trace from any reader; `path` names it in messages.
pub fn decode_reader<R: Read>(input: R, path: &Path) -> Result<(Process, Vec<Warning>), Error> {
    decode_frames(FrameReader::new(input, path)?, path)
}

fn decode_frames<R: Read>(reader: FrameReader<R>, path: &Path) -> Result<(Process, Vec<Warning>), Error> {
    let mut builder = build::Builder::default();
    let warnings = run::decode(reader, path, &mut builder)?;
    Ok((builder.into_process(), warnings))
}

/// What a decoded process holds, in numbers: the summary `waffle-decode` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessStats {
    /// The file, as given.
    pub source: String,
    /// OS process id.
    pub pid: u32,
    /// Process name.
    pub name: String,
    /// Threads (streams).
    pub threads: usize,
    /// Spans, stand-ins for lost begins included.
    pub spans: u64,
    /// Events.
    pub events: u64,
    /// Records the producer dropped.
    pub dropped: u64,
    /// Whether the file ended with a clean-shutdown frame.
    pub complete: bool,
    /// The fraction of roots head sampling kept, if the process sampled (its `waffle.sample`
    /// label): the file holds only those roots, each whole.
    pub sample: Option<String>,
}

/// The `waffle.sample` label of a header: the rate a sampling process kept roots at.
pub fn sample_label(h: &waffle_wire::Header) -> Option<String> {
    h.labels.iter().find(|(k, _)| k == "waffle.sample").map(|(_, v)| v.clone())
}

impl ProcessStats {
    /// The numbers of a decoded process.
    pub fn of(p: &Process) -> ProcessStats {
        ProcessStats {
            source: p.source.clone(),
            pid: p.header.pid,
            name: p.header.name.clone(),
            threads: p.threads.len(),
            spans: p.threads.iter().map(|t| t.spans.len() as u64).sum(),
            events: p.threads.iter().map(|t| t.events.len() as u64).sum(),
            dropped: p.dropped,
            complete: p.complete,
            sample: sample_label(&p.header),
        }
    }
}
