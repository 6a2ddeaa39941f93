//! Spans that end on another thread than the one that began them: a span is taken off its
//! thread's stack (`DETACH`) and its end is recorded by id from whichever thread ends it
//! (`ASYNC_END`), as the core's `Instrument` does for a Rust future. C++20 coroutines
//! (`waffle::task`) detach the spans a coroutine holds open when it suspends.
//!
//! A detached guard is marked by its `restore` holding its own id: no span is ever its own
//! parent, so no guard of an attached span looks like that.

use crate::{
    boundary::guard,
    status::{fail, waffle_status_t::*},
    types::waffle_span_t,
};
use waffle::{local::with_local, runtime};

/// Whether guard `s` is of a detached span.
pub(crate) fn is_detached(s: &waffle_span_t) -> bool {
    s.id.id != 0 && s.restore == s.id.id
}

/// Records the end of detached span `id` from this thread, in its session even after recording
/// paused (as a guard ends its span).
pub(crate) fn end_detached(id: u64) {
    let state = runtime::state();
    let state = if state == 0 { runtime::last_epoch() } else { state };
    with_local(|l| l.async_end(state, id));
}

/// Takes the span `span` guards off this thread's stack so that it can end on any thread: what
/// this thread records next nests in the span's parent again, and `waffle_span_end`, called on
/// whichever thread, records the span's end by its id. Call it on the thread that began the
/// span, while the span is that thread's innermost. To make the span the parent of what another
/// thread records, enter its context there (`waffle_context_enter`). Detaching a null or an
/// already detached guard does nothing.
///
/// # Safety
/// `span` is NULL or points to a `waffle_span_t` returned by a `waffle_span_begin*` call.
#[no_mangle]
pub unsafe extern "C" fn waffle_span_detach(span: *mut waffle_span_t) -> crate::status::waffle_status_t {
    guard(|| {
        if span.is_null() {
            return fail(WAFFLE_ERR_NULL);
        }
        if !span.is_aligned() {
            return fail(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: non-null, aligned, and pointing to a guard (the caller's promise).
        let s = unsafe { span.read() };
        if s.id.id == 0 || is_detached(&s) {
            return WAFFLE_OK;
        }
        let state = runtime::state();
        with_local(|l| l.detach(state, s.id.id, s.restore));
        // SAFETY: non-null and aligned (checked above); the guard is the caller's to write
        // through.
        unsafe { span.write(waffle_span_t { id: s.id, restore: s.id.id }) };
        WAFFLE_OK
    })
}
