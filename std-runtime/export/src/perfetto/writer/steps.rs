//! Step spans on a track of their own: a span named `step` whose first field is `step`
//! (`waffle_wire::reserved`) is drawn on a track named "Steps" under its process, one per
//! thread that records steps (a thread's steps nest, as its spans do), rather than on the
//! thread's track, so that a run's steps read as one row above its threads.
//!
//! The span stays on its sequence's stack of open spans (its children still sit inside it for
//! the causal rules, and its end comes in stream order); only its two packets name the steps
//! track. The writer's span value says so: [`STEP`] and the track's uuid.

use super::PacketWriter;
use crate::{
    decode::stream::{Item, Sink},
    perfetto::proto,
};
use waffle_wire::reserved;

/// Marks a span value (see `Sink::Span`) as a step on the track in its low bits. Track uuids
/// are small numbers, so the bit is never one of theirs.
pub(super) const STEP: u64 = 1 << 63;

/// What the writer knows of the current process's steps.
#[derive(Default)]
pub(super) struct Steps {
    /// Per callsite index: 0 not looked at yet, 1 no step, 2 a step.
    sites: Vec<u8>,
    /// Per thread: its steps track, 0 until its first step.
    tracks: Vec<u64>,
}

impl Steps {
    /// Forgets the previous process (callsite indices and threads are per process).
    pub(super) fn next_process(&mut self) {
        self.sites.clear();
        self.tracks.clear();
    }

    /// Whether `r` begins a step span.
    #[inline(always)]
    pub(super) fn is_step(&mut self, r: &Item<'_>) -> bool {
        let i = r.callsite_index as usize;
        if i >= self.sites.len() {
            self.sites.resize(i + 1, 0);
        }
        if self.sites[i] == 0 {
            let cs = r.callsite;
            let step =
                cs.name == reserved::STEP_SPAN && cs.fields.first().is_some_and(|f| f.name == reserved::STEP);
            self.sites[i] = 1 + u8::from(step);
        }
        self.sites[i] == 2
    }
}

impl PacketWriter<'_> {
    /// Writes the begin of step span `r` of sequence `t` on the thread's steps track (described
    /// on first use); returns the span value its end is written with.
    #[cold]
    pub(super) fn step_begin(&mut self, t: usize, r: &Item<'_>, target: Option<usize>) -> u64 {
        if t >= self.steps.tracks.len() {
            self.steps.tracks.resize(t + 1, 0);
        }
        if self.steps.tracks[t] == 0 {
            let track = self.uuid();
            let packet = proto::TracePacket {
                trusted_packet_sequence_id: Some(self.seqs[t].id),
                track_descriptor: Some(proto::TrackDescriptor {
                    uuid: Some(track),
                    parent_uuid: Some(self.process_track),
                    name: Some("Steps".to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            self.message(&packet);
            self.steps.tracks[t] = track;
        }
        let track = self.steps.tracks[t];
        self.item(t, r, super::TYPE_SLICE_BEGIN, Some(track), target);
        self.seqs[t].open.push(r.id);
        STEP | track
    }

    /// Writes the end of a span that is not on its thread's track: a step's now, on its steps
    /// track; a detached span's (see `Sink::detached_end`) once the sequence's time passes it.
    #[cold]
    pub(super) fn off_thread_end(&mut self, t: usize, span: u64, ticks: u64, ended: bool) {
        if span & STEP == 0 {
            return Sink::detached_end(self, t, span, ticks, ended);
        }
        let track = span & !STEP;
        let ts = self.time(t, ticks);
        self.seqs[t].open.pop();
        self.end_packet(t, ts, Some(track), ended);
    }
}
