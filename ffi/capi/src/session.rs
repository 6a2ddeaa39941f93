//! Starting and stopping the process's recording session from C.
//!
//! One session records at a time, into one file. It is held here until `waffle_stop`; if the
//! program exits without calling it, the runtime's exit handler closes the file as `waffle_stop`
//! would (see `waffle_std`'s crash handling).
//!
//! A program run with `WAFFLE_OUTPUT` set records from its start without calling anything here
//! (`waffle_std::autostart`). `waffle_start` and `waffle_start_with` then replace that session
//! (its file is kept if it holds records) and succeed; `waffle_stop` stops either.

use crate::{
    boundary::guard,
    cstr,
    status::{fail, waffle_status_t, waffle_status_t::*},
    types::{waffle_config_t, waffle_label_t, WAFFLE_MAX_LABELS},
    WAFFLE_ABI_VERSION,
};
use std::{
    ffi::{c_char, OsStr},
    os::unix::ffi::OsStrExt,
    path::Path,
    sync::Mutex,
};

static SESSION: Mutex<Option<waffle_std::Session>> = Mutex::new(None);

fn start(config: waffle_std::Config) -> waffle_status_t {
    let mut slot = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return fail(WAFFLE_ERR_ALREADY_STARTED);
    }
    match config.start() {
        Ok(session) => {
            *slot = Some(session);
            WAFFLE_OK
        }
        Err(waffle_std::Error::AlreadyStarted(_)) => fail(WAFFLE_ERR_ALREADY_STARTED),
        Err(_) => fail(WAFFLE_ERR_IO),
    }
}

/// The path at `p`, as bytes (file names need not be UTF-8).
///
/// # Safety
/// `p` is NULL or readable up to its NUL (at most 4 096 bytes are read).
unsafe fn path<'a>(p: *const c_char) -> Result<&'a Path, waffle_status_t> {
    // SAFETY: forwarded from the caller.
    match unsafe { cstr::bytes(p, cstr::MAX_TEXT) } {
        None => Err(WAFFLE_ERR_NULL),
        Some([]) => Err(WAFFLE_ERR_INVALID_ARGUMENT),
        Some(b) => Ok(Path::new(OsStr::from_bytes(b))),
    }
}

/// Starts recording to the file `path` with default settings: the `rank` label, trace id and
/// parent context come from the environment (see `waffle_config_t`). Spans and events record
/// from now on, on every thread, until `waffle_stop`. A session that `WAFFLE_OUTPUT` started is
/// stopped first (its file kept if it holds records, removed if not).
///
/// `waffle.h` wraps this function in a macro of the same name that first checks that the
/// header and the library agree on `WAFFLE_ABI_VERSION` (`WAFFLE_ERR_ABI_MISMATCH` if not).
///
/// # Safety
/// `path` is NULL or readable up to its NUL.
#[no_mangle]
pub unsafe extern "C" fn waffle_start(path: *const c_char) -> waffle_status_t {
    guard(|| {
        // SAFETY: forwarded from the caller.
        match unsafe { self::path(path) } {
            Ok(p) => start(waffle_std::Config::new(p)),
            Err(e) => fail(e),
        }
    })
}

/// Starts recording as `config` says (initialise it with `WAFFLE_CONFIG_INIT`). Fails with
/// `WAFFLE_ERR_ABI_MISMATCH` if `config->abi_version` is not this library's.
///
/// # Safety
/// `config` is NULL or readable, and its pointers are NULL or valid as `waffle_config_t`
/// documents.
#[no_mangle]
pub unsafe extern "C" fn waffle_start_with(config: *const waffle_config_t) -> waffle_status_t {
    guard(|| {
        // SAFETY: forwarded from the caller.
        match unsafe { config_from(config) } {
            Ok(c) => start(c),
            Err(e) => fail(e),
        }
    })
}

/// # Safety
/// As `waffle_start_with`.
unsafe fn config_from(config: *const waffle_config_t) -> Result<waffle_std::Config, waffle_status_t> {
    if config.is_null() {
        return Err(WAFFLE_ERR_NULL);
    }
    if !config.is_aligned() {
        return Err(WAFFLE_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, aligned and readable (the caller's promise); plain data.
    let cfg = unsafe { config.read() };
    if cfg.abi_version != WAFFLE_ABI_VERSION {
        return Err(WAFFLE_ERR_ABI_MISMATCH);
    }
    // SAFETY: forwarded from the caller.
    let mut c = waffle_std::Config::new(unsafe { path(cfg.path) }?);
    // SAFETY: forwarded from the caller.
    if let Some(name) = unsafe { cstr::text(cfg.process_name) } {
        c = c.process_name(name);
    }
    if cfg.label_count > 0 {
        if cfg.labels.is_null() {
            return Err(WAFFLE_ERR_NULL);
        }
        if cfg.label_count > WAFFLE_MAX_LABELS || !cfg.labels.is_aligned() {
            return Err(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: non-null, aligned, `label_count` (bounded) labels readable: the caller's
        // promise.
        let labels: &[waffle_label_t] = unsafe { std::slice::from_raw_parts(cfg.labels, cfg.label_count) };
        for l in labels {
            // SAFETY: forwarded from the caller.
            let (k, v) = unsafe { (cstr::text(l.key), cstr::text(l.value)) };
            c = c.label(k.ok_or(WAFFLE_ERR_NULL)?, v.ok_or(WAFFLE_ERR_NULL)?);
        }
    }
    if cfg.rank >= 0 {
        c = c.label("rank", cfg.rank.to_string());
    }
    let trace_id = u128::from(cfg.trace_id_hi) << 64 | u128::from(cfg.trace_id_lo);
    if trace_id != 0 {
        c = c.trace_id(waffle::TraceId::from_u128(trace_id));
    }
    if !cfg.parent.is_null() {
        if !cfg.parent.is_aligned() {
            return Err(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: non-null, aligned and readable (the caller's promise); plain data.
        let parent = unsafe { cfg.parent.read() }.to_context();
        if parent.trace_id().is_null() {
            return Err(WAFFLE_ERR_INVALID_ARGUMENT);
        }
        c = c.parent(parent);
    }
    Ok(c)
}

/// Stops recording: every thread's records so far are written, then the clock and end frames,
/// and the file is closed. Threads still running should call `waffle_flush` first to keep what
/// they staged since their last push. This also stops a session that `WAFFLE_OUTPUT` started.
/// `WAFFLE_ERR_NOT_STARTED` if nothing records.
#[no_mangle]
pub extern "C" fn waffle_stop() -> waffle_status_t {
    guard(|| {
        let session = SESSION.lock().unwrap_or_else(|e| e.into_inner()).take();
        match session.or_else(waffle_std::autostart::take).map(waffle_std::Session::stop) {
            None => fail(WAFFLE_ERR_NOT_STARTED),
            Some(Ok(_)) => WAFFLE_OK,
            Some(Err(_)) => fail(WAFFLE_ERR_IO),
        }
    })
}

/// Pushes this thread's staged records to the collector now (a thread about to block for long,
/// or before `waffle_stop` from another thread).
#[no_mangle]
pub extern "C" fn waffle_flush() {
    guard(waffle::flush)
}

/// Pauses (`false`) or resumes (`true`) recording in the current session, whichever copy of
/// waffle in the process runs it; spans already open still record their end.
#[no_mangle]
pub extern "C" fn waffle_set_enabled(on: bool) {
    guard(|| waffle_std::set_enabled(on))
}

/// Whether spans and events record now.
#[no_mangle]
pub extern "C" fn waffle_is_enabled() -> bool {
    guard(waffle::is_enabled)
}
