//! The `tracing` spans entered on this thread, and what waffle must restore when each exits.
//!
//! Entering a recorded span writes an `ENTER` of its waffle id, which makes it the parent of
//! what the thread records next; the id that was current before comes back from the core and
//! is kept here, keyed by the `tracing` span id, until the exit. `tracing` lets a span be
//! entered twice on one thread and exits be out of order (a guard kept longer than a later
//! one); waffle's `ENTER`/`EXIT` nest strictly, so an exit below the top exits the entries
//! above it too and enters them again, keeping the thread's stack true.

use std::cell::RefCell;
use waffle::{local::with_local, runtime};

#[derive(Clone, Copy)]
struct Entry {
    /// The `tracing` span id.
    span: u64,
    /// Its waffle id.
    id: u64,
    /// The waffle id current before the enter, restored by the exit.
    prev: u64,
    /// The session the enter was recorded in.
    epoch: u32,
}

thread_local! {
    static ENTERED: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// The state to record an exit or an end under for something recorded in session `epoch`:
/// the session's own, also while recording is paused, never another session's.
pub(crate) fn state_for(epoch: u32) -> Option<u32> {
    let state = runtime::state();
    let state = if state == 0 { runtime::last_epoch() } else { state };
    (state != 0 && state == epoch).then_some(state)
}

/// Records that `tracing` span `span`, recorded as waffle span `id` in session `state`, is
/// entered on this thread.
pub(crate) fn enter(span: u64, id: u64, state: u32) {
    let Some(prev) = with_local(|l| l.enter(state, id)).flatten() else { return };
    let _ = ENTERED.try_with(|e| {
        if let Ok(mut e) = e.try_borrow_mut() {
            // Entries of an earlier session whose spans were never exited (the thread's
            // stream was started afresh since) are at the bottom: they go.
            if e.first().is_some_and(|x| x.epoch != state) {
                e.retain(|x| x.epoch == state);
            }
            e.push(Entry { span, id, prev, epoch: state });
        }
    });
}

/// Records that `tracing` span `span` is exited on this thread (nothing if its enter was
/// not recorded).
pub(crate) fn exit(span: u64) {
    let _ = ENTERED.try_with(|e| {
        let Ok(mut stack) = e.try_borrow_mut() else { return };
        if stack.last().is_some_and(|x| x.span == span) {
            if let Some(x) = stack.pop() {
                leave(&x);
            }
            return;
        }
        let Some(at) = stack.iter().rposition(|x| x.span == span) else { return };
        // Entries above `at` leave first (innermost first), then `at`, then they come back.
        let above: Vec<Entry> = stack.drain(at + 1..).collect();
        for x in above.iter().rev() {
            leave(x);
        }
        if let Some(x) = stack.pop() {
            leave(&x);
        }
        for x in above {
            if let Some(state) = state_for(x.epoch) {
                if let Some(prev) = with_local(|l| l.enter(state, x.id)).flatten() {
                    stack.push(Entry { prev, ..x });
                }
            }
        }
    });
}

/// Exits `x` (nothing if the session it was entered in is over: a new session's stream
/// starts with an empty stack).
fn leave(x: &Entry) {
    if let Some(state) = state_for(x.epoch) {
        with_local(|l| l.exit(state, x.prev));
    }
}
