//! `waffle.tensor(name, array, caused_by=None, **fields)`: a tensor's fingerprint (element
//! count, XXH3-64 of its little-endian bytes, RMS/min/max of the finite elements, NaN and Inf
//! counts; `waffle::tensor::Fingerprint`) recorded as one event with the reserved fields of
//! `waffle::wire::reserved::tensor`, then the keyword fields.
//!
//! Where the elements are read from, in this order:
//! 1. the buffer protocol (NumPy arrays, `bytes`, `array.array`, `memoryview`), in place when
//!    contiguous ([`buffer`](crate::buffer));
//! 2. DLPack, for objects with `__dlpack__` (PyTorch, JAX, CuPy, and any array-API library):
//!    in host memory, in place when contiguous ([`dlpack`](crate::dlpack)); on a device (as
//!    `__dlpack_device__` says), copied to the host by the framework first (`from_device`);
//! 3. `__array__`, which converts to NumPy (and a producer that refuses to export its element
//!    type through DLPack, as NumPy does for ml_dtypes' `bfloat16`, is read this way too).
//!
//! While recording or fingerprints are off, the call returns before touching the array.

use crate::{
    buffer,
    dlpack::{self, Managed},
    fields::{convert, Conv, Val},
    ids::{self, EventId},
};
use pyo3::{
    buffer::PyUntypedBuffer,
    exceptions::{PyBufferError, PyTypeError},
    prelude::*,
    types::{PyDict, PyString},
};
use std::{collections::HashMap, sync::Mutex};
use waffle::{
    callsite::Kind,
    tensor::{Fingerprint, Shape, SCHEMA},
    wire::FieldType,
};

/// The tensor callsites registered so far, by the names of their keyword fields.
static SITES: Mutex<Option<HashMap<Vec<String>, Option<u32>>>> = Mutex::new(None);

/// The callsite for tensors with keyword fields `keys` (registered the first time).
fn site(keys: Vec<String>) -> Option<u32> {
    let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    let sites = sites.get_or_insert_with(HashMap::new);
    if let Some(id) = sites.get(&keys) {
        return *id;
    }
    let mut schema: Vec<(&str, FieldType)> = SCHEMA.to_vec();
    schema.extend(keys.iter().map(|k| (k.as_str(), FieldType::Dynamic)));
    let id = waffle_std::dynamic::register(Kind::Event, "tensor", "python", "", 0, &schema, "");
    sites.insert(keys, id);
    id
}

/// The fingerprint and shape of `array`, from wherever its elements can be read (see the
/// module docs).
fn read(array: &Bound<'_, PyAny>) -> PyResult<(Fingerprint, Vec<usize>)> {
    let py = array.py();
    if PyUntypedBuffer::get(array).is_ok() || !array.hasattr(pyo3::intern!(py, "__dlpack__"))? {
        return buffer::read(array);
    }
    // PyTorch refuses to export a tensor that requires grad; `.detach()` is the same memory
    // without the autograd graph.
    let requires_grad = array.getattr_opt(pyo3::intern!(py, "requires_grad")).ok().flatten();
    let detached = match requires_grad {
        Some(r) if r.is_truthy()? => Some(array.call_method0(pyo3::intern!(py, "detach"))?),
        _ => None,
    };
    let array = detached.as_ref().unwrap_or(array);
    match place(array) {
        Place::Device(device) => from_device(array, &device),
        Place::Host => match dlpack::export(array, &PyDict::new(py)) {
            Ok(capsule) => Managed::take(&capsule)?.fingerprint(),
            // NumPy cannot export ml_dtypes' bfloat16 through DLPack, and says so this way.
            Err(e) if e.is_instance_of::<PyBufferError>(py) && array.hasattr(pyo3::intern!(py, "__array__"))? => {
                buffer::read(array).map_err(|e2| {
                    PyBufferError::new_err(format!(
                        "waffle.tensor: {} in host memory could be read neither through __dlpack__ ({e}) nor through __array__ ({e2})",
                        describe(array)
                    ))
                })
            }
            Err(e) => Err(PyBufferError::new_err(format!(
                "waffle.tensor: {} in host memory could not be exported through __dlpack__: {e}",
                describe(array)
            ))),
        },
    }
}

/// Where an object with `__dlpack__` keeps its elements.
enum Place {
    /// Host memory (`kDLCPU`), or not said (no `__dlpack_device__`: the capsule will say).
    Host,
    /// Elsewhere, by name (`cuda:0`).
    Device(String),
}

fn place(array: &Bound<'_, PyAny>) -> Place {
    let py = array.py();
    let Ok(Some(method)) = array.getattr_opt(pyo3::intern!(py, "__dlpack_device__")) else {
        return Place::Host;
    };
    match method.call0().and_then(|d| d.extract::<(i32, i32)>()) {
        Ok((dlpack::CPU, _)) => Place::Host,
        Ok((kind, id)) => Place::Device(dlpack::device_name(kind, id)),
        // A JAX array sharded over several devices, for one: it has no one device.
        Err(e) => Place::Device(format!("no single device ({e})")),
    }
}

/// The object's type and element type, for messages (`Tensor of torch.bfloat16`).
fn describe(array: &Bound<'_, PyAny>) -> String {
    let py = array.py();
    let ty = array.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    let dtype = array.getattr_opt(pyo3::intern!(py, "dtype")).ok().flatten().and_then(|d| d.str().ok());
    match dtype {
        Some(d) => format!("a {ty} of {d}"),
        None => format!("a {ty}"),
    }
}

/// A tensor on a device, copied to host memory by its own framework, then read there. The
/// ways, in order: DLPack's own (`__dlpack__(dl_device=(kDLCPU, 0), copy=True)`, the array
/// API's since 2023.12, which JAX and PyTorch take), then `.cpu()` (PyTorch), `.get()` (CuPy),
/// `__array__` (JAX, and most others). Each copies the whole tensor and waits for the work
/// that writes it; the copy lives until the fingerprint is taken.
fn from_device(array: &Bound<'_, PyAny>, device: &str) -> PyResult<(Fingerprint, Vec<usize>)> {
    let py = array.py();
    let mut tried = Vec::new();
    let kwargs = PyDict::new(py);
    kwargs.set_item("dl_device", (dlpack::CPU, 0))?;
    kwargs.set_item("copy", true)?;
    match dlpack::export(array, &kwargs).and_then(|capsule| Managed::take(&capsule)) {
        Ok(t) if t.device().0 == dlpack::CPU => return t.fingerprint(),
        Ok(t) => {
            let (kind, id) = t.device();
            tried.push(format!(
                "__dlpack__(dl_device=(kDLCPU, 0), copy=True) gave a tensor on {}",
                dlpack::device_name(kind, id)
            ));
        }
        Err(e) => tried.push(format!("__dlpack__(dl_device=(kDLCPU, 0), copy=True): {e}")),
    }
    for method in ["cpu", "get", "__array__"] {
        let Ok(Some(f)) = array.getattr_opt(method) else { continue };
        match f.call0() {
            Ok(host) if in_host_memory(&host) => return read(&host),
            Ok(host) => tried.push(format!(".{method}() gave {}, not in host memory", describe(&host))),
            Err(e) => tried.push(format!(".{method}(): {e}")),
        }
    }
    Err(PyBufferError::new_err(format!(
        "waffle.tensor: {} on {device} could not be copied to the host ({})",
        describe(array),
        tried.join("; ")
    )))
}

/// Whether `obj` is read from host memory by [`read`]: a buffer, or something `__dlpack_device__`
/// does not place on a device. (What a framework's host copy returns, checked so that a copy
/// that did not move the tensor is not copied again and again.)
fn in_host_memory(obj: &Bound<'_, PyAny>) -> bool {
    PyUntypedBuffer::get(obj).is_ok() || matches!(place(obj), Place::Host)
}

/// Keyword fields: their names and values (scalars only).
fn keyword_fields(fields: Option<&Bound<'_, PyDict>>) -> PyResult<(Vec<String>, Vec<Val>)> {
    let (mut keys, mut vals) = (Vec::new(), Vec::new());
    for (k, v) in fields.into_iter().flat_map(|f| f.iter()) {
        let key = k.str()?.to_string_lossy().into_owned();
        match convert(&v, false)? {
            Conv::Scalar(val) if !key.starts_with("tensor.") => {
                keys.push(key);
                vals.push(val);
            }
            _ => {
                let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
                return Err(PyTypeError::new_err(format!(
                    "waffle.tensor field `{key}`: a value of type {ty} cannot be recorded; fields take int, float, bool, str"
                )));
            }
        }
    }
    Ok((keys, vals))
}

/// `waffle.tensor(name, array, caused_by=None, **fields) -> EventId`.
#[pyfunction]
#[pyo3(signature = (name, array, /, *, caused_by=None, **fields))]
pub(crate) fn tensor(
    name: &Bound<'_, PyString>,
    array: &Bound<'_, PyAny>,
    caused_by: Option<&Bound<'_, PyAny>>,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<EventId> {
    let state = waffle::runtime::state();
    if state == 0 || !waffle::runtime::tensors() {
        return Ok(EventId(0));
    }
    let py = name.py();
    let causes = crate::span::causes(caused_by)?;
    let (keys, vals) = keyword_fields(fields)?;
    let (fp, shape) = read(array)?;
    let Some(callsite) = site(keys) else { return Ok(EventId(0)) };
    let name = name.to_str()?;
    let want = ids::current(py)?;
    let encode = |w: &mut waffle::encode::Writer<'_>| {
        fp.encode(name, Shape::Sizes(&shape), w);
        crate::fields::encode_all(&vals, w);
    };
    Ok(EventId(crate::shadow::event(state, want, callsite, &encode, &causes)))
}

/// `waffle.set_tensors(on)`: turns tensor fingerprints on or off for the session recording now
/// (a session starts with them on when `WAFFLE_TENSORS=1`).
#[pyfunction]
pub(crate) fn set_tensors(on: bool) {
    waffle::runtime::set_tensors(on);
}

/// Whether tensor fingerprints are on.
#[pyfunction]
pub(crate) fn tensors_enabled() -> bool {
    waffle::runtime::tensors()
}
