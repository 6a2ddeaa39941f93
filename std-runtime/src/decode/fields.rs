//! Field values as decoded: one reusable buffer per stream, so that decoding a record allocates
//! nothing once the buffer has grown to the largest record's fields.

use crate::{
    model::{Callsite, Value},
    reader::Cursor,
};
use waffle::wire::{unzigzag, FieldType};

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

#[derive(Clone, Copy, Debug)]
enum Slot {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// A range of `Fields::text`.
    Str(u32, u32),
}

/// One record's field values, in its callsite's schema order.
#[derive(Debug, Default)]
pub struct Fields {
    slots: Vec<Slot>,
    text: String,
}

impl Fields {
    /// No values.
    pub const fn new() -> Fields {
        Fields { slots: Vec::new(), text: String::new() }
    }

    /// Forgets the values, keeping the memory.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.text.clear();
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The values in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = FieldValue<'_>> + '_ {
        self.slots.iter().map(|s| match *s {
            Slot::U64(v) => FieldValue::U64(v),
            Slot::I64(v) => FieldValue::I64(v),
            Slot::F64(v) => FieldValue::F64(v),
            Slot::Bool(v) => FieldValue::Bool(v),
            Slot::Str(a, b) => FieldValue::Str(&self.text[a as usize..b as usize]),
        })
    }

    /// Appends a value.
    pub fn push(&mut self, v: FieldValue<'_>) {
        let slot = match v {
            FieldValue::U64(v) => Slot::U64(v),
            FieldValue::I64(v) => Slot::I64(v),
            FieldValue::F64(v) => Slot::F64(v),
            FieldValue::Bool(v) => Slot::Bool(v),
            FieldValue::Str(s) => self.push_str(s),
        };
        self.slots.push(slot);
    }

    fn push_str(&mut self, s: &str) -> Slot {
        let start = self.text.len();
        self.text.push_str(s);
        // Field strings are cut to 1 KiB by writers, and a frame holds at most 16 MiB, so the
        // text of one record stays far below 4 GiB.
        Slot::Str(start as u32, self.text.len() as u32)
    }

    /// The values as the model keeps them.
    pub fn to_values(&self) -> Vec<Value> {
        self.iter().map(FieldValue::to_value).collect()
    }

    /// Replaces the values with those of a record of `callsite` read from `c`; with `keep`
    /// false they are only checked and stepped over.
    pub(crate) fn read(&mut self, c: &mut Cursor<'_>, callsite: &Callsite, keep: bool) -> Result<(), String> {
        self.clear();
        for (name, ty) in &callsite.fields {
            let ty = match *ty {
                FieldType::Dynamic => {
                    let code = c.byte()?;
                    match FieldType::from_code(code) {
                        Some(FieldType::Dynamic) | None => {
                            return Err(format!("field `{name}` has unknown type code {code}"))
                        }
                        Some(t) => t,
                    }
                }
                t => t,
            };
            let slot = match ty {
                FieldType::U64 => Slot::U64(c.varint()?),
                FieldType::I64 => Slot::I64(unzigzag(c.varint()?)),
                FieldType::F64 => Slot::F64(f64::from_le_bytes(c.bytes(8)?.try_into().expect("8 bytes"))),
                FieldType::Bool => Slot::Bool(c.byte()? != 0),
                FieldType::Str => {
                    let bytes = c.str_bytes()?;
                    if !keep {
                        continue;
                    }
                    match std::str::from_utf8(bytes) {
                        Ok(s) => self.push_str(s),
                        Err(_) => self.push_str(&String::from_utf8_lossy(bytes)),
                    }
                }
                FieldType::Dynamic => unreachable!("resolved above"),
            };
            if keep {
                self.slots.push(slot);
            }
        }
        Ok(())
    }
}
