//! The sink both passes run (see the parent module for the rules it applies). The first pass
//! writes nothing and reads no field values; it leaves in [`State`] what the second pass must
//! know in advance. Both make the same decisions in the same order, so where an item ends up is
//! the same in both. How parents and causes resolve is in `resolve.rs`; what a span that ends
//! hands to the writer, in `finish.rs`.
//!
//! Nothing is allocated per record once the buffers have grown: an open span's slot keeps its
//! buffers (field values, links, events) when the span ends, and the next span opened in it
//! reuses them; events shown on a span come from a pool of them.

use std::{io, sync::Arc};
use waffle_wire::Converter;

use super::{
    groups::{Membership, Order},
    ids::Run,
    state::State,
    Anchor, Log, ProcessInfo, SpanWriter,
};
use crate::{
    decode::{stream::Item, Fields},
    index::IdMap,
    model::Callsite,
};

mod finish;
mod resolve;
mod sink;

/// A span's parent as known at its begin.
#[derive(Clone, Copy)]
pub(super) enum Parent {
    None,
    /// The span enclosing it on its thread when it began, by its output id and slot (which
    /// tells, when the child ends, whether the span has left the thread since: detached).
    Known(u64, usize),
    /// A span of this file elsewhere, by its output id.
    Off(u64, Anchor),
    /// An id to look up when the span is written.
    Lookup(u64),
}

/// An open span, in a slot that is used again once it ends.
pub(super) struct Open {
    pub(super) thread: usize,
    /// The id recorded (0 for a stand-in), and the id written.
    pub(super) raw: u64,
    pub(super) id: u64,
    /// Whether `id` is a first-pass count of a fresh id.
    pub(super) fresh: bool,
    pub(super) callsite: Arc<Callsite>,
    pub(super) callsite_index: u32,
    pub(super) fields: Fields,
    pub(super) start_ns: u64,
    pub(super) parent: Parent,
    pub(super) links: Vec<u64>,
    pub(super) correlation: Option<u64>,
    pub(super) member: Option<Membership>,
    pub(super) detached: bool,
    pub(super) logs: Vec<Log>,
    /// How many spans the slot has held before this one: a late link or correlation that
    /// names the slot is for this span only if it names this generation.
    generation: u32,
}

/// What a late link or correlation belongs to: a thread's latest item, while it is held (its
/// slot and the slot's generation).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    None,
    Span(usize, u32),
    Log(usize, u32, usize),
}

struct ThreadState {
    /// Open spans of the thread's stack, by slot.
    stack: Vec<usize>,
    run: Run,
    last: Last,
}

/// One pass over one file.
pub(crate) struct Assembler<'s, W> {
    st: &'s mut State,
    writer: W,
    error: Option<io::Error>,
    process: usize,
    cal: Option<Converter>,
    threads: Vec<ThreadState>,
    /// Open spans' slots, and those free to be used again.
    slots: Vec<Open>,
    free: Vec<usize>,
    /// Open spans of the file by recorded id, for events of other threads.
    open: IdMap<u64, usize>,
    /// Events no span holds, to be used again.
    pool: Vec<Log>,
    /// The links of the span being written.
    links: Vec<super::Link>,
}

impl<'s, W: SpanWriter> Assembler<'s, W> {
    pub(super) fn new(st: &'s mut State, writer: W) -> Self {
        Assembler {
            st,
            writer,
            error: None,
            process: 0,
            cal: None,
            threads: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            open: IdMap::default(),
            pool: Vec::new(),
            links: Vec::new(),
        }
    }

    /// The first error the writer returned.
    pub(crate) fn result(self) -> io::Result<()> {
        self.error.map_or(Ok(()), Err)
    }

    /// Whether this pass learns the processes: the first of two passes, or the only one.
    fn learns(&self) -> bool {
        !self.st.sealed || W::ONE_PASS
    }

    fn info(&mut self) -> &mut ProcessInfo {
        &mut self.st.ctx.processes[self.process]
    }

    /// An item of the process at `ns`: the earliest so far?
    fn first_seen(&mut self, ns: u64) {
        let first = &mut self.st.ctx.first_ns[self.process];
        *first = Some(first.map_or(ns, |f| f.min(ns)));
    }

    fn ns(&self, ticks: u64) -> u64 {
        self.cal.expect("the header comes first").to_unix_ns(ticks)
    }

    /// The id an item is written under, and whether it is a first-pass fresh count.
    fn id_of(&mut self, thread: usize, raw: u64) -> (u64, bool, bool) {
        // One pass knows no runs: every item holds its id.
        let owns = raw != 0
            && (W::ONE_PASS || {
                let run = self.st.ids.place(&mut self.threads[thread].run, raw);
                self.st.ids.owns(run, raw)
            });
        if owns {
            (raw, false, true)
        } else {
            (self.st.ids.fresh(), !self.st.sealed, false)
        }
    }

    /// Notes what an item names (first pass) and joins it to its correlation group, if any.
    fn refer_item(&mut self, thread: usize, r: &Item<'_>, ts_ns: u64) -> Option<Membership> {
        if !self.st.sealed {
            for &cause in r.links {
                self.st.refer(cause, true);
            }
        }
        self.join(thread, r.callsite_index, &r.callsite.correlate, r.correlation, r.id, ts_ns)
    }

    /// The membership of an item (of thread `thread`, callsite `callsite` with correlation key
    /// `key`, id `id`, at `ts_ns`) in the group of its correlation value, if it has one.
    fn join(
        &mut self,
        thread: usize,
        callsite: u32,
        key: &str,
        value: Option<u64>,
        id: u64,
        ts_ns: u64,
    ) -> Option<Membership> {
        let value = value?;
        if key.is_empty() || id == 0 {
            return None;
        }
        // The second pass meets the keys the first numbered.
        let (number, role) = self.st.keys.group(callsite, key, !self.st.sealed)?;
        let order: Order = (ts_ns, self.process as u32, thread as u32, id);
        Some(self.st.groups.join(number, value, role, order))
    }

    /// The thread's innermost open span.
    fn top(&self, thread: usize) -> Option<(usize, &Open)> {
        let slot = *self.threads[thread].stack.last()?;
        Some((slot, &self.slots[slot]))
    }

    /// A parent id as the item records it, against the thread's stack.
    fn parent_of(&mut self, thread: usize, parent: Option<u64>) -> Parent {
        let top = self.top(thread).map(|(slot, o)| (o.raw, o.id, slot));
        match (parent, top) {
            (Some(p), Some((raw, id, slot))) if raw == p => Parent::Known(id, slot),
            (Some(p), _) => {
                self.st.refer(p, false);
                Parent::Lookup(p)
            }
            // A stand-in's children: the decoder cannot name their parent.
            (None, Some((0, id, slot))) => Parent::Known(id, slot),
            (None, _) => Parent::None,
        }
    }

    /// A free slot, its buffers empty.
    fn take_slot(&mut self, callsite: &Arc<Callsite>) -> usize {
        if let Some(slot) = self.free.pop() {
            let o = &mut self.slots[slot];
            if !Arc::ptr_eq(&o.callsite, callsite) {
                o.callsite = callsite.clone();
            }
            return slot;
        }
        self.slots.push(Open {
            thread: 0,
            raw: 0,
            id: 0,
            fresh: false,
            callsite: callsite.clone(),
            callsite_index: 0,
            fields: Fields::new(),
            start_ns: 0,
            parent: Parent::None,
            links: Vec::new(),
            correlation: None,
            member: None,
            detached: false,
            logs: Vec::new(),
            generation: 0,
        });
        self.slots.len() - 1
    }

    /// An event of `r`, in a pooled [`Log`] when there is one.
    fn log_of(&mut self, thread: usize, r: &Item<'_>, ts_ns: u64, id: u64, owns: bool) -> Log {
        let linked = self.st.named(r.id).is_some_and(|t| t.linked);
        let mut log = match self.pool.pop() {
            Some(mut log) => {
                if !Arc::ptr_eq(&log.callsite, r.callsite) {
                    log.callsite = r.callsite.clone();
                }
                log.caused_by.clear();
                log.caused_by.extend_from_slice(r.links);
                log
            }
            None => Log::on_own_thread(0, 0, 0, r.callsite.clone(), Fields::new(), r.links.to_vec(), None),
        };
        if W::FIELDS {
            log.fields.copy_from(r.fields);
        }
        (log.id, log.thread, log.ts_ns, log.correlation, log.linked) =
            (id, thread, ts_ns, r.correlation, linked);
        (log.off_thread, log.raw, log.owns, log.callsite_index) = (false, r.id, owns, r.callsite_index);
        log.member = None;
        log
    }

    /// The slot of a span that ended: free again, its buffers kept.
    fn release(&mut self, slot: usize) {
        let o = &mut self.slots[slot];
        o.generation = o.generation.wrapping_add(1);
        o.links.clear();
        self.pool.append(&mut o.logs);
        self.free.push(slot);
    }

    /// The item a thread's late link or correlation belongs to, if it is still held.
    fn last_of(&self, thread: usize) -> Last {
        match self.threads[thread].last {
            Last::Span(slot, g) | Last::Log(slot, g, _) if self.slots[slot].generation != g => Last::None,
            last => last,
        }
    }
}
