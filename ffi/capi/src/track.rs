//! Device tracks from C: a named timeline in a clock of its own (a GPU queue), its sync points
//! and its slices, recorded as `waffle::Track` records them (`docs/device-tracks.md`).
//!
//! A track is a plain value (its id), so it holds nothing to release and a garbage one is
//! harmless: its slices name a track the decoder does not know and stay ordinary events. A
//! slice is an event of a callsite named at run time whose key-values the call puts in front
//! of the caller's (`track.id`, `track.begin`, `track.end`, then the launcher as a cause), in
//! an array on the stack: no allocation.

use crate::{
    boundary::{guard, OnPanic},
    cstr,
    kvs::kv_slice,
    record::{event, Site},
    status::{fail, waffle_status_t::*},
    types::{waffle_event_id_t, waffle_kv_kind_t as K, waffle_kv_t, waffle_kv_value_t, WAFFLE_MAX_KVS},
};
use std::ffi::{c_char, CStr};
use waffle::{wire::reserved::track as names, Track};

/// A device track: a named timeline in a clock of its own. A plain value (`id` 0 is the null
/// track, which records nothing); copy it freely, between threads too.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct waffle_track_t {
    /// The track's id: the id of the event that defined it; 0 is null.
    pub id: u64,
}

/// A call that returns a track gives the null track after a caught panic.
impl OnPanic for waffle_track_t {
    fn on_panic() -> Self {
        Self::default()
    }
}

const KEY_ID: &CStr = c"track.id";
const KEY_BEGIN: &CStr = c"track.begin";
const KEY_END: &CStr = c"track.end";

fn kv(key: &'static CStr, kind: K, value: u64) -> waffle_kv_t {
    waffle_kv_t { key: key.as_ptr(), kind: kind as u32, len: 0, value: waffle_kv_value_t { u64: value } }
}

/// Defines a track named `name` (NUL-terminated, invalid UTF-8 replaced) whose clock counts
/// `ticks_per_second`. Returns the null track, recording nothing, while no session records or
/// when `name` is NULL (see `waffle_last_status`). A track holds no resources; see
/// `waffle_track_free`.
///
/// # Safety
/// `name` is NULL or a readable NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn waffle_track_new(name: *const c_char, ticks_per_second: u64) -> waffle_track_t {
    guard(|| {
        if name.is_null() {
            fail(WAFFLE_ERR_NULL);
            return waffle_track_t::default();
        }
        // SAFETY: non-null and NUL-terminated (the caller's promise); the scan is bounded.
        let bytes = unsafe { cstr::bytes(name, cstr::MAX_TEXT) }.unwrap_or(&[]);
        let name = String::from_utf8_lossy(bytes);
        waffle_track_t { id: Track::new(&name, ticks_per_second).id() }
    })
}

/// Pairs the track's device clock reading `device_ticks` with the host's now; call it right
/// after reading the device's counter, a few times over a run. Returns the sync's event id
/// (null when nothing was recorded).
#[no_mangle]
pub extern "C" fn waffle_track_sync(track: waffle_track_t, device_ticks: u64) -> waffle_event_id_t {
    guard(|| waffle_event_id_t { id: Track::from_id(track.id).sync(device_ticks).to_u64() })
}

/// Records a slice of `track` named `name` (`name_len` bytes, or `WAFFLE_STRLEN_NUL`) from
/// `begin` to `end` in device ticks; `launched_by` is the id of the span or event that launched
/// it (`span.id.id`, `event.id`; 0 for none), drawn as an arrow from it; `kvs` are its fields
/// (and further causes), as for `waffle_event_named`. At most `WAFFLE_MAX_KVS - 4` key-values.
/// Returns the slice's event id, or the null id, recording nothing, for the null track, while
/// no session records, or when an argument is bad (see `waffle_last_status`).
///
/// # Safety
/// As `waffle_event_named` for `name`, `name_len`, `kvs` and `count`.
#[no_mangle]
pub unsafe extern "C" fn waffle_track_slice(
    track: waffle_track_t,
    name: *const c_char,
    name_len: u32,
    begin: u64,
    end: u64,
    launched_by: u64,
    kvs: *const waffle_kv_t,
    count: usize,
) -> waffle_event_id_t {
    guard(|| {
        if track.id == 0 || waffle::runtime::state() == 0 {
            return waffle_event_id_t::default();
        }
        // SAFETY: forwarded from the caller.
        let user = match unsafe { kv_slice(kvs, count) } {
            Ok(user) if user.len() <= WAFFLE_MAX_KVS - 4 => user,
            Ok(_) => {
                fail(WAFFLE_ERR_INVALID_ARGUMENT);
                return waffle_event_id_t::default();
            }
            Err(e) => {
                fail(e);
                return waffle_event_id_t::default();
            }
        };
        let mut all = [kv(KEY_ID, K::WAFFLE_KV_KIND_U64, 0); WAFFLE_MAX_KVS];
        all[0] = kv(KEY_ID, K::WAFFLE_KV_KIND_U64, track.id);
        all[1] = kv(KEY_BEGIN, K::WAFFLE_KV_KIND_U64, begin);
        all[2] = kv(KEY_END, K::WAFFLE_KV_KIND_U64, end);
        let mut n = 3;
        if launched_by != 0 {
            // The first cause, so that it is the slice's launcher.
            all[n] = kv(c"", K::WAFFLE_KV_KIND_CAUSE, launched_by);
            n += 1;
        }
        all[n..n + user.len()].copy_from_slice(user);
        n += user.len();
        debug_assert_eq!([KEY_ID, KEY_BEGIN, KEY_END].map(|k| k.to_str().unwrap_or_default()), names::SLICE);
        // SAFETY: `name` and the user's strings as the caller promised; ours are static.
        unsafe { event(Site::Named(name, name_len), all.as_ptr(), n) }
    })
}

/// Makes `*track` the null track. A track holds no resources (it is its id), so this only
/// stops later calls with it from recording; NULL is ignored.
///
/// # Safety
/// `track` is NULL or points to a writable `waffle_track_t`.
#[no_mangle]
pub unsafe extern "C" fn waffle_track_free(track: *mut waffle_track_t) {
    guard(|| {
        if !track.is_null() && track.is_aligned() {
            // SAFETY: non-null, aligned and writable (the caller's promise).
            unsafe { *track = waffle_track_t::default() };
        }
    })
}
