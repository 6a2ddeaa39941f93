//! The exporter's packet encoder against prost's, on the same packets: for `benches/` (which
//! measures both in one run) and for the unit test that reads both back with the prost
//! messages of `proto.rs`. Not part of the API.
//!
//! A [`Sample`] holds the track-event packets of a `.pftrace`, each ready for both encoders:
//! as a prost message, and as what the writer hands `packet.rs` (tags, field values, flows).
//! The hand side encodes each one the way the writer does: a plain slice end in one piece, an
//! event without flows with its annotations in one go, others field by field.

use prost::Message;

use super::{
    packet::Packets,
    proto::{self, AnnotationValue},
    put::{key, Tag, TRACE_PACKET_KEY},
    TYPE_SLICE_END,
};
use crate::decode::{FieldValue, Fields};

/// One packet as the writer hands it to the encoder.
struct Input {
    delta: u64,
    seq: Tag,
    kind: i32,
    name: Tag,
    track: Option<u64>,
    names: Vec<Tag>,
    fields: Fields,
    out: Vec<u64>,
    into: Vec<u64>,
    /// Names defined in the packet: (event name?, iid, name).
    interned: Vec<(bool, u64, String)>,
}

/// The track-event packets of a trace, for both encoders.
pub struct Sample {
    messages: Vec<proto::TracePacket>,
    inputs: Vec<Input>,
}

impl Sample {
    /// The track-event packets of `pftrace`, as this exporter writes them.
    pub fn new(pftrace: &[u8]) -> Result<Sample, prost::DecodeError> {
        let messages: Vec<_> = proto::Trace::decode(pftrace)?
            .packet
            .into_iter()
            .filter(|p| p.track_event.is_some() && p.clock_snapshot.is_none())
            .collect();
        let inputs = messages.iter().map(input).collect();
        Ok(Sample { messages, inputs })
    }

    /// How many packets.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The packets encoded by prost into `out` (cleared first), each as `Trace.packet`.
    pub fn prost(&self, out: &mut Vec<u8>) {
        out.clear();
        for m in &self.messages {
            out.push(TRACE_PACKET_KEY);
            m.encode_length_delimited(out).expect("a Vec grows");
        }
    }

    /// The packets encoded by the exporter's encoder into `out` (cleared first).
    pub fn hand(&self, out: &mut Buffer) {
        let out = &mut out.0;
        out.clear();
        for p in &self.inputs {
            let plain = p.out.is_empty() && p.into.is_empty();
            if p.kind == TYPE_SLICE_END
                && plain
                && p.names.is_empty()
                && p.track.is_none()
                && p.interned.is_empty()
            {
                out.slice_end(p.delta, p.seq);
                continue;
            }
            for (event_name, iid, name) in &p.interned {
                match event_name {
                    true => out.intern_name(*iid, name),
                    false => out.intern_annotation(*iid, name),
                }
            }
            if plain {
                out.event(p.delta, p.seq, p.kind, p.name, p.track, &p.names, &p.fields);
            } else {
                out.begin(p.delta, p.seq);
                out.fields(&p.names, &p.fields);
                out.end(p.kind, p.name, p.track, &p.out, &p.into);
            }
        }
    }
}

/// The exporter's packet buffer, for [`Sample::hand`].
pub struct Buffer(Packets);

impl Buffer {
    /// An empty buffer.
    pub fn new() -> Buffer {
        Buffer(Packets::with_capacity(1 << 20))
    }

    /// The packets written.
    pub fn bytes(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl Default for Buffer {
    fn default() -> Self {
        Buffer::new()
    }
}

/// What the writer would hand the encoder for `m`.
fn input(m: &proto::TracePacket) -> Input {
    let ev = m.track_event.as_ref().expect("a track event");
    let mut fields = Fields::new();
    let mut names = Vec::new();
    for a in &ev.debug_annotations {
        names.push(Tag::new(key::ANNOTATION_NAME_IID, a.name_iid.expect("an interned name")));
        fields.push(match a.value.as_ref().expect("a value") {
            AnnotationValue::Bool(v) => FieldValue::Bool(*v),
            AnnotationValue::Uint(v) => FieldValue::U64(*v),
            AnnotationValue::Int(v) => FieldValue::I64(*v),
            AnnotationValue::Double(v) => FieldValue::F64(*v),
            AnnotationValue::Str(v) => FieldValue::Str(v),
        });
    }
    let mut interned = Vec::new();
    if let Some(d) = &m.interned_data {
        let entries = d
            .event_names
            .iter()
            .map(|e| (true, e))
            .chain(d.debug_annotation_names.iter().map(|e| (false, e)));
        interned.extend(
            entries.map(|(event, e)| (event, e.iid.unwrap_or(0), e.name.clone().unwrap_or_default())),
        );
    }
    Input {
        delta: m.timestamp.unwrap_or(0),
        seq: Tag::new(key::SEQUENCE_ID, m.trusted_packet_sequence_id.unwrap_or(0).into()),
        kind: ev.r#type.unwrap_or(0),
        name: ev.name_iid.map_or(Tag::NONE, |iid| Tag::new(key::NAME_IID, iid)),
        track: ev.track_uuid,
        names,
        fields,
        out: ev.flow_ids.clone(),
        into: ev.terminating_flow_ids.clone(),
        interned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perfetto::tests::sample;

    /// The exporter's bytes and prost's decode to the same messages, field by field: those the
    /// exporter wrote, read back.
    #[test]
    fn hand_encoding_decodes_to_prost_s_messages() {
        let mut bytes = Vec::new();
        crate::perfetto::write(&sample(), &mut bytes).unwrap();
        let sample = Sample::new(&bytes).unwrap();
        assert!(sample.len() > 10);
        let (mut theirs, mut ours) = (Vec::new(), Buffer::new());
        sample.prost(&mut theirs);
        sample.hand(&mut ours);
        let theirs = proto::Trace::decode(theirs.as_slice()).unwrap().packet;
        let ours = proto::Trace::decode(ours.bytes()).unwrap().packet;
        assert_eq!(ours.len(), sample.messages.len());
        for ((ours, theirs), written) in ours.iter().zip(&theirs).zip(&sample.messages) {
            assert_eq!(ours, theirs);
            assert_eq!(ours, written);
        }
        // Every kind of packet the writer makes is among them.
        let kinds = |f: &dyn Fn(&proto::TracePacket) -> bool| sample.messages.iter().filter(|p| f(p)).count();
        let event = |p: &proto::TracePacket| p.track_event.clone().unwrap();
        assert!(
            kinds(&|p| event(p).r#type == Some(TYPE_SLICE_END) && event(p).debug_annotations.is_empty()) > 0
        );
        assert!(
            kinds(&|p| event(p).r#type == Some(TYPE_SLICE_END) && !event(p).debug_annotations.is_empty()) > 0
        );
        assert!(kinds(&|p| p.interned_data.is_some()) > 0);
        assert!(kinds(&|p| event(p).debug_annotations.len() >= 5) > 0, "every value type");
    }

    /// A string long enough for 3-byte lengths, in a packet written in one go.
    #[test]
    fn long_strings_move_their_packet_up() {
        let mut trace = sample();
        trace.processes[0].threads[0].events[0].fields[4] = crate::model::Value::Str("y".repeat(20_000));
        let mut bytes = Vec::new();
        crate::perfetto::write(&trace, &mut bytes).unwrap();
        let sample = Sample::new(&bytes).unwrap();
        let mut ours = Buffer::new();
        sample.hand(&mut ours);
        assert_eq!(proto::Trace::decode(ours.bytes()).unwrap().packet, sample.messages);
        assert!(ours.bytes().len() > 20_000);
    }

    /// The same with flows and tracks of their own, and strings long enough for 3-byte
    /// lengths.
    #[test]
    fn flows_tracks_and_long_strings_too() {
        let mut bytes = Vec::new();
        let mut trace = sample();
        let long = "x".repeat(20_000);
        trace.processes[0].threads[0].events[0].fields[4] = crate::model::Value::Str(long);
        crate::perfetto::write(&trace, &mut bytes).unwrap();
        let mut messages = proto::Trace::decode(bytes.as_slice()).unwrap().packet;
        messages.retain(|p| p.track_event.is_some());
        for (k, p) in messages.iter_mut().enumerate() {
            let ev = p.track_event.as_mut().unwrap();
            if k % 3 == 0 {
                (ev.flow_ids, ev.terminating_flow_ids) = (vec![k as u64, 1 << 40], vec![7]);
            }
            if k % 4 == 0 {
                ev.track_uuid = Some(0x5741_4646 + k as u64);
            }
        }
        let mut bytes = Vec::new();
        proto::Trace { packet: messages.clone() }.encode(&mut bytes).unwrap();
        let sample = Sample::new(&bytes).unwrap();
        let mut ours = Buffer::new();
        sample.hand(&mut ours);
        assert_eq!(proto::Trace::decode(ours.bytes()).unwrap().packet, messages);
    }
}
