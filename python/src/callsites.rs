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
//! - `@waffle.instrument`: a [`FunctionSite`] made at decoration time, which caches one id per
//!   *shape* of a call (which arguments were recorded, and which were arrays), keyed by a
//!   64-bit mask.

use crate::{
    fields::{convert, Conv, Val},
    span::Span,
};
use pyo3::{
    exceptions::PyTypeError,
    prelude::*,
    sync::PyOnceLock,
    types::{PyDict, PyString, PyTuple},
};
use std::{collections::HashMap, sync::Mutex};
use waffle::{callsite::Kind, wire::FieldType};

/// Module path recorded for `waffle.span`/`waffle.event` callsites.
const PY_MODULE: &str = "python";

static SPANS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
static EVENTS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// Registers a callsite whose fields are all dynamically typed.
fn register(kind: Kind, name: &str, module: &str, file: &str, line: u32, fields: &[String]) -> Option<u32> {
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

/// How a parameter takes its argument (`inspect.Parameter.kind`, same numbers).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ParamKind {
    PositionalOnly = 0,
    PositionalOrKeyword = 1,
    VarPositional = 2,
    KeywordOnly = 3,
    VarKeyword = 4,
}

struct Param {
    name: String,
    key: Py<PyString>,
    kind: ParamKind,
    skip: bool,
}

/// Most parameters of one function recorded as fields (two mask bits each).
const MAX_PARAMS: usize = 32;

/// The callsite of one `@waffle.instrument`ed function; made once, at decoration time.
#[pyclass(module = "waffle._native", frozen)]
pub struct FunctionSite {
    name: String,
    module: String,
    file: String,
    line: u32,
    params: Vec<Param>,
    /// Callsite per call shape: two bits per parameter (0 not recorded, 1 value, 2 array).
    sites: Mutex<HashMap<u64, Option<u32>>>,
}

#[pymethods]
impl FunctionSite {
    /// `params`: `(name, kind)` pairs in signature order, `kind` as `inspect.Parameter.kind`;
    /// `skip`: parameter names never recorded.
    #[new]
    #[pyo3(signature = (name, module, file, line, params, skip))]
    fn new(
        py: Python<'_>,
        name: String,
        module: String,
        file: String,
        line: u32,
        params: Vec<(String, u8)>,
        skip: Vec<String>,
    ) -> PyResult<FunctionSite> {
        let params = params
            .into_iter()
            .map(|(pname, kind)| {
                let kind = match kind {
                    0 => ParamKind::PositionalOnly,
                    1 => ParamKind::PositionalOrKeyword,
                    2 => ParamKind::VarPositional,
                    3 => ParamKind::KeywordOnly,
                    4 => ParamKind::VarKeyword,
                    k => return Err(PyTypeError::new_err(format!("unknown parameter kind {k}"))),
                };
                let skip =
                    skip.contains(&pname) || matches!(kind, ParamKind::VarPositional | ParamKind::VarKeyword);
                Ok(Param { key: PyString::intern(py, &pname).unbind(), name: pname, kind, skip })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(FunctionSite { name, module, file, line, params, sites: Mutex::new(HashMap::new()) })
    }

    /// The span name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// A span for one call with these arguments: recorded arguments become fields, others
    /// (unsupported types, `None`, skipped names, `*args`/`**kwargs`) are left out. Never
    /// raises for an argument's value.
    #[pyo3(signature = (args, kwargs=None))]
    fn span(&self, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Span> {
        if waffle::runtime::state() == 0 {
            return Ok(Span::disabled());
        }
        let py = args.py();
        let mut vals = Vec::with_capacity(self.params.len());
        let mut mask = 0u64;
        let mut pos = 0;
        for (i, p) in self.params.iter().enumerate().take(MAX_PARAMS) {
            let arg = match p.kind {
                ParamKind::PositionalOnly | ParamKind::PositionalOrKeyword if pos < args.len() => {
                    pos += 1;
                    if p.skip {
                        continue;
                    }
                    Some(args.get_item(pos - 1)?)
                }
                ParamKind::PositionalOrKeyword | ParamKind::KeywordOnly if !p.skip => match kwargs {
                    Some(kw) => kw.get_item(p.key.bind(py))?,
                    None => None,
                },
                _ => None,
            };
            let Some(arg) = arg else { continue };
            match convert(&arg, true).unwrap_or(Conv::Unsupported) {
                Conv::Scalar(v) => {
                    vals.push(v);
                    mask |= 1 << (2 * i);
                }
                Conv::Array { shape, dtype } => {
                    vals.push(Val::Text(shape));
                    vals.push(Val::Text(dtype));
                    mask |= 2 << (2 * i);
                }
                Conv::Unsupported => {}
            }
        }
        let callsite = self.callsite(mask);
        Ok(Span::ready(callsite, vals, Vec::new()))
    }
}

impl FunctionSite {
    fn callsite(&self, mask: u64) -> Option<u32> {
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        *sites.entry(mask).or_insert_with(|| {
            let mut names = Vec::new();
            for (i, p) in self.params.iter().enumerate().take(MAX_PARAMS) {
                match (mask >> (2 * i)) & 3 {
                    1 => names.push(p.name.clone()),
                    2 => {
                        names.push(format!("{}.shape", p.name));
                        names.push(format!("{}.dtype", p.name));
                    }
                    _ => {}
                }
            }
            register(Kind::Span, &self.name, &self.module, &self.file, self.line, &names)
        })
    }
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
