//! One event parsed from its own bytes, borrowing its strings where they hold no escapes: the
//! fields waffle reads, each taken leniently (tools disagree on types: `pid` and `tid` may be
//! numbers or strings, `ts` a string), and the arguments kept as raw JSON until they are
//! turned into fields.

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::{borrow::Cow, fmt};

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

struct LenientVisitor;

impl<'de> Visitor<'de> for LenientVisitor {
    type Value = Lenient<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_i64<E>(self, v: i64) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Lenient<'de>, E> {
        Ok(Lenient::UInt(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Float(v))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Bool(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Null)
    }
    fn visit_none<E>(self) -> Result<Lenient<'de>, E> {
        Ok(Lenient::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Lenient<'de>, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Lenient::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Lenient<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Lenient::Other)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Lenient<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Lenient<'a>, D::Error> {
        d.deserialize_any(LenientVisitor)
    }
}

/// One entry of `traceEvents`: what waffle reads of it.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(crate) struct Event<'a> {
    #[serde(borrow)]
    pub ph: Lenient<'a>,
    #[serde(borrow)]
    pub name: Lenient<'a>,
    #[serde(borrow)]
    pub cat: Lenient<'a>,
    #[serde(borrow)]
    pub pid: Lenient<'a>,
    #[serde(borrow)]
    pub tid: Lenient<'a>,
    #[serde(borrow)]
    pub ts: Lenient<'a>,
    #[serde(borrow)]
    pub dur: Lenient<'a>,
    #[serde(borrow)]
    pub id: Lenient<'a>,
    #[serde(borrow)]
    pub bp: Lenient<'a>,
    #[serde(borrow)]
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
    /// A raw JSON value as an argument: integers as integers, other numbers as doubles,
    /// strings borrowed where they hold no escapes, `null` as the text `null`.
    pub(crate) fn of(raw: &'a RawValue) -> Result<Arg<'a>, serde_json::Error> {
        let text = raw.get();
        Ok(match text.as_bytes().first() {
            Some(b'"') if !text.contains('\\') => Arg::Str(Cow::Borrowed(&text[1..text.len() - 1])),
            Some(b'"') => Arg::Str(Cow::Owned(serde_json::from_str::<String>(text)?)),
            Some(b't') => Arg::Bool(true),
            Some(b'f') => Arg::Bool(false),
            Some(b'n') => Arg::Str(Cow::Borrowed("null")),
            Some(b'{' | b'[') => Arg::Json(compact(text)),
            _ if text.contains(['.', 'e', 'E']) => Arg::F64(text.parse().unwrap_or(f64::NAN)),
            Some(b'-') => text.parse().map_or_else(|_| Arg::F64(text.parse().unwrap_or(f64::NAN)), Arg::I64),
            _ => text.parse().map_or_else(|_| Arg::F64(text.parse().unwrap_or(f64::NAN)), Arg::U64),
        })
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Arg::U64(u) => Some(*u),
            Arg::I64(i) => u64::try_from(*i).ok(),
            Arg::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// JSON text without the whitespace outside its strings.
fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut quoted, mut escaped) = (false, false);
    for c in text.chars() {
        if quoted {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => quoted = false,
                _ => {}
            }
        } else if !c.is_ascii_whitespace() {
            quoted = c == '"';
            out.push(c);
        }
    }
    out
}

/// An event's arguments: the entries of its `args` object, sorted by key (a key given twice:
/// the first); nothing when `args` is no object.
#[derive(Debug, Default)]
pub(crate) struct Args<'a>(pub Vec<(Cow<'a, str>, Arg<'a>)>);

struct ArgsVisitor;

impl<'de> Visitor<'de> for ArgsVisitor {
    type Value = Args<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of arguments")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args<'de>, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(key) = map.next_key::<Lenient<'de>>()? {
            let raw = map.next_value::<&'de RawValue>()?;
            let key = match key {
                Lenient::Str(s) => s,
                other => Cow::Owned(other.text().into_owned()),
            };
            out.push((key, Arg::of(raw).map_err(de::Error::custom)?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|later, earlier| later.0 == earlier.0);
        Ok(Args(out))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Args<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Args::default())
    }
    fn visit_unit<E>(self) -> Result<Args<'de>, E> {
        Ok(Args::default())
    }
    fn visit_none<E>(self) -> Result<Args<'de>, E> {
        Ok(Args::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<Args<'de>, E> {
        Ok(Args::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Args<'de>, E> {
        Ok(Args::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Args<'de>, E> {
        Ok(Args::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Args<'de>, E> {
        Ok(Args::default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<Args<'de>, E> {
        Ok(Args::default())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Args<'a>, D::Error> {
        d.deserialize_any(ArgsVisitor)
    }
}
