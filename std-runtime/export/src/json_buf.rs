//! JSON text written straight into a byte buffer, for the JSON formats' hot paths (a span at a
//! time, millions of them): no `serde_json::Value` tree per span, no map of keys, no
//! allocation once the buffer has grown.
//!
//! Each writer writes its objects' keys itself, in the order serde_json's (sorted) maps wrote
//! them before, so the bytes are those the `Value` trees gave. Strings are escaped as serde_json
//! escapes them, and numbers are serde_json's own formatting (through its [`Formatter`]), so a value reads back as it did.
//!
//! Building a span's tree of `Value`s and serialising it cost the Jaeger exporter 480 ms on
//! the bench's 1.9 MB trace; written directly, see `benches/README.md`.

use std::io::{self, Write};

use serde_json::ser::{CompactFormatter, Formatter};

/// How much text is gathered before it is handed to the output.
const BLOCK: usize = 256 << 10;

/// JSON text being written, handed to an output in blocks.
#[derive(Default)]
pub(crate) struct JsonBuf {
    pub(crate) bytes: Vec<u8>,
}

/// The escape of each byte in a JSON string: 0 for none, else the letter after `\` (`u` for
/// a `\u00XX` escape), as serde_json escapes them.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `v` in decimal, appended to `text` (as `write!(text, "{v}")`, without the formatting
/// machinery).
#[inline]
pub(crate) fn push_u64(text: &mut String, v: u64) {
    text.push_str(itoa::Buffer::new().format(v));
}

/// `id` as 16 lowercase hex digits, appended to `text` (as `{id:016x}`).
#[inline]
pub(crate) fn push_hex(text: &mut String, id: u64) {
    for k in 0..16 {
        text.push(HEX[((id >> (60 - 4 * k)) & 0xf) as usize] as char);
    }
}

impl JsonBuf {
    /// Bytes as they are.
    #[inline]
    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// A string, quoted and escaped.
    #[inline]
    pub(crate) fn str(&mut self, s: &str) {
        self.bytes.push(b'"');
        self.str_contents(s);
        self.bytes.push(b'"');
    }

    /// A string's contents, escaped, without quotes (to build a string from pieces).
    pub(crate) fn str_contents(&mut self, s: &str) {
        let bytes = s.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let escape = ESCAPE[b as usize];
            if escape == 0 {
                continue;
            }
            self.bytes.extend_from_slice(&bytes[start..i]);
            start = i + 1;
            match escape {
                b'u' => self.bytes.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]),
                e => self.bytes.extend_from_slice(&[b'\\', e]),
            }
        }
        self.bytes.extend_from_slice(&bytes[start..]);
    }

    #[inline]
    pub(crate) fn u64(&mut self, v: u64) {
        self.raw(itoa::Buffer::new().format(v).as_bytes());
    }

    #[inline]
    pub(crate) fn i64(&mut self, v: i64) {
        self.raw(itoa::Buffer::new().format(v).as_bytes());
    }

    /// An unsigned integer as a string, as proto3's JSON writes 64-bit integers.
    #[inline]
    pub(crate) fn u64_str(&mut self, v: u64) {
        self.bytes.push(b'"');
        self.u64(v);
        self.bytes.push(b'"');
    }

    /// A finite float, as serde_json prints it (the shortest text that reads back as it).
    #[inline]
    pub(crate) fn f64(&mut self, v: f64) {
        debug_assert!(v.is_finite());
        let _ = CompactFormatter.write_f64(&mut self.bytes, v);
    }

    #[inline]
    pub(crate) fn bool(&mut self, v: bool) {
        self.bytes.extend_from_slice(if v { b"true" } else { b"false" });
    }

    /// An id as 16 lowercase hex digits, without quotes.
    #[inline]
    pub(crate) fn hex_contents(&mut self, id: u64) {
        let mut digits = [0u8; 16];
        for (k, d) in digits.iter_mut().enumerate() {
            *d = HEX[((id >> (60 - 4 * k)) & 0xf) as usize];
        }
        self.bytes.extend_from_slice(&digits);
    }

    /// An id as 16 lowercase hex digits, quoted.
    #[inline]
    pub(crate) fn hex(&mut self, id: u64) {
        self.bytes.push(b'"');
        self.hex_contents(id);
        self.bytes.push(b'"');
    }

    /// A trace id as 32 lowercase hex digits, quoted.
    pub(crate) fn hex128(&mut self, id: u128) {
        self.bytes.push(b'"');
        self.hex_contents((id >> 64) as u64);
        self.hex_contents(id as u64);
        self.bytes.push(b'"');
    }

    /// Hands the text to `out` once a block of it is ready.
    #[inline]
    pub(crate) fn flush_block(&mut self, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
        if self.bytes.len() >= BLOCK {
            self.flush(out)?;
        }
        Ok(())
    }

    /// Hands all the text to `out`.
    #[cold]
    pub(crate) fn flush(&mut self, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
        out.write_all(&self.bytes)?;
        self.bytes.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings, numbers and ids come out as serde_json writes them.
    #[test]
    fn text_is_serde_jsons() {
        let strings = [
            "",
            "plain",
            "quote \" and \\ slash /",
            "tab\tnew\nline\r\u{8}\u{c}",
            "\u{1}\u{1f}\u{7f}",
            "héllo ✓",
        ];
        for s in strings {
            let mut b = JsonBuf::default();
            b.str(s);
            assert_eq!(String::from_utf8(b.bytes).unwrap(), serde_json::to_string(s).unwrap(), "{s:?}");
        }
        for v in [0.0, -0.0, 1.0, 0.25, 1e-9, 1e300, 123456.789, f64::MIN_POSITIVE, -2.5e-7] {
            let mut b = JsonBuf::default();
            b.f64(v);
            assert_eq!(String::from_utf8(b.bytes).unwrap(), serde_json::to_string(&v).unwrap(), "{v}");
        }
        let mut b = JsonBuf::default();
        b.u64(u64::MAX);
        b.raw(b",");
        b.i64(i64::MIN);
        b.raw(b",");
        b.hex(0x00ab_cdef_0123_4567);
        b.raw(b",");
        b.hex128(0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c);
        b.raw(b",");
        b.u64_str(7);
        b.raw(b",");
        b.bool(false);
        assert_eq!(
            String::from_utf8(b.bytes).unwrap(),
            format!(
                "{},{},\"00abcdef01234567\",\"0af7651916cd43dd8448eb211c80319c\",\"7\",false",
                u64::MAX,
                i64::MIN
            )
        );
    }
}
