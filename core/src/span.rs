//! The guard returned by `span!`, causes, and the record calls generated code makes.

use crate::{
    callsite::Callsite,
    encode::Writer,
    ids::{EventId, SpanId},
    local::with_local,
    runtime,
    wire::tag,
};
use core::marker::PhantomData;

/// An open span; the span ends when the guard is dropped.
///
/// The guard stays on the thread that opened it (it is neither `Send` nor `Sync`), so that a
/// thread's spans nest. To keep a span across `.await`s, hand it to
/// [`Instrument::instrument`](crate::Instrument::instrument).
#[must_use = "the span ends when this guard is dropped; bind it with `let _span = ...`"]
pub struct Span {
    id: SpanId,
    /// What was current before this span, restored when it ends.
    prev: u64,
    _not_send: PhantomData<*const ()>,
}

impl Span {
    /// A guard that records nothing: what `span!` gives while recording is off.
    #[inline(always)]
    pub const fn disabled() -> Span {
        Span { id: SpanId::NULL, prev: 0, _not_send: PhantomData }
    }

    /// This span's id (null if the span was not recorded), for `caused_by` and contexts.
    #[inline(always)]
    pub fn id(&self) -> SpanId {
        self.id
    }

    /// Takes the span off this thread's stack so that it can end on any thread; returns its
    /// id (null if it was not recorded). Used by [`Instrument`](crate::Instrument).
    pub(crate) fn detach(self) -> SpanId {
        let (id, prev) = (self.id, self.prev);
        core::mem::forget(self);
        if !id.is_null() {
            let state = runtime::state();
            with_local(|l| l.detach(state, id.to_u64(), prev));
        }
        id
    }
}

impl Drop for Span {
    /// Only the null test is inlined: a disabled span's drop is one compare, and the end path
    /// stays out of line (inlining it made every drop call a large drop glue function).
    #[inline(always)]
    fn drop(&mut self) {
        if !self.id.is_null() {
            span_end(self.prev);
        }
    }
}

#[inline(never)]
fn span_end(prev: u64) {
    let state = runtime::state();
    with_local(|l| l.end(state, prev));
}

impl core::fmt::Debug for Span {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Span").field("id", &self.id).finish()
    }
}

/// Something that can be named in `caused_by`: span and event ids, and collections of them.
/// Null ids are skipped.
pub trait Causes {
    /// Calls `f` with each id (null ones included; the recorder skips them).
    fn each_cause(&self, f: &mut dyn FnMut(u64));
}

impl Causes for SpanId {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        f(self.to_u64())
    }
}

impl Causes for EventId {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        f(self.to_u64())
    }
}

impl Causes for Span {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        f(self.id.to_u64())
    }
}

impl Causes for crate::Context {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        f(self.span_id().to_u64())
    }
}

impl<T: Causes> Causes for Option<T> {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        if let Some(c) = self {
            c.each_cause(f)
        }
    }
}

impl<T: Causes> Causes for [T] {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        self.iter().for_each(|c| c.each_cause(f))
    }
}

impl<T: Causes, const N: usize> Causes for [T; N] {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        self.iter().for_each(|c| c.each_cause(f))
    }
}

#[cfg(feature = "std")]
impl<T: Causes> Causes for std::vec::Vec<T> {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        self.iter().for_each(|c| c.each_cause(f))
    }
}

impl<T: Causes + ?Sized> Causes for &T {
    fn each_cause(&self, f: &mut dyn FnMut(u64)) {
        (**self).each_cause(f)
    }
}

/// Records a span begin for `callsite` (generated code calls this after checking `state`).
#[inline(always)]
pub fn span_begin<F: Fn(&mut Writer<'_>)>(state: u32, callsite: &'static Callsite, fields: &F) -> Span {
    let (id, prev) = with_local(|l| l.begin(state, callsite.id(), fields)).unwrap_or((0, 0));
    Span { id: SpanId::from_u64(id), prev, _not_send: PhantomData }
}

/// Records an event for `callsite` (generated code calls this after checking `state`).
#[inline(always)]
pub fn event<F: Fn(&mut Writer<'_>)>(state: u32, callsite: &'static Callsite, fields: &F) -> EventId {
    let id = with_local(|l| l.record(state, tag::EVENT, callsite.id(), fields)).unwrap_or(0);
    EventId::from_u64(id)
}

/// Before a record that names `causes`: if it will be a root decided by sampling, its causes
/// decide it (kept if one of them was kept). Costs one load while sampling is off.
#[inline(always)]
pub fn follow(state: u32, causes: &dyn Causes) {
    if crate::local::sample::on() {
        follow_slow(state, causes);
    }
}

#[cold]
#[inline(never)]
fn follow_slow(state: u32, causes: &dyn Causes) {
    let (mut any, mut kept) = (false, false);
    causes.each_cause(&mut |id| {
        any |= id != 0;
        kept |= id != 0 && !crate::ids::is_sampled_out(id);
    });
    with_local(|l| l.follow_causes(state, any, kept));
}

/// Records that the span or event just begun on this thread was caused by `causes`.
#[inline]
pub fn link(state: u32, causes: &dyn Causes) {
    with_local(|l| causes.each_cause(&mut |id| l.link(state, id)));
}

/// Records the correlation value of the span or event just begun on this thread (its key is
/// its callsite's; a key ending in `>` or `<` makes it a cause or an effect of its group).
#[inline]
pub fn correlate(state: u32, value: u64) {
    with_local(|l| l.correlate(state, value));
}

/// Opens a span for a callsite registered at run time (by a foreign-language binding), whose
/// id the caller got from its runtime. `fields` writes the values in the callsite's schema.
/// Returns a disabled guard while recording is off.
#[inline]
pub fn span_begin_raw<F: Fn(&mut Writer<'_>)>(callsite_id: u32, fields: &F) -> Span {
    let state = runtime::state();
    if state == 0 {
        return Span::disabled();
    }
    let (id, prev) = with_local(|l| l.begin(state, callsite_id, fields)).unwrap_or((0, 0));
    Span { id: SpanId::from_u64(id), prev, _not_send: PhantomData }
}

/// Records an event for a callsite registered at run time; see [`span_begin_raw`].
#[inline]
pub fn event_raw<F: Fn(&mut Writer<'_>)>(callsite_id: u32, fields: &F) -> EventId {
    let state = runtime::state();
    if state == 0 {
        return EventId::NULL;
    }
    EventId::from_u64(with_local(|l| l.record(state, tag::EVENT, callsite_id, fields)).unwrap_or(0))
}

/// Records that the span or event just recorded on this thread was caused by `causes`, and,
/// if given, its correlation value: for foreign-language bindings (the macros do this inline).
pub fn link_raw(causes: &dyn Causes, correlation: Option<u64>) {
    let state = runtime::state();
    if state == 0 {
        return;
    }
    link(state, causes);
    if let Some(v) = correlation {
        correlate(state, v);
    }
}
