//! The reference the hand-written parser is held to: the same event read by serde_json
//! through derived and visitor deserializers (what the conversion used before).

use crate::event::{compact, Arg, Args, Event, Lenient};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::{borrow::Cow, fmt};

/// An event as serde_json reads it, or why not (`None`: the text ends inside it).
pub(crate) fn event(text: &str) -> Result<(Event<'_>, usize), Option<serde_json::Error>> {
    let mut one = serde_json::Deserializer::from_str(text).into_iter::<Ref<'_>>();
    match one.next() {
        Some(Ok(Ref(ev))) => Ok((ev, one.byte_offset())),
        Some(Err(e)) if e.is_eof() => Err(None),
        None => Err(None),
        Some(Err(e)) => Err(Some(e)),
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Fields<'a> {
    #[serde(borrow)]
    ph: RefLenient<'a>,
    #[serde(borrow)]
    name: RefLenient<'a>,
    #[serde(borrow)]
    cat: RefLenient<'a>,
    #[serde(borrow)]
    pid: RefLenient<'a>,
    #[serde(borrow)]
    tid: RefLenient<'a>,
    #[serde(borrow)]
    ts: RefLenient<'a>,
    #[serde(borrow)]
    dur: RefLenient<'a>,
    #[serde(borrow)]
    id: RefLenient<'a>,
    #[serde(borrow)]
    bp: RefLenient<'a>,
    #[serde(borrow)]
    args: RefArgs<'a>,
}

struct Ref<'a>(Event<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Ref<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ref<'a>, D::Error> {
        let f = Fields::deserialize(d)?;
        Ok(Ref(Event {
            ph: f.ph.0,
            name: f.name.0,
            cat: f.cat.0,
            pid: f.pid.0,
            tid: f.tid.0,
            ts: f.ts.0,
            dur: f.dur.0,
            id: f.id.0,
            bp: f.bp.0,
            args: f.args.0,
        }))
    }
}

#[derive(Default)]
struct RefLenient<'a>(Lenient<'a>);

#[derive(Default)]
struct RefArgs<'a>(Args<'a>);

/// A raw JSON value as an argument: integers as integers, other numbers as doubles, strings
/// borrowed where they hold no escapes, `null` as the text `null`.
fn arg_of(raw: &RawValue) -> Result<Arg<'_>, serde_json::Error> {
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

impl<'de: 'a, 'a> Deserialize<'de> for RefLenient<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RefLenient<'a>, D::Error> {
        d.deserialize_any(LenientVisitor).map(RefLenient)
    }
}

struct ArgsVisitor;

impl<'de> Visitor<'de> for ArgsVisitor {
    type Value = Args<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of arguments")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args<'de>, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(RefLenient(key)) = map.next_key::<RefLenient<'de>>()? {
            let raw = map.next_value::<&'de RawValue>()?;
            let key = match key {
                Lenient::Str(s) => s,
                other => Cow::Owned(other.text().into_owned()),
            };
            out.push((key, arg_of(raw).map_err(de::Error::custom)?));
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

impl<'de: 'a, 'a> Deserialize<'de> for RefArgs<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RefArgs<'a>, D::Error> {
        d.deserialize_any(ArgsVisitor).map(RefArgs)
    }
}
