//! Field values as decoded: one reusable buffer per stream, so that decoding a record allocates
//! nothing once the buffer has grown to the largest record's fields.

use crate::{
    model::{Callsite, Value},
    reader::Cursor,
};
use waffle_wire::{unzigzag, FieldType};

/// A field value, its string borrowed from the [`Fields`] it is read from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValue<'a> {
    /// Unsigned integer.
    U64(u64),
    /// Signed integer.
    I64(i64),
    /// Float.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// String.
    Str(&'a str),
}

impl FieldValue<'_> {
    /// The value as the model keeps it.
    pub fn to_value(self) -> Value {
        match self {
            FieldValue::U64(v) => Value::U64(v),
            FieldValue::I64(v) => Value::I64(v),
            FieldValue::F64(v) => Value::F64(v),
            FieldValue::Bool(v) => Value::Bool(v),
            FieldValue::Str(v) => Value::Str(v.to_owned()),
        }
    }
}

impl<'a> From<&'a Value> for FieldValue<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::U64(v) => FieldValue::U64(*v),
            Value::I64(v) => FieldValue::I64(*v),
            Value::F64(v) => FieldValue::F64(*v),
            Value::Bool(v) => FieldValue::Bool(*v),
            Value::Str(v) => FieldValue::Str(v),
        }
    }
}

/// One record's field values, in its callsite's schema order.
///
/// Each value is a type and a 64-bit word (the bits of a float, a bool as 0 or 1, a string as
/// its range of `text`), kept in two arrays: a value is stored as two plain stores, never as an
/// enum assembled on the stack and copied (which stalls on store forwarding).
#[derive(Clone, Debug, Default)]
pub struct Fields {
    types: Vec<FieldType>,
    words: Vec<u64>,
    text: String,
}

impl Fields {
    /// No values.
    pub const fn new() -> Fields {
        Fields { types: Vec::new(), words: Vec::new(), text: String::new() }
    }

    /// Replaces the values with a copy of `other`'s, keeping this buffer's memory (a record's
    /// values kept past the decoder's next record, without allocating once it has grown).
    pub fn copy_from(&mut self, other: &Fields) {
        self.types.clone_from(&other.types);
        self.words.clone_from(&other.words);
        self.text.clone_from(&other.text);
    }

    /// Forgets the values, keeping the memory.
    pub fn clear(&mut self) {
        self.types.clear();
        self.words.clear();
        self.text.clear();
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// The values in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = FieldValue<'_>> + '_ {
        self.types.iter().zip(&self.words).map(|(&ty, &w)| match ty {
            FieldType::U64 => FieldValue::U64(w),
            FieldType::I64 => FieldValue::I64(w as i64),
            FieldType::F64 => FieldValue::F64(f64::from_bits(w)),
            FieldType::Bool => FieldValue::Bool(w != 0),
            _ => FieldValue::Str(&self.text[(w >> 32) as usize..w as u32 as usize]),
        })
    }

    /// The values as they are kept: each one's type (never `Dynamic`), its word (the value, a
    /// float's bits, a bool as 0 or 1, or a string's range of the text: start << 32 | end),
    /// and the strings' text.
    #[inline]
    pub fn raw(&self) -> (&[FieldType], &[u64], &str) {
        (&self.types, &self.words, &self.text)
    }

    /// Appends a value.
    pub fn push(&mut self, v: FieldValue<'_>) {
        let (ty, w) = match v {
            FieldValue::U64(v) => (FieldType::U64, v),
            FieldValue::I64(v) => (FieldType::I64, v as u64),
            FieldValue::F64(v) => (FieldType::F64, v.to_bits()),
            FieldValue::Bool(v) => (FieldType::Bool, u64::from(v)),
            FieldValue::Str(s) => (FieldType::Str, self.push_str(s)),
        };
        self.types.push(ty);
        self.words.push(w);
    }

    /// Appends `s` to the text; its range there, as a word.
    fn push_str(&mut self, s: &str) -> u64 {
        let start = self.text.len();
        self.text.push_str(s);
        // Field strings are cut to 1 KiB by writers, and a frame holds at most 16 MiB, so the
        // text of one record stays far below 4 GiB.
        (start as u64) << 32 | self.text.len() as u64
    }

    /// The values as the model keeps them.
    pub fn to_values(&self) -> Vec<Value> {
        self.iter().map(FieldValue::to_value).collect()
    }

    /// Replaces the values with those of a record of `callsite` (whose field types are
    /// `types`) read from `c`; with `keep` false they are only checked and stepped over.
    #[inline(always)]
    pub(crate) fn read(
        &mut self,
        c: &mut Cursor<'_>,
        types: &[FieldType],
        callsite: &Callsite,
        keep: bool,
    ) -> Result<(), String> {
        self.clear();
        if keep {
            self.types.reserve(types.len());
            self.words.reserve(types.len());
        }
        for (k, &ty) in types.iter().enumerate() {
            let mut ty = ty;
            if ty == FieldType::Dynamic {
                let code = c.byte()?;
                ty = match FieldType::from_code(code) {
                    Some(FieldType::Dynamic) | None => {
                        return Err(unknown_type(&callsite.fields[k].name, code))
                    }
                    Some(t) => t,
                };
            }
            let w = if ty == FieldType::U64 {
                c.varint()?
            } else if ty == FieldType::F64 {
                u64::from_le_bytes(c.array()?)
            } else if ty == FieldType::I64 {
                unzigzag(c.varint()?) as u64
            } else if ty == FieldType::Bool {
                u64::from(c.byte()? != 0)
            } else {
                let bytes = c.str_bytes()?;
                if !keep {
                    continue;
                }
                match std::str::from_utf8(bytes) {
                    Ok(s) => self.push_str(s),
                    Err(_) => self.push_str(&String::from_utf8_lossy(bytes)),
                }
            };
            if keep {
                self.types.push(ty);
                self.words.push(w);
            }
        }
        Ok(())
    }
}

#[cold]
fn unknown_type(name: &str, code: u8) -> String {
    format!("field `{name}` has unknown type code {code}")
}
