//! Contexts from C: taking this thread's, entering one on another thread, and W3C traceparent
//! text for other processes.

use crate::{
    boundary::guard,
    cstr,
    status::{fail, waffle_status_t, waffle_status_t::*},
    types::{waffle_context_guard_t, waffle_context_t},
};
use std::ffi::c_char;
use waffle::{local::with_local, runtime};

/// Bytes `waffle_context_to_traceparent` needs: 55 characters and a NUL.
pub const WAFFLE_TRACEPARENT_LEN: usize = 56;

/// This thread's context: the session's trace id and the innermost open span (or entered
/// context). Its span id is null outside any span; all of it is null before any session.
#[no_mangle]
pub extern "C" fn waffle_context_current() -> waffle_context_t {
    guard(|| waffle_context_t::from_context(waffle::Context::current()))
}

/// Makes `ctx`'s span the parent of what this thread records until `waffle_context_exit` is
/// called with the returned guard, on this thread. A null guard (nothing entered) comes back
/// for a NULL pointer, a context without a span, or while no session records; exiting it does
/// nothing.
///
/// # Safety
/// `ctx` is NULL or points to a readable `waffle_context_t`.
#[no_mangle]
pub unsafe extern "C" fn waffle_context_enter(ctx: *const waffle_context_t) -> waffle_context_guard_t {
    guard(|| {
        if ctx.is_null() {
            fail(WAFFLE_ERR_NULL);
            return waffle_context_guard_t::default();
        }
        if !ctx.is_aligned() {
            fail(WAFFLE_ERR_INVALID_ARGUMENT);
            return waffle_context_guard_t::default();
        }
        // SAFETY: non-null, aligned and readable (the caller's promise); plain data.
        let span = unsafe { ctx.read() }.span_id.id;
        // As the core's `Context::enter`, with the guard kept by C.
        let state = runtime::state();
        if state == 0 {
            return waffle_context_guard_t::default();
        }
        match with_local(|l| l.enter(state, span)).flatten() {
            Some(restore) => waffle_context_guard_t { restore, entered: 1, reserved: 0 },
            None => waffle_context_guard_t::default(),
        }
    })
}

/// Leaves the context `guard` entered and zeroes the guard (a second exit does nothing).
///
/// # Safety
/// `guard` is NULL or points to a guard returned by `waffle_context_enter` on this thread.
#[no_mangle]
pub unsafe extern "C" fn waffle_context_exit(guard: *mut waffle_context_guard_t) -> waffle_status_t {
    crate::boundary::guard(|| {
        if guard.is_null() {
            return fail(WAFFLE_ERR_NULL);
        }
        if !guard.is_aligned() {
            return fail(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: non-null, aligned, pointing to a guard (the caller's promise).
        let g = unsafe { guard.replace(waffle_context_guard_t::default()) };
        if g.entered != 0 {
            let state = runtime::state();
            with_local(|l| l.exit(state, g.restore));
        }
        WAFFLE_OK
    })
}

/// Writes `ctx` as a W3C `traceparent` (`00-<trace id>-<span id>-01`, 55 characters and a NUL)
/// into `buf` of `len` bytes, which must be at least `WAFFLE_TRACEPARENT_LEN`. On failure `buf`
/// holds an empty string (if `len` > 0). A context without a trace id or span id cannot be
/// written (`WAFFLE_ERR_INVALID_ARGUMENT`).
///
/// # Safety
/// `ctx` is NULL or readable; `buf` is NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn waffle_context_to_traceparent(
    ctx: *const waffle_context_t,
    buf: *mut c_char,
    len: usize,
) -> waffle_status_t {
    guard(|| {
        if buf.is_null() {
            return fail(WAFFLE_ERR_NULL);
        }
        if len == 0 {
            return fail(WAFFLE_ERR_BUFFER_TOO_SMALL);
        }
        // SAFETY: `buf` is non-null and writable for `len` > 0 bytes (the caller's promise).
        unsafe { buf.write(0) };
        if ctx.is_null() {
            return fail(WAFFLE_ERR_NULL);
        }
        if !ctx.is_aligned() {
            return fail(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: non-null, aligned and readable (the caller's promise); plain data.
        let c = unsafe { ctx.read() }.to_context();
        if c.trace_id().is_null() || c.span_id().is_null() {
            return fail(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        if len < WAFFLE_TRACEPARENT_LEN {
            return fail(WAFFLE_ERR_BUFFER_TOO_SMALL);
        }
        let text = c.write_traceparent();
        let bytes = text.as_str().as_bytes();
        // SAFETY: `buf` is writable for `len` >= 56 bytes, and 55 bytes plus a NUL are written;
        // `text` is a separate Rust value, so the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
            buf.add(bytes.len()).write(0);
        }
        WAFFLE_OK
    })
}

/// Reads a W3C `traceparent` (version 00, or a later version's first four fields; surrounding
/// whitespace ignored) into `*out`. On failure `*out` is the null context.
///
/// # Safety
/// `text` is NULL or readable up to its NUL (at most 4 096 bytes are read); `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn waffle_context_from_traceparent(
    text: *const c_char,
    out: *mut waffle_context_t,
) -> waffle_status_t {
    guard(|| {
        if out.is_null() {
            return fail(WAFFLE_ERR_NULL);
        }
        if !out.is_aligned() {
            return fail(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: non-null, aligned and writable (the caller's promise).
        unsafe { out.write(waffle_context_t::default()) };
        // SAFETY: NULL or readable up to its NUL within the bound (the caller's promise).
        let Some(bytes) = (unsafe { cstr::bytes(text, cstr::MAX_TEXT) }) else {
            return fail(WAFFLE_ERR_NULL);
        };
        let Ok(text) = std::str::from_utf8(bytes) else { return fail(WAFFLE_ERR_UTF8) };
        match waffle::Context::from_traceparent(text) {
            Ok(c) => {
                // SAFETY: as above.
                unsafe { out.write(waffle_context_t::from_context(c)) };
                WAFFLE_OK
            }
            Err(_) => fail(WAFFLE_ERR_PARSE),
        }
    })
}
