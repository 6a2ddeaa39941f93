//! Perfetto exporter: `trace.bin` files or a [`Trace`] as a `.pftrace` (Perfetto's `Trace`
//! proto) for ui.perfetto.dev and trace_processor.
//!
//! The mapping:
//! - each process is a process track (`TrackDescriptor` with a `ProcessDescriptor`), named
//!   `rank N (pid P)` when the header has a `rank` label; its host and labels become
//!   `process_labels`. All processes share the model's time base, Unix nanoseconds;
//! - each thread is a thread track parented to its process track, with its own
//!   `trusted_packet_sequence_id`. The sequence's first packet sets its defaults: its track
//!   events are on the thread track unless they name another, and its timestamps are on a
//!   clock of its own (id 64), incremental: each packet gives the time since the sequence's
//!   previous packet, a byte or two instead of nine. A clock snapshot (the sequence's second
//!   packet) says that this clock reads 0 when BOOTTIME reads 0, so that times land where
//!   absolute ones would;
//! - a span is a `TYPE_SLICE_BEGIN` and a `TYPE_SLICE_END` on its thread's track, an event a
//!   `TYPE_INSTANT`; fields are debug annotations, and a span that never ended gets
//!   `waffle.unfinished = true` and ends where the decoder ends it;
//! - a step span (named `step`, its first field `step`: `waffle_wire::reserved`) is a slice
//!   on a track named "Steps" under its process track, one per thread with steps, its
//!   children still on the thread's track (`writer::steps`);
//! - a device track (`waffle::Track`: a GPU queue) is a track named after it under its
//!   process track, with a sequence of its own; its slices are slices on it, and the span or
//!   event that launched each is the source of a flow into it (its first link);
//! - a detached span (an instrumented future's, which may end on another thread) is a slice on
//!   a track of its own under its process track, named after the span, from its begin;
//! - causality becomes flows, arrows from slice to slice, carried by span begins and instants
//!   (see `plan`): links, correlation groups (one flow through an undirected group's members
//!   in time order; one arrow from each cause of a directed group to each of its effects, see
//!   [`crate::correlation`]), and parents that do not hold the child on its track (a context entered on another thread or process, a detached span's children, a
//!   detached span itself). Annotations make
//!   them readable: `waffle.caused_by` (the linked ids in hex), `waffle.unresolved_links` (how
//!   many of them are not in the trace), `waffle.correlate` (`key=value`), and `waffle.id` on
//!   every item a link names;
//! - spans matched by order across ranks ([`crate::matching`]: the k-th span of a name on
//!   every rank, one operation) carry one flow id per operation, which joins them in time
//!   order, and `waffle.matched_by_order = k`. Such a flow is never terminated: the trace
//!   processor steps it from member to member, and its id is used by nothing else.
//!
//! The rules the trace processor enforces, and how they are met:
//! - pids must differ between processes and tids between threads, but ranks on different hosts
//!   can share them: duplicates (and ids that are 0 or do not fit an `i32`) are remapped to
//!   fresh ids above Linux's largest pid, and a main thread (tid = pid) follows its process;
//! - track uuids are unique over the whole trace;
//! - event and annotation names are interned per sequence, each entry sent in the packet that
//!   first uses it; a sequence's first packet clears incremental state (flags 3,
//!   `first_packet_on_sequence`), and every later packet using an iid says it needs it (flag 2);
//! - a slice end closes the innermost open slice, so each thread's records are written in their
//!   stream's order (begins and ends nest there) with times clamped to never go backwards; a
//!   span that never ended says so on its end (`waffle.unfinished`), which the trace processor
//!   adds to the slice's arguments;
//! - flow ids are unique over the trace and written unpacked, as proto2 has them;
//! - a sequence's defaults are set in its first packet, where its incremental state is cleared
//!   (they belong to that state); its clock (ids 64 to 127 are a sequence's own, and only those
//!   may be incremental) is known from a clock snapshot on the sequence, written before any
//!   timestamp on it, alone in its packet (the trace processor reads nothing else of a packet
//!   with a snapshot), and reaching BOOTTIME, the trace's time.
//!
//! One writer serves files and models, in the two passes every streaming format makes
//! (`passes`): the first ([`Scan`], see `plan`) learns what refers to what, the second
//! ([`PacketWriter`](writer::PacketWriter)) writes packets as records arrive. From files
//! ([`Files`](super::Files)) both passes stream (`decode::stream`): memory grows with open
//! spans and cross-references, never with records. A model ([`write()`]) is played back as
//! records (`replay`).

use std::{
    io::{self, Write},
    sync::Arc,
};

use super::passes::{Pass, Source};
use crate::{decode::stream::Header, model::Trace};

mod groups;
mod order;
pub mod overlay;
mod packet;
mod plan;
#[doc(hidden)]
pub mod prost_comparison;
mod proto;
mod put;
mod scan;
mod sequence;
mod tally;
mod track;
mod writer;

pub(crate) use plan::Plan;
use proto::TracePacket;
pub(crate) use scan::Scan;
use writer::PacketWriter;

/// The sequence-scoped clock a sequence's timestamps are on (64 to 127 are the sequence's own).
const SEQUENCE_CLOCK: u32 = 64;
/// `BuiltinClock.BOOTTIME`, the trace processor's default trace time.
const BOOTTIME: u32 = 6;
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
const TYPE_SLICE_BEGIN: i32 = 1;
const TYPE_SLICE_END: i32 = 2;
const TYPE_INSTANT: i32 = 3;
/// Track uuids count up from here ("WAFF"), away from the small numbers other tools use and
/// still a 5-byte varint (descriptors and the track events of detached spans name them).
const UUID_BASE: u64 = 0x5741_4646;
/// The annotation marking a span whose end was never recorded.
const UNFINISHED: &str = "waffle.unfinished";
/// Annotations that spell out causality: the linked ids, the links left unresolved, the
/// correlation, and the id of an item that a link names.
const CAUSED_BY: &str = "waffle.caused_by";
const UNRESOLVED: &str = "waffle.unresolved_links";
const CORRELATE: &str = "waffle.correlate";
/// A span matched by order with the same operation on the other ranks: its occurrence k.
const MATCHED: &str = "waffle.matched_by_order";
const ID: &str = "waffle.id";

/// Writes `trace` to `out` as a Perfetto `.pftrace`.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_from(Source::Trace(trace), out, 1)
}

/// Writes `source` to `out` as a Perfetto `.pftrace`: the plan (its files' scan, or the
/// model's first pass now), then the packets as the records are read again. Files whose plan
/// allows it ([`Plan::apart`](plan::Plan)) are written on up to `threads` threads, each by a
/// writer of its own, the same bytes as one writer makes.
pub(super) fn write_from(source: Source<'_, Plan>, out: &mut dyn Write, threads: usize) -> io::Result<()> {
    match source {
        Source::Files(scanned, progress) if threads > 1 && scanned.plan.apart => {
            let (mut plan, files) = scanned.take_plan();
            let parts = std::mem::take(&mut plan.parts);
            let large = std::mem::take(&mut plan.large);
            let plan = Arc::new(plan);
            files.write_apart(parts, threads, out, progress, |i, part, records, out| {
                let mut writer = PacketWriter::from(out, plan.clone(), vec![part], large.clone(), i);
                writer.read(records).map_err(io::Error::other)?;
                writer.written()?;
                writer.finish()
            })
        }
        source => source.run(Scan::new, |plan| PacketWriter::new(out, plan)),
    }
}

/// [`write_from`] of the scanned `files`, then `overlay` after the trace's own packets.
pub(super) fn write_with_overlay(
    files: Source<'_, Plan>,
    out: &mut dyn Write,
    threads: usize,
    overlay: &overlay::Overlay,
) -> io::Result<()> {
    let (tracks, sequence) = match &files {
        Source::Files(scanned, _) => {
            (scanned.plan.firsts.iter().map(|f| f.0).collect::<Vec<_>>(), scanned.plan.free_sequence)
        }
        Source::Trace(_) => return Err(io::Error::other("an overlay is laid over files only")),
    };
    write_from(files, out, threads)?;
    overlay::write(overlay, &tracks, sequence, out)?;
    out.flush()
}

/// The first packet of a sequence: it clears (and so starts) the incremental state.
fn first_packet(seq_id: u32) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(seq_id),
        sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE),
        first_packet_on_sequence: Some(true),
        ..Default::default()
    }
}

/// A thread sequence's defaults: its clock and its track.
fn defaults(track: u64) -> proto::TracePacketDefaults {
    proto::TracePacketDefaults {
        timestamp_clock_id: Some(SEQUENCE_CLOCK),
        track_event_defaults: Some(proto::TrackEventDefaults { track_uuid: Some(track) }),
    }
}

/// Sequence `seq_id`'s clock: incremental, and at 0 when BOOTTIME (the trace's time, Unix ns
/// here) is at 0. (The trace processor reads a clock snapshot and nothing else of its packet.)
fn clock_snapshot(seq_id: u32) -> TracePacket {
    let clock = |id, incremental: bool| proto::Clock {
        clock_id: Some(id),
        timestamp: Some(0),
        is_incremental: incremental.then_some(true),
    };
    TracePacket {
        trusted_packet_sequence_id: Some(seq_id),
        clock_snapshot: Some(proto::ClockSnapshot {
            clocks: vec![clock(SEQUENCE_CLOCK, true), clock(BOOTTIME, false)],
        }),
        ..Default::default()
    }
}

fn process_track(process: &Header, pid: i32, uuid: u64) -> proto::TrackDescriptor {
    let rank = process.labels.iter().find(|(k, _)| k == "rank").map(|(_, v)| v);
    let name = match rank {
        Some(rank) => format!("rank {rank} (pid {})", process.pid),
        None => process.name.clone(),
    };
    let mut labels = Vec::with_capacity(process.labels.len() + 1);
    if !process.host.is_empty() {
        labels.push(format!("host={}", process.host));
    }
    labels.extend(process.labels.iter().map(|(k, v)| format!("{k}={v}")));
    proto::TrackDescriptor {
        uuid: Some(uuid),
        name: Some(name),
        process: Some(proto::ProcessDescriptor {
            pid: Some(pid),
            process_name: Some(process.name.clone()),
            process_labels: labels,
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod apart_tests;
#[cfg(test)]
mod causal_tests;
#[cfg(test)]
mod steps_tests;
#[cfg(test)]
mod tests;
