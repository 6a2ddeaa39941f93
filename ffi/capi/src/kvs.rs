//! A C call's key-values as record bytes: the slice checked, string values bounded and made
//! valid UTF-8, numbers written with the same varints and layouts Rust's fields use. This runs
//! on every recorded C span and event, so the loops are shaped for the inliner (see
//! [`encode_numbers`]).

use crate::{
    cstr,
    status::waffle_status_t::*,
    types::{waffle_kv_kind_t as K, waffle_kv_t, WAFFLE_MAX_KVS, WAFFLE_STRLEN_NUL},
};
use std::borrow::Cow;
use waffle::{
    encode::Writer,
    wire::{zigzag, MAX_STR_LEN},
    FieldValue,
};

/// The key-values of one call.
///
/// # Safety
/// `kvs` is NULL or points to `count` readable `waffle_kv_t`.
#[inline(always)]
pub(crate) unsafe fn kv_slice<'a>(
    kvs: *const waffle_kv_t,
    count: usize,
) -> Result<&'a [waffle_kv_t], crate::status::waffle_status_t> {
    if count == 0 {
        return Ok(&[]);
    }
    if kvs.is_null() {
        return Err(WAFFLE_ERR_NULL);
    }
    if count > WAFFLE_MAX_KVS || !kvs.is_aligned() {
        return Err(WAFFLE_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, aligned, and `count` (bounded) elements readable: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(kvs, count) })
}

/// A string value: at most `MAX_STR_LEN` bytes, whole characters, invalid UTF-8 replaced.
///
/// # Safety
/// `kv.value.str` is NULL or readable for `kv.len` bytes (or up to its NUL for
/// `WAFFLE_STRLEN_NUL`), capped at `MAX_STR_LEN`.
#[inline(always)]
unsafe fn str_value(kv: &waffle_kv_t) -> Cow<'_, str> {
    // SAFETY: the kind is STR, whose member is `str`; any bit pattern is a valid pointer value.
    let p = unsafe { kv.value.str };
    let bytes: &[u8] = if p.is_null() {
        &[]
    } else if kv.len == WAFFLE_STRLEN_NUL {
        // SAFETY: readable up to its NUL or the bound (the caller's promise).
        unsafe { cstr::bytes(p, MAX_STR_LEN) }.unwrap_or(&[])
    } else {
        // SAFETY: `len` bytes, capped, are readable (the caller's promise).
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), (kv.len as usize).min(MAX_STR_LEN)) }
    };
    cstr::value_text(bytes, MAX_STR_LEN)
}

/// Writes a string value; out of line, so that the numeric fields' loop stays small enough to
/// be inlined into the record.
///
/// # Safety
/// As [`str_value`].
#[inline(never)]
unsafe fn encode_str(kv: &waffle_kv_t, w: &mut Writer<'_>) {
    // SAFETY: forwarded from the caller.
    unsafe { str_value(kv) }.as_ref().encode(w)
}

/// Writes the field values of `kvs` in order; [`callsite::resolve`] has checked every kind.
///
/// # Safety
/// As [`str_value`] for every string value.
#[inline(always)]
pub(crate) unsafe fn encode_fields(kvs: &[waffle_kv_t], w: &mut Writer<'_>) {
    for kv in kvs {
        if kv.kind == K::WAFFLE_KV_KIND_STR as u32 {
            // SAFETY: the string is readable as `str_value` needs (the caller's promise).
            unsafe { encode_str(kv, w) }
        } else {
            encode_number(kv, w)
        }
    }
}

/// Writes one number field (nothing for a cause or a correlation, which are records of their
/// own). A kind check picks the member read, so a string's pointer is never read as a number.
#[inline(always)]
fn encode_number(kv: &waffle_kv_t, w: &mut Writer<'_>) {
    let kind = kv.kind;
    if kind == 0 || kind > K::WAFFLE_KV_KIND_BOOL as u32 {
        return;
    }
    // SAFETY: the kinds up to BOOL are numbers, stored in the 8-byte members `u64`, `i64` or
    // `f64`, and any bit pattern of them is a valid `u64`.
    let bits = unsafe { kv.value.u64 };
    if kind <= K::WAFFLE_KV_KIND_I64 as u32 {
        // U64 and I64 share one varint writer (zigzag for signed values).
        w.varint(if kind == K::WAFFLE_KV_KIND_I64 as u32 { zigzag(bits as i64) } else { bits })
    } else if kind == K::WAFFLE_KV_KIND_F64 as u32 {
        w.bytes(&bits.to_le_bytes()) // the f64's bits, little-endian
    } else {
        w.byte(u8::from(bits != 0))
    }
}

/// Writes the field values of `kvs`, which has no string fields: a loop that calls nothing, so
/// that the writer stays in registers (passing it to the out-of-line string encoder made every
/// field reload and store it, a few nanoseconds per field).
#[inline(always)]
pub(crate) fn encode_numbers(kvs: &[waffle_kv_t], w: &mut Writer<'_>) {
    for kv in kvs {
        encode_number(kv, w);
    }
}
