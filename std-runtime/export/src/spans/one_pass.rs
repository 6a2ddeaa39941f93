//! `follow`'s span assembly: the two passes' [`Assembler`], run once over a file that may
//! still be written. `follow` runs it, so it comes with the `send` feature.

#![cfg(any(feature = "send", test))]

use super::{state::State, Assembler, ProcessInfo, SpanWriter, LOGS};

/// The assembly of one file in one pass, each span handed to the writer as soon as it ends:
/// what `follow` sends while the file is still written. Nothing is known ahead, so nothing is
/// resolved ahead: the rules above hold but for these.
/// - A parent or cause not open in the file when it is named is written as the id recorded,
///   and taken as resolved (it is sent under that id, before or after). A cause that is an
///   event shown on a span links to the event's own id, not to the span showing it.
/// - Ids are the recorded ones, repeats included (a stand-in still gets a fresh id).
/// - Correlation groups are not turned into links; items still carry their value.
/// - Times use the header's clock calibration until a CLOCK frame refines it.
pub(crate) struct OnePass(State);

impl OnePass {
    pub(crate) fn new() -> OnePass {
        OnePass(State::one_pass(LOGS))
    }

    /// The record sink of the pass, handing spans to `writer`.
    pub(crate) fn assembler<W: SpanWriter>(&mut self, writer: W) -> Assembler<'_, W> {
        assert!(W::ONE_PASS && W::LOGS == self.0.logs, "a two-pass writer, or another LOGS");
        Assembler::new(&mut self.0, writer)
    }

    /// The file's process as read so far, once its header is.
    pub(crate) fn process(&self) -> Option<&ProcessInfo> {
        self.0.ctx.processes.first()
    }
}
