//! Decoding a file from the middle: checkpoints of the decoder's state taken between frames
//! while the file is read once, and decoding resumed from one of them later.
//!
//! A record's meaning depends on what came before it in its stream (the open spans its parent
//! is found among, the id it takes, the item a link attaches to), so a reader cannot start at
//! an arbitrary frame. A [`Checkpoint`] is the decoder's whole state before one frame (each
//! stream's open stack and pending item, detached spans, held TAILs, the callsites so far) and
//! where that frame begins. [`resume`] decodes from there and hands a sink exactly the calls
//! that the first reading made from that point on, so an analysis can keep a few checkpoints
//! instead of what the records said, and read again only the part of a file it needs.
//!
//! Device tracks' slices are handed over at the end of a file (`track.rs`); decoding resumed
//! holds the slices it reads and hands them over, at the end, on threads after those the
//! first reading made: a sink that resumes tells them apart by their number and ignores them.

use super::{decoder::Decoder, stream::Sink, track::Tracks};
use crate::{error::Error, reader::FrameReader};
use std::path::Path;

/// The decoder's state before one frame of a file (see the module docs).
pub struct Checkpoint<T> {
    offset: u64,
    decoder: Decoder<T>,
}

impl<T: Copy + Default> Checkpoint<T> {
    pub(super) fn new(offset: u64, decoder: &Decoder<T>) -> Self {
        Checkpoint { offset, decoder: decoder.snapshot() }
    }

    /// Where the frame it comes before begins in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The id of the item that `thread` held back for links still to come when the
    /// checkpoint was taken (so it was read before it and is handed over after it), if any.
    /// Its field values are kept only if the sink of the first reading kept them.
    pub fn pending(&self, thread: usize) -> Option<u64> {
        self.decoder.pending_id(thread)
    }

    /// Threads (streams) the file had shown before it.
    pub fn threads(&self) -> usize {
        self.decoder.thread_count()
    }
}

/// Decodes `path` from `checkpoint` (taken while it was read into a sink of the same kind) into
/// `sink`, asking `stop` after each frame, with the offset of the next, whether to stop there.
/// At the end of the file, what is
/// still held back is handed over and open spans end, as when it was read whole; returns
/// whether it got there. Warnings are not collected: the first reading told them.
pub fn resume<S: Sink>(
    path: &Path,
    checkpoint: &Checkpoint<S::Span>,
    sink: &mut S,
    mut stop: impl FnMut(&mut S, u64) -> bool,
) -> Result<bool, Error> {
    let mut reader = FrameReader::open(path)?;
    reader.seek_to(checkpoint.offset).map_err(|e| Error::io(path, e))?;
    let mut d = checkpoint.decoder.snapshot();
    let mut tracks = Tracks::resume(sink, d.thread_count());
    let (mut warnings, mut payload) = (Vec::new(), Vec::new());
    while let Some((kind, offset)) = reader.read_frame(&mut warnings, &mut payload) {
        // Damage was told by the first reading.
        let _ = d.frame(kind, offset, &payload, &mut tracks);
        warnings.clear();
        if stop(tracks.inner(), reader.offset()) {
            return Ok(false);
        }
    }
    d.finish(&mut tracks);
    Ok(true)
}
