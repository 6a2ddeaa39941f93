//! One event as [`parse`](crate::parse) reads it, borrowing its strings where they hold no
//! escapes: the fields waffle reads, each taken leniently (tools disagree on types: `pid` and
//! `tid` may be numbers or strings, `ts` a string), and the arguments as fields will hold
//! them.

use std::borrow::Cow;

/// A scalar as the file gives it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum Lenient<'a> {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(Cow<'a, str>),
    #[default]
    Null,
    /// An array or object, where a scalar was expected.
    Other,
}

impl Lenient<'_> {
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Lenient::Int(i) => Some(*i as f64),
            Lenient::UInt(u) => Some(*u as f64),
            Lenient::Float(f) => Some(*f),
            Lenient::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// As text: a string itself, a number or boolean written out, nothing for null.
    pub(crate) fn text(&self) -> Cow<'_, str> {
        match self {
            Lenient::Str(s) => Cow::Borrowed(s),
            Lenient::Int(i) => Cow::Owned(i.to_string()),
            Lenient::UInt(u) => Cow::Owned(u.to_string()),
            Lenient::Float(f) => Cow::Owned(f.to_string()),
            Lenient::Bool(b) => Cow::Owned(b.to_string()),
            Lenient::Null | Lenient::Other => Cow::Borrowed(""),
        }
    }
}

/// One entry of `traceEvents`: what waffle reads of it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Event<'a> {
    pub ph: Lenient<'a>,
    pub name: Lenient<'a>,
    pub cat: Lenient<'a>,
    pub pid: Lenient<'a>,
    pub tid: Lenient<'a>,
    pub ts: Lenient<'a>,
    pub dur: Lenient<'a>,
    pub id: Lenient<'a>,
    pub bp: Lenient<'a>,
    pub args: Args<'a>,
}

/// An argument's value, as a field will hold it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg<'a> {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(Cow<'a, str>),
    /// An array or object, as its compact JSON text.
    Json(String),
}

impl<'a> Arg<'a> {
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Arg::U64(u) => Some(*u),
            Arg::I64(i) => u64::try_from(*i).ok(),
            Arg::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// JSON text without the whitespace outside its strings: runs of other bytes copied whole,
/// a string (to its closing quote, past escaped quotes) with its contents.
pub(crate) fn compact(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let run =
            b[i..].iter().position(|&c| c.is_ascii_whitespace() || c == b'"').map_or(b.len(), |k| i + k);
        out.extend_from_slice(&b[i..run]);
        i = run;
        match b.get(i) {
            Some(b'"') => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(b.len());
                out.extend_from_slice(&b[i..end]);
                i = end;
            }
            Some(_) => i += 1,
            None => {}
        }
    }
    // Only ASCII whitespace was left out, never a part of a character.
    String::from_utf8(out).expect("UTF-8 less some ASCII bytes")
}

/// An event's arguments: the entries of its `args` object, sorted by key (a key given twice:
/// the first); nothing when `args` is no object.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Args<'a>(pub Vec<(Cow<'a, str>, Arg<'a>)>);
