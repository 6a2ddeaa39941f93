//! Track-event packets encoded straight into the output buffer: the bytes of
//! [`proto::TracePacket`](super::proto::TracePacket), without building a message per record
//! and without copying the event once it is written (no allocation once the buffers have
//! grown).
//!
//! The fields themselves are written by `put.rs`, lengths reserved as two-byte varints and
//! filled in afterwards; contents of 16 KiB or more (long strings) move up here to make room
//! for a longer length. A slice end on its thread's track has a known size, so its lengths are
//! written first.
//!
//! What every packet of a sequence repeats (its sequence id, and per callsite the interned
//! name's and field names' iids) is encoded once as a [`Tag`] and copied with one store.
//!
//! Field numbers are Perfetto's (see `../shared/formats/NOTES.md` and `proto.rs`); the unit
//! tests decode these bytes with the prost messages of `proto.rs`, and `benches/` compares
//! this encoder with prost's on the same packets.

use super::put::{fields_room, key, varint, varint_len, Put, Tag, FIELD, TRACE_PACKET_KEY};
use crate::decode::{FieldValue, Fields};
use waffle_wire::FieldType;

/// `TracePacket.sequence_flags`: SEQ_NEEDS_INCREMENTAL_STATE.
const NEEDS_INCREMENTAL_STATE: u8 = 2;

/// Packets being written into one buffer, one track event at a time.
pub(super) struct Packets {
    /// Whole packets, and the one being written, up to `used`; the rest is room, zeroed once.
    buf: Vec<u8>,
    used: usize,
    /// The `InternedData` entries of the packet being written: names it uses first.
    interned: Vec<u8>,
    packet_at: usize,
    event_at: usize,
    uses_iids: bool,
}

impl Packets {
    /// An empty buffer with room for `bytes`.
    pub(super) fn with_capacity(bytes: usize) -> Packets {
        Packets {
            buf: vec![0; bytes.max(256)],
            used: 0,
            interned: Vec::new(),
            packet_at: 0,
            event_at: 0,
            uses_iids: false,
        }
    }

    /// The packets written.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf[..self.used]
    }

    /// How many bytes of packets are written.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.used
    }

    /// Forgets the packets written (once they are out).
    pub(super) fn clear(&mut self) {
        self.used = 0;
    }

    /// Appends bytes as they are (a whole packet encoded elsewhere).
    pub(super) fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        self.room(n)[..n].copy_from_slice(bytes);
        self.used += n;
    }

    /// At least `n` bytes of room after what is written.
    #[inline(always)]
    fn room(&mut self, n: usize) -> &mut [u8] {
        if self.buf.len() - self.used < n {
            self.grow(n);
        }
        &mut self.buf[self.used..]
    }

    #[cold]
    fn grow(&mut self, n: usize) {
        let len = (self.used + n).max(2 * self.buf.len());
        self.buf.resize(len, 0);
    }

    /// Starts a packet of sequence `seq` (its id's [`Tag`]) holding a track event, `delta`
    /// after the sequence's previous packet on its incremental clock.
    #[inline]
    pub(super) fn begin(&mut self, delta: u64, seq: Tag) {
        let used = self.used;
        let mut w = Put { b: self.room(4 * FIELD), p: 0 };
        let packet_at = w.open(TRACE_PACKET_KEY);
        w.byte(key::TIMESTAMP);
        w.varint(delta);
        w.tag(seq);
        let event_at = w.open(key::TRACK_EVENT);
        let p = w.p;
        (self.packet_at, self.event_at) = (used + packet_at, used + event_at);
        self.used += p;
        self.uses_iids = false;
    }

    /// Defines event name `iid` in the packet being written (or the next one).
    pub(super) fn intern_name(&mut self, iid: u64, name: &str) {
        intern(&mut self.interned, key::EVENT_NAMES, iid, name);
    }

    /// Defines annotation name `iid` in the packet being written (or the next one).
    pub(super) fn intern_annotation(&mut self, iid: u64, name: &str) {
        intern(&mut self.interned, key::ANNOTATION_NAMES, iid, name);
    }

    /// A debug annotation with an interned name: `name` is its iid's tag (key
    /// [`key::ANNOTATION_NAME_IID`]).
    pub(super) fn annotation(&mut self, name: Tag, value: FieldValue<'_>) {
        let (ty, word) = match value {
            FieldValue::Bool(v) => (FieldType::Bool, u64::from(v)),
            FieldValue::U64(v) => (FieldType::U64, v),
            FieldValue::I64(v) => (FieldType::I64, v as u64),
            FieldValue::F64(v) => (FieldType::F64, v.to_bits()),
            FieldValue::Str(s) => return self.text_annotation(name, s.as_bytes()),
        };
        self.uses_iids = true;
        let mut w = Put { b: self.room(4 * FIELD), p: 0 };
        w.scalar_annotation(name, ty, word);
        self.used += w.p;
    }

    /// A debug annotation with an interned name (as for [`annotation`](Self::annotation))
    /// whose value is the string `text`, given as its bytes, which must be UTF-8 (the writer
    /// builds its texts as bytes, so none is checked again here).
    pub(super) fn text_annotation(&mut self, name: Tag, text: &[u8]) {
        self.uses_iids = true;
        let mut w = Put { b: self.room(4 * FIELD + text.len()), p: 0 };
        w.str_annotation(name, text);
        self.used += w.p;
    }

    /// `fields` as debug annotations, named by `names` (one per value).
    #[inline]
    pub(super) fn fields(&mut self, names: &[Tag], fields: &Fields) {
        if names.is_empty() {
            return;
        }
        self.uses_iids = true;
        let mut w = Put { b: self.room(fields_room(fields) + FIELD), p: 0 };
        w.fields(names, fields);
        self.used += w.p;
    }

    /// A whole packet of sequence `seq` holding a track event without flows: `delta` after
    /// the sequence's previous packet, of type `kind`, named by `name` (an iid's tag, key
    /// [`key::NAME_IID`]), with `fields` as annotations named by `names`, on `track` unless
    /// it is the sequence's default. The commonest packet, written in one go.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn event(
        &mut self,
        delta: u64,
        seq: Tag,
        kind: i32,
        name: Tag,
        track: Option<u64>,
        names: &[Tag],
        fields: &Fields,
    ) {
        let used = self.used;
        let interned = self.interned.len();
        self.room(fields_room(fields) + interned + 8 * FIELD);
        let mut w = Put { b: &mut self.buf[used..], p: 0 };
        let packet_at = w.open(TRACE_PACKET_KEY);
        w.byte(key::TIMESTAMP);
        w.varint(delta);
        w.tag(seq);
        let event_at = w.open(key::TRACK_EVENT);
        w.fields(names, fields);
        w.bytes([key::TYPE, kind as u8]);
        w.tag(name);
        if let Some(track) = track {
            w.byte(key::TRACK_UUID);
            w.varint(track);
        }
        let event_end = w.p;
        let short = w.close(event_at);
        if interned > 0 {
            w.byte(key::INTERNED_DATA);
            w.varint(interned as u64);
            w.b[w.p..w.p + interned].copy_from_slice(&self.interned);
            w.p += interned;
            self.interned.clear();
        }
        if name.is_some() || !names.is_empty() {
            w.bytes([key::SEQUENCE_FLAGS, NEEDS_INCREMENTAL_STATE]);
        }
        let short = w.close(packet_at) && short;
        self.used = used + w.p;
        if !short {
            // Long strings: lengths of more than two bytes, contents moved up.
            let len = event_end - event_at - 2;
            if len >= 1 << 14 {
                self.close_long(used + event_at, len);
            }
            self.close(used + packet_at);
        }
    }

    /// Ends the packet: the rest of the `TrackEvent` (type, name, the track unless it is the
    /// sequence's default, flows), then the names it defines, and the flag saying it needs the
    /// sequence's interned state if it uses any. `name` is the name iid's tag (key
    /// [`key::NAME_IID`]), if any. Flow ids are written unpacked, as proto2 has them and
    /// trace_processor reads them.
    #[inline]
    pub(super) fn end(&mut self, kind: i32, name: Tag, track: Option<u64>, out: &[u64], into: &[u64]) {
        self.uses_iids |= name.is_some();
        let mut w = Put { b: self.room(4 * FIELD + 10 * (out.len() + into.len())), p: 0 };
        w.bytes([key::TYPE, kind as u8]);
        w.tag(name);
        if let Some(track) = track {
            w.byte(key::TRACK_UUID);
            w.varint(track);
        }
        for id in out {
            w.bytes(key::FLOW_IDS);
            w.bytes(id.to_le_bytes());
        }
        for id in into {
            w.bytes(key::TERMINATING_FLOW_IDS);
            w.bytes(id.to_le_bytes());
        }
        self.used += w.p;
        self.close(self.event_at);
        if !self.interned.is_empty() {
            let n = self.interned.len();
            let mut w = Put { b: self.room(FIELD + n), p: 0 };
            w.byte(key::INTERNED_DATA);
            w.varint(n as u64);
            let p = w.p;
            let (used, interned) = (self.used + p, &self.interned);
            self.buf[used..used + n].copy_from_slice(interned);
            self.used = used + n;
            self.interned.clear();
        }
        if self.uses_iids {
            let mut w = Put { b: self.room(2), p: 0 };
            w.bytes([key::SEQUENCE_FLAGS, NEEDS_INCREMENTAL_STATE]);
            self.used += 2;
        }
        self.close(self.packet_at);
    }

    /// A whole packet holding a slice end on the sequence's default track, with nothing else:
    /// the commonest packet, whose lengths are known before it is written.
    #[inline(always)]
    pub(super) fn slice_end(&mut self, delta: u64, seq: Tag) {
        let mut w = Put { b: self.room(4 * FIELD), p: 0 };
        // Packet: timestamp, sequence id, and the 4-byte track event.
        let len = 1 + varint_len(delta) + seq.len() + 4;
        w.bytes([TRACE_PACKET_KEY, len as u8, key::TIMESTAMP]);
        w.varint(delta);
        w.tag(seq);
        w.bytes([key::TRACK_EVENT, 2, key::TYPE, super::TYPE_SLICE_END as u8]);
        self.used += w.p;
    }

    /// Ends the contents whose length is reserved at `at`: fills it in.
    #[inline]
    fn close(&mut self, at: usize) {
        let len = self.used - at - 2;
        if len < 1 << 14 {
            self.buf[at] = len as u8 | 0x80;
            self.buf[at + 1] = (len >> 7) as u8;
        } else {
            self.close_long(at, len);
        }
    }

    /// Contents longer than two length bytes say: they move up.
    #[cold]
    fn close_long(&mut self, at: usize, len: usize) {
        let mut length = Vec::with_capacity(5);
        varint(&mut length, len as u64);
        let n = length.len();
        self.room(n - 2);
        self.buf.copy_within(at + 2..self.used, at + n);
        self.buf[at..at + n].copy_from_slice(&length);
        self.used += n - 2;
    }
}

fn intern(b: &mut Vec<u8>, table: u8, iid: u64, name: &str) {
    let len = 1 + varint_len(iid) + 1 + varint_len(name.len() as u64) + name.len();
    b.push(table);
    varint(b, len as u64);
    b.push(key::IID);
    varint(b, iid);
    b.push(key::NAME);
    varint(b, name.len() as u64);
    b.extend_from_slice(name.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_of_every_kind_read_back_with_prost() {
        use super::super::proto::{AnnotationValue, Trace};
        use prost::Message;
        let long = "x".repeat(300);
        let values = [
            FieldValue::Bool(true),
            FieldValue::Bool(false),
            FieldValue::U64(0),
            FieldValue::U64(u64::MAX),
            FieldValue::I64(-1),
            FieldValue::I64(i64::MIN),
            FieldValue::F64(-2.5),
            FieldValue::Str(""),
            FieldValue::Str(&long),
        ];
        let mut packets = Packets::with_capacity(0);
        packets.begin(7, Tag::new(key::SEQUENCE_ID, 3));
        for (k, &v) in values.iter().enumerate() {
            packets.annotation(Tag::new(key::ANNOTATION_NAME_IID, 1 << (6 * k)), v);
        }
        packets
            .text_annotation(Tag::new(key::ANNOTATION_NAME_IID, 99), b"0000000000000001, 00000000000000ff");
        packets.end(3, Tag::NONE, None, &[], &[]);
        let trace = Trace::decode(packets.bytes()).expect("prost reads the packet");
        let ev = trace.packet[0].track_event.as_ref().expect("a track event");
        let got: Vec<_> = ev.debug_annotations.iter().map(|a| (a.name_iid, a.value.clone())).collect();
        let mut want: Vec<_> = values
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let value = match *v {
                    FieldValue::Bool(v) => AnnotationValue::Bool(v),
                    FieldValue::U64(v) => AnnotationValue::Uint(v),
                    FieldValue::I64(v) => AnnotationValue::Int(v),
                    FieldValue::F64(v) => AnnotationValue::Double(v),
                    FieldValue::Str(v) => AnnotationValue::Str(v.to_owned()),
                };
                (Some(1 << (6 * k)), Some(value))
            })
            .collect();
        want.push((Some(99), Some(AnnotationValue::Str("0000000000000001, 00000000000000ff".into()))));
        assert!(got == want, "{} annotations read back differ", got.len());
        assert_eq!(trace.packet[0].sequence_flags, Some(u32::from(NEEDS_INCREMENTAL_STATE)));
    }

    #[test]
    fn long_contents_get_longer_lengths() {
        for len in [0, 127, 128, 16_383, 16_384, 70_000] {
            let mut packets = Packets::with_capacity(0);
            packets.put(&[key::STRING_VALUE, 0x80, 0x00]);
            packets.put(&vec![7u8; len]);
            packets.close(1);
            let b = packets.bytes();
            // Two bytes (not minimal below 128, still read right) up to 16 KiB, then minimal.
            let (got, used) = waffle_wire::read_varint(&b[1..]).unwrap();
            assert_eq!((got as usize, b.len() - 1 - used), (len, len));
            let minimal = prost::encoding::encoded_len_varint(len as u64);
            assert_eq!(used, minimal.max(2), "{len}");
        }
    }
}
