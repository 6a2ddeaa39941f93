//! How the wrappers record: static callsites compiled into the library, values passed as plain
//! integers.
//!
//! Every recorded MPI function has a [`Site`] (`waffle_mpi_site_MPI_Send`, ...), made in
//! [`crate::sites`] from one line naming its span, its fields in schema order and its
//! correlation key: static [`Callsite`]s in the image's callsite slice, as `waffle::span!`
//! makes them, so their ids are known at compile time and nothing is registered, hashed or
//! checked per call. A wrapper fills a [`Vals`] (one slot per field name, `wm_vals_t` in `c/wmpi.h`)
//! and calls [`waffle_mpi_begin`], which writes the site's slots straight into the thread's
//! staging area. The receive event has a function of its own ([`waffle_mpi_received`]) that
//! also counts the message, and a span whose last record is that event ends at its timestamp
//! ([`waffle_mpi_end`] with `at_last`): one clock read fewer per receive.
//!
//! The thread's recording state is reached through a handle the C side keeps in an
//! initial-exec thread-local (`wm_thread`), not through this library's own thread-local,
//! which a shared library reaches with a call of `__tls_get_addr`.

use crate::keys::{self, Counted};
use std::ffi::{c_char, c_void, CStr};
use waffle::{
    __private::{Callsite, FieldType},
    encode::{FieldValue, Writer},
    runtime,
    wire::{tag, MAX_STR_LEN},
};
// The thread's recording state through the handle a C thread-local caches, as the C ABI does.
use waffle_capi::with_thread;

/// The values a wrapper's span can carry, one slot per field name; a [`Site`] says which it
/// writes. `c/wmpi.h`'s `wm_vals_t` is the same struct.
#[repr(C)]
#[derive(Debug)]
pub struct Vals {
    /// `comm`; also `window` (a window's key).
    pub comm: u64,
    /// `peer`; also `target` (a one-sided call's target).
    pub peer: i64,
    /// `tag`.
    pub tag: i64,
    /// `bytes`.
    pub bytes: u64,
    /// `root`.
    pub root: i64,
    /// `op`: a NUL-terminated static name.
    pub op: *const c_char,
    /// `request`.
    pub request: u64,
    /// `dest` (the send half of a `Sendrecv`).
    pub dest: i64,
    /// `send_tag`.
    pub send_tag: i64,
    /// `send_bytes`.
    pub send_bytes: u64,
    /// `requests`: `requests_len` bytes.
    pub requests: *const c_char,
    /// The length of `requests`.
    pub requests_len: u64,
    /// `count`.
    pub count: i64,
    /// `size`.
    pub size: i64,
    /// `required` (`MPI_Init_thread`).
    pub required: i64,
    /// `exclusive` (`MPI_Win_lock`).
    pub exclusive: bool,
}

/// A slot of [`Vals`]: its field name and type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // each is the field of its name
pub enum Slot {
    Comm,
    Peer,
    Tag,
    Bytes,
    Root,
    Op,
    Request,
    Dest,
    SendTag,
    SendBytes,
    Requests,
    Count,
    Size,
    Window,
    Target,
    Required,
    Exclusive,
}

impl Slot {
    /// The field's name in the schema.
    pub const fn name(self) -> &'static str {
        match self {
            Slot::Comm => "comm",
            Slot::Peer => "peer",
            Slot::Tag => "tag",
            Slot::Bytes => "bytes",
            Slot::Root => "root",
            Slot::Op => "op",
            Slot::Request => "request",
            Slot::Dest => "dest",
            Slot::SendTag => "send_tag",
            Slot::SendBytes => "send_bytes",
            Slot::Requests => "requests",
            Slot::Count => "count",
            Slot::Size => "size",
            Slot::Window => "window",
            Slot::Target => "target",
            Slot::Required => "required",
            Slot::Exclusive => "exclusive",
        }
    }

    /// The field's type in the schema.
    pub const fn ty(self) -> FieldType {
        match self {
            Slot::Comm | Slot::Bytes | Slot::Request | Slot::SendBytes | Slot::Window => FieldType::U64,
            Slot::Op | Slot::Requests => FieldType::Str,
            Slot::Exclusive => FieldType::Bool,
            _ => FieldType::I64,
        }
    }

    /// Writes this slot of `v` as its type says (for [`Site::write`]).
    #[inline(always)]
    pub fn write(self, v: &Vals, w: &mut Writer<'_>) {
        match self {
            Slot::Comm => v.comm.encode(w),
            Slot::Peer => v.peer.encode(w),
            Slot::Tag => v.tag.encode(w),
            Slot::Bytes => v.bytes.encode(w),
            Slot::Root => v.root.encode(w),
            // SAFETY: `op` is NULL or a NUL-terminated string (the C side's promise).
            Slot::Op => ascii(unsafe { c_str(v.op) }, w),
            Slot::Request => v.request.encode(w),
            Slot::Dest => v.dest.encode(w),
            Slot::SendTag => v.send_tag.encode(w),
            Slot::SendBytes => v.send_bytes.encode(w),
            // SAFETY: `requests` is NULL or readable for `requests_len` bytes (as above).
            Slot::Requests => ascii(unsafe { bytes(v.requests, v.requests_len) }, w),
            Slot::Count => v.count.encode(w),
            Slot::Size => v.size.encode(w),
            Slot::Window => v.comm.encode(w),
            Slot::Target => v.peer.encode(w),
            Slot::Required => v.required.encode(w),
            Slot::Exclusive => v.exclusive.encode(w),
        }
    }
}

/// The bytes of a NUL-terminated string, or none for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_bytes()
}

/// `len` bytes at `p`, or none for NULL.
///
/// # Safety
/// `p` is NULL or readable for `len` bytes.
unsafe fn bytes<'a>(p: *const c_char, len: u64) -> &'a [u8] {
    if p.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len as usize) }
}

/// Writes `b` as a string field, as `str`'s [`FieldValue`] does, without validating it: the
/// wrappers pass ASCII of their own (an op's name, request numbers), where any cut at the length
/// limit is valid UTF-8 too.
#[inline(always)]
fn ascii(b: &[u8], w: &mut Writer<'_>) {
    let b = &b[..b.len().min(MAX_STR_LEN)];
    w.varint(b.len() as u64);
    w.bytes(b);
}

/// One recorded MPI function: its callsite with its correlation key, the same without (for a
/// call that has no correlation value, such as a send to `MPI_PROC_NULL`), and the writer of
/// its fields' values from their slots, in schema order (made from the same list as the
/// schema, each slot's type known at compile time).
#[derive(Debug)]
pub struct Site {
    /// The callsite of a call with a correlation value (the site's key, or none).
    pub correlated: &'static Callsite,
    /// The callsite of a call without one.
    pub plain: &'static Callsite,
    /// Writes the fields' values from their slots, in the callsites' schema order.
    pub write: fn(&Vals, &mut Writer<'_>),
}

/// An open span of a wrapper: its id (0: not recorded) and what was current before it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Open {
    /// The span's id, 0 if it was not recorded.
    pub id: u64,
    /// The span current before it, made current again when it ends.
    pub prev: u64,
}

/// Whether a session exists (recording, or paused): the wrappers that start something do no
/// bookkeeping at all without one, and call MPI straight away.
#[no_mangle]
pub extern "C" fn waffle_mpi_on() -> bool {
    runtime::last_epoch() != 0
}

/// Opens the span of `site` with the values `v` and, if `correlation` is not 0, that
/// correlation value (under the site's key). End it with [`waffle_mpi_end`] on this thread.
///
/// # Safety
/// `thread` as the module docs say; `site` and `v` valid, `v`'s strings as [`Vals`] says.
#[no_mangle]
pub unsafe extern "C" fn waffle_mpi_begin(
    thread: *mut *mut c_void,
    site: &'static Site,
    v: &Vals,
    correlation: u64,
) -> Open {
    let state = runtime::state();
    if state == 0 {
        return Open::default();
    }
    let callsite = if correlation != 0 { site.correlated } else { site.plain };
    let id = callsite.id();
    let fields = |w: &mut Writer<'_>| (site.write)(v, w);
    // SAFETY: forwarded from the caller.
    let begun = unsafe {
        with_thread(thread, |l| {
            let (span, prev) = l.begin(state, id, &fields);
            if span != 0 && correlation != 0 {
                l.correlate(state, correlation);
            }
            (span, prev)
        })
    };
    let (id, prev) = begun.unwrap_or((0, 0));
    Open { id, prev }
}

/// Ends the span `open` (on the thread that began it); with `at_last`, at the timestamp of the
/// thread's last record instead of reading the clock (the caller just recorded the receive
/// event that ends the call).
///
/// # Safety
/// `thread` as the module docs say.
#[no_mangle]
pub unsafe extern "C" fn waffle_mpi_end(thread: *mut *mut c_void, open: Open, at_last: bool) {
    if open.id == 0 {
        return;
    }
    let state = runtime::state();
    // SAFETY: forwarded from the caller.
    unsafe {
        with_thread(
            thread,
            |l| if at_last { l.end_at_last(state, open.prev) } else { l.end(state, open.prev) },
        )
    };
}

#[::waffle::__private::linkme::distributed_slice(::waffle::__private::CALLSITES)]
#[linkme(crate = ::waffle::__private::linkme)]
static RECEIVED: Callsite = Callsite::new(
    waffle::__private::Kind::Event,
    "MPI message received",
    module_path!(),
    file!(),
    line!(),
    &[
        waffle::__private::Field::new("comm", FieldType::U64),
        waffle::__private::Field::new("peer", FieldType::I64),
        waffle::__private::Field::new("tag", FieldType::I64),
        waffle::__private::Field::new("bytes", FieldType::U64),
        waffle::__private::Field::new("request", FieldType::U64),
    ],
    "mpi.message<",
);

/// Counts a receive completed on the communicator keyed `comm` from world rank `source` with
/// `tag`, and records its event "MPI message received" (with `bytes` arrived and the request
/// number, 0 for a blocking call) and its `mpi.message<` correlation. Returns whether the
/// event was recorded.
///
/// # Safety
/// `thread` as the module docs say.
#[no_mangle]
pub unsafe extern "C" fn waffle_mpi_received(
    thread: *mut *mut c_void,
    comm: u64,
    source: i64,
    tag: i64,
    bytes: u64,
    request: u64,
) -> bool {
    let msg = keys::next(Counted::Receive, comm, crate::world_rank(), source, tag);
    let state = runtime::state();
    if state == 0 {
        return false;
    }
    let id = RECEIVED.id();
    let fields = |w: &mut Writer<'_>| {
        comm.encode(w);
        source.encode(w);
        tag.encode(w);
        bytes.encode(w);
        request.encode(w);
    };
    // SAFETY: forwarded from the caller.
    let recorded = unsafe {
        with_thread(thread, |l| {
            let event = l.record(state, tag::EVENT, id, &fields);
            if event != 0 {
                l.correlate(state, msg);
            }
            event != 0
        })
    };
    recorded.unwrap_or(false)
}
