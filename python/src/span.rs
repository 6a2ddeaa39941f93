//! `waffle.span(...)`: a context manager (and decorator) implemented in Rust, and
//! `waffle.event(...)`.
//!
//! `waffle.span("name", **fields)` converts the fields and finds the cached callsite when it is
//! called; `__enter__` records the begin (after making the thread's stack agree with the Python
//! context, see [`crate::shadow`]) and makes the span current in the context variable;
//! `__exit__` records an `exception` event if one is propagating, ends the span and restores
//! the context variable. The exception is never swallowed.

use crate::{
    callsites::{self, explicit},
    fields::{encode_all, Val},
    ids::{self, EventId, SpanId},
    shadow,
};
use pyo3::{
    exceptions::{PyRuntimeError, PyTypeError},
    prelude::*,
    types::{PyDict, PyIterator, PyString, PyTuple},
};
use waffle::callsite::Kind;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    New,
    Open,
    Closed,
}

/// A span: `with waffle.span("load", shard=3) as s: ...`; `s.id` is its `SpanId`.
#[pyclass(module = "waffle._native", name = "Span")]
pub struct Span {
    callsite: Option<u32>,
    vals: Vec<Val>,
    causes: Vec<u64>,
    stage: Stage,
    /// Whether `callsite`, `vals` and `causes` are known. A span made while nothing records
    /// leaves them to `__enter__`, which resolves them only if recording has begun since.
    resolved: bool,
    id: u64,
    epoch: u32,
    token: Option<Py<PyAny>>,
    /// For the decorator form, which makes a fresh span per call: the arguments it was made
    /// with (references, no copies).
    name: Option<Py<PyString>>,
    caused_by: Option<Py<PyAny>>,
    fields: Option<Py<PyDict>>,
}

impl Span {
    /// A span that records nothing (recording was off when it was made).
    pub(crate) fn disabled() -> Span {
        Span::ready(None, Vec::new(), Vec::new())
    }

    /// A span with its callsite and field values, not entered yet.
    pub(crate) fn ready(callsite: Option<u32>, vals: Vec<Val>, causes: Vec<u64>) -> Span {
        Span {
            callsite,
            vals,
            causes,
            stage: Stage::New,
            resolved: true,
            id: 0,
            epoch: 0,
            token: None,
            name: None,
            caused_by: None,
            fields: None,
        }
    }

    /// Its id once entered (0 before, or if nothing was recorded).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn close(&mut self, py: Python<'_>) {
        self.stage = Stage::Closed;
        let plain = self.id == 0 || shadow::end(self.epoch, self.id);
        if let Some(token) = self.token.take() {
            ids::reset(py, token);
        }
        if !plain {
            ids::resync(py);
        }
    }

    /// Enters the span: records its begin under the running context's current span and makes
    /// it current. What `__enter__` does, callable from Rust on a span that is not a Python
    /// object (the decorators' native path).
    pub(crate) fn enter(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.stage != Stage::New {
            return Err(PyRuntimeError::new_err(
                "this span was already entered; make a new one with waffle.span(...) for each use",
            ));
        }
        self.stage = Stage::Open;
        let state = waffle::runtime::state();
        if state == 0 {
            return Ok(());
        }
        if !self.resolved {
            // Made while nothing recorded; recording has begun since.
            let Some(name) = self.name.as_ref().map(|n| n.clone_ref(py)) else { return Ok(()) };
            let caused_by = self.caused_by.as_ref().map(|c| c.clone_ref(py));
            let fields = self.fields.as_ref().map(|f| f.clone_ref(py));
            let mut r = resolved(
                name.bind(py),
                caused_by.as_ref().map(|c| c.bind(py)),
                fields.as_ref().map(|f| f.bind(py)),
            )?;
            self.callsite = r.callsite;
            self.vals = std::mem::take(&mut r.vals);
            self.causes = std::mem::take(&mut r.causes);
            self.resolved = true;
        }
        let Some(callsite) = self.callsite else { return Ok(()) };
        let want = ids::current(py)?;
        let vals = std::mem::take(&mut self.vals);
        let id = shadow::begin(state, want, callsite, &|w| encode_all(&vals, w), &self.causes);
        if id != 0 {
            self.id = id;
            self.epoch = state;
            self.token = Some(ids::set_current(py, id)?);
        }
        Ok(())
    }

    /// Exits the span: an `exception` event first if `exc_type` is propagating, then its end.
    pub(crate) fn exit(
        &mut self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        exc: Option<&Bound<'_, PyAny>>,
    ) {
        if self.stage != Stage::Open {
            return;
        }
        if self.id != 0 {
            if let Some(t) = exc_type {
                record_exception(self.id, t, exc);
            }
        }
        self.close(py);
    }

    /// Calls `func(*args, **kwargs)` inside this span; an exception is recorded and propagates.
    pub(crate) fn call_in(
        mut self,
        func: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let py = func.py();
        self.enter(py)?;
        let r = func.call(args, kwargs);
        match &r {
            Ok(_) => self.exit(py, None, None),
            Err(e) => {
                let (ty, value) = (e.get_type(py), e.value(py).clone());
                self.exit(py, Some(ty.as_any()), Some(value.as_any()));
            }
        }
        Ok(r?.unbind())
    }
}

/// `_native.call_in_span(name, caused_by, fields, func, args, kwargs)`: what a function
/// decorated with `@waffle.span(name, **fields)` runs per call, in one native call (no span
/// object, no `with` statement).
#[pyfunction]
#[pyo3(signature = (name, caused_by, fields, func, args, kwargs=None))]
pub(crate) fn call_in_span(
    name: &Bound<'_, PyString>,
    caused_by: Option<&Bound<'_, PyAny>>,
    fields: Option<&Bound<'_, PyDict>>,
    func: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let fields = fields.filter(|f| !f.is_empty());
    make(name, caused_by.filter(|c| !c.is_none()), fields)?.call_in(func, args, kwargs)
}

/// `waffle.span(name, caused_by=None, **fields)`: converts the fields (a `TypeError` names a
/// bad one), finds the cached callsite and returns the span, not entered yet. While nothing
/// records (no session, or paused) it only keeps its arguments: the work is left to
/// `__enter__`, which does it if recording has begun by then, so a paused span costs little
/// more than a bare `with` statement, and its fields are not checked.
pub(crate) fn make(
    name: &Bound<'_, PyString>,
    caused_by: Option<&Bound<'_, PyAny>>,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<Span> {
    let mut span = if waffle::runtime::state() == 0 {
        let mut s = Span::disabled();
        s.resolved = false;
        s
    } else {
        resolved(name, caused_by, fields)?
    };
    span.name = Some(name.clone().unbind());
    span.caused_by = caused_by.map(|c| c.clone().unbind());
    span.fields = fields.map(|f| f.clone().unbind());
    Ok(span)
}

/// A span with its fields converted, its causes read and its callsite found.
fn resolved(
    name: &Bound<'_, PyString>,
    caused_by: Option<&Bound<'_, PyAny>>,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<Span> {
    let ex = explicit(fields)?;
    let causes = causes(caused_by)?;
    let callsite = callsites::lookup(name.py(), Kind::Span, name, fields, &ex)?;
    Ok(Span::ready(callsite, ex.vals, causes))
}

/// `waffle.span(name, caused_by=None, **fields) -> Span` (a function rather than the class's
/// constructor: Python then passes keywords without building a dict of its own).
#[pyfunction]
#[pyo3(signature = (name, /, *, caused_by=None, **fields))]
pub(crate) fn span(
    name: &Bound<'_, PyString>,
    caused_by: Option<&Bound<'_, PyAny>>,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<Span> {
    make(name, caused_by, fields)
}

#[pymethods]
impl Span {
    /// `waffle.Span(name, caused_by=None, **fields)`, the same as `waffle.span(...)`.
    #[new]
    #[pyo3(signature = (name, /, *, caused_by=None, **fields))]
    fn new(
        name: &Bound<'_, PyString>,
        caused_by: Option<&Bound<'_, PyAny>>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Span> {
        make(name, caused_by, fields)
    }

    /// This span's id; null before `__enter__` or while recording is off.
    #[getter(id)]
    fn py_id(&self) -> SpanId {
        SpanId(self.id)
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        let py = slf.py();
        slf.enter(py)?;
        Ok(slf)
    }

    #[pyo3(signature = (exc_type=None, exc=None, _tb=None))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.exit(py, exc_type.filter(|t| !t.is_none()), exc);
        false
    }

    /// `@waffle.span("name", **fields)` on a function: a fresh span around every call.
    fn __call__(&self, py: Python<'_>, func: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Some(name) = &self.name else {
            return Err(PyRuntimeError::new_err("only a span made by waffle.span(...) can decorate"));
        };
        if self.stage != Stage::New {
            return Err(PyRuntimeError::new_err("a span that was entered cannot decorate a function"));
        }
        let helper = py.import("waffle._instrument")?.getattr("span_decorator")?;
        Ok(helper
            .call1((func, name.bind(py), self.caused_by.as_ref().map(|c| c.bind(py)), self.fields.as_ref()))?
            .unbind())
    }

    fn __repr__(&self) -> String {
        let stage = match self.stage {
            Stage::New => "new",
            Stage::Open => "open",
            Stage::Closed => "closed",
        };
        format!("Span(id={:016x}, {stage})", self.id)
    }
}

impl Drop for Span {
    /// A span left open (a generator never finished, say) still ends when it is collected, and
    /// stops being current in the context it was entered in (if that is the running one).
    fn drop(&mut self) {
        if self.stage == Stage::Open && self.id != 0 {
            shadow::end(self.epoch, self.id);
        }
        if let Some(token) = self.token.take() {
            Python::attach(|py| ids::reset(py, token));
        }
    }
}

/// An `exception` event inside span `id`, with the exception's type and message.
fn record_exception(id: u64, ty: &Bound<'_, PyAny>, exc: Option<&Bound<'_, PyAny>>) {
    let state = waffle::runtime::state();
    if state == 0 {
        return;
    }
    let name = ty.getattr("__qualname__").and_then(|n| n.extract::<String>()).unwrap_or_default();
    let msg = exc.and_then(|e| e.str().ok()).map(|s| s.to_string()).unwrap_or_default();
    static SITE: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let site = *SITE.get_or_init(|| {
        use waffle::wire::FieldType::Dynamic;
        waffle_std::dynamic::register(
            Kind::Event,
            "exception",
            "python",
            "",
            0,
            &[("exception.type", Dynamic), ("exception.message", Dynamic)],
            "",
        )
    });
    if let Some(site) = site {
        let vals = [Val::Text(name), Val::Text(msg)];
        shadow::event(state, id, site, &|w| encode_all(&vals, w), &[]);
    }
}

/// `waffle.event(name, caused_by=None, **fields) -> EventId`.
#[pyfunction]
#[pyo3(signature = (name, /, *, caused_by=None, **fields))]
pub(crate) fn event(
    name: &Bound<'_, PyString>,
    caused_by: Option<&Bound<'_, PyAny>>,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<EventId> {
    let py = name.py();
    // While nothing records, nothing is converted (as for a span).
    let state = waffle::runtime::state();
    if state == 0 {
        return Ok(EventId(0));
    }
    let ex = explicit(fields)?;
    let causes = causes(caused_by)?;
    let Some(callsite) = callsites::lookup(py, Kind::Event, name, fields, &ex)? else {
        return Ok(EventId(0));
    };
    let want = ids::current(py)?;
    Ok(EventId(shadow::event(state, want, callsite, &|w| encode_all(&ex.vals, w), &causes)))
}

/// One id from a `caused_by` item: an entered `Span`, or what [`ids::one_id`] takes.
fn cause_id(v: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    if let Ok(s) = v.cast::<Span>() {
        return Ok(Some(s.borrow().id()));
    }
    ids::one_id(v)
}

/// The ids named by a `caused_by=` argument: one cause or an iterable of them; null ids are
/// left out.
pub(crate) fn causes(caused_by: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<u64>> {
    let Some(c) = caused_by.filter(|c| !c.is_none()) else { return Ok(Vec::new()) };
    let bad = |what: &Bound<'_, PyAny>| {
        let ty = what.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        PyTypeError::new_err(format!(
            "caused_by takes SpanId, EventId, Context, Span or int values (or a list of them), not {ty}"
        ))
    };
    if let Some(id) = cause_id(c)? {
        return Ok(if id == 0 { Vec::new() } else { vec![id] });
    }
    let Ok(items) = PyIterator::from_object(c) else { return Err(bad(c)) };
    let mut out = Vec::new();
    for item in items {
        let item = item?;
        if item.is_none() {
            continue;
        }
        match cause_id(&item)? {
            Some(0) => {}
            Some(id) => out.push(id),
            None => return Err(bad(&item)),
        }
    }
    Ok(out)
}
