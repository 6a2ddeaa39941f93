//! The JSON read as a stream of values: the top-level object's keys, and each entry of
//! `traceEvents` cut out as its own bytes (strings and nesting followed, nothing else
//! checked) for the parser to read on its own. Only one event's bytes are held at a time, and
//! every byte's offset in the file is known, so an error names it.

use std::io::{self, Read};

/// What went wrong at a byte.
#[derive(Debug)]
pub(crate) enum ScanError {
    /// The file ended inside a value or before the structure closed: cut short.
    Cut(u64),
    /// Not what JSON allows there.
    Bad {
        offset: u64,
        what: String,
    },
    Io(io::Error),
}

/// Bytes read ahead of the scan (more while one value is larger).
const BUFFER: usize = 1 << 16;

/// A reader of JSON values from a byte stream. A value is handed out as a slice of the
/// buffer: the bytes not yet taken are moved to its front before more are read, and the
/// buffer grows for a value larger than it.
pub(crate) struct Scanner<R> {
    input: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// The offset of `buf[0]` in the stream.
    base: u64,
    /// `buf[..valid]` is UTF-8 (what follows is a character cut by the end of a read, or
    /// `bad` says where it is not).
    valid: usize,
    /// Where the bytes read are not UTF-8, if they are not.
    bad: Option<usize>,
}

impl<R: Read> Scanner<R> {
    pub(crate) fn new(input: R) -> Scanner<R> {
        Scanner { input, buf: vec![0; BUFFER], pos: 0, len: 0, base: 0, valid: 0, bad: None }
    }

    /// The offset of the next byte.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Reads more after what is held from `keep` on (moved to the front first); whether any
    /// came. `keep` and the other indices into the buffer move with the bytes.
    fn more(&mut self, keep: &mut usize, i: &mut usize) -> Result<bool, ScanError> {
        if *keep > 0 {
            self.buf.copy_within(*keep..self.len, 0);
            self.base += *keep as u64;
            self.len -= *keep;
            self.pos -= *keep;
            self.valid = self.valid.saturating_sub(*keep);
            // Bytes that were not UTF-8 but were let go (a broken byte-order mark skipped):
            // what is left is checked again from the front.
            self.bad = match self.bad {
                Some(b) if b >= *keep => Some(b - *keep),
                _ => None,
            };
            *i -= *keep;
            *keep = 0;
        }
        if self.len == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.input.read(&mut self.buf[self.len..]) {
                Ok(n) => {
                    self.len += n;
                    self.validate();
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(ScanError::Cut(self.base + self.len as u64))
                }
                Err(e) => return Err(ScanError::Io(e)),
            }
        }
    }

    /// Checks the bytes read since the last check as UTF-8, once (a character cut by the end
    /// of what is read waits for the rest).
    fn validate(&mut self) {
        if self.bad.is_some() {
            return;
        }
        match std::str::from_utf8(&self.buf[self.valid..self.len]) {
            Ok(_) => self.valid = self.len,
            Err(e) => {
                self.valid += e.valid_up_to();
                if e.error_len().is_some() {
                    self.bad = Some(self.valid);
                }
            }
        }
    }

    /// The next byte that is not whitespace (or a byte-order mark at the start), not taken;
    /// `None` at the end of the stream.
    pub(crate) fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            while self.pos < self.len {
                let b = self.buf[self.pos];
                if b.is_ascii_whitespace() || (self.offset() < 3 && [0xef, 0xbb, 0xbf].contains(&b)) {
                    self.pos += 1;
                } else {
                    return Ok(Some(b));
                }
            }
            let (mut keep, mut i) = (self.pos, self.pos);
            if !self.more(&mut keep, &mut i)? {
                return Ok(None);
            }
        }
    }

    /// Takes the next byte, which must be one of `want`; the stream ending is a cut.
    pub(crate) fn expect(&mut self, want: &[u8], what: &str) -> Result<u8, ScanError> {
        match self.peek()? {
            Some(b) if want.contains(&b) => {
                self.pos += 1;
                Ok(b)
            }
            Some(b) => Err(ScanError::Bad {
                offset: self.offset(),
                what: format!("expected {what}, found {:?}", b as char),
            }),
            None => Err(ScanError::Cut(self.offset())),
        }
    }

    /// The next value's offset and bytes: an object or array to its matching close, a string
    /// to its closing quote, anything else up to the next delimiter.
    pub(crate) fn value(&mut self) -> Result<(u64, &[u8]), ScanError> {
        let Some(first) = self.peek()? else { return Err(ScanError::Cut(self.offset())) };
        let mut start = self.pos;
        let at = self.offset();
        let scalar = !matches!(first, b'{' | b'[' | b'"');
        let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
        let mut i = start;
        loop {
            let end = 'scan: {
                while i < self.len {
                    if escaped {
                        escaped = false;
                        i += 1;
                    } else if quoted {
                        match memchr::memchr2(b'"', b'\\', &self.buf[i..self.len]) {
                            None => i = self.len,
                            Some(k) if self.buf[i + k] == b'\\' => {
                                escaped = true;
                                i += k + 1;
                            }
                            Some(k) => {
                                quoted = false;
                                i += k + 1;
                                if depth == 0 {
                                    break 'scan Some(i);
                                }
                            }
                        }
                    } else {
                        let b = self.buf[i];
                        i += 1;
                        match b {
                            b'"' => quoted = true,
                            b'{' | b'[' if !scalar => depth += 1,
                            b'}' | b']' if !scalar => {
                                depth = depth.saturating_sub(1);
                                if depth == 0 {
                                    break 'scan Some(i);
                                }
                            }
                            b',' | b']' | b'}' if scalar => break 'scan Some(i - 1),
                            b if scalar && b.is_ascii_whitespace() => break 'scan Some(i - 1),
                            _ => {}
                        }
                    }
                }
                None
            };
            if let Some(end) = end {
                self.pos = end;
                return Ok((at, &self.buf[start..end]));
            }
            if !self.more(&mut start, &mut i)? {
                return match scalar && i > start {
                    true => {
                        self.pos = i;
                        Ok((at, &self.buf[start..i]))
                    }
                    false => Err(ScanError::Cut(self.base + self.len as u64)),
                };
            }
        }
    }
}

/// What a parse of the bytes ahead gave.
pub(crate) enum Parsed<T> {
    /// A value, and the bytes it took.
    Done(T, usize),
    /// The bytes ended inside the value: more are needed.
    More,
    /// Not a value: why, at which byte of those given.
    Failed { at: usize, what: String },
}

impl<R: Read> Scanner<R> {
    /// Parses the next value in place with `parse`, which is handed the bytes from the value's
    /// start to the end of what is read; when it needs more, more are read (the buffer moved
    /// and grown as for [`value`](Scanner::value)) and it is asked again.
    pub(crate) fn parse<T>(&mut self, mut parse: impl FnMut(&str) -> Parsed<T>) -> Result<T, ScanError> {
        if self.peek()?.is_none() {
            return Err(ScanError::Cut(self.offset()));
        }
        let mut start = self.pos;
        loop {
            let valid = self.valid.max(start);
            // SAFETY: `buf[..self.valid]` was checked to be UTF-8 by `validate` as it was read
            // (and moved with the bytes since), ending at a character boundary. `start` is a
            // boundary too: `peek` stops at the first byte that is not whitespace, having
            // skipped only ASCII whitespace and, at the start of the file, the bytes of a
            // byte-order mark (a whole character when valid; when not, `validate` stopped
            // `valid` at or before them). So `buf[start..valid]` is UTF-8, or empty when
            // `start` is past `valid`.
            let text = unsafe { std::str::from_utf8_unchecked(&self.buf[start..valid]) };
            match parse(text) {
                Parsed::Done(value, n) => {
                    self.pos = start + n;
                    return Ok(value);
                }
                Parsed::Failed { at, what } => {
                    return Err(ScanError::Bad { offset: self.base + (start + at) as u64, what });
                }
                Parsed::More if self.bad.is_some_and(|b| b == valid) => {
                    let what = "bytes that are not UTF-8".to_owned();
                    return Err(ScanError::Bad { offset: self.base + valid as u64, what });
                }
                Parsed::More => {
                    let mut end = self.len;
                    if !self.more(&mut start, &mut end)? {
                        return Err(ScanError::Cut(self.base + self.len as u64));
                    }
                }
            }
        }
    }
}

/// The byte offset, in `bytes`, of a parser's 1-based `line` and `column` in them.
pub(crate) fn position(bytes: &[u8], line: usize, column: usize) -> usize {
    let start = match line {
        0 | 1 => 0,
        l => bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .nth(l - 2)
            .map_or(bytes.len(), |(i, _)| i + 1),
    };
    (start + column.saturating_sub(1)).min(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes a few at a time, so that every value straddles reads.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Every value of a top-level array, with its offset.
    fn values(text: &[u8], step: usize) -> Result<Vec<(u64, Vec<u8>)>, ScanError> {
        let mut s = Scanner::new(Trickle(text, step));
        s.expect(b"[", "[")?;
        let mut out = Vec::new();
        loop {
            let (at, v) = s.value()?;
            out.push((at, v.to_vec()));
            if s.expect(b",]", ", or ]")? == b']' {
                return Ok(out);
            }
        }
    }

    #[test]
    fn values_are_cut_out_whole_across_reads_and_a_growing_buffer() {
        let big = format!(r#"{{"s": "{}"}}"#, "x\\\"".repeat(60_000));
        let items = [
            r#"{"a": {"b": [1, {"c": "]}\"\\"}]}, "d": "}"}"#,
            r#""a \"quoted\" string, with ] and }""#,
            "-12.5e3",
            "true",
            r#"[[1, 2], [3, 4]]"#,
            big.as_str(),
            r#"{"e": "\\"}"#,
        ];
        let text = format!("[ {} ]", items.join(" ,\n "));
        for step in [1, 3, 7, 4096, usize::MAX] {
            let got = values(text.as_bytes(), step).unwrap_or_else(|e| panic!("step {step}: {e:?}"));
            let texts: Vec<_> = got.iter().map(|(_, v)| String::from_utf8(v.clone()).unwrap()).collect();
            assert_eq!(texts, items, "step {step}");
            for (at, v) in &got {
                assert_eq!(&text.as_bytes()[*at as usize..*at as usize + v.len()], v.as_slice());
            }
        }
    }

    #[test]
    fn a_stream_that_ends_inside_a_value_is_cut_there() {
        let text = br#"[{"a": "b"}, {"a": "unfinished"#;
        match values(text, 5) {
            Err(ScanError::Cut(at)) => assert_eq!(at, text.len() as u64),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn values_are_parsed_in_place_as_text_across_reads_and_bad_utf8_is_named() {
        let items = [r#"{"name": "é ünïcødé → 漢字", "n": 1}"#, r#"{"name": "plain"}"#];
        let text = format!("[{}]", items.join(","));
        for step in [1, 2, 3, usize::MAX] {
            let mut s = Scanner::new(Trickle(text.as_bytes(), step));
            s.expect(b"[", "[").unwrap();
            let mut got = Vec::new();
            loop {
                let v: serde_json::Value = s
                    .parse(|t| {
                        let mut one = serde_json::Deserializer::from_str(t).into_iter::<serde_json::Value>();
                        match one.next() {
                            Some(Ok(v)) => Parsed::Done(v, one.byte_offset()),
                            Some(Err(e)) if e.is_eof() => Parsed::More,
                            None => Parsed::More,
                            Some(Err(e)) => Parsed::Failed { at: 0, what: e.to_string() },
                        }
                    })
                    .unwrap();
                got.push(v["name"].as_str().unwrap().to_owned());
                if s.expect(b",]", ", or ]").unwrap() == b']' {
                    break;
                }
            }
            assert_eq!(got, ["é ünïcødé → 漢字", "plain"], "step {step}");
        }
        let mut bytes = br#"[{"name": "ab"#.to_vec();
        let at = bytes.len();
        bytes.extend_from_slice(b"\xff\xfe\"}]");
        let mut s = Scanner::new(Trickle(&bytes, 4));
        s.expect(b"[", "[").unwrap();
        match s.parse(|_| Parsed::<()>::More) {
            Err(ScanError::Bad { offset, what }) => {
                assert_eq!((offset, what.as_str()), (at as u64, "bytes that are not UTF-8"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_broken_byte_order_mark_let_go_is_not_held_against_the_rest() {
        // The first two bytes of a byte-order mark, then an event: the mark is skipped, and
        // the event parses once it is read (the case the fuzzer found).
        let mut s = Scanner::new(Trickle(b"\xef\xbb[{\"a\": 1}]", 3));
        s.expect(b"[", "[").unwrap();
        let v = s.parse(|t| match serde_json::from_str::<serde_json::Value>(t.trim_end_matches(']')) {
            Ok(v) => Parsed::Done(v, t.len() - 1),
            Err(e) if e.is_eof() => Parsed::More,
            Err(e) => Parsed::Failed { at: 0, what: e.to_string() },
        });
        assert_eq!(v.unwrap(), serde_json::json!({"a": 1}));
    }
}
