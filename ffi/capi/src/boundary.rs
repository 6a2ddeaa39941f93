//! The panic boundary: no Rust panic ever unwinds into C.
//!
//! Every `extern "C"` body runs inside [`guard`] (rustls-ffi's `ffi_panic_boundary!` is the
//! model). A panic there — which would be a bug in waffle, since every argument is checked
//! first — is caught, recorded as `WAFFLE_ERR_PANIC` for [`waffle_last_status`], and the
//! function returns the value its type gives for "nothing happened": a status of
//! `WAFFLE_ERR_PANIC`, a null id, a null guard. Unwinding out of an `extern "C"` function would
//! abort the process instead.
//!
//! [`waffle_last_status`]: crate::report::waffle_last_status

use crate::{
    status::{fail, waffle_status_t},
    types::{waffle_context_guard_t, waffle_context_t, waffle_event_id_t, waffle_span_t},
};
use std::{
    ffi::c_char,
    panic::{catch_unwind, AssertUnwindSafe},
};

/// What a C entry point returns when its body panicked.
pub(crate) trait OnPanic {
    /// The value returned after a caught panic.
    fn on_panic() -> Self;
}

impl OnPanic for waffle_status_t {
    fn on_panic() -> Self {
        waffle_status_t::WAFFLE_ERR_PANIC
    }
}

impl OnPanic for *const c_char {
    fn on_panic() -> Self {
        c"internal error: a panic was caught at the C boundary".as_ptr()
    }
}

macro_rules! on_panic_default {
    ($($t:ty),*) => {$(
        impl OnPanic for $t {
            fn on_panic() -> Self {
                <$t>::default()
            }
        }
    )*};
}
on_panic_default!((), bool, u32, waffle_span_t, waffle_event_id_t, waffle_context_t, waffle_context_guard_t);

/// Runs `body`, turning a panic into [`OnPanic::on_panic`].
///
/// `AssertUnwindSafe` is sound here in the sense that matters: after a caught panic the only
/// shared state that may be half-updated is behind mutexes, which every user recovers from
/// poisoning, or thread-local recording state, which the core keeps consistent record by record.
#[inline(always)]
pub(crate) fn guard<R: OnPanic>(body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => panicked(payload),
    }
}

#[cold]
#[inline(never)]
fn panicked<R: OnPanic>(payload: Box<dyn std::any::Any + Send>) -> R {
    // A payload whose destructor panics must not escape either.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    fail(waffle_status_t::WAFFLE_ERR_PANIC);
    R::on_panic()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_types_null_value_and_a_last_status() {
        let _ = crate::status::take_last();
        let s: waffle_status_t = guard(|| panic!("boom"));
        assert_eq!(s, waffle_status_t::WAFFLE_ERR_PANIC);
        let span: waffle_span_t = guard(|| panic!("boom"));
        assert_eq!(span.id.id, 0);
        let ctx: waffle_context_t = guard(|| panic!("boom"));
        assert_eq!((ctx.trace_id_hi, ctx.trace_id_lo, ctx.span_id.id), (0, 0, 0));
        assert_eq!(crate::status::take_last(), waffle_status_t::WAFFLE_ERR_PANIC);
        assert_eq!(guard(|| 7u32), 7);
    }
}
