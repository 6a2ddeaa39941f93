//! Values as the format writes them: arguments as dynamic field values, microseconds as
//! nanoseconds; FNV-1a for salts and correlation values; the hasher of the per-event maps.

use crate::event::Arg;
use waffle_wire::{write_varint, zigzag, FieldType, MAX_STR_LEN, MAX_VARINT_LEN};

/// Microseconds (the format's unit, a double) to whole nanoseconds, never below 0.
pub(crate) fn ns(us: f64) -> u64 {
    let v = (us * 1000.0).round();
    if v.is_finite() && v > 0.0 {
        v.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// An argument as a dynamic field value: its type code, then the value (integers as
/// varints, other numbers as doubles, strings cut at a character boundary to the format's
/// limit, arrays and objects as their compact JSON text).
pub(crate) fn encode(v: &Arg<'_>, out: &mut Vec<u8>) {
    let mut buf = [0u8; MAX_VARINT_LEN];
    match v {
        Arg::U64(u) => {
            out.push(FieldType::U64 as u8);
            let len = write_varint(&mut buf, *u);
            out.extend_from_slice(&buf[..len]);
        }
        Arg::I64(i) => {
            out.push(FieldType::I64 as u8);
            let len = write_varint(&mut buf, zigzag(*i));
            out.extend_from_slice(&buf[..len]);
        }
        Arg::F64(f) => {
            out.push(FieldType::F64 as u8);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Arg::Bool(b) => {
            out.push(FieldType::Bool as u8);
            out.push(u8::from(*b));
        }
        Arg::Str(s) => string(s, out),
        Arg::Json(s) => string(s, out),
    }
}

fn string(s: &str, out: &mut Vec<u8>) {
    let mut end = s.len().min(MAX_STR_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut buf = [0u8; MAX_VARINT_LEN];
    out.push(FieldType::Str as u8);
    let len = write_varint(&mut buf, end as u64);
    out.extend_from_slice(&buf[..len]);
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// FNV-1a over `parts`, from `basis`.
pub(crate) fn fnv(basis: u64, parts: &[&[u8]]) -> u64 {
    let step = |h: u64, b: &u8| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    parts.iter().fold(basis, |h, p| p.iter().fold(step(h, &0xff), step))
}

/// A multiply-rotate `Hasher` eight bytes at a time (FxHash's rule), for the maps looked up once
/// per event (callsites, threads, operations): short keys, hashed far faster than by SipHash
/// or byte by byte, and no input here is chosen to collide.
/// `waffle_read::id_hash::IdHash` was measured in its place: the conversion took 12 to 16 %
/// longer (its round per word is made for ids, and its per-map random key buys nothing here).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FastHash(u64);

impl FastHash {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for FastHash {
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().expect("eight bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last) ^ (rest.len() as u64) << 59);
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

/// A map hashed with [`FastHash`].
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FastHash>>;
