//! Python values as span and event fields.
//!
//! Every field of a Python callsite is declared [`FieldType::Dynamic`]: the record carries a
//! one-byte type before each value, so one callsite serves `x=1` and `x=1.5` alike and the
//! callsite depends only on the field *names*. Values are converted once, before anything is
//! recorded, so that a bad value raises instead of leaving half a record:
//!
//! - `bool`, `int` (as i64, or u64 above `i64::MAX`; larger ones as their decimal text), `float`
//!   and `str` are written as they are;
//! - anything with `.shape` and `.dtype` (NumPy, JAX, PyTorch arrays, JAX tracers) becomes two
//!   string fields, `name.shape` (`"(8192, 4096)"`) and `name.dtype` (`"float32"`); the data is
//!   never read, so a summary costs no device transfer;
//! - anything else is a [`Conv::Unsupported`]: a `TypeError` naming the field for explicit
//!   fields, left out for a decorated function's arguments.

use pyo3::{
    prelude::*,
    pybacked::PyBackedStr,
    types::{PyBool, PyFloat, PyInt, PyString, PyTuple},
};
use waffle::{encode::Writer, FieldValue};

/// A converted field value, ready to be written.
pub(crate) enum Val {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    /// A Python string, borrowed without copying its UTF-8 bytes.
    Str(PyBackedStr),
    /// Owned text: array summaries, huge integers.
    Text(String),
}

impl Val {
    #[inline]
    pub(crate) fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Val::I64(v) => v.encode_dynamic(w),
            Val::U64(v) => v.encode_dynamic(w),
            Val::F64(v) => v.encode_dynamic(w),
            Val::Bool(v) => v.encode_dynamic(w),
            Val::Str(s) => (**s).encode_dynamic(w),
            Val::Text(s) => s.as_str().encode_dynamic(w),
        }
    }
}

/// What a Python value turned into.
pub(crate) enum Conv {
    /// One field.
    Scalar(Val),
    /// Two fields: `name.shape` and `name.dtype`.
    Array { shape: String, dtype: String },
    /// Not a type waffle records.
    Unsupported,
}

/// Writes field values in callsite order.
#[inline]
pub(crate) fn encode_all(vals: &[Val], w: &mut Writer<'_>) {
    for v in vals {
        v.encode(w);
    }
}

/// Converts one value. Exact built-in types are tested first, so common fields cost a pointer
/// compare; `duck` also tries the array protocol (an attribute lookup) on other objects.
pub(crate) fn convert(v: &Bound<'_, PyAny>, duck: bool) -> PyResult<Conv> {
    if v.is_exact_instance_of::<PyString>() {
        return Ok(Conv::Scalar(Val::Str(v.extract()?)));
    }
    if v.is_exact_instance_of::<PyFloat>() {
        return Ok(Conv::Scalar(Val::F64(v.extract()?)));
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(Conv::Scalar(Val::Bool(v.is_truthy()?)));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(Conv::Scalar(int(v)?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Conv::Scalar(Val::F64(v.extract()?)));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(Conv::Scalar(Val::Str(v.extract()?)));
    }
    if !duck || v.is_none() {
        return Ok(Conv::Unsupported);
    }
    array(v)
}

fn int(v: &Bound<'_, PyAny>) -> PyResult<Val> {
    if let Ok(i) = v.extract::<i64>() {
        return Ok(Val::I64(i));
    }
    if let Ok(u) = v.extract::<u64>() {
        return Ok(Val::U64(u));
    }
    Ok(Val::Text(v.str()?.to_str()?.to_owned()))
}

/// Duck-typed arrays: `.shape` (a sequence of ints) and `.dtype`. A 0-d value with `.item()`
/// (a NumPy scalar, a concrete 0-d array) becomes the Python scalar it holds; one whose
/// `.item()` fails (a JAX tracer) is summarised like any array.
fn array(v: &Bound<'_, PyAny>) -> PyResult<Conv> {
    let py = v.py();
    let (Some(shape), Some(dtype)) = (
        v.getattr_opt(pyo3::intern!(py, "shape")).ok().flatten(),
        v.getattr_opt(pyo3::intern!(py, "dtype")).ok().flatten(),
    ) else {
        return Ok(Conv::Unsupported);
    };
    let Ok(dims) = py.get_type::<PyTuple>().call1((&shape,)).and_then(|t| Ok(t.cast_into::<PyTuple>()?))
    else {
        return Ok(Conv::Unsupported);
    };
    if dims.is_empty() {
        if let Ok(item) = v.call_method0(pyo3::intern!(py, "item")) {
            if let Ok(Conv::Scalar(s)) = convert(&item, false) {
                return Ok(Conv::Scalar(s));
            }
        }
    }
    let shape = dims.str()?.to_str()?.to_owned();
    let dtype = dtype.str()?.to_str()?.to_owned();
    Ok(Conv::Array { shape, dtype })
}
