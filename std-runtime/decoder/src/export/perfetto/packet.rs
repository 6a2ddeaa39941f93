//! Track-event packets encoded straight into the output buffer: the bytes of
//! [`proto::TracePacket`](super::proto::TracePacket), without building a message per record
//! and without copying the event once it is written (no allocation once the buffers have
//! grown).
//!
//! A length-delimited field's length is only known once its contents are written, so it is
//! reserved as a two-byte varint and filled in afterwards, as Perfetto's own protozero writer
//! does: `0x85 0x00` is a valid (if not minimal) varint for 5, which every protobuf parser
//! reads. Contents of 16 KiB or more (long strings) move up to make room for a longer length.
//! A slice end on its thread's track has a known size, so its lengths are written first.
//!
//! What every packet of a sequence repeats (its sequence id, and per callsite the interned
//! name's and field names' iids) is encoded once as a [`Tag`] and copied with one store.
//!
//! Field numbers are Perfetto's (see `../shared/formats/NOTES.md` and `proto.rs`); the unit
//! tests decode these bytes with the prost messages of `proto.rs`, and `benches/` compares
//! this encoder with prost's on the same packets.

use crate::decode::{FieldValue, Fields};
use waffle::wire::FieldType;

/// `Trace.packet`, length-delimited: the first byte of every packet.
pub(super) const TRACE_PACKET_KEY: u8 = 1 << 3 | 2;

/// Field keys (`number << 3 | wire type`; varint 0, 64-bit 1, length-delimited 2).
pub(super) mod key {
    /// `TracePacket`.
    pub const TIMESTAMP: u8 = 8 << 3;
    pub const SEQUENCE_ID: u8 = 10 << 3;
    pub const TRACK_EVENT: u8 = 11 << 3 | 2;
    pub const INTERNED_DATA: u8 = 12 << 3 | 2;
    pub const SEQUENCE_FLAGS: u8 = 13 << 3;
    /// `TrackEvent`; fields 47 and 48 take two-byte keys.
    pub const DEBUG_ANNOTATIONS: u8 = 4 << 3 | 2;
    pub const TYPE: u8 = 9 << 3;
    pub const NAME_IID: u8 = 10 << 3;
    pub const TRACK_UUID: u8 = 11 << 3;
    pub const FLOW_IDS: [u8; 2] = [0xf9, 0x02]; // 47 << 3 | 1
    pub const TERMINATING_FLOW_IDS: [u8; 2] = [0x81, 0x03]; // 48 << 3 | 1
    /// `InternedData`: tables of `{iid = 1, name = 2}`.
    pub const EVENT_NAMES: u8 = 2 << 3 | 2;
    pub const ANNOTATION_NAMES: u8 = 3 << 3 | 2;
    pub const IID: u8 = 1 << 3;
    pub const NAME: u8 = 2 << 3 | 2;
    /// `DebugAnnotation`.
    pub const ANNOTATION_NAME_IID: u8 = 1 << 3;
    pub const BOOL_VALUE: u8 = 2 << 3;
    pub const UINT_VALUE: u8 = 3 << 3;
    pub const INT_VALUE: u8 = 4 << 3;
    pub const DOUBLE_VALUE: u8 = 5 << 3 | 1;
    pub const STRING_VALUE: u8 = 6 << 3 | 2;
}

/// `TracePacket.sequence_flags`: SEQ_NEEDS_INCREMENTAL_STATE.
const NEEDS_INCREMENTAL_STATE: u8 = 2;

/// Appends `v` as a varint to a vector (for the cold parts: interned names).
fn varint(b: &mut Vec<u8>, v: u64) {
    let (low, high, n) = encoded(v);
    let mut bytes = [0u8; 10];
    bytes[..8].copy_from_slice(&low.to_le_bytes());
    bytes[8..].copy_from_slice(&high.to_le_bytes());
    b.extend_from_slice(&bytes[..n]);
}

/// `v` as a varint: its first 8 bytes and next 2 as little-endian words, and how many bytes
/// it takes.
#[inline(always)]
fn encoded(v: u64) -> (u64, u16, usize) {
    // Most multi-byte values (timestamp deltas, counters, sizes) take two bytes: made directly.
    if v < 1 << 14 {
        return if v < 0x80 { (v, 0, 1) } else { (v & 0x7f | 0x80 | (v >> 7) << 8, 0, 2) };
    }
    spread(v)
}

/// [`encoded`] for any value.
#[inline(always)]
fn spread(v: u64) -> (u64, u16, usize) {
    // The 7-bit groups of the low 56 bits are spread to a byte each in three steps (28-bit
    // halves to 32-bit lanes, then 14-bit quarters, then 7-bit groups), and all but the last
    // byte get their continuation bit: a few operations on registers, no loop. (Bytes stored
    // one by one and read back as a word would stall on store forwarding.)
    let n = varint_len(v);
    let x = v & 0x00ff_ffff_ffff_ffff;
    let x = (x & 0x0fff_ffff) | ((x & 0x00ff_ffff_f000_0000) << 4);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x0fff_c000_0fff_c000) << 2);
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x3f80_3f80_3f80_3f80) << 1);
    let continued = if n > 8 { u64::MAX } else { (1u64 << (8 * (n - 1))) - 1 };
    let low = x | (0x8080_8080_8080_8080 & continued);
    // Bits 56 to 63: the ninth byte (continued if there is a tenth) and the tenth.
    let high = ((v >> 56) & 0x7f) as u16 | ((v >> 63) as u16) << 8 | if n > 9 { 0x80 } else { 0 };
    (low, high, n)
}

/// The bytes `v` takes as a varint.
#[inline(always)]
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros()).div_ceil(7) as usize
}

/// A varint field encoded once (its key, then its value), to be copied into packets with one
/// 8-byte store: the sequence id every packet carries, the iid of an interned name. Values
/// are below 2^49 (sequence ids are 32-bit, iids count the names of a sequence).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tag {
    bytes: u64,
    len: u8,
}

impl Tag {
    /// Not defined yet.
    pub(super) const NONE: Tag = Tag { bytes: 0, len: 0 };

    /// Field `key` with varint value `v` (below 2^49).
    pub(super) fn new(key: u8, v: u64) -> Tag {
        assert!(v < 1 << 49, "a tag's value fits in 7 varint bytes");
        let (low, _, n) = encoded(v);
        // Only its own bytes: the rest are zero (annotation heads add the value's key there).
        let bytes = (u64::from(key) | low << 8) & (u64::MAX >> (8 * (7 - n)));
        Tag { bytes, len: 1 + n as u8 }
    }

    /// Whether it is defined.
    #[inline(always)]
    pub(super) fn is_some(self) -> bool {
        self.len != 0
    }

    /// The bytes it takes.
    #[inline(always)]
    fn len(self) -> usize {
        usize::from(self.len)
    }
}

/// Writes into a slice of the buffer with its position in a local, so that the compiler keeps
/// it in a register (a byte pushed onto a `Vec` may alias the vector's length, which is then
/// stored and loaded again around every byte).
struct Put<'a> {
    b: &'a mut [u8],
    p: usize,
}

impl Put<'_> {
    #[inline(always)]
    fn byte(&mut self, x: u8) {
        self.bytes([x]);
    }

    /// Stores `x` where the writer stands. Every write is bounds-checked in debug builds
    /// only: the checks of the byte-by-byte writes of a packet cost more than its encoding.
    #[inline(always)]
    fn bytes<const N: usize>(&mut self, x: [u8; N]) {
        debug_assert!(self.p + N <= self.b.len(), "a packet wrote past the room it reserved");
        // SAFETY: a `Put` is made over room that its packet reserved (`Packets::room`) for
        // the most it may write, counting whole words for varints and tags and a `FIELD` per
        // field, so `p + N` is within `b`; an unaligned write of plain bytes is always valid.
        unsafe { self.b.as_mut_ptr().add(self.p).cast::<[u8; N]>().write_unaligned(x) };
        self.p += N;
    }

    #[inline(always)]
    fn varint(&mut self, v: u64) {
        if v < 0x80 {
            self.byte(v as u8);
        } else {
            let (low, high, n) = encoded(v);
            self.words(low, high, n);
        }
    }

    /// `n` bytes (at most 10) given as two little-endian words: two stores.
    #[inline(always)]
    fn words(&mut self, low: u64, high: u16, n: usize) {
        let p = self.p;
        self.bytes(low.to_le_bytes());
        self.bytes(high.to_le_bytes());
        self.p = p + n;
    }

    /// A tag: one store of 8 bytes, of which it keeps its own.
    #[inline(always)]
    fn tag(&mut self, t: Tag) {
        let p = self.p;
        self.bytes(t.bytes.to_le_bytes());
        self.p = p + t.len();
    }

    /// A length-delimited field's key and a two-byte length to fill in: where that is.
    #[inline(always)]
    fn open(&mut self, key: u8) -> usize {
        self.bytes([key, 0x80, 0x00]);
        self.p - 2
    }

    /// Fills in the length reserved at `at` with what was written since; false if it does not
    /// fit in two bytes (then the caller moves the contents).
    #[inline(always)]
    fn close(&mut self, at: usize) -> bool {
        let len = self.p - at - 2;
        self.b[at] = len as u8 | 0x80;
        self.b[at + 1] = (len >> 7) as u8;
        len < 1 << 14
    }

    /// A debug annotation named by an iid's tag (key [`key::ANNOTATION_NAME_IID`]) whose
    /// value is a number or a bool of type `ty`, as [`Fields`] keeps it in a word.
    #[inline(always)]
    fn scalar_annotation(&mut self, name: Tag, ty: FieldType, w: u64) {
        // The value's key, by type code: bool, u64 and i64 (as two's complement, which is
        // what the word holds) are varints; a double is its 8 bytes.
        const KEYS: [u8; 8] =
            [0, key::UINT_VALUE, key::INT_VALUE, key::DOUBLE_VALUE, key::BOOL_VALUE, 0, 0, 0];
        let (low, high, n) = if ty == FieldType::F64 {
            (w, 0, 8)
        } else if w < 0x80 {
            (w, 0, 1)
        } else {
            encoded(w)
        };
        let key = KEYS[ty as usize & 7];
        if name.len() <= 5 {
            // Key, length, name and the value's key: one store.
            let head = u64::from(key::DEBUG_ANNOTATIONS)
                | ((name.len() + 1 + n) as u64) << 8
                | name.bytes << 16
                | u64::from(key) << (8 * (2 + name.len()));
            let p = self.p;
            self.bytes(head.to_le_bytes());
            self.p = p + 3 + name.len();
        } else {
            self.bytes([key::DEBUG_ANNOTATIONS, (name.len() + 1 + n) as u8]);
            self.tag(name);
            self.byte(key);
        }
        self.words(low, high, n);
    }

    /// A debug annotation named by an iid's tag whose value is a string, as bytes.
    #[inline(always)]
    fn str_annotation(&mut self, name: Tag, s: &[u8]) {
        self.byte(key::DEBUG_ANNOTATIONS);
        self.varint((name.len() + 1 + varint_len(s.len() as u64) + s.len()) as u64);
        self.tag(name);
        self.byte(key::STRING_VALUE);
        self.varint(s.len() as u64);
        self.b[self.p..self.p + s.len()].copy_from_slice(s);
        self.p += s.len();
    }

    /// `fields` as debug annotations, named by `names` (one per value).
    #[inline(always)]
    fn fields(&mut self, names: &[Tag], fields: &Fields) {
        let (types, words, text) = fields.raw();
        for ((&name, &ty), &w) in names.iter().zip(types).zip(words) {
            if ty == FieldType::Str {
                self.str_annotation(name, &text.as_bytes()[(w >> 32) as usize..w as u32 as usize]);
            } else {
                self.scalar_annotation(name, ty, w);
            }
        }
    }
}

/// The room the annotations of `fields` take, at most.
#[inline(always)]
fn fields_room(fields: &Fields) -> usize {
    let (types, _, text) = fields.raw();
    // Key, length, name, value key, and a varint, a double or a string's length.
    types.len() * 40 + text.len()
}

/// The room one field of fixed size is given: key and a 10-byte varint, or a [`Tag`]'s store.
const FIELD: usize = 16;

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
    fn varints_are_prost_s() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut values = vec![0, 1, 127, 128, 300, 16_383, 16_384, u64::MAX, u64::MAX >> 1, 1 << 63];
        values.extend((0..64).map(|k| 1u64 << k));
        values.extend((0..64).map(|k| (1u64 << k) - 1));
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        for v in values {
            let (mut ours, mut theirs) = (vec![9], vec![9]);
            varint(&mut ours, v);
            prost::encoding::encode_varint(v, &mut theirs);
            assert_eq!(ours, theirs, "{v}");
            let mut packets = Packets::with_capacity(0);
            let mut w = Put { b: packets.room(FIELD), p: 0 };
            w.varint(v);
            let p = w.p;
            assert_eq!(&packets.buf[..p], &theirs[1..], "{v}");
            // A tag: the key, then the same varint.
            if v < 1 << 49 {
                let mut w = Put { b: packets.room(2 * FIELD), p: 0 };
                w.tag(Tag::new(0x50, v));
                let p = w.p;
                theirs[0] = 0x50;
                assert_eq!(&packets.buf[..p], &theirs[..], "{v}");
            }
        }
    }

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
            let (got, used) = waffle::wire::read_varint(&b[1..]).unwrap();
            assert_eq!((got as usize, b.len() - 1 - used), (len, len));
            let minimal = prost::encoding::encoded_len_varint(len as u64);
            assert_eq!(used, minimal.max(2), "{len}");
        }
    }
}
