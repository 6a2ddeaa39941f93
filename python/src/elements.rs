//! The element types a tensor may have, and memory seen as a slice of one of them: what both
//! ways of reading a tensor (a Python buffer in `tensor`, a DLPack tensor in `dlpack`) end in.
//!
//! Fingerprints are computed on `&[T]`, so the memory must be aligned for `T`; memory that is
//! not (or that is strided) is first copied in C order into [`Scratch`], whose words are
//! aligned for every element type.

use waffle::tensor::{Element, Fingerprint};

/// The element types a tensor may have.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Dtype {
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
    /// The size of one element in bytes.
    pub(crate) fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::F16 | Dtype::Bf16 | Dtype::I16 | Dtype::U16 => 2,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
        }
    }
}

/// Sees `bytes` bytes at `ptr` as elements of `T` and fingerprints them.
///
/// # Safety
/// `ptr` is aligned for `T` and readable for `bytes` bytes, a whole number of `T`s, every
/// pattern of which is a valid `T` (true of the element types), and nothing writes them for the
/// whole call.
#[allow(unsafe_code)]
unsafe fn view<T: Element>(ptr: *const u8, bytes: usize) -> Fingerprint {
    let count = bytes / size_of::<T>();
    let data: &[T] = if count == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise: aligned, readable, initialised, not written meanwhile.
        unsafe { std::slice::from_raw_parts(ptr.cast::<T>(), count) }
    };
    Fingerprint::of(data)
}

/// Fingerprints `bytes` bytes at `ptr` of element type `dtype`.
///
/// # Safety
/// As [`view`], for the type `dtype` names.
#[allow(unsafe_code)]
pub(crate) unsafe fn fingerprint(dtype: Dtype, ptr: *const u8, bytes: usize) -> Fingerprint {
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

/// Bytes in memory aligned for every element type: where strided or misaligned tensors are
/// copied before they are fingerprinted.
pub(crate) struct Scratch {
    words: Vec<u64>,
    len: usize,
}

impl Scratch {
    /// `len` zeroed bytes.
    pub(crate) fn zeroed(len: usize) -> Scratch {
        Scratch { words: vec![0; len.div_ceil(8)], len }
    }

    /// The bytes, to be written.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let ptr = self.words.as_mut_ptr().cast::<u8>();
        // SAFETY: `words` owns `len.div_ceil(8) * 8 >= len` initialised bytes, which the
        // returned slice borrows mutably (through `self`) for its lifetime; `u8` needs no
        // alignment and every byte pattern is a valid `u64`.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(ptr, self.len)
        }
    }

    /// The fingerprint of the bytes as elements of `dtype`.
    pub(crate) fn fingerprint(&self, dtype: Dtype) -> Fingerprint {
        // SAFETY: `words` holds `len` initialised bytes, aligned for any element type (the
        // largest is 8 bytes), owned by `self` and borrowed immutably for the call.
        #[allow(unsafe_code)]
        unsafe {
            fingerprint(dtype, self.words.as_ptr().cast::<u8>(), self.len)
        }
    }
}
