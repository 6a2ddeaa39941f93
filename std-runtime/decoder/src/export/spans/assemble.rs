//! The sink both passes run (see the parent module for the rules it applies). The first pass
//! writes nothing and reads no field values; it leaves in [`State`] what the second pass must
//! know in advance. Both make the same decisions in the same order, so where an item ends up is
//! the same in both. How parents and causes resolve is in `resolve.rs`; what a span that ends
//! hands to the writer, in `finish.rs`.

use std::{io, sync::Arc};
use waffle::wire::Converter;

use super::{
    ids::Run,
    state::{Group, Place, State},
    Anchor, Log, ProcessInfo, SpanWriter,
};
use crate::{
    correlation::Role,
    decode::stream::{FileEnd, Header, Item, Sink},
    export::index::IdMap,
    model::{Callsite, Track, Value},
};

mod finish;
mod resolve;

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

/// An open span.
pub(super) struct Open {
    pub(super) thread: usize,
    /// The id recorded (0 for a stand-in), and the id written.
    pub(super) raw: u64,
    pub(super) id: u64,
    /// Whether `id` is a first-pass count of a fresh id.
    pub(super) fresh: bool,
    pub(super) callsite: Arc<Callsite>,
    pub(super) fields: Vec<Value>,
    pub(super) start_ns: u64,
    pub(super) parent: Parent,
    pub(super) links: Vec<u64>,
    pub(super) correlation: Option<u64>,
    pub(super) detached: bool,
    pub(super) logs: Vec<Log>,
}

/// What a late link or correlation belongs to: a thread's latest item, while it is held.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    None,
    Span(usize),
    Log(usize, usize),
}

struct ThreadState {
    /// Open spans of the thread's stack, by slot.
    stack: Vec<usize>,
    run: Run,
    last: Last,
}

/// One pass over one file.
pub(super) struct Assembler<'s, W> {
    st: &'s mut State,
    writer: W,
    error: Option<io::Error>,
    process: usize,
    cal: Option<Converter>,
    threads: Vec<ThreadState>,
    slots: Vec<Option<Open>>,
    free: Vec<usize>,
    /// Open spans of the file by recorded id, for events of other threads.
    open: IdMap<u64, usize>,
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
        }
    }

    /// The first error the writer returned.
    pub(super) fn result(self) -> io::Result<()> {
        self.error.map_or(Ok(()), Err)
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
        let owns = raw != 0 && {
            let run = self.st.ids.place(&mut self.threads[thread].run, raw);
            self.st.ids.owns(run, raw)
        };
        if owns {
            (raw, false, true)
        } else {
            (self.st.ids.fresh(), !self.st.sealed, false)
        }
    }

    /// Notes the causal facts of an item in the first pass.
    fn refer_item(&mut self, thread: usize, r: &Item<'_>, ts_ns: u64) {
        if self.st.sealed {
            return;
        }
        for &cause in r.links {
            self.st.refer(cause, true);
        }
        if let (Some(value), false) = (r.correlation, r.callsite.correlate.is_empty()) {
            if r.id != 0 {
                let (key, role) =
                    self.st.keys.group(r.callsite_index, &r.callsite.correlate, true).expect("added");
                let member = (ts_ns, self.process as u32, thread as u32, r.id);
                let group = self.st.groups.entry((key, value)).or_insert(Group {
                    first: member,
                    members: 0,
                    directed: role.directed(),
                    causes: Vec::new(),
                    effects: 0,
                });
                group.members += 1;
                match role {
                    // The first member is what the others link to: where it ends up is needed.
                    Role::Member if member <= group.first => {
                        group.first = member;
                        self.st.refer(r.id, false);
                    }
                    Role::Member => {}
                    // A directed group's effects link to each of its causes.
                    Role::Cause => {
                        group.causes.push(r.id);
                        self.st.refer(r.id, false);
                    }
                    Role::Effect => group.effects += 1,
                }
            }
        }
    }

    /// The thread's innermost open span.
    fn top(&self, thread: usize) -> Option<(usize, &Open)> {
        let slot = *self.threads[thread].stack.last()?;
        Some((slot, self.slots[slot].as_ref().expect("open")))
    }

    fn slot(&mut self, slot: usize) -> &mut Open {
        self.slots[slot].as_mut().expect("open")
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
}

impl<W: SpanWriter> Sink for Assembler<'_, W> {
    type Span = usize;
    const FIELDS: bool = W::FIELDS;

    fn process(&mut self, source: &str, header: &Header) {
        self.cal = Some(self.st.next_calibration.take().unwrap_or(header.calibration).converter());
        self.st.keys.next_process();
        self.process = self.st.processes_seen;
        self.st.processes_seen += 1;
        if !self.st.sealed {
            self.st.ctx.processes.push(ProcessInfo::new(source, header));
            self.st.ctx.first_ns.push(None);
        } else if let Err(e) = self.writer.begin_process(&self.st.ctx, self.process) {
            self.error = Some(e);
        }
    }

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.threads.push(ThreadState { stack: Vec::new(), run: Run::default(), last: Last::None });
        if !self.st.sealed {
            self.info().thread();
        }
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        if !self.st.sealed {
            self.info().thread_named(thread, tid, name);
        }
    }

    fn device_track(&mut self, thread: usize, _track: &Track) {
        if !self.st.sealed {
            self.info().device_track(thread);
        }
    }

    fn span_begin(&mut self, thread: usize, r: &Item<'_>) -> usize {
        let start_ns = self.ns(r.ticks);
        if !self.st.sealed {
            self.info().spans += 1;
            self.first_seen(start_ns);
        }
        self.refer_item(thread, r, start_ns);
        let (id, fresh, owns) = self.id_of(thread, r.id);
        let parent = self.parent_of(thread, r.parent);
        if owns {
            let anchor = Anchor {
                process: self.process as u32,
                thread: thread as u32,
                ts_ns: start_ns,
                detached: None,
            };
            self.st.settle(r.id, Place { span: id, fresh, event: false, anchor });
        }
        let open = Open {
            thread,
            raw: r.id,
            id,
            fresh,
            callsite: r.callsite.clone(),
            fields: if W::FIELDS { r.fields.to_values() } else { Vec::new() },
            start_ns,
            parent,
            links: r.links.to_vec(),
            correlation: r.correlation,
            detached: false,
            logs: Vec::new(),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(open);
                slot
            }
            None => {
                self.slots.push(Some(open));
                self.slots.len() - 1
            }
        };
        if owns {
            self.open.insert(r.id, slot);
        }
        let t = &mut self.threads[thread];
        t.stack.push(slot);
        t.last = if r.id != 0 { Last::Span(slot) } else { t.last };
        slot
    }

    fn event(&mut self, thread: usize, r: &Item<'_>) {
        let ts_ns = self.ns(r.ticks);
        if !self.st.sealed {
            self.info().events += 1;
            self.first_seen(ts_ns);
        }
        self.refer_item(thread, r, ts_ns);
        let (id, fresh, owns) = self.id_of(thread, r.id);
        let linked = self.st.targets.get(&r.id).is_some_and(|t| t.linked);
        let log = Log {
            id,
            thread,
            ts_ns,
            callsite: r.callsite.clone(),
            fields: if W::FIELDS { r.fields.to_values() } else { Vec::new() },
            caused_by: r.links.to_vec(),
            correlation: r.correlation,
            linked,
            off_thread: false,
            raw: r.id,
            owns,
        };
        // The span that may show it: the thread's innermost (which a stand-in's children
        // name as no parent), else an open span of another thread or a detached one.
        let on_stack = self.top(thread).filter(|(_, o)| match r.parent {
            Some(p) => o.raw == p,
            None => o.raw == 0,
        });
        let host = match (on_stack, r.parent) {
            (Some((slot, _)), _) => Some((slot, false)),
            (None, Some(p)) => self.open.get(&p).map(|&slot| (slot, true)),
            (None, None) => None,
        };
        let logs = self.st.logs;
        match host.filter(|&(slot, _)| self.slots[slot].as_ref().expect("open").logs.len() < logs) {
            Some((slot, off_thread)) => {
                let anchor = self.event_anchor(thread, ts_ns, self.slots[slot].as_ref());
                let host = self.slot(slot);
                let place = Place { span: host.id, fresh: host.fresh, event: true, anchor };
                let k = host.logs.len();
                host.logs.push(Log { off_thread, ..log });
                if owns && !off_thread {
                    self.st.settle(r.id, place);
                }
                self.threads[thread].last = Last::Log(slot, k);
            }
            None => {
                let parent = match host {
                    Some((slot, false)) => Parent::Known(self.slots[slot].as_ref().expect("open").id, slot),
                    Some((slot, true)) => {
                        let o = self.slots[slot].as_ref().expect("open");
                        Parent::Off(o.id, self.anchor(o))
                    }
                    None => self.parent_of(thread, r.parent),
                };
                if owns {
                    let anchor = self.event_anchor(thread, ts_ns, None);
                    self.st.settle(r.id, Place { span: id, fresh, event: true, anchor });
                }
                if self.st.sealed {
                    self.own_event(thread, id, parent, &log);
                }
                self.threads[thread].last = Last::None;
            }
        }
    }

    fn span_end(&mut self, thread: usize, slot: usize, ticks: u64, ended: bool) {
        let stack = &mut self.threads[thread].stack;
        if let Some(pos) = stack.iter().rposition(|&s| s == slot) {
            stack.remove(pos);
        }
        self.finish_span(slot, ticks, ended);
    }

    fn detach(&mut self, thread: usize, slot: usize, _id: u64) {
        let stack = &mut self.threads[thread].stack;
        if let Some(pos) = stack.iter().rposition(|&s| s == slot) {
            stack.remove(pos);
        }
        let o = self.slot(slot);
        o.detached = true;
        let (raw, id, fresh, start) = (o.raw, o.id, o.fresh, o.start_ns);
        if raw != 0 && self.open.get(&raw) == Some(&slot) {
            let anchor = Anchor {
                process: self.process as u32,
                thread: thread as u32,
                ts_ns: start,
                detached: Some(id),
            };
            self.st.settle(raw, Place { span: id, fresh, event: false, anchor });
        }
    }

    fn detached_end(&mut self, _thread: usize, slot: usize, ticks: u64, ended: bool) {
        self.finish_span(slot, ticks, ended);
    }

    fn late_link(&mut self, thread: usize, target: u64) {
        self.st.refer(target, true);
        match self.threads[thread].last {
            Last::Span(slot) => self.slot(slot).links.push(target),
            Last::Log(slot, k) => self.slot(slot).logs[k].caused_by.push(target),
            Last::None => {}
        }
    }

    fn late_correlation(&mut self, thread: usize, value: u64) {
        match self.threads[thread].last {
            Last::Span(slot) => self.slot(slot).correlation = Some(value),
            Last::Log(slot, k) => self.slot(slot).logs[k].correlation = Some(value),
            Last::None => {}
        }
    }

    fn dropped(&mut self, thread: usize, records: u64) {
        if !self.st.sealed {
            self.info().dropped(thread, records);
        }
    }

    fn finish(&mut self, end: &FileEnd) {
        for t in &mut self.threads {
            self.st.ids.close(&mut t.run);
        }
        self.threads.clear();
        if !self.st.sealed {
            self.info().finish(end);
        } else if self.error.is_none() {
            if let Err(e) = self.writer.end_process(&self.st.ctx, self.process) {
                self.error = Some(e);
            }
        }
    }
}
