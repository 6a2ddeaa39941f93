//! The tokens under the event parser: strings (their plain runs found eight bytes at a time,
//! borrowed unless escaped), numbers (integers exact, doubles by an exact power of ten where
//! one operation is exact, else by the standard library), and `true`, `false`, `null`.

use super::{Parser, Res, Stop};
use crate::scan::position;
use std::borrow::Cow;

/// The bytes that end a string's plain run: its closing quote, an escape, a control character
/// (which JSON refuses inside a string).
static SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Where the plain run of a string's bytes from `j` ends (at its closing quote, an escape or a
/// control character); `None` when the bytes end first. Eight bytes at a time while eight
/// remain (SWAR: a byte is special where it is below 0x20 or equals `"` or `\`), then one by
/// one.
#[inline(always)]
fn plain_run(b: &[u8], mut j: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(word) = b.get(j..j + 8) {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        // A byte's high bit is set where it is zero (after the xor), or below 0x20; bytes of
        // 0x80 and up, whose own high bit is set, are masked out by `!x`.
        let zero = |v: u64| v.wrapping_sub(ONES) & !v;
        let found = (zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | x.wrapping_sub(ONES * 0x20))
            & !x
            & HIGH;
        if found != 0 {
            return Some(j + (found.trailing_zeros() / 8) as usize);
        }
        j += 8;
    }
    b[j..].iter().position(|&c| SPECIAL[usize::from(c)]).map(|k| j + k)
}

/// A number as the file writes it: its text; its integer value where it is an integer that
/// fits 64 bits (its sign apart), else its value as a double where it has a point or an
/// exponent (an integer too large keeps only its text).
pub(super) struct Number<'a> {
    pub text: &'a str,
    pub negative: bool,
    pub integer: Option<u64>,
    pub float: Option<f64>,
}

/// The powers of ten a double holds exactly.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];

impl<'a> Parser<'a> {
    /// `text[from..to]`, where each end is at an ASCII byte or right after one: a string's
    /// quotes (`from` after the opening one, `to` at the closing one); a number's first byte
    /// and the byte after its last digit.
    #[inline(always)]
    fn between(&self, from: usize, to: usize) -> &'a str {
        let edge = |k: usize| self.b[k].is_ascii() || (k > 0 && self.b[k - 1].is_ascii());
        debug_assert!(from <= to && to < self.b.len() && edge(from) && edge(to));
        // SAFETY: `from <= to < text.len()`: every caller found a byte at `to` (a closing
        // quote, or the byte that ends a number, which is not its last byte read: a number
        // that reaches the end of the bytes is "more"), and `from` is where it began scanning
        // towards it. Both are character boundaries: an ASCII byte begins a character, and so
        // does the byte right after an ASCII one, since in UTF-8 (`text` is a `str`) a
        // continuation byte follows only a lead or continuation byte.
        unsafe { self.text.get_unchecked(from..to) }
    }

    /// A string from its opening quote, borrowed, where it holds no escape; `None`, nothing
    /// taken, where it does. (A plain slice, not a `Cow`: results stay small on the hot path.)
    #[inline(always)]
    pub(super) fn plain(&mut self) -> Res<Option<&'a str>> {
        let start = self.i + 1;
        let Some(j) = plain_run(self.b, start) else { return Err(Stop::More) };
        match self.b[j] {
            b'"' => {
                self.i = j + 1;
                Ok(Some(self.between(start, j)))
            }
            b'\\' => Ok(None),
            _ => {
                self.i = j;
                self.bad("control character (\\u0000-\\u001F) found while parsing a string")
            }
        }
    }

    /// A string that holds an escape, from its opening quote: its end found and its escapes'
    /// form checked as for one passed over, then unescaped by serde_json, which refuses a lone
    /// surrogate (rare in traces: this path may be slow).
    #[cold]
    #[inline(never)]
    pub(super) fn escaped(&mut self) -> Res<Cow<'a, str>> {
        let open = self.i;
        self.skip_string()?;
        let end = self.i;
        // The end is a quote: a character's boundary, whatever the escapes were.
        let quoted = &self.text[open..end];
        match serde_json::from_str::<String>(quoted) {
            Ok(s) => {
                self.i = end;
                Ok(Cow::Owned(s))
            }
            Err(e) => {
                let msg = e.to_string();
                let what = msg.rfind(" at line ").map_or(msg.clone(), |k| msg[..k].to_owned());
                self.fail(open + position(quoted.as_bytes(), e.line(), e.column()), what)
            }
        }
    }

    /// A string passed over from its opening quote, its escapes checked as serde_json checks
    /// what it passes over (a known escape, or `\u` and four hex digits), not decoded.
    pub(super) fn skip_string(&mut self) -> Res<()> {
        let mut j = self.i + 1;
        loop {
            let Some(k) = plain_run(self.b, j) else { return Err(Stop::More) };
            match self.b[k] {
                b'"' => {
                    self.i = k + 1;
                    return Ok(());
                }
                b'\\' => match self.b.get(k + 1) {
                    None => return Err(Stop::More),
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j = k + 2,
                    Some(b'u') => {
                        // Four bytes read before any is looked at, as serde_json does.
                        let Some(hex) = self.b.get(k + 2..k + 6) else { return Err(Stop::More) };
                        if let Some(h) = hex.iter().position(|c| !c.is_ascii_hexdigit()) {
                            self.i = k + 2 + h;
                            return self.bad("invalid escape");
                        }
                        j = k + 6;
                    }
                    Some(_) => {
                        self.i = k + 1;
                        return self.bad("invalid escape");
                    }
                },
                _ => {
                    self.i = k;
                    return self.bad("control character (\\u0000-\\u001F) found while parsing a string");
                }
            }
        }
    }

    /// One or more digits from `j`, added to `m` (which overflows past 19 digits: the caller
    /// counts them); where they end.
    #[inline(always)]
    fn digits(&mut self, mut j: usize, m: &mut u64) -> Res<usize> {
        let from = j;
        while let Some(&c) = self.b.get(j) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            *m = m.wrapping_mul(10).wrapping_add(u64::from(d));
            j += 1;
        }
        match j > from {
            true => Ok(j),
            false if j == self.b.len() => Err(Stop::More),
            false => {
                self.i = j;
                self.bad("invalid number")
            }
        }
    }

    /// A number from its first byte.
    #[inline(always)]
    pub(super) fn number(&mut self) -> Res<Number<'a>> {
        let (b, start) = (self.b, self.i);
        let negative = b[start] == b'-';
        let first = start + usize::from(negative);
        // Every digit as one integer (exact while there are at most 19), how many follow the
        // point, the exponent.
        let (mut m, mut fraction, mut exp) = (0u64, 0usize, 0i64);
        let mut j = match b.get(first) {
            None => return Err(Stop::More),
            Some(b'0') => first + 1,
            Some(_) => self.digits(first, &mut m)?,
        };
        let whole = j - first;
        let point = b.get(j) == Some(&b'.');
        if point {
            j = self.digits(j + 1, &mut m)?;
            fraction = j - (first + whole + 1);
        }
        let e = matches!(b.get(j), Some(b'e' | b'E'));
        if e {
            j += 1;
            let minus = b.get(j) == Some(&b'-');
            j += usize::from(matches!(b.get(j), Some(b'+' | b'-')));
            let from = j;
            let mut v = 0u64;
            j = self.digits(j, &mut v)?;
            exp = if j - from > 6 { 1 << 20 } else { v as i64 };
            if minus {
                exp = -exp;
            }
        }
        if j == b.len() {
            // The number may go on in bytes not read yet.
            return Err(Stop::More);
        }
        self.i = j;
        let text = self.between(start, j);
        let exact = whole + fraction <= 19;
        if !point && !e {
            let integer = match exact {
                true => Some(m),
                false => text[usize::from(negative)..].parse().ok(),
            };
            return Ok(Number { text, negative, integer, float: None });
        }
        // Clinger's fast path: a mantissa that a double holds exactly, times or over a power
        // of ten that it holds exactly, is one correctly rounded operation; anything else goes
        // to the standard library's parser.
        let e = exp - fraction as i64;
        let float = if exact && m < 1 << 53 && (-22..=22).contains(&e) {
            let v = if e < 0 {
                m as f64 / POW10[e.unsigned_abs() as usize]
            } else {
                m as f64 * POW10[e as usize]
            };
            if negative {
                -v
            } else {
                v
            }
        } else {
            text.parse().unwrap_or(f64::NAN)
        };
        Ok(Number { text, negative, integer: None, float: Some(float) })
    }

    /// `true`, `false` or `null`, from its first byte.
    #[inline(always)]
    pub(super) fn literal(&mut self) -> Res<u8> {
        let first = self.b[self.i];
        let word: &[u8] = match first {
            b't' => b"true",
            b'f' => b"false",
            _ => b"null",
        };
        let have = &self.b[self.i..self.b.len().min(self.i + word.len())];
        if !word.starts_with(have) {
            return self.bad("expected ident");
        }
        if have.len() < word.len() {
            return Err(Stop::More);
        }
        self.i += word.len();
        Ok(first)
    }
}
