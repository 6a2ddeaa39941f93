//! Reading C strings without trusting them: every scan is bounded, and text that is not UTF-8
//! is either replaced (names, values) or refused (traceparents), never assumed.

use std::{borrow::Cow, ffi::c_char};

/// Longest name, key, label, path or traceparent read, in bytes; a string without a NUL
/// within this many bytes is cut here.
pub(crate) const MAX_TEXT: usize = 4096;

/// The bytes of the NUL-terminated string at `p`, without the NUL, scanning at most `max`
/// bytes; `None` for NULL.
///
/// # Safety
/// `p` is NULL or readable up to its NUL or `max` bytes, whichever comes first, and those bytes
/// are not written while the returned slice lives.
pub(crate) unsafe fn bytes<'a>(p: *const c_char, max: usize) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    let mut len = 0;
    // SAFETY: the caller guarantees the bytes up to the NUL or `max` are readable; the loop
    // stops at the first NUL and never reads at or past `max`.
    while len < max && unsafe { *p.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: the `len` bytes just read are readable and, by the caller's promise, unchanged.
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// The string at `p` as text, invalid UTF-8 replaced with U+FFFD; `None` for NULL.
///
/// # Safety
/// As [`bytes`] with [`MAX_TEXT`].
pub(crate) unsafe fn text<'a>(p: *const c_char) -> Option<Cow<'a, str>> {
    // SAFETY: forwarded from the caller.
    unsafe { bytes(p, MAX_TEXT) }.map(String::from_utf8_lossy)
}

/// The string at `p` as text, or "" for NULL.
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn text_or_empty<'a>(p: *const c_char) -> Cow<'a, str> {
    // SAFETY: forwarded from the caller.
    unsafe { text(p) }.unwrap_or(Cow::Borrowed(""))
}

/// `bytes` as a field value: at most `max` bytes, whole characters only; invalid UTF-8 is
/// replaced (which allocates, so only malformed input pays for it).
pub(crate) fn value_text(bytes: &[u8], max: usize) -> Cow<'_, str> {
    let bytes = &bytes[..bytes.len().min(max)];
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        // Only a character cut at the end: keep the whole characters before it.
        Err(e) if e.error_len().is_none() => {
            // `valid_up_to` ends the longest valid prefix, at a character boundary.
            Cow::Borrowed(std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or(""))
        }
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_stop_at_the_bound_and_null_is_none() {
        let s = b"abcdef\0";
        // SAFETY: `s` is readable and NUL-terminated.
        assert_eq!(unsafe { bytes(s.as_ptr().cast(), 3) }, Some(&b"abc"[..]));
        // SAFETY: as above.
        assert_eq!(unsafe { bytes(s.as_ptr().cast(), 100) }, Some(&b"abcdef"[..]));
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { bytes(std::ptr::null(), 100) }, None);
        let bad = b"a\xffb\0";
        // SAFETY: `bad` is readable and NUL-terminated.
        assert_eq!(unsafe { text(bad.as_ptr().cast()) }.as_deref(), Some("a\u{fffd}b"));
    }

    #[test]
    fn values_keep_whole_characters_and_replace_garbage() {
        assert_eq!(value_text("héllo".as_bytes(), 2), "h"); // 'é' would be cut: dropped
        assert_eq!(value_text("héllo".as_bytes(), 3), "hé");
        assert_eq!(value_text(b"a\xffb", 10), "a\u{fffd}b");
        assert_eq!(value_text(b"", 10), "");
    }
}
