//! Attribute lists with unique keys, and field values as OTLP attribute values.

use super::proto::{self, AnyValue, KeyValue};
use crate::{decode::FieldValue, model::Value};

/// Attributes with unique keys: the first value for a key is kept, later ones are counted as
/// dropped (`dropped_attributes_count`), so a field named like one of the mapping's keys keeps
/// its value.
#[derive(Default)]
pub(super) struct Attributes {
    list: Vec<KeyValue>,
    dropped: u32,
}

impl Attributes {
    pub(super) fn put(&mut self, key: &str, value: proto::Value) {
        if self.list.iter().any(|kv| kv.key == key) {
            self.dropped += 1;
        } else {
            self.list.push(KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }) });
        }
    }

    pub(super) fn str(&mut self, key: &str, s: &str) {
        self.put(key, proto::Value::String(s.to_owned()));
    }

    /// `key = true`.
    pub(super) fn flag(&mut self, key: &str) {
        self.put(key, proto::Value::Bool(true));
    }

    /// An id as 16 lowercase hex digits, as waffle prints ids.
    pub(super) fn id(&mut self, key: &str, id: u64) {
        self.str(key, &format!("{id:016x}"));
    }

    pub(super) fn value(&mut self, key: &str, v: &Value) {
        self.put(key, value(v));
    }

    /// Field `(name, value)` pairs.
    pub(super) fn fields<'a>(&mut self, fields: impl Iterator<Item = (&'a str, FieldValue<'a>)>) {
        for (name, v) in fields {
            self.value(name, &v.to_value());
        }
    }

    /// `waffle.correlate = "key=value"`, if the item is correlated.
    pub(super) fn correlate(&mut self, key: &str, value: Option<u64>) {
        if let (Some(value), false) = (value, key.is_empty()) {
            self.str("waffle.correlate", &format!("{key}={value}"));
        }
    }

    /// The list and how many were dropped.
    pub(super) fn done(self) -> (Vec<KeyValue>, u32) {
        (self.list, self.dropped)
    }
}

/// A field value as an attribute value: OTLP's integers are signed 64-bit, so a `u64` above
/// `i64::MAX` is written as its decimal string. A non-finite float (`NaN`, `inf`, `-inf`) is
/// written as that text too, as the Jaeger exporter writes it: OTLP could carry it as a double,
/// but Jaeger stores it and then fails every read of the trace (its query API's JSON encoder
/// refuses NaN and infinities: HTTP 500, no trace in its UI), and a non-finite value has no
/// numeric use in a backend anyway.
fn value(v: &Value) -> proto::Value {
    match v {
        Value::U64(v) => {
            i64::try_from(*v).map_or_else(|_| proto::Value::String(v.to_string()), proto::Value::Int)
        }
        Value::I64(v) => proto::Value::Int(*v),
        Value::F64(v) if v.is_finite() => proto::Value::Double(*v),
        Value::F64(v) => proto::Value::String(v.to_string()),
        Value::Bool(v) => proto::Value::Bool(*v),
        Value::Str(v) => proto::Value::String(v.clone()),
    }
}
