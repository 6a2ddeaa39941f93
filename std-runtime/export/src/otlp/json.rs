//! OTLP/JSON: the messages of `proto` rendered as the OTLP specification's JSON encoding asks,
//! which is proto3's JSON mapping with three changes that matter here:
//! - trace and span ids are lowercase hex strings, not base64;
//! - enums are integers, not names;
//! - keys are lowerCamelCase (64-bit integers are still decimal strings, as in proto3).
//!
//! Fields at their proto3 default are left out, as the protobuf encoding leaves them out, so the
//! two outputs say the same thing; receivers must treat a missing field as its default.

use serde_json::{json, Map, Value as Json};

use super::proto::{
    AnyValue, Event, ExportTraceServiceRequest, KeyValue, Link, Resource, ResourceSpans, ScopeSpans, Span,
    Value,
};

/// The request as an OTLP/JSON object.
pub(super) fn request(r: &ExportTraceServiceRequest) -> Json {
    Object::default().list("resourceSpans", &r.resource_spans, resource_spans).done()
}

pub(super) fn resource_spans(rs: &ResourceSpans) -> Json {
    Object::default()
        .opt("resource", rs.resource.as_ref().map(resource))
        .list("scopeSpans", &rs.scope_spans, scope_spans)
        .done()
}

fn resource(r: &Resource) -> Json {
    Object::default()
        .list("attributes", &r.attributes, key_value)
        .count("droppedAttributesCount", r.dropped_attributes_count)
        .done()
}

fn scope_spans(ss: &ScopeSpans) -> Json {
    let scope = ss.scope.as_ref().map(|s| Object::default().string("name", &s.name).done());
    Object::default().opt("scope", scope).list("spans", &ss.spans, span).done()
}

pub(super) fn span(s: &Span) -> Json {
    Object::default()
        .hex("traceId", &s.trace_id)
        .hex("spanId", &s.span_id)
        .hex("parentSpanId", &s.parent_span_id)
        .string("name", &s.name)
        .opt("kind", (s.kind != 0).then(|| json!(s.kind)))
        .u64("startTimeUnixNano", s.start_time_unix_nano)
        .u64("endTimeUnixNano", s.end_time_unix_nano)
        .list("attributes", &s.attributes, key_value)
        .count("droppedAttributesCount", s.dropped_attributes_count)
        .list("events", &s.events, event)
        .list("links", &s.links, link)
        .done()
}

fn event(e: &Event) -> Json {
    Object::default()
        .u64("timeUnixNano", e.time_unix_nano)
        .string("name", &e.name)
        .list("attributes", &e.attributes, key_value)
        .count("droppedAttributesCount", e.dropped_attributes_count)
        .done()
}

fn link(l: &Link) -> Json {
    Object::default()
        .hex("traceId", &l.trace_id)
        .hex("spanId", &l.span_id)
        .list("attributes", &l.attributes, key_value)
        .count("droppedAttributesCount", l.dropped_attributes_count)
        .done()
}

fn key_value(kv: &KeyValue) -> Json {
    Object::default().string("key", &kv.key).opt("value", kv.value.as_ref().map(any_value)).done()
}

/// A one-of case is written even at its default value: that is how the case is told.
fn any_value(v: &AnyValue) -> Json {
    let mut o = Map::new();
    match &v.value {
        Some(Value::String(s)) => o.insert("stringValue".into(), json!(s)),
        Some(Value::Bool(b)) => o.insert("boolValue".into(), json!(b)),
        Some(Value::Int(i)) => o.insert("intValue".into(), json!(i.to_string())),
        Some(Value::Double(d)) => o.insert("doubleValue".into(), double(*d)),
        None => None,
    };
    Json::Object(o)
}

/// A double as proto3 JSON writes it: a number, or "NaN", "Infinity", "-Infinity".
fn double(d: f64) -> Json {
    match serde_json::Number::from_f64(d) {
        Some(n) => Json::Number(n),
        None if d.is_nan() => json!("NaN"),
        None if d > 0.0 => json!("Infinity"),
        None => json!("-Infinity"),
    }
}

/// A JSON object built field by field, leaving out fields at their proto3 default.
#[derive(Default)]
struct Object(Map<String, Json>);

impl Object {
    fn done(self) -> Json {
        Json::Object(self.0)
    }

    fn opt(mut self, key: &str, value: Option<Json>) -> Self {
        if let Some(v) = value {
            self.0.insert(key.into(), v);
        }
        self
    }

    fn list<T>(self, key: &str, items: &[T], f: impl Fn(&T) -> Json) -> Self {
        let value = (!items.is_empty()).then(|| Json::Array(items.iter().map(f).collect()));
        self.opt(key, value)
    }

    fn string(self, key: &str, s: &str) -> Self {
        self.opt(key, (!s.is_empty()).then(|| json!(s)))
    }

    /// Ids: lowercase hex, as OTLP/JSON has them.
    fn hex(self, key: &str, bytes: &[u8]) -> Self {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.string(key, &hex)
    }

    /// 64-bit integers are decimal strings.
    fn u64(self, key: &str, v: u64) -> Self {
        self.opt(key, (v != 0).then(|| json!(v.to_string())))
    }

    fn count(self, key: &str, v: u32) -> Self {
        self.opt(key, (v != 0).then(|| json!(v)))
    }
}
