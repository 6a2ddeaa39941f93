//! How strings and codes of the cold frames meet serde, so that postcard writes exactly the
//! bytes of format version 1 and reads them as version 1 readers did.
//!
//! - Strings are written as postcard `str` (varint length, bytes) and read as bytes, with
//!   invalid UTF-8 replaced rather than rejected (postcard's own `str` rejects it).
//! - [`Kind`] and [`FieldType`] are one raw byte, their code (serde's enums would be a varint
//!   variant index). A code that is none of them fails the decoding; the frame's decoder names
//!   it (postcard keeps no message of a serde error, see [`super::frames`]).

use super::FieldType;
use crate::Kind;
use alloc::{borrow::Cow, string::String, vec::Vec};
use core::fmt;
use serde::{
    de::{Error as _, Unexpected, Visitor},
    Deserialize, Deserializer, Serializer,
};

/// A string of a frame, borrowed from the payload when it is valid UTF-8. (Written as any
/// string is: serde's `Cow<str>` is a `str`.)
pub(super) fn cow<'de, D: Deserializer<'de>>(d: D) -> Result<Cow<'de, str>, D::Error> {
    d.deserialize_bytes(Lossy)
}

/// A string of a frame, owned.
pub(super) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    cow(d).map(Cow::into_owned)
}

/// Key-value pairs of strings (HEADER's labels), owned.
pub(super) fn pairs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    #[derive(Deserialize)]
    struct Pair<'a>(
        #[serde(borrow, deserialize_with = "cow")] Cow<'a, str>,
        #[serde(borrow, deserialize_with = "cow")] Cow<'a, str>,
    );
    let pairs = Vec::<Pair<'de>>::deserialize(d)?;
    Ok(pairs.into_iter().map(|Pair(k, v)| (k.into_owned(), v.into_owned())).collect())
}

struct Lossy;

impl<'de> Visitor<'de> for Lossy {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_bytes<E: serde::de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
        Ok(String::from_utf8_lossy(v))
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        Ok(Cow::Owned(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.into()))
    }
}

/// A callsite's kind, as its one-byte code.
pub(super) mod kind {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(k: &Kind, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_u8(*k as u8)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        let code = u8::deserialize(d)?;
        Kind::from_code(code).ok_or_else(|| {
            D::Error::invalid_value(Unexpected::Unsigned(code.into()), &"1 (span) or 2 (event)")
        })
    }
}

/// A field's type, as its one-byte code.
pub(super) mod field_type {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(t: &FieldType, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_u8(*t as u8)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FieldType, D::Error> {
        let code = u8::deserialize(d)?;
        FieldType::from_code(code)
            .ok_or_else(|| D::Error::invalid_value(Unexpected::Unsigned(code.into()), &"a type code 0 to 5"))
    }
}

/// A `u128` as 16 bytes, little-endian (postcard would write a varint).
pub(super) mod le_u128 {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &u128, ser: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&v.to_le_bytes(), ser)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        <[u8; 16]>::deserialize(d).map(u128::from_le_bytes)
    }
}
