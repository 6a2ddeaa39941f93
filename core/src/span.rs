//! The guard returned by `span!` and the record calls generated code makes.

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
/// thread's spans nest.
#[must_use = "the span ends when this guard is dropped; bind it with `let _span = ...`"]
pub struct Span {
    id: SpanId,
    _not_send: PhantomData<*const ()>,
}

impl Span {
    /// A guard that records nothing: what `span!` gives while recording is off.
    #[inline(always)]
    pub const fn disabled() -> Span {
        Span { id: SpanId::NULL, _not_send: PhantomData }
    }

    /// This span's id (null if the span was not recorded), for `caused_by` and contexts.
    #[inline(always)]
    pub fn id(&self) -> SpanId {
        self.id
    }
}

impl Drop for Span {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.id.is_null() {
            let state = runtime::state();
            with_local(|l| l.end(state));
        }
    }
}

impl core::fmt::Debug for Span {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Span").field("id", &self.id).finish()
    }
}

/// Records a span begin for `callsite` (generated code calls this after checking `state`).
#[inline(always)]
pub fn span_begin<F: Fn(&mut Writer<'_>)>(state: u32, callsite: &'static Callsite, fields: &F) -> Span {
    let id = with_local(|l| l.record(state, tag::SPAN_BEGIN, callsite.id(), fields)).unwrap_or(0);
    Span { id: SpanId::from_u64(id), _not_send: PhantomData }
}

/// Records an event for `callsite` (generated code calls this after checking `state`).
#[inline(always)]
pub fn event<F: Fn(&mut Writer<'_>)>(state: u32, callsite: &'static Callsite, fields: &F) -> EventId {
    let id = with_local(|l| l.record(state, tag::EVENT, callsite.id(), fields)).unwrap_or(0);
    EventId::from_u64(id)
}
