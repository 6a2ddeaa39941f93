//! Tracks an analysis lays over a trace: slices on tracks of their own, under a process's track
//! or at the top, with arguments and flows between them (`waffle-decode FILES -o OUT.pftrace
//! --waits` draws each rank's waits, the delays they come back to and the critical path so).
//!
//! They are written after the trace's own packets, which a `.pftrace` allows (it is a sequence
//! of packets): track descriptors parented to the process tracks the plan numbered, then a
//! begin and an end per slice on one sequence of their own, with absolute times on the trace's
//! clock (BOOTTIME, Unix ns here) and names spelt out. Their track uuids and flow ids lie in
//! ranges of their own, apart from the trace's.

use std::io::{self, Write};

use prost::Message;

use super::{
    proto::{self, AnnotationValue, DebugAnnotation, TracePacket, TrackEvent},
    put::TRACE_PACKET_KEY,
    TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};

/// Overlay track uuids count up from here ("wait"), far above the trace's.
const TRACK_BASE: u64 = 0x7761_6974_0000_0000;
/// Overlay flow ids count up from here, far above the trace's.
const FLOW_BASE: u64 = 0x7761_6974_0000_0000;

/// Tracks to lay over a trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overlay {
    /// The tracks, in the order they are listed.
    pub tracks: Vec<OverlayTrack>,
}

/// One track of slices that never overlap unless one holds the other.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OverlayTrack {
    /// The process (index among the files) it is drawn under; `None`: at the top.
    pub process: Option<usize>,
    /// Its name.
    pub name: String,
    /// Its slices.
    pub slices: Vec<OverlaySlice>,
}

/// One slice.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OverlaySlice {
    /// Its name.
    pub name: String,
    /// Its begin, Unix ns, and length.
    pub start_ns: u64,
    /// Its length.
    pub dur_ns: u64,
    /// Its arguments.
    pub args: Vec<(String, String)>,
    /// Flows that leave it, by the overlay's own numbers (from 0).
    pub flows_out: Vec<u64>,
    /// Flows that end on it.
    pub flows_in: Vec<u64>,
    /// Flows that end where it ends: on an instant `NAME ends` there (a flow from a slice that
    /// began later than this one, which an arrow to its begin could not be).
    pub flows_in_at_end: Vec<u64>,
}

/// What is written on a track at a moment.
enum Mark<'o> {
    Begin(&'o OverlaySlice),
    Ends(&'o OverlaySlice),
    End,
}

/// A track's marks in time order: each slice's begin, then the begins and ends of those it
/// holds, then its end.
fn marks(track: &OverlayTrack) -> Vec<(u64, Mark<'_>)> {
    let mut slices: Vec<&OverlaySlice> = track.slices.iter().collect();
    slices.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.dur_ns)));
    let mut out = Vec::with_capacity(slices.len() * 2);
    let mut open: Vec<&OverlaySlice> = Vec::new();
    fn close<'o>(open: &mut Vec<&'o OverlaySlice>, out: &mut Vec<(u64, Mark<'o>)>, until: Option<u64>) {
        while let Some(&top) = open.last() {
            let end = top.start_ns + top.dur_ns;
            if until.is_some_and(|t| end > t) {
                break;
            }
            if !top.flows_in_at_end.is_empty() {
                out.push((end, Mark::Ends(top)));
            }
            out.push((end, Mark::End));
            open.pop();
        }
    }
    for s in slices {
        close(&mut open, &mut out, Some(s.start_ns));
        out.push((s.start_ns, Mark::Begin(s)));
        open.push(s);
    }
    close(&mut open, &mut out, None);
    out
}

/// Writes `overlay` as packets after a trace whose process tracks have the uuids `processes`,
/// on sequence `sequence`: the tracks, then every track's marks merged in time order (the
/// sequence's time never goes back).
pub(super) fn write(
    overlay: &Overlay,
    processes: &[u64],
    sequence: u32,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut bytes = Vec::new();
    let mut put = |packet: TracePacket| {
        bytes.push(TRACE_PACKET_KEY);
        packet.encode_length_delimited(&mut bytes).expect("a Vec grows");
    };
    put(TracePacket {
        trusted_packet_sequence_id: Some(sequence),
        sequence_flags: Some(super::SEQ_INCREMENTAL_STATE_CLEARED | super::SEQ_NEEDS_INCREMENTAL_STATE),
        first_packet_on_sequence: Some(true),
        ..Default::default()
    });
    let mut all = Vec::new();
    for (k, track) in overlay.tracks.iter().enumerate() {
        let uuid = TRACK_BASE + k as u64;
        let parent = match track.process {
            Some(p) => Some(
                *processes
                    .get(p)
                    .ok_or_else(|| io::Error::other(format!("no process {p} to draw a track under")))?,
            ),
            None => None,
        };
        put(TracePacket {
            trusted_packet_sequence_id: Some(sequence),
            track_descriptor: Some(proto::TrackDescriptor {
                uuid: Some(uuid),
                name: Some(track.name.clone()),
                parent_uuid: parent,
                ..Default::default()
            }),
            ..Default::default()
        });
        all.extend(marks(track).into_iter().map(|(ts, m)| (ts, uuid, m)));
    }
    // Stable: each track's marks keep their order.
    all.sort_by_key(|&(ts, ..)| ts);
    let flows = |ids: &[u64]| ids.iter().map(|f| FLOW_BASE + f).collect::<Vec<_>>();
    for (ts, uuid, mark) in all {
        let mut event = TrackEvent { track_uuid: Some(uuid), ..Default::default() };
        match mark {
            Mark::Begin(s) => {
                event.r#type = Some(TYPE_SLICE_BEGIN);
                event.name = Some(s.name.clone());
                event.flow_ids = flows(&s.flows_out);
                event.terminating_flow_ids = flows(&s.flows_in);
                event.debug_annotations = s
                    .args
                    .iter()
                    .map(|(name, value)| DebugAnnotation {
                        name_iid: None,
                        name: Some(name.clone()),
                        value: Some(AnnotationValue::Str(value.clone())),
                    })
                    .collect();
            }
            Mark::Ends(s) => {
                event.r#type = Some(TYPE_INSTANT);
                event.name = Some(format!("{} ends", s.name));
                event.terminating_flow_ids = flows(&s.flows_in_at_end);
            }
            Mark::End => event.r#type = Some(TYPE_SLICE_END),
        }
        put(TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(sequence),
            track_event: Some(event),
            ..Default::default()
        });
    }
    out.write_all(&bytes)
}
