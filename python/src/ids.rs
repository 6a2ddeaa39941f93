//! `SpanId`, `EventId` and `Context` as Python values, and the context variable that says which
//! span is current in the running thread or asyncio task.

use pyo3::{
    exceptions::{PyTypeError, PyValueError},
    prelude::*,
    sync::PyOnceLock,
    types::{PyBytes, PyDict},
};
use waffle::{SpanId as RSpanId, TraceId};

macro_rules! id_class {
    ($(#[$doc:meta])* $name:ident, $py_name:literal) => {
        $(#[$doc])*
        #[pyclass(module = "waffle._native", name = $py_name, frozen, eq, hash, from_py_object)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub(crate) u64);

        #[pymethods]
        impl $name {
            /// The id with this numeric value (0 is the null id).
            #[new]
            fn new(value: u64) -> Self {
                $name(value)
            }

            /// Whether this is the null id (nothing was recorded).
            #[getter]
            fn is_null(&self) -> bool {
                self.0 == 0
            }

            fn __int__(&self) -> u64 {
                self.0
            }

            fn __bool__(&self) -> bool {
                self.0 != 0
            }

            /// 16 lower-case hex digits, as Jaeger and Zipkin show ids.
            fn __str__(&self) -> String {
                format!("{:016x}", self.0)
            }

            fn __repr__(&self) -> String {
                format!(concat!($py_name, "({:016x})"), self.0)
            }
        }
    };
}

id_class! {
    /// Identifies one span, unique within a trace: what `caused_by=` and contexts refer to.
    SpanId, "SpanId"
}

id_class! {
    /// Identifies one event, unique within a trace; `waffle.event(...)` returns it.
    EventId, "EventId"
}

/// A trace id and a span: what work done in another thread, task or process belongs to.
#[pyclass(module = "waffle._native", name = "Context", frozen, eq, hash, from_py_object)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Context {
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
}

impl Context {
    fn inner(&self) -> waffle::Context {
        waffle::Context::new(TraceId::from_u128(self.trace_id), RSpanId::from_u64(self.span_id))
    }

    fn from_inner(c: waffle::Context) -> Context {
        Context { trace_id: c.trace_id().to_u128(), span_id: c.span_id().to_u64() }
    }
}

#[pymethods]
impl Context {
    /// A context naming `span_id` in trace `trace_id` (an int, or 32 hex digits).
    #[new]
    #[pyo3(signature = (trace_id, span_id))]
    fn new(trace_id: &Bound<'_, PyAny>, span_id: &Bound<'_, PyAny>) -> PyResult<Context> {
        let trace_id = match trace_id.extract::<u128>() {
            Ok(v) => v,
            Err(_) => {
                let s: String = trace_id.extract()?;
                u128::from_str_radix(&s, 16)
                    .map_err(|_| PyValueError::new_err(format!("trace id {s:?} is not hex")))?
            }
        };
        let span_id = one_id(span_id)?
            .ok_or_else(|| PyTypeError::new_err("span_id must be a SpanId, an EventId or an int"))?;
        Ok(Context { trace_id, span_id })
    }

    /// Reads a W3C `traceparent` header (`00-<32 hex trace id>-<16 hex span id>-<flags>`).
    #[staticmethod]
    fn from_traceparent(header: &str) -> PyResult<Context> {
        waffle::Context::from_traceparent(header)
            .map(Context::from_inner)
            .map_err(|e| PyValueError::new_err(format!("{e}: {header:?}")))
    }

    /// Reads the 25-byte form written by [`Context::to_bytes`].
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Context> {
        waffle::Context::from_bytes(data)
            .map(Context::from_inner)
            .map_err(|e| PyValueError::new_err(format!("not a waffle context: {e}")))
    }

    /// The W3C `traceparent` header for this context.
    #[getter]
    fn traceparent(&self) -> String {
        self.inner().to_traceparent()
    }

    /// The compact binary form: a version byte, the trace id, the span id (25 bytes).
    #[pyo3(name = "to_bytes")]
    fn bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner().to_bytes())
    }

    /// The trace id, 32 lower-case hex digits.
    #[getter]
    fn trace_id(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// The span that work carried by this context belongs to.
    #[getter]
    fn span_id(&self) -> SpanId {
        SpanId(self.span_id)
    }

    /// Whether it names no span.
    #[getter]
    fn is_null(&self) -> bool {
        self.span_id == 0
    }

    fn __repr__(&self) -> String {
        format!("Context(traceparent={:?})", self.traceparent())
    }
}

/// The context variable holding the current span id (0: none) of this thread or task. It is
/// read and written through the C API (`PyContextVar_Get`/`Set`/`Reset`): a call through its
/// bound Python methods cost a method call and an argument tuple each, per span.
struct CurrentVar {
    var: Py<PyAny>,
}

static CURRENT: PyOnceLock<CurrentVar> = PyOnceLock::new();

/// Creates the context variable; called once when the module loads.
pub(crate) fn init(py: Python<'_>) -> PyResult<()> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("default", 0u64)?;
    let var =
        py.import("contextvars")?.getattr("ContextVar")?.call(("waffle_current_span",), Some(&kwargs))?;
    let _ = CURRENT.set(py, CurrentVar { var: var.unbind() });
    Ok(())
}

fn var(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    CURRENT
        .get(py)
        .map(|c| c.var.bind(py))
        .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("waffle._native is not initialised"))
}

/// The span current in the running thread or task according to Python (0: none).
pub(crate) fn current(py: Python<'_>) -> PyResult<u64> {
    let var = var(py)?;
    let mut value: *mut pyo3::ffi::PyObject = std::ptr::null_mut();
    // SAFETY: `var` is a live ContextVar (made in `init`, kept for the process) and the GIL is
    // held; on success `value` is a new reference (the variable's default when unset), which
    // `from_owned_ptr` takes over.
    #[allow(unsafe_code)]
    let value = unsafe {
        if pyo3::ffi::PyContextVar_Get(var.as_ptr(), std::ptr::null_mut(), &mut value) < 0 || value.is_null()
        {
            return Err(PyErr::fetch(py));
        }
        Bound::from_owned_ptr(py, value)
    };
    value.extract()
}

/// Makes `id` current in the running context; returns the token that [`reset`] takes.
pub(crate) fn set_current(py: Python<'_>, id: u64) -> PyResult<Py<PyAny>> {
    let var = var(py)?;
    let value = id.into_pyobject(py)?;
    // SAFETY: `var` is a live ContextVar and `value` a live object, the GIL is held; the
    // result is a new reference to the token, or null with an exception set.
    #[allow(unsafe_code)]
    unsafe {
        let token = pyo3::ffi::PyContextVar_Set(var.as_ptr(), value.as_ptr());
        if token.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, token).unbind())
    }
}

/// Restores what was current before [`set_current`] made `token`. A token made in another
/// context (a span entered in one task and exited in another) cannot be reset; the error is
/// dropped, since that context ends with its task anyway.
pub(crate) fn reset(py: Python<'_>, token: Py<PyAny>) {
    if let Ok(v) = var(py) {
        // SAFETY: `v` is a live ContextVar and `token` a live object (checked to be a token by
        // the call), the GIL is held.
        #[allow(unsafe_code)]
        let failed = unsafe { pyo3::ffi::PyContextVar_Reset(v.as_ptr(), token.as_ptr()) } < 0;
        if failed {
            drop(PyErr::take(py));
        }
    }
}

/// The context of the running thread or task.
#[pyfunction]
pub(crate) fn extract_context(py: Python<'_>) -> PyResult<Context> {
    let span = crate::shadow::effective_parent(current(py)?);
    Ok(Context { trace_id: waffle::runtime::trace_id().to_u128(), span_id: span })
}

/// Makes `span_id` current (for `inject_context`): sets the context variable and enters the
/// span on this thread. Returns the token and the session it was entered in, for
/// [`leave_context`].
#[pyfunction]
pub(crate) fn enter_context(py: Python<'_>, span_id: u64) -> PyResult<(Py<PyAny>, u32)> {
    let token = set_current(py, span_id)?;
    let state = waffle::runtime::state();
    if state != 0 && span_id != 0 {
        crate::shadow::enter(state, span_id);
    }
    Ok((token, state))
}

/// Undoes [`enter_context`].
#[pyfunction]
pub(crate) fn leave_context(py: Python<'_>, token: Py<PyAny>, epoch: u32, span_id: u64) {
    let left = span_id == 0 || crate::shadow::leave(epoch, span_id);
    reset(py, token);
    if !left {
        resync(py);
    }
}

/// Makes this thread's stack agree with the running context's current span now (after a span
/// or context left from below the top), so that native code called next nests correctly.
pub(crate) fn resync(py: Python<'_>) {
    let state = waffle::runtime::state();
    if state != 0 {
        if let Ok(want) = current(py) {
            crate::shadow::enter(state, want);
        }
    }
}

/// One id from a `SpanId`, `EventId`, `Context` or int (`None` for anything else).
pub(crate) fn one_id(v: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    if let Ok(s) = v.cast::<SpanId>() {
        return Ok(Some(s.get().0));
    }
    if let Ok(e) = v.cast::<EventId>() {
        return Ok(Some(e.get().0));
    }
    if let Ok(c) = v.cast::<Context>() {
        return Ok(Some(c.get().span_id));
    }
    if v.is_instance_of::<pyo3::types::PyInt>() && !v.is_instance_of::<pyo3::types::PyBool>() {
        return Ok(v.extract::<u64>().ok());
    }
    Ok(None)
}
