//! Tensors read through Python's buffer protocol: NumPy arrays, `bytes`, `array.array`,
//! `memoryview`s in place when contiguous; objects with `__array__` converted by it first;
//! ml_dtypes' `bfloat16`, which NumPy cannot export as a buffer, read as its 16-bit patterns
//! through `.view("uint16")`. The element type comes from the buffer's format (`e` is
//! float16). A strided or misaligned buffer is copied in C order.

use crate::elements::{fingerprint, Dtype, Scratch};
use pyo3::{
    buffer::{ElementType, PyUntypedBuffer},
    exceptions::PyTypeError,
    prelude::*,
    types::PyBytes,
};
use waffle::tensor::Fingerprint;

/// The element type of a buffer's elements of format `format` (`bf16`: its 16-bit elements are
/// bfloat16's patterns).
fn buffer_dtype(format: ElementType, bf16: bool) -> Option<Dtype> {
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
        "waffle.tensor takes an object with the buffer protocol, __dlpack__ or __array__ (NumPy, PyTorch, JAX, CuPy), not {ty}"
    )))
}

/// The fingerprint and shape of `array` read as a buffer (converted by `__array__` first when
/// it is not one).
pub(crate) fn read(array: &Bound<'_, PyAny>) -> PyResult<(Fingerprint, Vec<usize>)> {
    let py = array.py();
    let Source { obj, bf16, scalar } = source(array)?;
    let buf = PyUntypedBuffer::get(&obj)?;
    let format = buf.format();
    // A byte-order prefix other than this machine's: the elements' bytes are not ours to hash.
    let foreign = match format.to_bytes() {
        [b'<', _] => cfg!(target_endian = "big"),
        [b'>' | b'!', _] => cfg!(target_endian = "little"),
        _ => false,
    };
    let dtype = buffer_dtype(ElementType::from_format(format), bf16)
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
        let mut scratch = Scratch::zeroed(bytes.len());
        scratch.bytes_mut().copy_from_slice(bytes);
        scratch.fingerprint(dtype)
    };
    drop(buf);
    Ok((fp, shape))
}
