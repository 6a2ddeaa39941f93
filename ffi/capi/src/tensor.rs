//! Tensor fingerprints and steps from C: `waffle_tensor_f32` and its siblings, one per element
//! type, each recording one event with the reserved fields of `waffle::wire::reserved::tensor`
//! (count, XXH3-64 of the little-endian bytes, RMS/min/max of the finite elements, NaN and Inf
//! counts) under the callsite `tensor`, registered once per process. Steps need no function:
//! `WAFFLE_STEP(n)` in `waffle_macros.h` is a `WAFFLE_SPAN("step", ...)`.
//!
//! While no session records, or fingerprints are off (the default: `WAFFLE_TENSORS=1` at start
//! or `waffle_set_tensors(true)` turns them on), a call returns the null id after two loads,
//! before reading its arguments.

use crate::{
    boundary::guard,
    cstr,
    status::{fail, waffle_status_t::*},
    types::waffle_event_id_t,
};
use std::{ffi::c_char, sync::OnceLock};
use waffle::{
    callsite::Kind,
    runtime,
    tensor::{Element, Fingerprint, Shape, SCHEMA},
};

/// Most dimensions a shape may have.
const MAX_DIMS: usize = 32;

/// The callsite every C tensor is recorded at (registered on first use; `None` if the table of
/// run-time callsites is full).
fn site() -> Option<u32> {
    static SITE: OnceLock<Option<u32>> = OnceLock::new();
    *SITE.get_or_init(|| waffle_std::dynamic::register(Kind::Event, "tensor", "", "", 0, &SCHEMA, ""))
}

/// Checks the arguments and records the fingerprint of `count` elements at `data`.
///
/// # Safety
/// As the exported functions document.
unsafe fn record<T: Element>(
    name: *const c_char,
    data: *const T,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    if runtime::state() == 0 || !runtime::tensors() {
        return waffle_event_id_t::default();
    }
    let null = waffle_event_id_t::default();
    if name.is_null() || (data.is_null() && count > 0) || (shape.is_null() && ndim > 0) {
        fail(WAFFLE_ERR_NULL);
        return null;
    }
    let too_long = count.checked_mul(size_of::<T>()).is_none_or(|b| b > isize::MAX as usize);
    if (!data.is_null() && !data.is_aligned()) || !shape.is_aligned() || ndim > MAX_DIMS || too_long {
        fail(WAFFLE_ERR_INVALID_ARGUMENT);
        return null;
    }
    let mut dims = [0u64; MAX_DIMS];
    if !shape.is_null() {
        // SAFETY: non-null, aligned, and readable for `ndim` values (the caller's promise).
        let given = unsafe { std::slice::from_raw_parts(shape, ndim) };
        for (d, &g) in dims.iter_mut().zip(given) {
            let Ok(g) = u64::try_from(g) else {
                fail(WAFFLE_ERR_INVALID_ARGUMENT);
                return null;
            };
            *d = g;
        }
    }
    let shape = if shape.is_null() { Shape::Count(count as u64) } else { Shape::Dims(&dims[..ndim]) };
    // SAFETY: non-null (bounded scan of at most MAX_TEXT bytes up to the NUL).
    let name = String::from_utf8_lossy(unsafe { cstr::bytes(name, cstr::MAX_TEXT) }.unwrap_or(&[]));
    let data: &[T] = if count == 0 {
        &[]
    } else {
        // SAFETY: non-null, aligned, `count` initialised elements (the caller's promise) whose
        // size in bytes fits `isize`.
        unsafe { std::slice::from_raw_parts(data, count) }
    };
    let Some(site) = site() else {
        fail(WAFFLE_ERR_CALLSITES_FULL);
        return null;
    };
    let fp = Fingerprint::of(data);
    waffle_event_id_t { id: waffle::event_raw(site, &|w| fp.encode(&name, shape, w)).to_u64() }
}

/// Records the fingerprint of the `count` `float`s at `data` as one event and returns its id:
/// the tensor's name (`name`, NUL-terminated), element type, shape (the `ndim` dimensions at
/// `shape`; NULL for none, which records the element count), count, XXH3-64 hash of its bytes
/// in little-endian order, RMS, min and max of its finite elements and its NaN, +Inf and -Inf
/// counts. Returns the null id, reading nothing, while no session records or fingerprints are
/// off (see `waffle_set_tensors`); the null id and a status (`waffle_last_status`) for NULL or
/// misaligned pointers, a negative dimension or more than 32.
///
/// # Safety
/// `name` is NULL or NUL-terminated; `data` is NULL or points to `count` readable elements;
/// `shape` is NULL or points to `ndim` readable values.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_f32(
    name: *const c_char,
    data: *const f32,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `double`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_f64(
    name: *const c_char,
    data: *const f64,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for IEEE half-precision floats, given as their 16-bit patterns.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_f16(
    name: *const c_char,
    data: *const u16,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller; `half::f16` is a `repr(transparent)` `u16`.
    guard(|| unsafe { record(name, data.cast::<half::f16>(), count, shape, ndim) })
}

/// `waffle_tensor_f32` for bfloat16 values, given as their 16-bit patterns (the high half of
/// the `float` they round).
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_bf16(
    name: *const c_char,
    data: *const u16,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller; `half::bf16` is a `repr(transparent)` `u16`.
    guard(|| unsafe { record(name, data.cast::<half::bf16>(), count, shape, ndim) })
}

/// `waffle_tensor_f32` for `int8_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_i8(
    name: *const c_char,
    data: *const i8,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `int16_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_i16(
    name: *const c_char,
    data: *const i16,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `int32_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_i32(
    name: *const c_char,
    data: *const i32,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `int64_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_i64(
    name: *const c_char,
    data: *const i64,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `uint8_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_u8(
    name: *const c_char,
    data: *const u8,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `uint16_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_u16(
    name: *const c_char,
    data: *const u16,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `uint32_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_u32(
    name: *const c_char,
    data: *const u32,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// `waffle_tensor_f32` for `uint64_t`s.
///
/// # Safety
/// As `waffle_tensor_f32`.
#[no_mangle]
pub unsafe extern "C" fn waffle_tensor_u64(
    name: *const c_char,
    data: *const u64,
    count: usize,
    shape: *const i64,
    ndim: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { record(name, data, count, shape, ndim) })
}

/// Turns tensor fingerprints on or off for the session that records now (a session starts
/// with them on when `WAFFLE_TENSORS=1` was set, else off).
#[no_mangle]
pub extern "C" fn waffle_set_tensors(on: bool) {
    guard(|| runtime::set_tensors(on))
}
