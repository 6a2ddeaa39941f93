//! Status codes, their texts, and the per-thread last status of calls that return a value.

use std::{cell::Cell, ffi::c_char};

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

    fn from_code(code: i32) -> Option<waffle_status_t> {
        usize::try_from(code).ok().and_then(|i| Self::ALL.get(i).copied())
    }

    fn text(self) -> &'static std::ffi::CStr {
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

/// A static, NUL-terminated English description of `status` (any value, also unknown ones).
/// The string must not be freed.
#[no_mangle]
pub extern "C" fn waffle_status_str(status: i32) -> *const c_char {
    crate::boundary::guard(|| match waffle_status_t::from_code(status) {
        Some(s) => s.text().as_ptr(),
        None => c"unknown waffle status".as_ptr(),
    })
}

/// The last failure of a waffle call on this thread, and resets it to `WAFFLE_OK`. Calls that
/// return an id or a guard (`waffle_span_begin`, `waffle_event`, `waffle_context_enter`, ...)
/// return a null one on failure and say why only here; calls that return a status set it too.
/// Successful calls leave it alone.
#[no_mangle]
pub extern "C" fn waffle_last_status() -> waffle_status_t {
    crate::boundary::guard(|| {
        let code = LAST.try_with(|c| c.replace(0)).unwrap_or(0);
        waffle_status_t::from_code(code).unwrap_or(WAFFLE_ERR_PANIC)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn every_code_has_its_own_text_and_unknown_codes_have_one_too() {
        let mut seen = std::collections::HashSet::new();
        for (i, s) in waffle_status_t::ALL.iter().enumerate() {
            assert_eq!(*s as i32, i as i32);
            // SAFETY: waffle_status_str returns static NUL-terminated strings.
            let text = unsafe { CStr::from_ptr(waffle_status_str(i as i32)) };
            assert!(seen.insert(text.to_str().unwrap().to_owned()));
        }
        for code in [-1, 12, i32::MIN, i32::MAX] {
            // SAFETY: as above.
            let text = unsafe { CStr::from_ptr(waffle_status_str(code)) };
            assert_eq!(text.to_str(), Ok("unknown waffle status"));
        }
    }

    #[test]
    fn last_status_keeps_the_last_failure_until_read() {
        assert_eq!(waffle_last_status(), WAFFLE_OK);
        fail(WAFFLE_ERR_NULL);
        fail(WAFFLE_OK);
        assert_eq!(waffle_last_status(), WAFFLE_ERR_NULL);
        assert_eq!(waffle_last_status(), WAFFLE_OK);
    }
}
