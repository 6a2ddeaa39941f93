//! What C asks about statuses: a status's text, and this thread's last failure. (Apart from
//! `status.rs`, which the panic boundary records failures with, so that the two modules do
//! not use each other.)

use crate::{
    boundary::guard,
    status::{take_last, waffle_status_t},
};
use std::ffi::c_char;

/// A static, NUL-terminated English description of `status` (any value, also unknown ones).
/// The string must not be freed.
#[no_mangle]
pub extern "C" fn waffle_status_str(status: i32) -> *const c_char {
    guard(|| match waffle_status_t::from_code(status) {
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
    guard(take_last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{fail, waffle_status_t::*};
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
