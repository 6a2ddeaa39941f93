//! The consumer side of DLPack (<https://dmlc.github.io/dlpack/latest/>): a tensor taken out
//! of the capsule an object's `__dlpack__` returns, its layout read, and its elements
//! fingerprinted where they lie or copied in C order first.
//!
//! The protocol, as followed here:
//! - `__dlpack__(max_version=(1, 1))` is asked first; a producer that predates DLPack 1.0 does
//!   not know the keyword (a `TypeError`) and is asked again without it. The capsule is named
//!   `dltensor_versioned` (a `DLManagedTensorVersioned`) or `dltensor` (a `DLManagedTensor`).
//! - The capsule is renamed `used_dltensor[_versioned]` at once, which makes the tensor ours:
//!   [`Managed`] calls its deleter when dropped, on every path, errors included.
//! - A versioned tensor whose major version is not 1 is refused after reading nothing but its
//!   version, and its deleter called (`dlpack.h` keeps the fields up to the deleter stable
//!   across major versions for this).
//! - The elements are `data + byte_offset`, with `strides` in elements (null: C order) and
//!   native byte order. Only CPU memory is read; a tensor elsewhere is an error here (the
//!   caller copies it to the host first, see `tensor`).
//!
//! The `repr(C)` structs that mirror `dlpack.h` are in `abi.rs`.

use crate::elements::{fingerprint, Dtype, Scratch};
use pyo3::{
    exceptions::{PyBufferError, PyTypeError, PyValueError},
    ffi,
    prelude::*,
    types::{PyCapsule, PyDict},
};
use std::{ffi::CStr, ptr::NonNull};
use waffle::tensor::Fingerprint;

mod abi;
mod strided;
use abi::{DLDataType, DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use strided::{c_strides, gather, in_c_order};

/// `kDLCPU`: the one device whose memory is read where it lies.
pub(crate) const CPU: i32 = 1;

/// The DLPack version this consumer asks for: 1.1 has the layout of 1.0 and names more types
/// (which are refused here by name rather than by the producer).
const MAX_VERSION: (u32, u32) = (1, 1);

/// A device as `kind:id` (`cuda:0`), the way frameworks print them.
pub(crate) fn device_name(device_type: i32, device_id: i32) -> String {
    let kind = match device_type {
        1 => "cpu",
        2 => "cuda",
        3 => "cuda_host",
        4 => "opencl",
        7 => "vulkan",
        8 => "metal",
        9 => "vpi",
        10 => "rocm",
        11 => "rocm_host",
        12 => "ext_dev",
        13 => "cuda_managed",
        14 => "oneapi",
        15 => "webgpu",
        16 => "hexagon",
        17 => "maia",
        18 => "trn",
        other => return format!("DLPack device type {other}:{device_id}"),
    };
    format!("{kind}:{device_id}")
}

/// A DLPack element type by name (`float32`, `bfloat16`, `complex64`, `bool`).
fn dtype_name(t: DLDataType) -> String {
    let kind = match t.code {
        0 => "int",
        1 => "uint",
        2 => "float",
        3 => "opaque",
        4 => "bfloat",
        5 => "complex",
        6 => return "bool".to_string(),
        7 => "float8_e3m4",
        8 => "float8_e4m3",
        9 => "float8_e4m3b11fnuz",
        10 => "float8_e4m3fn",
        11 => "float8_e4m3fnuz",
        12 => "float8_e5m2",
        13 => "float8_e5m2fnuz",
        14 => "float8_e8m0fnu",
        15 => "float6_e2m3fn",
        16 => "float6_e3m2fn",
        17 => "float4_e2m1fn",
        other => return format!("DLPack type code {other} of {} bits", t.bits),
    };
    let name = if t.code <= 5 { format!("{kind}{}", t.bits) } else { kind.to_string() };
    if t.lanes == 1 {
        name
    } else {
        format!("{name}x{}", t.lanes)
    }
}

/// The element type a DLPack type is read as, if it is one of ours.
fn dtype(t: DLDataType) -> Option<Dtype> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (0, 8) => Dtype::I8,
        (0, 16) => Dtype::I16,
        (0, 32) => Dtype::I32,
        (0, 64) => Dtype::I64,
        (1, 8) => Dtype::U8,
        (1, 16) => Dtype::U16,
        (1, 32) => Dtype::U32,
        (1, 64) => Dtype::U64,
        (2, 16) => Dtype::F16,
        (2, 32) => Dtype::F32,
        (2, 64) => Dtype::F64,
        (4, 16) => Dtype::Bf16,
        _ => return None,
    })
}

/// `obj.__dlpack__(**kwargs)` with `max_version` added, or without it where the producer
/// predates DLPack 1.0 and refuses the keyword.
pub(crate) fn export<'py>(
    obj: &Bound<'py, PyAny>,
    kwargs: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let method = obj.getattr(pyo3::intern!(py, "__dlpack__"))?;
    let versioned = kwargs.copy()?;
    versioned.set_item(pyo3::intern!(py, "max_version"), MAX_VERSION)?;
    match method.call((), Some(&versioned)) {
        Err(e) if e.is_instance_of::<PyTypeError>(py) => method.call((), Some(kwargs)),
        other => other,
    }
}

/// A tensor taken out of its capsule; its deleter runs when this is dropped, with the GIL
/// held (a Python producer's deleter releases Python objects).
pub(crate) struct Managed<'py> {
    owned: Owned,
    _py: Python<'py>,
}

enum Owned {
    Legacy(NonNull<DLManagedTensor>),
    Versioned(NonNull<DLManagedTensorVersioned>),
}

impl Drop for Managed<'_> {
    fn drop(&mut self) {
        match self.owned {
            Owned::Legacy(p) => {
                // SAFETY: `p` is the tensor taken from its capsule in `take`, renamed so that no
                // one else frees it; its deleter is called this once, as the spec asks of the
                // consumer, and `p` is not used after.
                #[allow(unsafe_code)]
                unsafe {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
            }
            Owned::Versioned(p) => {
                // SAFETY: as for `Legacy`: ours since `take`, freed here once.
                #[allow(unsafe_code)]
                unsafe {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
            }
        }
    }
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// Renames `capsule` to `name`, the protocol's sign that its tensor has been consumed.
fn rename(capsule: &Bound<'_, PyCapsule>, name: &'static CStr) -> PyResult<()> {
    // SAFETY: `capsule` is a live capsule object (we hold a reference and the GIL); the capsule
    // keeps the name pointer, so it must outlive it: `name` is `'static`.
    #[allow(unsafe_code)]
    let status = unsafe { ffi::PyCapsule_SetName(capsule.as_ptr(), name.as_ptr()) };
    if status == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(capsule.py()))
    }
}

impl<'py> Managed<'py> {
    /// Takes the tensor out of the capsule `__dlpack__` returned.
    pub(crate) fn take(capsule: &Bound<'py, PyAny>) -> PyResult<Managed<'py>> {
        let py = capsule.py();
        let Ok(capsule) = capsule.cast::<PyCapsule>() else {
            let ty = capsule.get_type().name().map(|n| n.to_string()).unwrap_or_default();
            return Err(PyTypeError::new_err(format!("__dlpack__ returned a {ty}, not a DLPack capsule")));
        };
        if capsule.is_valid_checked(Some(VERSIONED)) {
            let ptr = capsule.pointer_checked(Some(VERSIONED))?.cast::<DLManagedTensorVersioned>();
            // SAFETY: a capsule named `dltensor_versioned` holds a `DLManagedTensorVersioned`
            // whose first field, the version, is readable in every version of the layout.
            #[allow(unsafe_code)]
            let (major, minor) = unsafe {
                let v = &(*ptr.as_ptr()).version;
                (v.major, v.minor)
            };
            rename(capsule, USED_VERSIONED)?;
            let managed = Managed { owned: Owned::Versioned(ptr), _py: py };
            if major != MAX_VERSION.0 {
                // Dropping `managed` calls the deleter, which is where every major version
                // keeps it.
                return Err(PyBufferError::new_err(format!(
                    "the DLPack tensor has version {major}.{minor}; waffle reads major version {}",
                    MAX_VERSION.0
                )));
            }
            return Ok(managed);
        }
        if capsule.is_valid_checked(Some(LEGACY)) {
            let ptr = capsule.pointer_checked(Some(LEGACY))?.cast::<DLManagedTensor>();
            rename(capsule, USED_LEGACY)?;
            return Ok(Managed { owned: Owned::Legacy(ptr), _py: py });
        }
        let name = capsule.name().ok().flatten().map(|n| {
            // SAFETY: the capsule (alive, held) owns its name for as long as it is unchanged,
            // and the name is copied out at once.
            #[allow(unsafe_code)]
            unsafe {
                n.as_cstr().to_string_lossy().into_owned()
            }
        });
        Err(PyBufferError::new_err(match name.as_deref() {
            Some(n) if n.starts_with("used_") => "the DLPack capsule was consumed already".to_string(),
            Some(n) => format!("a capsule named {n:?} is not a DLPack tensor"),
            None => "a capsule without a name is not a DLPack tensor".to_string(),
        }))
    }

    fn tensor(&self) -> &DLTensor {
        // SAFETY: the pointer is the struct its capsule's name promised (checked in `take`),
        // ours and alive until `drop` calls its deleter; the borrow of `self` ends before that.
        #[allow(unsafe_code)]
        unsafe {
            match self.owned {
                Owned::Legacy(p) => &(*p.as_ptr()).dl_tensor,
                Owned::Versioned(p) => &(*p.as_ptr()).dl_tensor,
            }
        }
    }

    /// The device the tensor's memory is on, as (DLPack device type, id).
    pub(crate) fn device(&self) -> (i32, i32) {
        let d = self.tensor().device;
        (d.device_type, d.device_id)
    }

    /// The element type's name (`bfloat16`), for messages.
    pub(crate) fn dtype_name(&self) -> String {
        dtype_name(self.tensor().dtype)
    }

    /// The shape and strides (in elements; C order's when the producer gave none).
    fn layout(&self) -> PyResult<(Vec<usize>, Vec<isize>)> {
        let t = self.tensor();
        let ndim = usize::try_from(t.ndim)
            .map_err(|_| PyValueError::new_err("a DLPack tensor with negative ndim"))?;
        let (dims, strides): (&[i64], Option<&[i64]>) = if ndim == 0 {
            (&[], None)
        } else {
            // SAFETY: DLPack's `shape` holds `ndim` sizes and `strides`, when not null, `ndim`
            // strides, both alive while the tensor is (until its deleter runs after `self`).
            #[allow(unsafe_code)]
            unsafe {
                (
                    std::slice::from_raw_parts(t.shape, ndim),
                    (!t.strides.is_null()).then(|| std::slice::from_raw_parts(t.strides, ndim)),
                )
            }
        };
        let shape = dims
            .iter()
            .map(|&d| {
                usize::try_from(d)
                    .map_err(|_| PyValueError::new_err(format!("a DLPack tensor with dimension {d}")))
            })
            .collect::<PyResult<Vec<usize>>>()?;
        let strides = match strides {
            Some(s) => s
                .iter()
                .map(|&s| {
                    isize::try_from(s)
                        .map_err(|_| PyValueError::new_err(format!("a DLPack tensor with stride {s}")))
                })
                .collect::<PyResult<Vec<isize>>>()?,
            None => c_strides(&shape),
        };
        Ok((shape, strides))
    }

    /// The fingerprint of the tensor's elements in C order, and its shape. The tensor must be in
    /// CPU memory; elements in C order and aligned are read where they lie, others copied first.
    pub(crate) fn fingerprint(&self) -> PyResult<(Fingerprint, Vec<usize>)> {
        let t = self.tensor();
        let (device_type, device_id) = self.device();
        let Some(dtype) = dtype(t.dtype) else {
            return Err(PyTypeError::new_err(format!(
                "waffle.tensor: cannot fingerprint {} elements (on {}); it takes float16, bfloat16, float32, float64 and integer types",
                self.dtype_name(),
                device_name(device_type, device_id)
            )));
        };
        if device_type != CPU {
            return Err(PyBufferError::new_err(format!(
                "waffle.tensor: a {} tensor on {} is not in host memory",
                self.dtype_name(),
                device_name(device_type, device_id)
            )));
        }
        let (shape, strides) = self.layout()?;
        let item = dtype.size();
        let overflow = || PyValueError::new_err("waffle.tensor: a DLPack tensor larger than memory");
        let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(overflow)?;
        let bytes = count.checked_mul(item).ok_or_else(overflow)?;
        if count == 0 {
            return Ok((Scratch::zeroed(0).fingerprint(dtype), shape));
        }
        let offset = usize::try_from(t.byte_offset).map_err(|_| overflow())?;
        let first = t.data.cast::<u8>().cast_const().wrapping_add(offset);
        if in_c_order(&shape, &strides) && (first as usize) % item == 0 {
            // SAFETY: a CPU tensor (checked above) of `count` elements of `dtype` in C order
            // from `first`, aligned for it (checked), kept alive by its producer until the
            // deleter runs, after this call. Every bit pattern is an element. Like a buffer's,
            // its memory is not written while we hold it unless another thread of the program
            // races with its own call.
            #[allow(unsafe_code)]
            let fp = unsafe { fingerprint(dtype, first, bytes) };
            return Ok((fp, shape));
        }
        // The lowest and highest element, relative to the first one, in bytes.
        let (mut low, mut high) = (0isize, 0isize);
        for (&n, &s) in shape.iter().zip(&strides) {
            let reach = s
                .checked_mul(n as isize - 1)
                .and_then(|r| r.checked_mul(item as isize))
                .ok_or_else(overflow)?;
            if reach < 0 {
                low = low.checked_add(reach).ok_or_else(overflow)?;
            } else {
                high = high.checked_add(reach).ok_or_else(overflow)?;
            }
        }
        let span =
            usize::try_from(high.checked_sub(low).ok_or_else(overflow)?).map_err(|_| overflow())? + item;
        let start = first.wrapping_offset(low);
        // SAFETY: a CPU tensor (checked above) alive until its deleter runs, after this call.
        // Every one of its elements lies between the lowest and the highest, which `start` and
        // `span` cover; DLPack addresses them all from one data pointer, into one allocation,
        // which is contiguous, so the bytes between them are readable too. They are read as
        // bytes, which any pattern is.
        #[allow(unsafe_code)]
        let extent = unsafe { std::slice::from_raw_parts(start, span) };
        let mut scratch = Scratch::zeroed(bytes);
        // In bytes; a dimension of one element is never stepped along (and may have any stride).
        let byte_strides: Vec<isize> =
            shape.iter().zip(&strides).map(|(&n, &s)| if n == 1 { 0 } else { s * item as isize }).collect();
        gather(extent, low.unsigned_abs(), &shape, &byte_strides, item, scratch.bytes_mut());
        Ok((scratch.fingerprint(dtype), shape))
    }
}
