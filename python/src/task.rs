//! Coroutines that put their span back on the thread's stack each time they resume.
//!
//! Python records re-synchronise the thread's span stack with the task's context variable
//! before they record ([`crate::shadow`]). Native code does not: a Rust `span!` called right
//! after an `await` would nest under whatever span another task left on the stack. So the
//! coroutine of an `async def` decorated with `@waffle.instrument` is driven through
//! [`Resync`], which re-synchronises before every step (`send`, `throw`), the way Rust's
//! `Instrumented` future enters its span on every poll.

use crate::ids;
use pyo3::prelude::*;

/// Awaitable wrapper of a coroutine: `await Resync(coro)` runs `coro`, re-synchronising the
/// thread's span stack with the running task's current span before each step.
#[pyclass(module = "waffle._native", frozen)]
pub struct Resync {
    inner: Py<PyAny>,
}

#[pymethods]
impl Resync {
    #[new]
    fn new(coro: Py<PyAny>) -> Resync {
        Resync { inner: coro }
    }

    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.send(py, py.None())
    }

    /// Resumes the coroutine with `value`; its `StopIteration` (its result) passes through.
    fn send(&self, py: Python<'_>, value: Py<PyAny>) -> PyResult<Py<PyAny>> {
        ids::resync(py);
        Ok(self.inner.bind(py).call_method1(pyo3::intern!(py, "send"), (value,))?.unbind())
    }

    /// Throws into the coroutine (cancellation, say).
    #[pyo3(signature = (typ, val=None, tb=None))]
    fn throw(
        &self,
        py: Python<'_>,
        typ: Py<PyAny>,
        val: Option<Py<PyAny>>,
        tb: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        ids::resync(py);
        let inner = self.inner.bind(py);
        let name = pyo3::intern!(py, "throw");
        let r = match (val, tb) {
            (None, None) => inner.call_method1(name, (typ,))?,
            (val, tb) => inner.call_method1(name, (typ, val, tb))?,
        };
        Ok(r.unbind())
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.bind(py).call_method0(pyo3::intern!(py, "close"))?;
        Ok(())
    }
}
