//! Record encoding: the bytes a span or event costs on the hot path.
//!
//! [`Writer`] appends to a fixed staging area and never fails mid-record: a write past the end
//! only advances the position, and the caller checks [`Writer::overflowed`] once per record and
//! rolls the record back. [`FieldValue`] says how each supported Rust type is written; the
//! macros require it of every field, so an unsupported type is a compile error that names it.

use crate::wire::{zigzag, FieldType, MAX_STR_LEN};

/// The longest LEB128 varint of a `u64`.
const MAX_VARINT: usize = 10;

/// Appends bytes to a staging area.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// A writer appending to `buf` from `pos`.
    #[inline(always)]
    pub fn new(buf: &'a mut [u8], pos: usize) -> Writer<'a> {
        Writer { buf, pos }
    }

    /// Bytes written so far, counting any that did not fit.
    #[inline(always)]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether some write did not fit.
    #[inline(always)]
    pub fn overflowed(&self) -> bool {
        self.pos > self.buf.len()
    }

    /// Appends one byte.
    #[inline(always)]
    pub fn byte(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.pos) {
            *slot = b;
        }
        self.pos += 1;
    }

    /// Appends a LEB128 varint.
    #[inline(always)]
    pub fn varint(&mut self, mut v: u64) {
        // Room for the longest varint: one bounds check instead of one per byte.
        if let Some(room) = self.buf.get_mut(self.pos..).and_then(|b| b.first_chunk_mut::<MAX_VARINT>()) {
            let mut n = 0;
            for slot in room.iter_mut() {
                n += 1;
                if v < 0x80 {
                    *slot = v as u8;
                    break;
                }
                *slot = (v as u8) | 0x80;
                v >>= 7;
            }
            self.pos += n;
            return;
        }
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    /// Appends raw bytes.
    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        let end = self.pos + b.len();
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.copy_from_slice(b);
        }
        self.pos = end;
    }
}

/// A value that can be a span or event field: integers, floats, `bool` and strings.
///
/// Implemented for the primitive types only, so that the hot path never formats. Convert other
/// values at the call site (`len as u64`, `&*name`), or leave them out of the fields.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a waffle field value",
    label = "not an integer, float, bool or string",
    note = "waffle fields take integers, floats, `bool` and `&str`; convert the value (e.g. `x as u64`, `s.as_str()`) or leave it out (`#[instrument(skip(..))]`)"
)]
pub trait FieldValue {
    /// How values of this type are written.
    const TYPE: FieldType;

    /// Writes the value in the encoding of [`Self::TYPE`].
    fn encode(&self, w: &mut Writer<'_>);

    /// Writes the type code, then the value: for fields whose type the macro could not see.
    #[inline(always)]
    fn encode_dynamic(&self, w: &mut Writer<'_>) {
        w.byte(Self::TYPE as u8);
        self.encode(w);
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const TYPE: FieldType = FieldType::U64;
            #[inline(always)]
            fn encode(&self, w: &mut Writer<'_>) {
                w.varint(*self as u64);
            }
        }
    )*};
}
unsigned!(u8, u16, u32, u64, usize);

macro_rules! signed {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const TYPE: FieldType = FieldType::I64;
            #[inline(always)]
            fn encode(&self, w: &mut Writer<'_>) {
                w.varint(zigzag(*self as i64));
            }
        }
    )*};
}
signed!(i8, i16, i32, i64, isize);

/// Ids are recorded as their numeric value.
impl FieldValue for crate::ids::SpanId {
    const TYPE: FieldType = FieldType::U64;
    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) {
        w.varint(self.to_u64());
    }
}

/// Ids are recorded as their numeric value.
impl FieldValue for crate::ids::EventId {
    const TYPE: FieldType = FieldType::U64;
    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) {
        w.varint(self.to_u64());
    }
}

impl FieldValue for f64 {
    const TYPE: FieldType = FieldType::F64;
    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) {
        w.bytes(&self.to_le_bytes());
    }
}

impl FieldValue for f32 {
    const TYPE: FieldType = FieldType::F64;
    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) {
        w.bytes(&f64::from(*self).to_le_bytes());
    }
}

impl FieldValue for bool {
    const TYPE: FieldType = FieldType::Bool;
    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) {
        w.byte(*self as u8);
    }
}

impl FieldValue for str {
    const TYPE: FieldType = FieldType::Str;
    #[inline]
    fn encode(&self, w: &mut Writer<'_>) {
        let mut len = self.len().min(MAX_STR_LEN);
        while !self.is_char_boundary(len) {
            len -= 1;
        }
        w.varint(len as u64);
        w.bytes(&self.as_bytes()[..len]);
    }
}

#[cfg(feature = "std")]
impl FieldValue for std::string::String {
    const TYPE: FieldType = FieldType::Str;
    #[inline]
    fn encode(&self, w: &mut Writer<'_>) {
        self.as_str().encode(w);
    }
}

impl<T: FieldValue + ?Sized> FieldValue for &T {
    const TYPE: FieldType = T::TYPE;
    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) {
        (**self).encode(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc<T: FieldValue + ?Sized>(v: &T) -> ([u8; 32], usize) {
        let mut buf = [0u8; 32];
        let mut w = Writer::new(&mut buf, 0);
        v.encode(&mut w);
        let n = w.pos();
        (buf, n)
    }

    #[test]
    fn varints_are_the_same_with_or_without_room_for_the_longest() {
        // Values at every length boundary, written with room to spare (the one-check path) and
        // into buffers that end just after, or inside, the varint (the byte-by-byte path).
        let values = (0..64).flat_map(|b| [(1u64 << b) - 1, 1u64 << b]).chain([u64::MAX]);
        for v in values {
            let mut roomy = [0u8; MAX_VARINT + 4];
            let mut w = Writer::new(&mut roomy, 2);
            w.varint(v);
            let len = w.pos() - 2;
            assert!(!w.overflowed());
            for size in [2 + len, 2 + len - 1] {
                let mut tight = [0u8; MAX_VARINT + 4];
                let mut t = Writer::new(&mut tight[..size], 2);
                t.varint(v);
                assert_eq!(t.pos(), 2 + len, "{v}: the position counts every byte");
                assert_eq!(t.overflowed(), size < 2 + len, "{v} in {size} bytes");
                let kept = size.min(2 + len);
                assert_eq!(&tight[2..kept], &roomy[2..kept], "{v}");
            }
        }
    }

    #[test]
    fn field_encodings_are_byte_exact() {
        let (b, n) = enc(&300u64);
        assert_eq!(&b[..n], &[0xac, 0x02]); // 300 = 0b10_0101100: low 7 bits + continuation, then 2
        let (b, n) = enc(&-2i32);
        assert_eq!(&b[..n], &[0x03]); // zigzag(-2) = 3
        let (b, n) = enc(&1.5f64);
        assert_eq!(&b[..n], &1.5f64.to_le_bytes());
        let (b, n) = enc(&true);
        assert_eq!(&b[..n], &[0x01]);
        let (b, n) = enc("hé");
        assert_eq!(&b[..n], &[0x03, b'h', 0xc3, 0xa9]); // length 3 bytes, then UTF-8
    }

    #[test]
    fn dynamic_fields_lead_with_their_type() {
        let mut buf = [0u8; 8];
        let mut w = Writer::new(&mut buf, 0);
        7u8.encode_dynamic(&mut w);
        assert_eq!(&buf[..2], &[FieldType::U64 as u8, 7]);
    }

    #[test]
    fn overflow_is_reported_not_written() {
        let mut buf = [0u8; 2];
        let mut w = Writer::new(&mut buf, 0);
        w.varint(u64::MAX);
        assert!(w.overflowed());
        assert_eq!(w.pos(), 10);
    }

    #[test]
    fn long_strings_are_cut_at_a_char_boundary() {
        let mut s = [b'a'; MAX_STR_LEN + 1];
        s[MAX_STR_LEN - 1] = 0xc3; // 'é' straddles the limit
        s[MAX_STR_LEN] = 0xa9;
        let s = core::str::from_utf8(&s).unwrap();
        let mut buf = [0u8; MAX_STR_LEN + 16];
        let mut w = Writer::new(&mut buf, 0);
        s.encode(&mut w);
        // 2-byte length prefix for 1023, then 1023 bytes.
        assert_eq!(w.pos(), 2 + MAX_STR_LEN - 1);
    }
}
