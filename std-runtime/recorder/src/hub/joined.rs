//! This copy recording into a session another copy runs: the forwarder installed in the
//! core, which hands each record to the owner's [`SessionApi`], and the translation of this
//! copy's callsite ids into the owner's, each registered with the owner on its first use.

use super::abi::{FieldDesc, Module, SessionApi, SiteDesc, Text};
use std::{
    cell::RefCell,
    sync::{
        atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering},
        Arc,
    },
};
use waffle::{
    encode::Writer,
    runtime::{self, Forward},
};

/// The copy whose session this one records into (null: none).
static OWNER: AtomicPtr<Module> = AtomicPtr::new(std::ptr::null_mut());
/// This copy's epoch in that session.
static EPOCH: AtomicU32 = AtomicU32::new(0);
/// Counts joins, so that ids translated for an earlier session are not used in a later one.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// The owner's session calls this when it starts (`owner`) or ends (null).
pub(super) extern "C" fn joined(owner: *const Module) {
    // SAFETY: a non-null `owner` is a `&'static Module` of a pinned image (the hub's promise).
    match unsafe { owner.as_ref() } {
        Some(m) => join(m),
        None => leave(),
    }
}

/// The owner paused (`false`) or resumed (`true`) recording.
pub(super) extern "C" fn enabled(on: bool) {
    if !OWNER.load(Ordering::Acquire).is_null() {
        runtime::set_enabled(on);
    }
}

/// Starts recording into `owner`'s session (nothing if this copy already does).
pub(super) fn join(owner: &'static Module) {
    let p = (owner as *const Module).cast_mut();
    if OWNER.load(Ordering::Acquire) == p && runtime::last_epoch() == EPOCH.load(Ordering::Acquire) {
        return;
    }
    let mut info = super::serve::no_session();
    if !(owner.api.describe)(&mut info) {
        return;
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    OWNER.store(p, Ordering::Release);
    runtime::set_trace_id(waffle::TraceId::from_u128(
        u128::from(info.trace_id_hi) << 64 | u128::from(info.trace_id_lo),
    ));
    runtime::set_tensors(info.tensors);
    let rate = if info.sampling { f64::from(info.sample_threshold) / 4_294_967_296.0 } else { 1.0 };
    waffle::local::sample::set_sample_rate(rate, 0);
    EPOCH.store(runtime::join(&FORWARD), Ordering::Release);
    if !info.enabled {
        runtime::set_enabled(false);
    }
}

/// Stops recording into the owner's session.
fn leave() {
    OWNER.store(std::ptr::null_mut(), Ordering::Release);
    runtime::uninstall(EPOCH.load(Ordering::Acquire));
}

/// Whether this copy records into another copy's session now.
pub(crate) fn is_joined() -> bool {
    !OWNER.load(Ordering::Acquire).is_null() && runtime::forward().is_some()
}

fn api() -> Option<&'static SessionApi> {
    let p = OWNER.load(Ordering::Acquire);
    // SAFETY: the only non-null values stored are `&'static Module`s (`join`).
    unsafe { p.as_ref() }.map(|m| &m.api)
}

static FORWARD: Forward = Forward {
    record,
    end: |prev, at_last| with_api(|a| (a.end)(prev, at_last)),
    link: |target| with_api(|a| (a.link)(target)),
    correlate: |value| with_api(|a| (a.correlate)(value)),
    enter: |span| {
        let mut prev = 0;
        api().and_then(|a| (a.enter)(span, &mut prev).then_some(prev))
    },
    exit: |prev| with_api(|a| (a.exit)(prev)),
    detach: |span, prev| with_api(|a| (a.detach)(span, prev)),
    async_end: |span| with_api(|a| (a.async_end)(span)),
    follow: |any, kept| with_api(|a| (a.follow)(any, kept)),
    current: || api().map_or(0, |a| (a.current)()),
    latest: || api().map_or(0, |a| (a.latest)()),
    flush: || with_api(|a| (a.flush)()),
};

fn with_api(f: impl FnOnce(&SessionApi)) {
    if let Some(a) = api() {
        f(a);
    }
}

/// The largest record handed over: the owner's staging area could not take a larger one.
const MAX_RECORD: usize = 1 << 20;

std::thread_local! {
    /// Where a record's field values are encoded before they cross.
    static FIELDS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn record(record_tag: u8, callsite: u32, fields: &dyn Fn(&mut Writer<'_>)) -> (u64, u64) {
    let Some(api) = api() else { return (0, 0) };
    let Some(id) = owner_id(callsite, api) else { return (0, 0) };
    FIELDS
        .try_with(|buf| {
            let Ok(mut buf) = buf.try_borrow_mut() else { return (0, 0) };
            if buf.is_empty() {
                buf.resize(256, 0);
            }
            let len = loop {
                let mut w = Writer::new(&mut buf, 0);
                fields(&mut w);
                if !w.overflowed() {
                    break w.pos();
                }
                if buf.len() >= MAX_RECORD {
                    return (0, 0);
                }
                let grown = buf.len() * 2;
                buf.resize(grown, 0);
            };
            let mut prev = 0;
            let id = (api.record)(record_tag, id, buf.as_ptr(), len, &mut prev);
            (id, prev)
        })
        .unwrap_or((0, 0))
}

/// Callsite ids translated so far: this copy's id indexes pages of entries
/// `generation << 32 | (owner's id + 1)`, made on first use and never freed.
const PAGE: usize = 1024;
type Page = [AtomicU64; PAGE];
static PAGES: [AtomicPtr<Page>; 2 * crate::dynamic::MAX_DYNAMIC / PAGE] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 2 * crate::dynamic::MAX_DYNAMIC / PAGE];

fn entry(id: u32) -> Option<&'static AtomicU64> {
    let i = id as usize;
    let slot = PAGES.get(i / PAGE)?;
    let mut page = slot.load(Ordering::Acquire);
    if page.is_null() {
        let fresh = Box::into_raw(Box::new([const { AtomicU64::new(0) }; PAGE]));
        page = match slot.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => fresh,
            Err(existing) => {
                // SAFETY: `fresh` came from `Box::into_raw` above and was never published.
                drop(unsafe { Box::from_raw(fresh) });
                existing
            }
        };
    }
    // SAFETY: published pages come from `Box::into_raw` and are never freed.
    Some(&unsafe { &*page }[i % PAGE])
}

/// The owner's id for this copy's callsite `id`, registering it with the owner the first time.
fn owner_id(id: u32, api: &SessionApi) -> Option<u32> {
    let generation = GENERATION.load(Ordering::Acquire);
    let entry = entry(id);
    if let Some(e) = entry {
        let v = e.load(Ordering::Acquire);
        if (v >> 32) as u32 == generation && v as u32 != 0 {
            return Some(v as u32 - 1);
        }
    }
    let theirs = describe(id, |desc| (api.register)(desc))?;
    if theirs == u32::MAX {
        return None;
    }
    if let Some(e) = entry {
        e.store(u64::from(generation) << 32 | u64::from(theirs + 1), Ordering::Release);
    }
    Some(theirs)
}

/// Calls `f` with the description of this copy's callsite `id` (linked or run-time).
fn describe(id: u32, f: impl FnOnce(&SiteDesc) -> u32) -> Option<u32> {
    let linked = waffle::callsite::all();
    let text = |s: &str| Text { ptr: s.as_ptr(), len: s.len() };
    if let Some(cs) = linked.get(id as usize) {
        let fields: Vec<FieldDesc> =
            cs.fields.iter().map(|fd| FieldDesc { name: text(fd.name), ty: fd.ty as u8 }).collect();
        return Some(f(&SiteDesc {
            kind: cs.kind as u8,
            line: cs.line,
            name: text(cs.name),
            module: text(cs.module),
            file: text(cs.file),
            correlate: text(cs.correlate),
            fields: fields.as_ptr(),
            field_count: fields.len(),
        }));
    }
    let site: Arc<crate::dynamic::Site> = crate::dynamic::site(id)?;
    let fields: Vec<FieldDesc> =
        site.fields.iter().map(|f| FieldDesc { name: text(&f.name), ty: f.ty as u8 }).collect();
    Some(f(&SiteDesc {
        kind: site.kind as u8,
        line: site.line,
        name: text(&site.name),
        module: text(&site.module),
        file: text(&site.file),
        correlate: text(&site.correlate),
        fields: fields.as_ptr(),
        field_count: fields.len(),
    }))
}
