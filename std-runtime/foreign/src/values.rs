//! Values as the file gives them, read leniently (tools disagree on types), and as the format
//! writes them: JSON values as dynamic field values, microseconds as nanoseconds.

use serde_json::Value;
use waffle_wire::{write_varint, zigzag, FieldType, MAX_STR_LEN, MAX_VARINT_LEN};

/// Microseconds (the format's unit, a double) to whole nanoseconds, never below 0.
pub(crate) fn ns(us: f64) -> u64 {
    let v = (us * 1000.0).round();
    if v.is_finite() && v > 0.0 {
        v.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// A non-negative integer from a number or a numeric string.
pub(crate) fn lenient_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A number from a number or a numeric string.
pub(crate) fn lenient_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON value as a dynamic field value: its type code, then the value (integers as varints,
/// other numbers as doubles, strings cut at a character boundary to the format's limit, arrays
/// and objects as their compact JSON text).
pub(crate) fn encode(v: &Value, out: &mut Vec<u8>) {
    let mut buf = [0u8; MAX_VARINT_LEN];
    match v {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                out.push(FieldType::U64 as u8);
                let len = write_varint(&mut buf, u);
                out.extend_from_slice(&buf[..len]);
            } else if let Some(i) = n.as_i64() {
                out.push(FieldType::I64 as u8);
                let len = write_varint(&mut buf, zigzag(i));
                out.extend_from_slice(&buf[..len]);
            } else {
                out.push(FieldType::F64 as u8);
                out.extend_from_slice(&n.as_f64().unwrap_or(f64::NAN).to_le_bytes());
            }
        }
        Value::Bool(b) => {
            out.push(FieldType::Bool as u8);
            out.push(u8::from(*b));
        }
        Value::String(s) => string(s, out),
        Value::Null => string("null", out),
        other => string(&other.to_string(), out),
    }
}

fn string(s: &str, out: &mut Vec<u8>) {
    let mut end = s.len().min(MAX_STR_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut buf = [0u8; MAX_VARINT_LEN];
    out.push(FieldType::Str as u8);
    let len = write_varint(&mut buf, end as u64);
    out.extend_from_slice(&buf[..len]);
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// FNV-1a over `parts`, from `basis`.
pub(crate) fn fnv(basis: u64, parts: &[&[u8]]) -> u64 {
    let step = |h: u64, b: &u8| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    parts.iter().fold(basis, |h, p| p.iter().fold(step(h, &0xff), step))
}
