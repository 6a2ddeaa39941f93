//! # waffle-python
//!
//! The native module `waffle._native` of the Python package `waffle`. The package's Python
//! code (`python/waffle/`) is the API users import; this crate is what runs per span:
//!
//! - [`span`]: `waffle.span(...)` as a `#[pyclass]` context manager, and `waffle.event(...)`;
//! - [`callsites`]: run-time callsites, registered once per name and field names and cached;
//! - [`fields`]: Python values as field values (scalars, array summaries);
//! - [`shadow`]: keeping the thread's span stack in agreement with Python's context variable,
//!   so asyncio tasks interleaved on one thread each get their own parents, and Rust spans
//!   opened underneath Python nest under the Python span that is current;
//! - [`task`]: coroutines of instrumented `async def`s, re-synchronised on every resume;
//! - [`track`]: `waffle.Track`, a device track (a GPU queue) in its own clock;
//! - [`ids`]: `SpanId`, `EventId`, `Context` and the context variable;
//! - [`session`]: start/stop, and decoding and exporting with `waffle-std`;
//! - `tensor`: `waffle.tensor(name, array)`, a tensor's fingerprint, read through the buffer
//!   protocol (`buffer`) or DLPack (`dlpack`; tensors on a device copied to the host by their
//!   framework), as the element types of `elements`.
//!
//! Records from Python go into the same per-thread buffers as Rust spans, so a Rust library
//! instrumented with `waffle::span!` and loaded in the same extension lands in the same trace.
//!
//! ```python
//! import waffle
//! waffle.start("trace.bin")
//! with waffle.span("load", shard=3) as s:
//!     waffle.event("loaded", caused_by=s.id, rows=1024)
//! waffle.shutdown()
//! ```

// Denied, not forbidden: `elements`, `buffer` and `dlpack` see a tensor's memory as a slice of
// its element type, `dlpack` owns what a capsule hands over, and `ids` reads and writes the
// current span's context variable through the C API.
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod buffer;
pub mod callsites;
mod dlpack;
mod elements;
mod fields;
pub mod ids;
pub mod instrument;
pub mod session;
mod shadow;
pub mod span;
pub mod task;
mod tensor;
pub mod track;

use pyo3::prelude::*;

/// Test support: a Rust span with `n` nested Rust spans, recorded by `waffle::span!` exactly as
/// a Rust library would; returns the sum of 0..n.
#[pyfunction]
fn _test_rust_work(n: u64) -> u64 {
    let _outer = waffle::span!("rust_work", n);
    let mut acc = 0;
    for i in 0..n {
        let _step = waffle::span!("rust_step", i);
        acc += i;
    }
    acc
}

/// Test support: calls `f()` inside a Rust span `rust_callback`, as a Rust library calling back
/// into Python would.
#[pyfunction]
fn _test_rust_callback(f: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let _s = waffle::span!("rust_callback");
    Ok(f.call0()?.unbind())
}

/// Native core of the `waffle` package; see the package's documentation.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    ids::init(m.py())?;
    m.add_class::<span::Span>()?;
    m.add_class::<ids::SpanId>()?;
    m.add_class::<ids::EventId>()?;
    m.add_class::<ids::Context>()?;
    m.add_class::<instrument::FunctionSite>()?;
    m.add_class::<task::Resync>()?;
    m.add_class::<track::Track>()?;
    m.add_function(wrap_pyfunction!(span::span, m)?)?;
    m.add_function(wrap_pyfunction!(span::event, m)?)?;
    m.add_function(wrap_pyfunction!(span::call_in_span, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::set_tensors, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensors_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(ids::extract_context, m)?)?;
    m.add_function(wrap_pyfunction!(ids::enter_context, m)?)?;
    m.add_function(wrap_pyfunction!(ids::leave_context, m)?)?;
    m.add_function(wrap_pyfunction!(session::start, m)?)?;
    m.add_function(wrap_pyfunction!(session::stop, m)?)?;
    m.add_function(wrap_pyfunction!(session::recording_path, m)?)?;
    m.add_function(wrap_pyfunction!(session::recording_elsewhere, m)?)?;
    m.add_function(wrap_pyfunction!(session::flush, m)?)?;
    m.add_function(wrap_pyfunction!(session::set_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(session::is_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(session::_after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(session::formats, m)?)?;
    m.add_function(wrap_pyfunction!(session::format_for_path, m)?)?;
    m.add_function(wrap_pyfunction!(session::export, m)?)?;
    m.add_function(wrap_pyfunction!(session::send, m)?)?;
    m.add_function(wrap_pyfunction!(session::decode, m)?)?;
    m.add_function(wrap_pyfunction!(callsites::_cache_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(_test_rust_work, m)?)?;
    m.add_function(wrap_pyfunction!(_test_rust_callback, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
