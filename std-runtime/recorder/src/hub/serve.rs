//! This copy's session, served to the copies that joined it: the functions of its
//! [`SessionApi`], each acting on this copy's core and recorder as its own API would.

use super::abi::{FieldDesc, SessionApi, SessionInfo, SiteDesc, StopResult};
use waffle::{
    callsite::Kind,
    encode::Writer,
    local::with_local,
    runtime,
    wire::{tag, FieldType},
};

pub(super) const API: SessionApi = SessionApi {
    register,
    record,
    end,
    link,
    correlate,
    enter,
    exit,
    detach,
    async_end,
    follow,
    current,
    latest,
    flush,
    describe,
    path,
    stop,
    take,
    set_enabled,
};

/// A `SessionInfo` that describes nothing, for `describe` to fill.
pub(super) fn no_session() -> SessionInfo {
    SessionInfo {
        epoch: 0,
        automatic: false,
        enabled: false,
        tensors: false,
        sample_threshold: u32::MAX,
        sampling: false,
        trace_id_lo: 0,
        trace_id_hi: 0,
    }
}

extern "C" fn register(site: *const SiteDesc) -> u32 {
    // SAFETY: a non-null `site` is a description valid for the call (the caller's promise).
    match unsafe { site.as_ref() } {
        Some(desc) => register_described(desc),
        None => u32::MAX,
    }
}

/// The callsite a [`SiteDesc`] from another copy describes, registered here; `u32::MAX` if it
/// cannot be (an unknown kind or field type, or too many callsites).
fn register_described(desc: &SiteDesc) -> u32 {
    let text = super::text;
    let Some(kind) = Kind::from_code(desc.kind) else { return u32::MAX };
    let fields: &[FieldDesc] = if desc.fields.is_null() || desc.field_count == 0 {
        &[]
    } else {
        // SAFETY: `fields` points to `field_count` descriptions for the call (the caller's
        // promise, kept by `describe`).
        unsafe { std::slice::from_raw_parts(desc.fields, desc.field_count) }
    };
    let mut schema = Vec::with_capacity(fields.len());
    for fd in fields {
        let Some(ty) = FieldType::from_code(fd.ty) else { return u32::MAX };
        schema.push((text(fd.name), ty));
    }
    let schema: Vec<(&str, FieldType)> = schema.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    crate::dynamic::register(
        kind,
        &text(desc.name),
        &text(desc.module),
        &text(desc.file),
        desc.line,
        &schema,
        &text(desc.correlate),
    )
    .unwrap_or(u32::MAX)
}

extern "C" fn record(record_tag: u8, callsite: u32, fields: *const u8, len: usize, prev: *mut u64) -> u64 {
    let state = runtime::state();
    if state == 0 {
        return 0;
    }
    let bytes: &[u8] = if fields.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: `fields` is `len` readable bytes for the call (the caller's promise).
        unsafe { std::slice::from_raw_parts(fields, len) }
    };
    let write = |w: &mut Writer<'_>| w.bytes(bytes);
    let (id, before) = with_local(|l| match record_tag {
        tag::SPAN_BEGIN => l.begin(state, callsite, &write),
        tag::EVENT => (l.record(state, tag::EVENT, callsite, &write), 0),
        _ => (0, 0),
    })
    .unwrap_or((0, 0));
    if !prev.is_null() {
        // SAFETY: a non-null `prev` is writable for a `u64` (the caller's promise).
        unsafe { prev.write(before) };
    }
    id
}

extern "C" fn end(prev: u64, at_last: bool) {
    let state = runtime::state();
    with_local(|l| if at_last { l.end_at_last(state, prev) } else { l.end(state, prev) });
}

extern "C" fn link(target: u64) {
    let state = runtime::state();
    with_local(|l| l.link(state, target));
}

extern "C" fn correlate(value: u64) {
    let state = runtime::state();
    with_local(|l| l.correlate(state, value));
}

extern "C" fn enter(span: u64, prev: *mut u64) -> bool {
    let state = runtime::state();
    if state == 0 {
        return false;
    }
    match with_local(|l| l.enter(state, span)).flatten() {
        Some(before) => {
            if !prev.is_null() {
                // SAFETY: a non-null `prev` is writable for a `u64` (the caller's promise).
                unsafe { prev.write(before) };
            }
            true
        }
        None => false,
    }
}

extern "C" fn exit(prev: u64) {
    let state = runtime::state();
    with_local(|l| l.exit(state, prev));
}

extern "C" fn detach(span: u64, prev: u64) {
    let state = runtime::state();
    with_local(|l| l.detach(state, span, prev));
}

extern "C" fn async_end(span: u64) {
    let state = runtime::state();
    with_local(|l| l.async_end(state, span));
}

extern "C" fn follow(any: bool, kept: bool) {
    let state = runtime::state();
    with_local(|l| l.follow_causes(state, any, kept));
}

extern "C" fn current() -> u64 {
    with_local(|l| l.current()).unwrap_or(0)
}

extern "C" fn latest() -> u64 {
    with_local(|l| l.latest()).unwrap_or(0)
}

extern "C" fn flush() {
    waffle::flush();
}

extern "C" fn describe(info: *mut SessionInfo) -> bool {
    let Some((epoch, automatic)) = crate::session::own_session() else { return false };
    let trace_id = runtime::trace_id().to_u128();
    let threshold = waffle::local::sample::sample_threshold();
    let described = SessionInfo {
        epoch,
        automatic,
        enabled: runtime::is_enabled(),
        tensors: runtime::tensors(),
        sample_threshold: threshold.unwrap_or(u32::MAX),
        sampling: threshold.is_some(),
        trace_id_lo: trace_id as u64,
        trace_id_hi: (trace_id >> 64) as u64,
    };
    if info.is_null() {
        return true;
    }
    // SAFETY: a non-null `info` is writable for a `SessionInfo` (the caller's promise).
    unsafe { info.write(described) };
    true
}

extern "C" fn path(buf: *mut u8, cap: usize) -> usize {
    let Some(p) = crate::session::own_path() else { return 0 };
    let bytes = p.as_os_str().as_encoded_bytes();
    if !buf.is_null() {
        let n = bytes.len().min(cap);
        // SAFETY: a non-null `buf` is writable for `cap` bytes (the caller's promise), and
        // `n <= cap`; the source is this copy's own, so the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, n) };
    }
    bytes.len()
}

extern "C" fn stop(epoch: u32, replacing: bool) -> StopResult {
    if replacing {
        let status = if crate::session::replace_own_automatic() { 0 } else { 1 };
        return StopResult { status, ..StopResult::default() };
    }
    let wait = crate::session::Wait::Full;
    match crate::session::stop_active((epoch != 0).then_some(epoch), wait) {
        None => StopResult { status: 1, ..StopResult::default() },
        Some(Err(e)) => {
            super::say(&format!("stopping the session: {e}"));
            StopResult { status: 2, ..StopResult::default() }
        }
        Some(Ok(s)) => StopResult {
            status: 0,
            data_bytes: s.data_bytes,
            data_frames: s.data_frames,
            dropped: s.dropped,
            streams: s.streams,
            slots: s.slots,
            refused_threads: s.refused_threads,
            tail_frames: s.tail_frames,
        },
    }
}

extern "C" fn take() -> bool {
    crate::session::take_own_automatic()
}

extern "C" fn set_enabled(on: bool) {
    set_enabled_here(on);
}

/// Pauses or resumes this copy's session and tells the copies that joined it.
pub(super) fn set_enabled_here(on: bool) {
    runtime::set_enabled(on);
    super::tell_enabled(on);
}
