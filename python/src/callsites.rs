//! Run-time callsites for Python names, registered once and cached.
//!
//! A Rust callsite is a static in a linker section; a Python one is registered with
//! [`waffle_std::dynamic::register`] the first time its name and field names are seen, and its
//! id is cached so that later calls record only the id:
//!
//! - `waffle.span(name, **fields)` and `waffle.event(...)`: a dict keyed by the name (a lookup
//!   on a string whose hash Python has already cached), then the name's few field-name lists,
//!   compared by pointer (keyword names in the source are the same objects on every call); no
//!   string is copied or hashed in Rust per call, and nothing is allocated for the lookup;
//! - `@waffle.instrument`: a `FunctionSite` (`instrument.rs`) made at decoration time, which
//!   caches one id per *shape* of a call (which arguments were recorded, and which were
//!   arrays), keyed by a 64-bit mask.

use crate::fields::{convert, Conv, Val};
use pyo3::{
    exceptions::PyTypeError,
    prelude::*,
    sync::PyOnceLock,
    types::{PyDict, PyString},
};
use std::sync::Mutex;
use waffle::{callsite::Kind, wire::FieldType};

/// Module path recorded for `waffle.span`/`waffle.event` callsites.
const PY_MODULE: &str = "python";

static SPANS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
static EVENTS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// Registers a callsite whose fields are all dynamically typed.
pub(crate) fn register(
    kind: Kind,
    name: &str,
    module: &str,
    file: &str,
    line: u32,
    fields: &[String],
) -> Option<u32> {
    let schema: Vec<(&str, FieldType)> = fields.iter().map(|f| (f.as_str(), FieldType::Dynamic)).collect();
    waffle_std::dynamic::register(kind, name, module, file, line, &schema, "")
}

/// Explicit fields converted: values in order, and which keywords were arrays.
pub(crate) struct Explicit {
    pub vals: Vec<Val>,
    /// Bit i set: the i-th keyword (of the first 64) was an array (two fields).
    arrays: u64,
}

/// Converts `**fields`; a value of another type is a `TypeError` naming its field.
pub(crate) fn explicit(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Explicit> {
    let mut out = Explicit { vals: Vec::new(), arrays: 0 };
    let Some(fields) = fields else { return Ok(out) };
    out.vals.reserve(fields.len());
    for (i, (k, v)) in fields.iter().enumerate() {
        match convert(&v, true)? {
            Conv::Scalar(val) => out.vals.push(val),
            Conv::Array { shape, dtype } if i < 64 => {
                out.vals.push(Val::Text(shape));
                out.vals.push(Val::Text(dtype));
                out.arrays |= 1 << i;
            }
            Conv::Array { .. } | Conv::Unsupported => {
                let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
                return Err(PyTypeError::new_err(format!(
                    "waffle field `{k}`: a value of type {ty} cannot be recorded; fields take int, float, \
                     bool, str, or an array (anything with .shape and .dtype)"
                )));
            }
        }
    }
    Ok(out)
}

/// The callsites of one name: one per list of field names (and which of them were arrays).
#[pyclass(module = "waffle._native", frozen)]
struct NameSites {
    variants: Mutex<Vec<Variant>>,
}

struct Variant {
    keys: Vec<Py<PyString>>,
    arrays: u64,
    id: Option<u32>,
}

impl Variant {
    /// Whether `fields` has these keys in this order. Keyword names written in the source are
    /// the same string objects on every call, so this is mostly pointer compares.
    fn matches(&self, fields: Option<&Bound<'_, PyDict>>, arrays: u64) -> bool {
        if self.arrays != arrays || self.keys.len() != fields.map_or(0, |f| f.len()) {
            return false;
        }
        let Some(fields) = fields else { return true };
        fields
            .iter()
            .zip(&self.keys)
            .all(|((k, _), mine)| k.as_ptr() == mine.as_ptr() || k.eq(mine).unwrap_or(false))
    }
}

/// The callsite id for `name` with the keywords of `fields` (converted as `ex`); registers it
/// the first time. `None` once the process's run-time callsites are exhausted.
pub(crate) fn lookup(
    _py: Python<'_>,
    kind: Kind,
    name: &Bound<'_, PyString>,
    fields: Option<&Bound<'_, PyDict>>,
    ex: &Explicit,
) -> PyResult<Option<u32>> {
    let cache = if kind == Kind::Span { &SPANS } else { &EVENTS };
    lookup_in(cache, &[], kind, name, fields, ex)
}

/// As [`lookup`], in a cache of its own, for callsites whose schema starts with the fields
/// `prefix` (written by the caller before the keywords' values): device track slices.
pub(crate) fn lookup_in(
    cache: &PyOnceLock<Py<PyDict>>,
    prefix: &[&str],
    kind: Kind,
    name: &Bound<'_, PyString>,
    fields: Option<&Bound<'_, PyDict>>,
    ex: &Explicit,
) -> PyResult<Option<u32>> {
    let py = name.py();
    let cache = cache.get_or_init(py, || PyDict::new(py).unbind()).bind(py);
    let sites = match cache.get_item(name)? {
        Some(s) => s.cast_into::<NameSites>()?,
        None => {
            let s = Bound::new(py, NameSites { variants: Mutex::new(Vec::new()) })?;
            cache.set_item(name, &s)?;
            s
        }
    };
    let mut variants = sites.get().variants.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = variants.iter().find(|v| v.matches(fields, ex.arrays)) {
        return Ok(v.id);
    }
    let mut keys = Vec::new();
    let mut names: Vec<String> = prefix.iter().map(|&p| p.to_owned()).collect();
    if let Some(f) = fields {
        for (i, (k, _)) in f.iter().enumerate() {
            let k = k.cast_into::<PyString>()?;
            let text = k.to_str()?;
            if ex.arrays & 1u64.checked_shl(i as u32).unwrap_or(0) != 0 {
                names.push(format!("{text}.shape"));
                names.push(format!("{text}.dtype"));
            } else {
                names.push(text.to_owned());
            }
            keys.push(k.unbind());
        }
    }
    let id = register(kind, name.to_str()?, PY_MODULE, "", 0, &names);
    variants.push(Variant { keys, arrays: ex.arrays, id });
    Ok(id)
}

/// Test support: how many (span, event) callsites the caches hold.
#[pyfunction]
pub(crate) fn _cache_sizes(py: Python<'_>) -> PyResult<(usize, usize)> {
    let count = |c: &PyOnceLock<Py<PyDict>>| -> PyResult<usize> {
        let Some(d) = c.get(py) else { return Ok(0) };
        let mut n = 0;
        for (_, v) in d.bind(py).iter() {
            n += v.cast_into::<NameSites>()?.get().variants.lock().map_or(0, |v| v.len());
        }
        Ok(n)
    };
    Ok((count(&SPANS)?, count(&EVENTS)?))
}
