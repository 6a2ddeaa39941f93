//! The cold paths of a stream that has no slot: while this copy of waffle records into a
//! session another copy runs ([`runtime::join`]), each record is handed to that copy through the
//! installed [`Forward`](runtime::Forward). A stream only gets here after its `ready` check
//! failed, so a copy that records itself pays nothing for this.

use crate::{encode::Writer, runtime};

#[cold]
#[inline(never)]
pub(super) fn record(record_tag: u8, callsite: u32, fields: &dyn Fn(&mut Writer<'_>)) -> (u64, u64) {
    runtime::forward().map_or((0, 0), |f| (f.record)(record_tag, callsite, fields))
}

#[cold]
#[inline(never)]
pub(super) fn end(prev: u64, at_last: bool) {
    if let Some(f) = runtime::forward() {
        (f.end)(prev, at_last);
    }
}

#[cold]
#[inline(never)]
pub(super) fn link(target: u64) {
    if let Some(f) = runtime::forward() {
        (f.link)(target);
    }
}

#[cold]
#[inline(never)]
pub(super) fn correlate(value: u64) {
    if let Some(f) = runtime::forward() {
        (f.correlate)(value);
    }
}

#[cold]
#[inline(never)]
pub(super) fn enter(span: u64) -> Option<u64> {
    runtime::forward().and_then(|f| (f.enter)(span))
}

#[cold]
#[inline(never)]
pub(super) fn exit(prev: u64) {
    if let Some(f) = runtime::forward() {
        (f.exit)(prev);
    }
}

#[cold]
#[inline(never)]
pub(super) fn detach(span: u64, prev: u64) {
    if let Some(f) = runtime::forward() {
        (f.detach)(span, prev);
    }
}

#[cold]
#[inline(never)]
pub(super) fn async_end(span: u64) {
    if let Some(f) = runtime::forward() {
        (f.async_end)(span);
    }
}

#[cold]
#[inline(never)]
pub(super) fn follow(any: bool, kept: bool) {
    if let Some(f) = runtime::forward() {
        (f.follow)(any, kept);
    }
}

#[cold]
#[inline(never)]
pub(super) fn current() -> Option<u64> {
    runtime::forward().map(|f| (f.current)())
}

#[cold]
#[inline(never)]
pub(super) fn latest() -> Option<u64> {
    runtime::forward().map(|f| (f.latest)())
}

#[cold]
#[inline(never)]
pub(super) fn flush() {
    if let Some(f) = runtime::forward() {
        (f.flush)();
    }
}
