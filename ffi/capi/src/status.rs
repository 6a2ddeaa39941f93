//! Status codes, their texts, and the per-thread last status of calls that return a value.

use std::cell::Cell;

/// What a call did: `WAFFLE_OK` (0), or what was wrong. Functions that return an id or a guard
/// instead report a failure through `waffle_last_status`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum waffle_status_t {
    /// Success.
    WAFFLE_OK = 0,
    /// A required pointer was NULL.
    WAFFLE_ERR_NULL = 1,
    /// An argument is out of range: an unknown kind, a count or length too large, a misaligned
    /// pointer, or a context without a trace or span id.
    WAFFLE_ERR_INVALID_ARGUMENT = 2,
    /// Text that must be UTF-8 (a traceparent) is not.
    WAFFLE_ERR_UTF8 = 3,
    /// The header the program was compiled with describes another ABI than this library's.
    WAFFLE_ERR_ABI_MISMATCH = 4,
    /// A session is already recording in this process.
    WAFFLE_ERR_ALREADY_STARTED = 5,
    /// No session is recording.
    WAFFLE_ERR_NOT_STARTED = 6,
    /// The trace file could not be created or written.
    WAFFLE_ERR_IO = 7,
    /// The output buffer is too small; nothing but a terminating NUL was written.
    WAFFLE_ERR_BUFFER_TOO_SMALL = 8,
    /// A traceparent could not be parsed.
    WAFFLE_ERR_PARSE = 9,
    /// The process has registered the most callsites it may (2^20).
    WAFFLE_ERR_CALLSITES_FULL = 10,
    /// A Rust panic was caught at the boundary (a bug in waffle); the call did nothing more.
    WAFFLE_ERR_PANIC = 11,
}

use waffle_status_t::*;

impl waffle_status_t {
    /// Every status, in code order.
    pub(crate) const ALL: [waffle_status_t; 12] = [
        WAFFLE_OK,
        WAFFLE_ERR_NULL,
        WAFFLE_ERR_INVALID_ARGUMENT,
        WAFFLE_ERR_UTF8,
        WAFFLE_ERR_ABI_MISMATCH,
        WAFFLE_ERR_ALREADY_STARTED,
        WAFFLE_ERR_NOT_STARTED,
        WAFFLE_ERR_IO,
        WAFFLE_ERR_BUFFER_TOO_SMALL,
        WAFFLE_ERR_PARSE,
        WAFFLE_ERR_CALLSITES_FULL,
        WAFFLE_ERR_PANIC,
    ];

    pub(crate) fn from_code(code: i32) -> Option<waffle_status_t> {
        usize::try_from(code).ok().and_then(|i| Self::ALL.get(i).copied())
    }

    pub(crate) fn text(self) -> &'static std::ffi::CStr {
        match self {
            WAFFLE_OK => c"ok",
            WAFFLE_ERR_NULL => c"a required pointer argument is NULL",
            WAFFLE_ERR_INVALID_ARGUMENT => c"an argument is out of range (kind, count, length or alignment)",
            WAFFLE_ERR_UTF8 => c"text is not valid UTF-8",
            WAFFLE_ERR_ABI_MISMATCH => {
                c"waffle.h and the linked libwaffle have different ABI versions; rebuild against one release"
            }
            WAFFLE_ERR_ALREADY_STARTED => c"a waffle session is already recording in this process",
            WAFFLE_ERR_NOT_STARTED => c"no waffle session is recording",
            WAFFLE_ERR_IO => c"the trace file could not be created or written",
            WAFFLE_ERR_BUFFER_TOO_SMALL => c"the output buffer is too small",
            WAFFLE_ERR_PARSE => c"not a valid W3C traceparent",
            WAFFLE_ERR_CALLSITES_FULL => c"too many callsites registered in this process",
            WAFFLE_ERR_PANIC => c"internal error: a panic was caught at the C boundary",
        }
    }
}

std::thread_local! {
    static LAST: Cell<i32> = const { Cell::new(0) };
}

/// Records `status` as this thread's last failure (if it is one) and returns it.
pub(crate) fn fail(status: waffle_status_t) -> waffle_status_t {
    if status != WAFFLE_OK {
        let _ = LAST.try_with(|c| c.set(status as i32));
    }
    status
}

/// This thread's last failure, reset to `WAFFLE_OK` (`WAFFLE_ERR_PANIC` for a code that is
/// none, which cannot happen).
pub(crate) fn take_last() -> waffle_status_t {
    let code = LAST.try_with(|c| c.replace(0)).unwrap_or(0);
    waffle_status_t::from_code(code).unwrap_or(WAFFLE_ERR_PANIC)
}
