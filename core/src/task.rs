//! Spans that follow a future across `.await`s and threads.
//!
//! [`Instrument::instrument`] takes a span off the creating thread's stack (a `DETACH` record)
//! and wraps the future: every poll enters the span on whatever thread polls (`ENTER`/`EXIT`,
//! so spans made during the poll are its children), and completion or cancellation ends it
//! (`ASYNC_END`, by id, from that thread).

use crate::{local::with_local, runtime, span::Span, SpanId};
use core::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

/// A future running inside a span; made by [`Instrument::instrument`].
#[must_use = "futures do nothing unless polled"]
pub struct Instrumented<F> {
    inner: F,
    span: SpanId,
    done: bool,
}

impl<F> Instrumented<F> {
    /// The span's id.
    pub fn span_id(&self) -> SpanId {
        self.span
    }

    fn end(&mut self) {
        if !self.done && !self.span.is_null() {
            self.done = true;
            let state = runtime::state();
            let state = if state == 0 { runtime::last_epoch() } else { state };
            with_local(|l| l.async_end(state, self.span.to_u64()));
        }
    }
}

/// Runs futures inside spans: `task.instrument(waffle::span!("fetch", shard))`.
pub trait Instrument: Sized {
    /// Wraps `self` so that it runs inside `span` until it completes or is dropped.
    fn instrument(self, span: Span) -> Instrumented<Self> {
        Instrumented { inner: self, span: span.detach(), done: false }
    }
}

impl<F: Future> Instrument for F {}

impl<F: Future> Future for Instrumented<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of `self`, and neither
        // `end` nor `Drop` moves it; the other fields are plain data that are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let state = runtime::state();
        let prev = if this.span.is_null() || state == 0 {
            None
        } else {
            with_local(|l| l.enter(state, this.span.to_u64())).flatten()
        };
        // SAFETY: see above; `this.inner` stays where it is for as long as `self` is pinned.
        let result = unsafe { Pin::new_unchecked(&mut this.inner) }.poll(cx);
        if let Some(prev) = prev {
            with_local(|l| l.exit(state, prev));
        }
        if result.is_ready() {
            this.end();
        }
        result
    }
}

impl<F> Drop for Instrumented<F> {
    fn drop(&mut self) {
        self.end();
    }
}
