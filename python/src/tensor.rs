//! `waffle.tensor(name, array, caused_by=None, **fields)`: a tensor's fingerprint (element
//! count, XXH3-64 of its little-endian bytes, RMS/min/max of the finite elements, NaN and Inf
//! counts; `waffle::tensor::Fingerprint`) recorded as one event with the reserved fields of
//! `waffle::wire::reserved::tensor`, then the keyword fields.
//!
//! The array is read through the buffer protocol without copying when it is contiguous
//! (NumPy arrays, `bytes`, `array.array`, `memoryview`s); anything else with `__array__`
//! (PyTorch CPU tensors, JAX arrays) is converted by it first. The element type comes from the
//! buffer's format (`e` is float16); ml_dtypes' `bfloat16`, which NumPy cannot export as a
//! buffer, is read as its 16-bit patterns through `.view("uint16")`. A non-contiguous buffer is
//! copied in C order. While recording or fingerprints are off, the call returns before touching
//! the array.
//!
//! This is the one module of the crate with `unsafe` code: a buffer's memory seen as a slice of
//! its element type (see [`view`]).

use crate::{
    fields::{convert, Conv, Val},
    ids::{self, EventId},
};
use pyo3::{
    buffer::{ElementType, PyUntypedBuffer},
    exceptions::PyTypeError,
    prelude::*,
    types::{PyBytes, PyDict, PyString},
};
use std::{collections::HashMap, sync::Mutex};
use waffle::{
    callsite::Kind,
    tensor::{Element, Fingerprint, Shape, SCHEMA},
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

/// The element types a tensor may have, as read from a buffer.
#[derive(Clone, Copy, Debug)]
enum Dtype {
    F16,
    Bf16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl Dtype {
    fn of(format: ElementType, bf16: bool) -> Option<Dtype> {
        use ElementType::*;
        Some(match format {
            UnsignedInteger { bytes: 2 } if bf16 => Dtype::Bf16,
            Float { bytes: 2 } => Dtype::F16,
            Float { bytes: 4 } => Dtype::F32,
            Float { bytes: 8 } => Dtype::F64,
            SignedInteger { bytes: 1 } => Dtype::I8,
            SignedInteger { bytes: 2 } => Dtype::I16,
            SignedInteger { bytes: 4 } => Dtype::I32,
            SignedInteger { bytes: 8 } => Dtype::I64,
            UnsignedInteger { bytes: 1 } => Dtype::U8,
            UnsignedInteger { bytes: 2 } => Dtype::U16,
            UnsignedInteger { bytes: 4 } => Dtype::U32,
            UnsignedInteger { bytes: 8 } => Dtype::U64,
            _ => return None,
        })
    }
}

/// Sees `bytes` bytes at `ptr` as elements of `T` and fingerprints them.
///
/// # Safety
/// `ptr` is aligned for `T` and readable for `bytes` bytes, a whole number of `T`s, every
/// pattern of which is a valid `T` (true of the element types), for the whole call.
#[allow(unsafe_code)]
unsafe fn view<T: Element>(ptr: *const u8, bytes: usize) -> Fingerprint {
    let count = bytes / size_of::<T>();
    let data: &[T] = if count == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise; the buffer is held (and so alive) for the call.
        unsafe { std::slice::from_raw_parts(ptr.cast::<T>(), count) }
    };
    Fingerprint::of(data)
}

/// Fingerprints `bytes` bytes at `ptr` of element type `dtype`.
///
/// # Safety
/// As [`view`], for the type `dtype` names.
#[allow(unsafe_code)]
unsafe fn fingerprint(dtype: Dtype, ptr: *const u8, bytes: usize) -> Fingerprint {
    // SAFETY: forwarded from the caller, for the type `dtype` names in each arm.
    unsafe {
        match dtype {
            Dtype::F16 => view::<half::f16>(ptr, bytes),
            Dtype::Bf16 => view::<half::bf16>(ptr, bytes),
            Dtype::F32 => view::<f32>(ptr, bytes),
            Dtype::F64 => view::<f64>(ptr, bytes),
            Dtype::I8 => view::<i8>(ptr, bytes),
            Dtype::I16 => view::<i16>(ptr, bytes),
            Dtype::I32 => view::<i32>(ptr, bytes),
            Dtype::I64 => view::<i64>(ptr, bytes),
            Dtype::U8 => view::<u8>(ptr, bytes),
            Dtype::U16 => view::<u16>(ptr, bytes),
            Dtype::U32 => view::<u32>(ptr, bytes),
            Dtype::U64 => view::<u64>(ptr, bytes),
        }
    }
}

/// What a tensor is read from: the object whose buffer holds it, whether its 16-bit elements
/// are bfloat16, and whether it is a scalar (0-d arrays export no shape: read as one element).
struct Source<'py> {
    obj: Bound<'py, PyAny>,
    bf16: bool,
    scalar: bool,
}

fn source<'py>(array: &Bound<'py, PyAny>) -> PyResult<Source<'py>> {
    let py = array.py();
    let found = base(array)?;
    let ndim = found.obj.getattr_opt(pyo3::intern!(py, "ndim")).ok().flatten();
    if ndim.and_then(|n| n.extract::<usize>().ok()) == Some(0) {
        let obj = found.obj.call_method1(pyo3::intern!(py, "reshape"), (1,))?;
        return Ok(Source { obj, scalar: true, ..found });
    }
    Ok(found)
}

fn base<'py>(array: &Bound<'py, PyAny>) -> PyResult<Source<'py>> {
    let py = array.py();
    let dtype_name = array
        .getattr_opt(pyo3::intern!(py, "dtype"))
        .ok()
        .flatten()
        .and_then(|d| d.str().ok())
        .map(|s| s.to_string_lossy().into_owned());
    if dtype_name.as_deref() == Some("bfloat16") {
        let np = if array.hasattr(pyo3::intern!(py, "view"))? && PyUntypedBuffer::get(array).is_ok() {
            array.clone()
        } else {
            array.call_method0(pyo3::intern!(py, "__array__"))?
        };
        let obj = np.call_method1(pyo3::intern!(py, "view"), ("uint16",))?;
        return Ok(Source { obj, bf16: true, scalar: false });
    }
    if PyUntypedBuffer::get(array).is_ok() {
        return Ok(Source { obj: array.clone(), bf16: false, scalar: false });
    }
    if array.hasattr(pyo3::intern!(py, "__array__"))? {
        let obj = array.call_method0(pyo3::intern!(py, "__array__"))?;
        return Ok(Source { obj, bf16: false, scalar: false });
    }
    let ty = array.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    Err(PyTypeError::new_err(format!(
        "waffle.tensor takes an object with the buffer protocol or __array__ (NumPy, PyTorch CPU, JAX), not {ty}"
    )))
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
    let causes = ids::causes(caused_by)?;
    let (keys, vals) = keyword_fields(fields)?;
    let Source { obj, bf16, scalar } = source(array)?;
    let buf = PyUntypedBuffer::get(&obj)?;
    let format = buf.format();
    // A byte-order prefix other than this machine's: the elements' bytes are not ours to hash.
    let foreign = match format.to_bytes() {
        [b'<', _] => cfg!(target_endian = "big"),
        [b'>' | b'!', _] => cfg!(target_endian = "little"),
        _ => false,
    };
    let dtype = Dtype::of(ElementType::from_format(format), bf16)
        .filter(|_| !foreign)
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "waffle.tensor: elements of buffer format {format:?} are not a float16, bfloat16, float32, float64 or integer type in native byte order"
            ))
        })?;
    let shape: Vec<usize> = if scalar { Vec::new() } else { buf.shape().to_vec() };
    let item = buf.item_size().max(1);
    let fp = if buf.is_c_contiguous() && (buf.buf_ptr() as usize) % item == 0 {
        // SAFETY: a C-contiguous buffer of `len_bytes` bytes of this format, aligned for it,
        // held until the end of this block.
        #[allow(unsafe_code)]
        unsafe {
            fingerprint(dtype, buf.buf_ptr().cast::<u8>(), buf.len_bytes())
        }
    } else {
        // Strided or misaligned: the bytes in C order, copied into memory aligned for any type.
        let bytes = py.get_type::<pyo3::types::PyMemoryView>().call1((&obj,))?.call_method0("tobytes")?;
        let bytes = bytes.cast::<PyBytes>()?.as_bytes();
        let mut aligned = vec![0u64; bytes.len().div_ceil(8)];
        for (dst, src) in aligned.iter_mut().zip(bytes.chunks(8)) {
            let mut word = [0u8; 8];
            word[..src.len()].copy_from_slice(src);
            *dst = u64::from_ne_bytes(word);
        }
        // SAFETY: `aligned` holds `bytes.len()` bytes of this format, aligned for any element
        // type, alive until the end of this block.
        #[allow(unsafe_code)]
        unsafe {
            fingerprint(dtype, aligned.as_ptr().cast::<u8>(), bytes.len())
        }
    };
    drop(buf);
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
