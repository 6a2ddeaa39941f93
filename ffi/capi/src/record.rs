//! Spans and events from C: the calls the macros make on every execution.
//!
//! A call checks its arguments, resolves the callsite (one atomic load and a schema compare,
//! see [`crate::callsite`]), and encodes the field values straight into the thread's staging
//! area through the same core functions Rust's macros use. Causes and the correlation follow as
//! their own small records. While recording is off a call returns at its first load.

use crate::{
    boundary::guard,
    callsite::{self, Desc, Extras},
    cstr,
    kvs::{encode_fields, encode_numbers, kv_slice},
    status::{fail, waffle_status_t::*},
    types::{
        waffle_callsite_t, waffle_event_id_t, waffle_kv_kind_t as K, waffle_kv_t, waffle_span_id_t,
        waffle_span_t, WAFFLE_STRLEN_NUL,
    },
};
use std::{
    borrow::Cow,
    ffi::{c_char, c_void},
    ptr::{self, NonNull},
};
use waffle::{
    callsite::Kind,
    encode::Writer,
    local::{thread_handle, with_local, with_local_at, Local, ThreadLocal},
    runtime,
    wire::tag,
};

/// Keeps `WAFFLE_OUTPUT`'s start-up hook in programs linked with `libwaffle.a`: the C linker
/// takes an archive member only for a symbol the program needs, and a program that never starts
/// a session needs none of `waffle_std::autostart`'s. This reference, in the object that holds
/// the functions every recording program calls, makes the member holding the hook one it
/// needs. Nothing reads it.
#[used]
static AUTOSTART: &extern "C" fn() = &waffle_std::autostart::CONSTRUCTOR;

/// Records the causes and correlation of the span or event `l` just recorded.
#[inline(always)]
fn record_extras(l: &mut Local, state: u32, kvs: &[waffle_kv_t], extras: Extras) {
    if extras.causes {
        for kv in kvs.iter().filter(|kv| kv.kind == K::WAFFLE_KV_KIND_CAUSE as u32) {
            // SAFETY: a cause's member is `u64`; any bit pattern is valid (0 is skipped).
            l.link(state, unsafe { kv.value.u64 });
        }
    }
    if let Some(value) = extras.correlation {
        l.correlate(state, value);
    }
}

/// Runs `f` on the calling thread's state, through the handle cached at `thread` when there is
/// one: a C `_Thread_local` (see `waffle_span_begin_t`), cheaper to reach from a shared library
/// than this library's own thread-local. A NULL (or misaligned) `thread` looks the state up.
///
/// # Safety
/// `thread` is NULL or points to a `void *` of the calling thread that only these functions
/// write (NULL at first): so what it holds is NULL or a handle of this thread.
///
/// Public for `waffle-mpi`, whose wrappers cache the handle the same way.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn with_thread<R>(thread: *mut *mut c_void, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    if thread.is_null() || !thread.is_aligned() {
        return with_local(f);
    }
    // SAFETY: non-null, aligned and the calling thread's own (the caller's promise).
    let cached = unsafe { *thread };
    let handle = match NonNull::new(cached.cast::<ThreadLocal>()) {
        Some(h) => h,
        None => match thread_handle() {
            Some(h) => {
                // SAFETY: as above; the handle is this thread's, stored in this thread's slot.
                unsafe { *thread = h.as_ptr().cast() };
                h
            }
            // Torn down, or a target without handles: the lookup says which.
            None => return with_local(f),
        },
    };
    // SAFETY: the slot holds only handles `thread_handle` gave on this thread (the caller's
    // promise that nothing else writes it, and the slot is the thread's own).
    unsafe { with_local_at(handle, f) }
}

/// Where a call's callsite comes from: a C static struct, or a name given with the call.
pub(crate) enum Site {
    Static(*mut waffle_callsite_t),
    Named(*const c_char, u32),
}

/// Checks a call and returns its key-values, callsite id and extras.
///
/// # Safety
/// As the exported functions document for their arguments.
#[inline(always)]
unsafe fn prepare<'a>(
    site: Site,
    kind: Kind,
    kvs: *const waffle_kv_t,
    count: usize,
) -> Result<(&'a [waffle_kv_t], u32, Extras), crate::status::waffle_status_t> {
    // SAFETY: forwarded from the caller.
    let kvs = unsafe { kv_slice(kvs, count) }?;
    let (id, extras) = match site {
        // SAFETY: forwarded from the caller.
        Site::Static(cs) => unsafe { callsite::resolve(cs, kind, kvs) }?,
        Site::Named(name, len) => {
            // SAFETY: forwarded from the caller.
            let name = unsafe { named(name, len) }?;
            let desc = Desc { name, function: Cow::Borrowed(""), file: Cow::Borrowed(""), line: 0 };
            let (extras, _) = callsite::scan(kvs, None)?;
            // SAFETY: forwarded from the caller.
            (unsafe { callsite::register(&desc, kind, kvs, extras) }?, extras)
        }
    };
    Ok((kvs, id, extras))
}

/// A name given with a call: `len` bytes, or up to the NUL for `WAFFLE_STRLEN_NUL`.
///
/// # Safety
/// `name` is NULL or readable for `len` bytes (or up to its NUL), capped at `MAX_TEXT`.
unsafe fn named<'a>(name: *const c_char, len: u32) -> Result<Cow<'a, str>, crate::status::waffle_status_t> {
    if name.is_null() {
        return Err(WAFFLE_ERR_NULL);
    }
    let bytes = if len == WAFFLE_STRLEN_NUL {
        // SAFETY: forwarded from the caller.
        unsafe { cstr::bytes(name, cstr::MAX_TEXT) }.unwrap_or(&[])
    } else {
        // SAFETY: forwarded from the caller; the length is capped.
        unsafe { std::slice::from_raw_parts(name.cast::<u8>(), (len as usize).min(cstr::MAX_TEXT)) }
    };
    Ok(String::from_utf8_lossy(bytes))
}

/// Opens a span; returns its guard. The core's own `span_begin`, without a Rust guard: the C
/// guard keeps what `waffle_span_end` needs.
///
/// # Safety
/// As the exported functions document; `thread` as for [`with_thread`].
#[inline(always)]
unsafe fn span_begin(
    site: Site,
    kvs: *const waffle_kv_t,
    count: usize,
    thread: *mut *mut c_void,
) -> waffle_span_t {
    let state = runtime::state();
    if state == 0 {
        return waffle_span_t::NULL;
    }
    // SAFETY: forwarded from the caller.
    let (kvs, id, extras) = match unsafe { prepare(site, Kind::Span, kvs, count) } {
        Ok(p) => p,
        Err(e) => {
            fail(e);
            return waffle_span_t::NULL;
        }
    };
    // SAFETY: the strings of `kvs` are readable (the caller's promise).
    let fields = |w: &mut Writer<'_>| unsafe { encode_fields(kvs, w) };
    let begun = if kvs.is_empty() {
        // SAFETY: `thread` as `with_thread` needs (the caller's promise).
        unsafe { with_thread(thread, |l| l.begin(state, id, &|_: &mut Writer<'_>| {})) }
    } else if !extras.strings {
        // SAFETY: as above.
        unsafe { with_thread(thread, |l| l.begin(state, id, &|w: &mut Writer<'_>| encode_numbers(kvs, w))) }
    } else {
        // SAFETY: as above.
        unsafe { with_thread(thread, |l| l.begin(state, id, &fields)) }
    };
    let (span, restore) = begun.unwrap_or((0, 0));
    if span != 0 && (extras.causes || extras.correlation.is_some()) {
        // SAFETY: as above.
        unsafe { with_thread(thread, |l| record_extras(l, state, kvs, extras)) };
    }
    waffle_span_t { id: waffle_span_id_t { id: span }, restore }
}

/// Records an event; returns its id.
///
/// # Safety
/// As the exported functions document.
#[inline(always)]
pub(crate) unsafe fn event(site: Site, kvs: *const waffle_kv_t, count: usize) -> waffle_event_id_t {
    let state = runtime::state();
    if state == 0 {
        return waffle_event_id_t::default();
    }
    // SAFETY: forwarded from the caller.
    let (kvs, id, extras) = match unsafe { prepare(site, Kind::Event, kvs, count) } {
        Ok(p) => p,
        Err(e) => {
            fail(e);
            return waffle_event_id_t::default();
        }
    };
    // SAFETY: the strings of `kvs` are readable (the caller's promise).
    let fields = |w: &mut Writer<'_>| unsafe { encode_fields(kvs, w) };
    let event = if kvs.is_empty() {
        with_local(|l| l.record(state, tag::EVENT, id, &|_: &mut Writer<'_>| {}))
    } else if !extras.strings {
        with_local(|l| l.record(state, tag::EVENT, id, &|w: &mut Writer<'_>| encode_numbers(kvs, w)))
    } else {
        with_local(|l| l.record(state, tag::EVENT, id, &fields))
    };
    let event = event.unwrap_or(0);
    if event != 0 && (extras.causes || extras.correlation.is_some()) {
        with_local(|l| record_extras(l, state, kvs, extras));
    }
    waffle_event_id_t { id: event }
}

/// Opens a span at `callsite` with the `count` key-values at `kvs` (fields, causes, a
/// correlation) and makes it this thread's current span. End it with `waffle_span_end` on this
/// thread. Returns a null guard, recording nothing, while no session records or when an
/// argument is bad (see `waffle_last_status`).
///
/// # Safety
/// `callsite` is NULL or a valid `waffle_callsite_t` (see there); `kvs` is NULL or points to
/// `count` initialised key-values whose keys and strings are NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn waffle_span_begin(
    callsite: *mut waffle_callsite_t,
    kvs: *const waffle_kv_t,
    count: usize,
) -> waffle_span_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { span_begin(Site::Static(callsite), kvs, count, ptr::null_mut()) })
}

/// Like `waffle_span_begin`, for a name known only at run time: `name_len` bytes at `name`, or
/// up to its NUL with `WAFFLE_STRLEN_NUL`. Each call looks the name up in the process's
/// registry (a lock and a hash): for hot code, prefer `WAFFLE_SPAN`'s static callsite.
///
/// # Safety
/// `name` is NULL or readable as described; `kvs` as for `waffle_span_begin`.
#[no_mangle]
pub unsafe extern "C" fn waffle_span_begin_named(
    name: *const c_char,
    name_len: u32,
    kvs: *const waffle_kv_t,
    count: usize,
) -> waffle_span_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { span_begin(Site::Named(name, name_len), kvs, count, ptr::null_mut()) })
}

/// Ends the span `span` guards; `thread` as for [`with_thread`].
///
/// # Safety
/// As `waffle_span_end_t` documents.
#[inline(always)]
unsafe fn span_end(span: *mut waffle_span_t, thread: *mut *mut c_void) -> crate::status::waffle_status_t {
    if span.is_null() {
        return fail(WAFFLE_ERR_NULL);
    }
    if !span.is_aligned() {
        return fail(WAFFLE_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, aligned, and pointing to a guard (the caller's promise).
    let s = unsafe { span.replace(waffle_span_t::NULL) };
    if crate::detached::is_detached(&s) {
        crate::detached::end_detached(s.id.id);
    } else if s.id.id != 0 {
        // As the core's `Span` guard ends a span: in its session even if recording paused.
        let state = runtime::state();
        // SAFETY: `thread` as `with_thread` needs (the caller's promise).
        unsafe { with_thread(thread, |l| l.end(state, s.restore)) };
    }
    WAFFLE_OK
}

/// Ends the span `span` guards (on the thread that began it, innermost first; a detached span,
/// see `waffle_span_detach`, on any thread) and zeroes the guard, so ending it twice does
/// nothing.
///
/// # Safety
/// `span` is NULL or points to a `waffle_span_t` returned by a `waffle_span_begin*` call.
#[no_mangle]
pub unsafe extern "C" fn waffle_span_end(span: *mut waffle_span_t) -> crate::status::waffle_status_t {
    // SAFETY: forwarded from the caller; no thread slot.
    guard(|| unsafe { span_end(span, ptr::null_mut()) })
}

/// `waffle_span_begin` for a caller that keeps a per-thread cache of its own: `thread` is NULL
/// or the address of a `void *` in the caller's thread-local storage, NULL at first, which
/// only waffle writes. The first call on a thread stores a handle to the thread's recording
/// state there; later calls use it instead of looking up the library's thread-local, which a
/// shared library reaches through `__tls_get_addr`, where a C `_Thread_local` in the program
/// is a fixed offset from the thread pointer. `WAFFLE_SPAN` passes one such variable per
/// translation unit. A NULL `thread` behaves as `waffle_span_begin`.
///
/// # Safety
/// As `waffle_span_begin`; and `thread` is NULL or points to such a variable of the calling
/// thread (never shared with or copied from another thread, never written by the caller after
/// it is first passed here).
#[no_mangle]
pub unsafe extern "C" fn waffle_span_begin_t(
    thread: *mut *mut c_void,
    callsite: *mut waffle_callsite_t,
    kvs: *const waffle_kv_t,
    count: usize,
) -> waffle_span_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { span_begin(Site::Static(callsite), kvs, count, thread) })
}

/// `waffle_span_end` with the per-thread cache of `waffle_span_begin_t` (it need not be the
/// variable the span began with, only one of the calling thread). `WAFFLE_SPAN`'s cleanup
/// calls it.
///
/// # Safety
/// As `waffle_span_end`, and `thread` as for `waffle_span_begin_t`.
#[no_mangle]
pub unsafe extern "C" fn waffle_span_end_t(
    thread: *mut *mut c_void,
    span: *mut waffle_span_t,
) -> crate::status::waffle_status_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { span_end(span, thread) })
}

/// Records an event at `callsite` with the `count` key-values at `kvs`; returns its id, for
/// later causes. Returns the null id, recording nothing, while no session records or when an
/// argument is bad (see `waffle_last_status`).
///
/// # Safety
/// As `waffle_span_begin`.
#[no_mangle]
pub unsafe extern "C" fn waffle_event(
    callsite: *mut waffle_callsite_t,
    kvs: *const waffle_kv_t,
    count: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { event(Site::Static(callsite), kvs, count) })
}

/// Like `waffle_event`, for a name known only at run time (see `waffle_span_begin_named`).
///
/// # Safety
/// As `waffle_span_begin_named`.
#[no_mangle]
pub unsafe extern "C" fn waffle_event_named(
    name: *const c_char,
    name_len: u32,
    kvs: *const waffle_kv_t,
    count: usize,
) -> waffle_event_id_t {
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { event(Site::Named(name, name_len), kvs, count) })
}
