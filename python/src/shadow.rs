//! Which span is the parent: the thread's stack, or the Python context?
//!
//! Rust spans nest by the thread's stack (what the decoder rebuilds from BEGIN/END records).
//! Python's truth is a `contextvars.ContextVar`: asyncio gives each task its own copy, so two
//! tasks interleaved on one thread each see their own current span. Code running underneath
//! Python (a Rust `span!` in an extension) only sees the thread's stack. So every Python record
//! first makes the two agree (`Shadow::sync`), and a Python span stays on the thread's stack
//! while it is current, where native code finds it.
//!
//! This module mirrors the Python-owned part of the thread's stack (the *shadow*: spans begun
//! and contexts entered from Python, innermost last). Before a record, with `want` the span the
//! Python context says is current:
//!
//! - if the thread's innermost entry is not the shadow's top, native code opened a span (or
//!   entered a context) and called back into Python: the record nests under it, as it would in
//!   Rust;
//! - if the shadow's top is `want`, the thread already agrees (the whole cost in synchronous
//!   code: a thread-local read and a compare);
//! - if `want` is deeper in the shadow, the entries above it belong to suspended tasks: they
//!   leave the stack (spans are `DETACH`ed, to end later by id with `ASYNC_END`, exactly like a
//!   Rust `Instrumented` future's span; entered contexts are `EXIT`ed);
//! - otherwise (a span of another thread or process, one detached earlier, or no span) the
//!   entered contexts at the top leave, and `want` is `ENTER`ed, as `Context::enter` does in
//!   Rust. No span at all (`want` 0) empties the shadow.
//!
//! The decoder gives every record the parent on top of its thread's stack at that point, so
//! these records make each task's spans and events children of its own current span, and a
//! detached span still ends where its task ended it.
//!
//! A span ending at the top of the stack is a plain END (contexts other tasks entered above it
//! leave first). One ending below other spans (its task ran ahead of another's) is detached and
//! ended by id, so the spans above it stay put. Nothing here allocates once the shadow's vector
//! has grown to the nesting depth.

use std::cell::RefCell;
use waffle::{local::with_local, runtime, wire::tag};

/// Shadow entries beyond this many are detached wholesale before another context is entered,
/// so that stale contexts cannot pile up without bound in a long-running event loop.
const MAX_DEPTH: usize = 256;

#[derive(Clone, Copy)]
enum Kind {
    Span,
    Entered,
}

#[derive(Clone, Copy)]
struct Entry {
    id: u64,
    /// The thread's current span before this entry: restored when it leaves.
    prev: u64,
    kind: Kind,
}

struct Shadow {
    epoch: u32,
    stack: Vec<Entry>,
}

thread_local! {
    static SHADOW: RefCell<Shadow> = const { RefCell::new(Shadow { epoch: 0, stack: Vec::new() }) };
}

/// The thread's innermost open span or entered context (0: none).
fn current() -> u64 {
    with_local(|l| l.current()).unwrap_or(0)
}

/// Runs `f` on this thread's shadow, emptied first if it belongs to an earlier session.
fn with_shadow<R>(state: u32, f: impl FnOnce(&mut Shadow) -> R) -> Option<R> {
    SHADOW
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            if s.epoch != state {
                s.stack.clear();
                s.epoch = state;
            }
            Some(f(&mut s))
        })
        .ok()
        .flatten()
}

/// The state a span's end or a context's exit is recorded under: the session's, also while
/// recording is paused (as for Rust spans), but never another session's.
fn end_state(epoch: u32) -> Option<u32> {
    let state = runtime::state();
    let state = if state == 0 { runtime::last_epoch() } else { state };
    (state != 0 && state == epoch).then_some(state)
}

impl Shadow {
    /// Takes entries above `keep` off the thread's stack, innermost first.
    fn pop_to(&mut self, state: u32, keep: usize) {
        while self.stack.len() > keep {
            let Some(e) = self.stack.pop() else { break };
            match e.kind {
                Kind::Span => with_local(|l| l.detach(state, e.id, e.prev)),
                Kind::Entered => with_local(|l| l.exit(state, e.prev)),
            };
        }
    }

    /// Exits entered contexts at the top of the stack, down to index `keep`.
    fn pop_entered_above(&mut self, state: u32, keep: usize) {
        while self.stack.len() > keep
            && matches!(self.stack.last(), Some(e) if matches!(e.kind, Kind::Entered))
        {
            self.pop_to(state, self.stack.len() - 1);
        }
    }

    /// Makes `want` the parent of the next record on this thread (see the module docs).
    fn sync(&mut self, state: u32, want: u64) {
        let top = self.stack.last().map_or(0, |e| e.id);
        if current() != top || top == want {
            return;
        }
        if let Some(k) = self.stack.iter().rposition(|e| e.id == want) {
            self.pop_to(state, k + 1);
            return;
        }
        if want == 0 || self.stack.len() >= MAX_DEPTH {
            self.pop_to(state, 0);
        }
        // Contexts entered for other tasks are not `want`'s ancestors: they go first, so that
        // the shadow holds at most one entered context above its spans.
        self.pop_entered_above(state, 0);
        if want != 0 {
            if let Some(prev) = with_local(|l| l.enter(state, want)).flatten() {
                self.stack.push(Entry { id: want, prev, kind: Kind::Entered });
            }
        }
    }
}

/// The span the next record on this thread nests under, given the Python context's `want`:
/// what [`sync`] would make current, without recording anything. For `extract_context`.
pub(crate) fn effective_parent(want: u64) -> u64 {
    let cur = current();
    let state = runtime::state();
    let top = with_shadow(state, |s| s.stack.last().map_or(0, |e| e.id)).unwrap_or(0);
    if cur != top {
        cur
    } else {
        want
    }
}

/// Begins a span under `want` (the Python context's current span); returns its id, 0 if
/// nothing was recorded. `fields` writes the values; `causes` are linked right after.
pub(crate) fn begin(
    state: u32,
    want: u64,
    callsite: u32,
    fields: &dyn Fn(&mut waffle::encode::Writer<'_>),
    causes: &[u64],
) -> u64 {
    with_shadow(state, |s| {
        s.sync(state, want);
        let (id, prev) = with_local(|l| {
            let (id, prev) = l.begin(state, callsite, &|w: &mut waffle::encode::Writer<'_>| fields(w));
            if id != 0 {
                causes.iter().for_each(|&c| l.link(state, c));
            }
            (id, prev)
        })
        .unwrap_or((0, 0));
        if id != 0 {
            s.stack.push(Entry { id, prev, kind: Kind::Span });
        }
        id
    })
    .unwrap_or(0)
}

/// Records an event under `want`; returns its id (0 if not recorded).
pub(crate) fn event(
    state: u32,
    want: u64,
    callsite: u32,
    fields: &dyn Fn(&mut waffle::encode::Writer<'_>),
    causes: &[u64],
) -> u64 {
    with_shadow(state, |s| {
        s.sync(state, want);
        with_local(|l| {
            let id = l.record(state, tag::EVENT, callsite, &|w: &mut waffle::encode::Writer<'_>| fields(w));
            if id != 0 {
                causes.iter().for_each(|&c| l.link(state, c));
            }
            id
        })
        .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// Ends span `id`, begun in session `epoch`, from whatever thread runs this. Returns whether it
/// was the innermost entry of this thread's stack (a plain END, after which the stack agrees
/// with the context again); otherwise the caller re-synchronises once the context is restored,
/// so that native code called next does not nest under stale entries.
pub(crate) fn end(epoch: u32, id: u64) -> bool {
    let Some(state) = end_state(epoch) else { return true };
    let done = with_shadow(state, |s| {
        let p = s.stack.iter().rposition(|e| e.id == id && matches!(e.kind, Kind::Span))?;
        // Contexts other tasks entered above it leave first; spans above it stay.
        if current() == s.stack.last().map_or(0, |e| e.id) {
            s.pop_entered_above(state, p + 1);
        }
        let e = s.stack.remove(p);
        let cur = current();
        if p == s.stack.len() && cur == id {
            with_local(|l| l.end(state, e.prev));
            return Some(true);
        }
        // Others are above it: it leaves from the middle. The entry above now restores what
        // this one would have.
        if let Some(above) = s.stack.get_mut(p).filter(|a| a.prev == id) {
            above.prev = e.prev;
        }
        let keep = if cur == id { e.prev } else { cur };
        with_local(|l| {
            l.detach(state, id, keep);
            l.async_end(state, id);
        });
        Some(false)
    });
    match done {
        Some(Some(plain)) => plain,
        _ => {
            // Detached earlier (its task was suspended), or begun on another thread.
            with_local(|l| l.async_end(state, id));
            false
        }
    }
}

/// Makes `want` current on this thread's stack now (for `inject_context`, a resumed
/// coroutine, a span that ended below the top), so native code called next nests under it.
pub(crate) fn enter(state: u32, want: u64) {
    with_shadow(state, |s| s.sync(state, want));
}

/// Leaves a context entered with [`enter`] if it is still the innermost entry, and returns
/// whether it was; otherwise it stays until the caller re-synchronises.
pub(crate) fn leave(epoch: u32, id: u64) -> bool {
    let Some(state) = end_state(epoch) else { return true };
    with_shadow(state, |s| match s.stack.last().copied() {
        Some(e) if e.id == id && matches!(e.kind, Kind::Entered) && current() == id => {
            s.stack.pop();
            with_local(|l| l.exit(state, e.prev));
            true
        }
        _ => false,
    })
    .unwrap_or(true)
}
