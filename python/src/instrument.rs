//! `@waffle.instrument`: one [`FunctionSite`] per decorated function, made at decoration time,
//! which caches one callsite id per *shape* of a call (which arguments were recorded, and which
//! were arrays), keyed by a 64-bit mask, and opens the call's span.

use crate::{
    callsites::register,
    fields::{convert, Conv, Val},
    span::Span,
};
use pyo3::{
    exceptions::PyTypeError,
    prelude::*,
    types::{PyDict, PyString, PyTuple},
};
use std::{collections::HashMap, sync::Mutex};
use waffle::callsite::Kind;

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
        self.span_for(args, kwargs)
    }

    /// Calls `func(*args, **kwargs)` inside a span for this call: what the wrapper of a plain
    /// decorated function runs, in one native call (no span object, no `with` statement).
    #[pyo3(signature = (func, args, kwargs=None))]
    fn call(
        &self,
        func: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.span_for(args, kwargs)?.call_in(func, args, kwargs)
    }
}

impl FunctionSite {
    /// The span of one call with these arguments (see [`FunctionSite::span`]).
    fn span_for(&self, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Span> {
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
