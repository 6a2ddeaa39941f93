//! One event parsed from its bytes by hand, in one pass: the fields waffle reads taken as they
//! come, every other value checked and passed over, strings borrowed where they hold no
//! escape. It accepts and refuses what serde_json's derived deserializer did (`parse_tests.rs`
//! holds it to that on generated and broken events, and names the two differences: an event
//! that is not an object is refused at once, and escapes passed over are checked for their
//! form only), in about half the instructions: that one sent every key, value and argument
//! through a visitor, and each string through a result too large for registers.
//!
//! Where the bytes end inside the event it says so ([`Parsed::More`]): the caller reads more
//! and asks again. Every error names its byte in the text given.

mod tokens;

use crate::{
    event::{compact, Arg, Args, Event, Lenient},
    scan::Parsed,
};
use std::borrow::Cow;

/// Why a parse stopped: one byte, so that every step's result stays in registers.
enum Stop {
    /// The text ended inside the event.
    More,
    /// Not JSON, or not an event: the parser's `error` says where and why.
    Bad,
}

type Res<T> = Result<T, Stop>;

/// The keys of an event that waffle reads, in the order of their slots.
const KEYS: [&str; 10] = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "bp", "args"];

/// The slot of each of [`KEYS`], the length of its text and closing quote, and those bytes as
/// a little-endian word.
const KNOWN: [(usize, u32, u64); 10] = {
    let mut out = [(0, 0, 0); 10];
    let mut k = 0;
    while k < KEYS.len() {
        let key = KEYS[k].as_bytes();
        let mut word = (b'"' as u64) << (8 * key.len());
        let mut i = 0;
        while i < key.len() {
            word |= (key[i] as u64) << (8 * i);
            i += 1;
        }
        out[k] = (k, key.len() as u32 + 1, word);
        k += 1;
    }
    out
};

/// The event at the start of `text`, handed to `then` where it lies (an event is large to
/// move), and the bytes it took.
pub(crate) fn event<'a, T>(text: &'a str, then: impl FnOnce(&mut Event<'a>) -> T) -> Parsed<T> {
    let mut p = Parser { text, b: text.as_bytes(), i: 0, error: (0, String::new()) };
    match p.event() {
        Ok(mut ev) => Parsed::Done(then(&mut ev), p.i),
        Err(Stop::More) => Parsed::More,
        Err(Stop::Bad) => Parsed::Failed { at: p.error.0, what: p.error.1 },
    }
}

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    /// Where the parse failed, and why.
    error: (usize, String),
}

impl<'a> Parser<'a> {
    #[cold]
    fn bad<T>(&mut self, what: impl Into<String>) -> Res<T> {
        self.fail(self.i, what)
    }

    #[cold]
    fn fail<T>(&mut self, at: usize, what: impl Into<String>) -> Res<T> {
        self.error = (at, what.into());
        Err(Stop::Bad)
    }

    /// The next byte that is not whitespace, not taken.
    #[inline(always)]
    fn peek(&mut self) -> Res<u8> {
        while let Some(&c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                return Ok(c);
            }
            self.i += 1;
        }
        Err(Stop::More)
    }

    #[inline(always)]
    fn colon(&mut self) -> Res<()> {
        match self.peek()? {
            b':' => {
                self.i += 1;
                Ok(())
            }
            _ => self.bad("expected `:`"),
        }
    }

    /// After an entry of an object (`array` false) or array: whether another follows (the
    /// separator taken), or the close (taken).
    #[inline(always)]
    fn next(&mut self, array: bool) -> Res<bool> {
        match (self.peek()?, array) {
            (b',', _) => {
                self.i += 1;
                Ok(true)
            }
            (b'}', false) | (b']', true) => {
                self.i += 1;
                Ok(false)
            }
            (_, false) => self.bad("expected `,` or `}`"),
            (_, true) => self.bad("expected `,` or `]`"),
        }
    }

    /// A number as a scalar of the event, as serde_json gives it: a whole number as an
    /// integer where one fits (`-0` as a double), a number too large for a double refused.
    #[inline(always)]
    fn lenient_number(&mut self) -> Res<Lenient<'a>> {
        let at = self.i;
        let n = self.number()?;
        Ok(match (n.integer, n.negative) {
            (Some(v), false) => Lenient::UInt(v),
            (Some(v), true) if v != 0 && v <= 1 << 63 => Lenient::Int((v as i64).wrapping_neg()),
            _ => match n.float.unwrap_or_else(|| n.text.parse().unwrap_or(f64::NAN)) {
                f if f.is_finite() => Lenient::Float(f),
                _ => return self.fail(at, "number out of range"),
            },
        })
    }

    /// A field of the event that waffle reads as a scalar; an array or object is checked and
    /// passed over.
    #[inline(always)]
    fn lenient(&mut self) -> Res<Lenient<'a>> {
        Ok(match self.peek()? {
            b'"' => match self.plain()? {
                Some(s) => Lenient::Str(Cow::Borrowed(s)),
                None => Lenient::Str(self.escaped()?),
            },
            b'-' | b'0'..=b'9' => self.lenient_number()?,
            b't' | b'f' | b'n' => match self.literal()? {
                b't' => Lenient::Bool(true),
                b'f' => Lenient::Bool(false),
                _ => Lenient::Null,
            },
            b'{' | b'[' => {
                self.skip()?;
                Lenient::Other
            }
            _ => return self.bad("expected value"),
        })
    }

    /// An argument's value, as [`Arg`] keeps it: integers as integers where they fit, other
    /// numbers as doubles, `null` as its text, arrays and objects as their compact text.
    #[inline(always)]
    fn arg(&mut self) -> Res<Arg<'a>> {
        Ok(match self.peek()? {
            b'"' => match self.plain()? {
                Some(s) => Arg::Str(Cow::Borrowed(s)),
                None => Arg::Str(self.escaped()?),
            },
            b'-' | b'0'..=b'9' => {
                let n = self.number()?;
                match (n.integer, n.negative) {
                    (Some(v), false) => Arg::U64(v),
                    (Some(v), true) if v <= 1 << 63 => Arg::I64((v as i64).wrapping_neg()),
                    _ => Arg::F64(n.float.unwrap_or_else(|| n.text.parse().unwrap_or(f64::NAN))),
                }
            }
            b't' | b'f' | b'n' => match self.literal()? {
                b't' => Arg::Bool(true),
                b'f' => Arg::Bool(false),
                _ => Arg::Str(Cow::Borrowed("null")),
            },
            b'{' | b'[' => {
                let start = self.i;
                self.skip()?;
                Arg::Json(compact(&self.text[start..self.i]))
            }
            _ => return self.bad("expected value"),
        })
    }

    /// The `args` object: its entries sorted by key (a key given twice: the first); nothing
    /// when it is no object.
    fn args(&mut self) -> Res<Args<'a>> {
        if self.peek()? != b'{' {
            self.lenient()?;
            return Ok(Args::default());
        }
        self.i += 1;
        let mut out = Vec::with_capacity(8);
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                if self.peek()? != b'"' {
                    return self.bad("key must be a string");
                }
                let key = match self.plain()? {
                    Some(k) => Cow::Borrowed(k),
                    None => self.escaped()?,
                };
                self.colon()?;
                out.push((key, self.arg()?));
                if !self.next(false)? {
                    break;
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|later, earlier| later.0 == earlier.0);
        Ok(Args(out))
    }

    /// Any value, checked and passed over. Iterative, so that nesting cannot exhaust the
    /// stack, and as deep as the value goes (as serde_json passes over values): whether each
    /// open container is an array is one bit, the first 128 in `near`, any deeper in `far`.
    fn skip(&mut self) -> Res<()> {
        let (mut near, mut far, mut n) = (0u128, Vec::new(), 0usize);
        loop {
            // A value.
            let mut closed = true;
            match self.peek()? {
                c @ (b'{' | b'[') => {
                    self.i += 1;
                    let array = c == b'[';
                    if self.peek()? == if array { b']' } else { b'}' } {
                        self.i += 1;
                    } else {
                        if n < 128 {
                            near = near & !(1 << n) | u128::from(array) << n;
                        } else {
                            far.truncate(n - 128);
                            far.push(array);
                        }
                        n += 1;
                        closed = false;
                        if !array {
                            self.skip_key()?;
                        }
                    }
                }
                b'"' => self.skip_string()?,
                b'-' | b'0'..=b'9' => {
                    self.number()?;
                }
                b't' | b'f' | b'n' => {
                    self.literal()?;
                }
                _ => return self.bad("expected value"),
            }
            // What follows a value: the next entry of the innermost container, or its close.
            while closed {
                if n == 0 {
                    return Ok(());
                }
                let array = if n <= 128 { near >> (n - 1) & 1 == 1 } else { far[n - 129] };
                if self.next(array)? {
                    if !array {
                        self.skip_key()?;
                    }
                    closed = false;
                } else {
                    n -= 1;
                }
            }
        }
    }

    /// A key of an object passed over, and its colon.
    fn skip_key(&mut self) -> Res<()> {
        match self.peek()? {
            b'"' => self.skip_string()?,
            _ => return self.bad("key must be a string"),
        }
        self.colon()
    }

    /// The key at the opening quote when it is one of [`KEYS`] as they are usually written:
    /// its bytes and closing quote read as one word and compared at once. Taken, with its
    /// slot; `None`, nothing taken, for any other key (or one written with escapes), and
    /// where fewer than eight bytes follow the quote.
    #[inline(always)]
    fn known_key(&mut self) -> Option<usize> {
        let word = u64::from_le_bytes(self.b.get(self.i + 1..self.i + 9)?.try_into().ok()?);
        let (slot, len) = KNOWN
            .iter()
            .find(|(_, len, key)| word & ((1 << (8 * len)) - 1) == *key)
            .map(|&(s, l, _)| (s, l))?;
        self.i += 1 + len as usize;
        Some(slot)
    }

    /// The event: an object whose known keys fill the fields, each at most once.
    fn event(&mut self) -> Res<Event<'a>> {
        if self.peek()? != b'{' {
            return self.bad("expected an event (an object)");
        }
        self.i += 1;
        let mut ev = Event::default();
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(ev);
        }
        let mut seen = 0u16;
        loop {
            if self.peek()? != b'"' {
                return self.bad("key must be a string");
            }
            let at = self.i;
            let slot = match self.known_key() {
                Some(k) => Some(k),
                None => {
                    let escaped;
                    let key = match self.plain()? {
                        Some(k) => k,
                        None => {
                            escaped = self.escaped()?;
                            &*escaped
                        }
                    };
                    KEYS.iter().position(|k| *k == key)
                }
            };
            self.colon()?;
            match slot {
                None => self.skip()?,
                Some(k) if seen & 1 << k != 0 => {
                    return self.fail(at, format!("duplicate field `{}`", KEYS[k]))
                }
                Some(k) => {
                    seen |= 1 << k;
                    let field = match k {
                        0 => &mut ev.ph,
                        1 => &mut ev.name,
                        2 => &mut ev.cat,
                        3 => &mut ev.pid,
                        4 => &mut ev.tid,
                        5 => &mut ev.ts,
                        6 => &mut ev.dur,
                        7 => &mut ev.id,
                        8 => &mut ev.bp,
                        _ => {
                            ev.args = self.args()?;
                            if !self.next(false)? {
                                return Ok(ev);
                            }
                            continue;
                        }
                    };
                    *field = self.lenient()?;
                }
            }
            if !self.next(false)? {
                return Ok(ev);
            }
        }
    }
}
