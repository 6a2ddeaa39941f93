//! `tracing` field values as waffle field values.
//!
//! A `tracing` value is visited (`Visit`), not read: its type is known only in the visitor's
//! call, and a `&str` or `Debug` value lives only for that call. So values are collected
//! first, into a per-thread [`Values`] that keeps its capacity, and written into the record
//! afterwards, in field order (the waffle schema's order, see `callsites`):
//!
//! - `u64`, `i64`, `f64`, `bool` and `&str` keep their type (`u128`/`i128` too when they fit
//!   64 bits); a string is copied into the per-thread text buffer;
//! - everything else (`Debug` values, errors, an event's `message`, wide integers that do not
//!   fit) is formatted with `{:?}` (errors with `{}`) into the same buffer. This runs the
//!   value's `Debug` impl, which is the real cost of such a field; the buffer grows to the
//!   longest text seen and is then reused, so nothing is allocated per record after warm-up.
//!
//! Strings longer than waffle's limit (1 KiB) are cut at a character boundary when written.

use std::{cell::RefCell, fmt::Write as _};
use tracing_core::field::{Field, Visit};
use waffle::{encode::Writer, FieldValue};

#[derive(Clone, Copy)]
enum Val {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// A range of [`Values::text`].
    Text(u32, u32),
}

/// One span's or event's values, by field index.
#[derive(Default)]
pub(crate) struct Values {
    vals: Vec<(u8, Val)>,
    text: String,
}

thread_local! {
    static VALUES: RefCell<Values> = RefCell::new(Values::default());
}

/// Runs `f` on this thread's emptied [`Values`]; `None` if they are in use (a `Debug` impl
/// that records through `tracing` while its value is being formatted: that inner record is
/// left out) or the thread is being torn down.
pub(crate) fn with_values<R>(f: impl FnOnce(&mut Values) -> R) -> Option<R> {
    VALUES
        .try_with(|v| {
            let mut v = v.try_borrow_mut().ok()?;
            v.vals.clear();
            v.text.clear();
            Some(f(&mut v))
        })
        .ok()
        .flatten()
}

impl Values {
    /// The mask of the fields collected (bit `i`: field index `i`), with the values put in
    /// field order.
    pub(crate) fn present(&mut self) -> u64 {
        if !self.vals.windows(2).all(|w| w[0].0 < w[1].0) {
            self.vals.sort_unstable_by_key(|v| v.0);
        }
        self.vals.iter().fold(0, |m, v| m | 1u64 << (v.0 & 63))
    }

    /// Writes the values in field order, each with its type code (the schema's fields are
    /// dynamically typed).
    #[inline]
    pub(crate) fn write(&self, w: &mut Writer<'_>) {
        for (_, v) in &self.vals {
            match *v {
                Val::U64(x) => x.encode_dynamic(w),
                Val::I64(x) => x.encode_dynamic(w),
                Val::F64(x) => x.encode_dynamic(w),
                Val::Bool(x) => x.encode_dynamic(w),
                Val::Text(a, b) => self.text.get(a as usize..b as usize).unwrap_or("").encode_dynamic(w),
            }
        }
    }

    fn push(&mut self, field: &Field, v: Val) {
        // A field set has at most 32 fields; an index past the mask's room is left out.
        if let Ok(i) = u8::try_from(field.index()) {
            if i < 64 {
                self.vals.push((i, v));
            }
        }
    }

    fn text_of(&mut self, field: &Field, f: impl FnOnce(&mut String)) {
        let start = self.text.len();
        f(&mut self.text);
        let (Ok(a), Ok(b)) = (u32::try_from(start), u32::try_from(self.text.len())) else { return };
        self.push(field, Val::Text(a, b));
    }
}

impl Visit for Values {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Val::U64(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Val::I64(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Val::F64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Val::Bool(value));
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.push(field, Val::U64(v)),
            Err(_) => self.text_of(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, Val::I64(v)),
            Err(_) => self.text_of(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.text_of(field, |t| t.push_str(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.text_of(field, |t| {
            let _ = write!(t, "{value}");
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text_of(field, |t| {
            let _ = write!(t, "{value:?}");
        });
    }
}
