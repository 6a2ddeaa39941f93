//! Protobuf fields as the Perfetto writer encodes them by hand: varints, field keys, a field
//! encoded once and copied with one store ([`Tag`]), and [`Put`], which writes fields into a
//! slice of the output buffer that [`Packets`](super::packet::Packets) has made room for.
//!
//! A length-delimited field's length is only known once its contents are written, so [`Put`]
//! reserves it as a two-byte varint and fills it in afterwards, as Perfetto's own protozero
//! writer does: `0x85 0x00` is a valid (if not minimal) varint for 5, which every protobuf
//! parser reads. The caller moves contents of 16 KiB or more up to make room for a longer
//! length.

use crate::decode::Fields;
use waffle_wire::FieldType;

/// `Trace.packet`, length-delimited: the first byte of every packet.
pub(super) const TRACE_PACKET_KEY: u8 = 1 << 3 | 2;

/// Field keys (`number << 3 | wire type`; varint 0, 64-bit 1, length-delimited 2).
pub(super) mod key {
    /// `TracePacket`.
    pub(crate) const TIMESTAMP: u8 = 8 << 3;
    pub(crate) const SEQUENCE_ID: u8 = 10 << 3;
    pub(crate) const TRACK_EVENT: u8 = 11 << 3 | 2;
    pub(crate) const INTERNED_DATA: u8 = 12 << 3 | 2;
    pub(crate) const SEQUENCE_FLAGS: u8 = 13 << 3;
    /// `TrackEvent`; fields 47 and 48 take two-byte keys.
    pub(crate) const DEBUG_ANNOTATIONS: u8 = 4 << 3 | 2;
    pub const TYPE: u8 = 9 << 3;
    pub(crate) const NAME_IID: u8 = 10 << 3;
    pub(crate) const TRACK_UUID: u8 = 11 << 3;
    pub(crate) const FLOW_IDS: [u8; 2] = [0xf9, 0x02]; // 47 << 3 | 1
    pub(crate) const TERMINATING_FLOW_IDS: [u8; 2] = [0x81, 0x03]; // 48 << 3 | 1
    /// `InternedData`: tables of `{iid = 1, name = 2}`.
    pub(crate) const EVENT_NAMES: u8 = 2 << 3 | 2;
    pub(crate) const ANNOTATION_NAMES: u8 = 3 << 3 | 2;
    pub(crate) const IID: u8 = 1 << 3;
    pub const NAME: u8 = 2 << 3 | 2;
    /// `DebugAnnotation`.
    pub(crate) const ANNOTATION_NAME_IID: u8 = 1 << 3;
    pub(crate) const BOOL_VALUE: u8 = 2 << 3;
    pub(crate) const UINT_VALUE: u8 = 3 << 3;
    pub(crate) const INT_VALUE: u8 = 4 << 3;
    pub(crate) const DOUBLE_VALUE: u8 = 5 << 3 | 1;
    pub(crate) const STRING_VALUE: u8 = 6 << 3 | 2;
}

/// Appends `v` as a varint to a vector (for the cold parts: interned names).
pub(super) fn varint(b: &mut Vec<u8>, v: u64) {
    let (low, high, n) = encoded(v);
    let mut bytes = [0u8; 10];
    bytes[..8].copy_from_slice(&low.to_le_bytes());
    bytes[8..].copy_from_slice(&high.to_le_bytes());
    b.extend_from_slice(&bytes[..n]);
}

/// `v` as a varint: its first 8 bytes and next 2 as little-endian words, and how many bytes
/// it takes.
#[inline(always)]
pub(super) fn encoded(v: u64) -> (u64, u16, usize) {
    // Most multi-byte values (timestamp deltas, counters, sizes) take two bytes: made directly.
    if v < 1 << 14 {
        return if v < 0x80 { (v, 0, 1) } else { (v & 0x7f | 0x80 | (v >> 7) << 8, 0, 2) };
    }
    spread(v)
}

/// [`encoded`] for any value.
#[inline(always)]
pub(super) fn spread(v: u64) -> (u64, u16, usize) {
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
pub(super) fn varint_len(v: u64) -> usize {
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
    pub(super) fn len(self) -> usize {
        usize::from(self.len)
    }
}

/// Writes into a slice of the buffer with its position in a local, so that the compiler keeps
/// it in a register (a byte pushed onto a `Vec` may alias the vector's length, which is then
/// stored and loaded again around every byte).
pub(super) struct Put<'a> {
    /// The room to write in.
    pub(super) b: &'a mut [u8],
    /// Where the next byte goes.
    pub(super) p: usize,
}

impl Put<'_> {
    #[inline(always)]
    pub(super) fn byte(&mut self, x: u8) {
        self.bytes([x]);
    }

    /// Stores `x` where the writer stands. Every write is bounds-checked in debug builds
    /// only: the checks of the byte-by-byte writes of a packet cost more than its encoding.
    #[inline(always)]
    pub(super) fn bytes<const N: usize>(&mut self, x: [u8; N]) {
        debug_assert!(self.p + N <= self.b.len(), "a packet wrote past the room it reserved");
        // SAFETY: a `Put` is made over room that its packet reserved (`Packets::room`) for
        // the most it may write, counting whole words for varints and tags and a `FIELD` per
        // field, so `p + N` is within `b`; an unaligned write of plain bytes is always valid.
        unsafe { self.b.as_mut_ptr().add(self.p).cast::<[u8; N]>().write_unaligned(x) };
        self.p += N;
    }

    #[inline(always)]
    pub(super) fn varint(&mut self, v: u64) {
        if v < 0x80 {
            self.byte(v as u8);
        } else {
            let (low, high, n) = encoded(v);
            self.words(low, high, n);
        }
    }

    /// `n` bytes (at most 10) given as two little-endian words: two stores.
    #[inline(always)]
    pub(super) fn words(&mut self, low: u64, high: u16, n: usize) {
        let p = self.p;
        self.bytes(low.to_le_bytes());
        self.bytes(high.to_le_bytes());
        self.p = p + n;
    }

    /// A tag: one store of 8 bytes, of which it keeps its own.
    #[inline(always)]
    pub(super) fn tag(&mut self, t: Tag) {
        let p = self.p;
        self.bytes(t.bytes.to_le_bytes());
        self.p = p + t.len();
    }

    /// A length-delimited field's key and a two-byte length to fill in: where that is.
    #[inline(always)]
    pub(super) fn open(&mut self, key: u8) -> usize {
        self.bytes([key, 0x80, 0x00]);
        self.p - 2
    }

    /// Fills in the length reserved at `at` with what was written since; false if it does not
    /// fit in two bytes (then the caller moves the contents).
    #[inline(always)]
    pub(super) fn close(&mut self, at: usize) -> bool {
        let len = self.p - at - 2;
        self.b[at] = len as u8 | 0x80;
        self.b[at + 1] = (len >> 7) as u8;
        len < 1 << 14
    }

    /// A debug annotation named by an iid's tag (key [`key::ANNOTATION_NAME_IID`]) whose
    /// value is a number or a bool of type `ty`, as [`Fields`] keeps it in a word.
    #[inline(always)]
    pub(super) fn scalar_annotation(&mut self, name: Tag, ty: FieldType, w: u64) {
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
    pub(super) fn str_annotation(&mut self, name: Tag, s: &[u8]) {
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
    pub(super) fn fields(&mut self, names: &[Tag], fields: &Fields) {
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
pub(super) fn fields_room(fields: &Fields) -> usize {
    let (types, _, text) = fields.raw();
    // Key, length, name, value key, and a varint, a double or a string's length.
    types.len() * 40 + text.len()
}

/// The room one field of fixed size is given: key and a 10-byte varint, or a [`Tag`]'s store.
pub(super) const FIELD: usize = 16;

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
            let mut buf = [0u8; 2 * FIELD];
            let mut w = Put { b: &mut buf, p: 0 };
            w.varint(v);
            let p = w.p;
            assert_eq!(&buf[..p], &theirs[1..], "{v}");
            // A tag: the key, then the same varint.
            if v < 1 << 49 {
                let mut buf = [0u8; 2 * FIELD];
                let mut w = Put { b: &mut buf, p: 0 };
                w.tag(Tag::new(0x50, v));
                let p = w.p;
                theirs[0] = 0x50;
                assert_eq!(&buf[..p], &theirs[..], "{v}");
            }
        }
    }
}
