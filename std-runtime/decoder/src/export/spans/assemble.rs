//! The sink both passes run (see the parent module for the rules it applies). The first pass
//! writes nothing and reads no field values; it leaves in [`State`] what the second pass must
//! know in advance. Both make the same decisions in the same order, so where an item ends up is
//! the same in both.

use std::{io, mem, sync::Arc};
use waffle::wire::{Calibration, Converter};

use super::{
    ids::{Ids, Run},
    Anchor, Context, Link, LinkKind, Log, OutSpan, ProcessInfo, SpanWriter,
};
use crate::{
    decode::stream::{FileEnd, Header, Item, Sink},
    export::{
        index::{IdMap, Keys},
        passes,
    },
    model::{Callsite, Value},
};

/// Where a referenced item ends up.
#[derive(Clone, Copy, Debug)]
pub(super) struct Place {
    /// The span showing it.
    span: u64,
    /// In the first pass: `span` is the count of a fresh id, not the id.
    fresh: bool,
    /// Whether it is an event.
    event: bool,
    /// Where it is.
    anchor: Anchor,
}

/// An id something refers to.
#[derive(Clone, Copy, Debug, Default)]
struct Target {
    place: Option<Place>,
    /// Whether a link names it.
    linked: bool,
}

/// A correlated item: (time in Unix ns, process, thread, id), the order of its group.
type Member = (u64, u32, u32, u64);

/// A correlation group: its first member so far, and how many it has.
struct Group {
    first: Member,
    members: u32,
}

/// What the passes share: after the first, the plan of the second.
pub(crate) struct State {
    pub(super) ctx: Context,
    /// The calibration of the next file (its last CLOCK frame's).
    pub(super) next_calibration: Option<Calibration>,
    pub(super) logs: usize,
    ids: Ids,
    targets: IdMap<u64, Target>,
    keys: Keys,
    /// Correlation groups by key number and value; after the first pass, only those of two
    /// or more members.
    groups: IdMap<(u32, u64), Group>,
    sealed: bool,
    /// Processes begun in this pass.
    processes_seen: usize,
}

impl State {
    pub(super) fn new(logs: usize) -> State {
        State {
            ctx: Context { processes: Vec::new(), first_ns: Vec::new(), trace_id: 0 },
            next_calibration: None,
            logs,
            ids: Ids::default(),
            targets: IdMap::default(),
            keys: Keys::default(),
            groups: IdMap::default(),
            sealed: false,
            processes_seen: 0,
        }
    }

    /// The first pass is over.
    pub(super) fn seal(&mut self) {
        self.ids.seal();
        for t in self.targets.values_mut() {
            if let Some(p) = t.place.as_mut().filter(|p| p.fresh) {
                let id = self.ids.nth_fresh(p.span);
                if p.anchor.detached == Some(p.span) {
                    p.anchor.detached = Some(id);
                }
                (p.span, p.fresh) = (id, false);
            }
        }
        self.groups.retain(|_, g| g.members > 1);
        self.ctx.trace_id = trace_id(&self.ctx);
        self.sealed = true;
        self.processes_seen = 0;
    }

    /// Notes that something refers to `id`.
    fn refer(&mut self, id: u64, linked: bool) {
        if id != 0 && !self.sealed {
            let t = self.targets.entry(id).or_default();
            t.linked |= linked;
        }
    }

    /// Where `id` ends up, if something refers to it: now known.
    fn settle(&mut self, id: u64, place: Place) {
        if let Some(t) = self.targets.get_mut(&id) {
            t.place = Some(place);
        }
    }
}

impl passes::Plan for State {
    fn processes(&self) -> &[ProcessInfo] {
        &self.ctx.processes
    }

    /// The second pass takes processes from the first pass's [`Context`], not from the
    /// headers it reads again.
    fn processes_mut(&mut self) -> &mut [ProcessInfo] {
        &mut self.ctx.processes
    }
}

/// The first pass's writer: nothing is written, no field is read.
pub(super) struct NoWrite;

impl SpanWriter for NoWrite {
    const FIELDS: bool = false;
    fn span(&mut self, _ctx: &Context, _span: &OutSpan<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// A span's parent as known at its begin.
#[derive(Clone, Copy)]
enum Parent {
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
struct Open {
    thread: usize,
    /// The id recorded (0 for a stand-in), and the id written.
    raw: u64,
    id: u64,
    /// Whether `id` is a first-pass count of a fresh id.
    fresh: bool,
    callsite: Arc<Callsite>,
    fields: Vec<Value>,
    start_ns: u64,
    parent: Parent,
    links: Vec<u64>,
    correlation: Option<u64>,
    detached: bool,
    logs: Vec<Log>,
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
                let key = self.st.keys.number(r.callsite_index, &r.callsite.correlate, true).expect("added");
                let member = (ts_ns, self.process as u32, thread as u32, r.id);
                let group = self.st.groups.entry((key, value)).or_insert(Group { first: member, members: 0 });
                group.members += 1;
                // The first member is what the others link to: where it ends up is needed.
                if member <= group.first {
                    group.first = member;
                    self.st.refer(r.id, false);
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

    /// The span showing `id`, if it is in the trace.
    fn place(&self, id: u64) -> Option<Place> {
        self.st.targets.get(&id).and_then(|t| t.place)
    }

    /// The parent written, the parent not found, and where the parent is when it does not
    /// enclose the child on its thread.
    fn resolve_parent(&self, parent: Parent) -> (Option<u64>, Option<u64>, Option<Anchor>) {
        match parent {
            Parent::None => (None, None, None),
            Parent::Known(id, slot) => {
                // Detached after the child began: it no longer encloses the child's row.
                let moved = self.slots[slot].as_ref().filter(|o| o.id == id && o.detached);
                (Some(id), None, moved.map(|o| self.anchor(o)))
            }
            Parent::Off(id, anchor) => (Some(id), None, Some(anchor)),
            Parent::Lookup(id) => match self.open.get(&id) {
                Some(&slot) => {
                    let o = self.slots[slot].as_ref().expect("open");
                    (Some(o.id), None, Some(self.anchor(o)))
                }
                None => match self.place(id) {
                    Some(p) => (Some(p.span), None, Some(p.anchor)),
                    None => (None, Some(id), None),
                },
            },
        }
    }

    /// Where an open span is.
    fn anchor(&self, o: &Open) -> Anchor {
        Anchor {
            process: self.process as u32,
            thread: o.thread as u32,
            ts_ns: o.start_ns,
            detached: o.detached.then_some(o.id),
        }
    }

    /// Where an event shown by `host` (if any) is.
    fn event_anchor(&self, thread: usize, ts_ns: u64, host: Option<&Open>) -> Anchor {
        let detached = host.filter(|h| h.detached).map(|h| h.id);
        Anchor { process: self.process as u32, thread: thread as u32, ts_ns, detached }
    }

    /// The links of an item shown by span `shown_by`.
    #[allow(clippy::too_many_arguments)]
    fn links_of(
        &self,
        out: &mut Vec<Link>,
        shown_by: u64,
        from_event: Option<u64>,
        item: (u64, u32, u64),
        callsite: &Callsite,
        causes: &[u64],
        correlation: Option<u64>,
    ) {
        let (id, thread, ts_ns) = item;
        for (k, &cause) in causes.iter().enumerate() {
            if cause == 0 || causes[..k].contains(&cause) {
                continue;
            }
            let link = match self.place(cause) {
                Some(p) if p.span == shown_by => continue,
                Some(p) => Link {
                    span: p.span,
                    resolved: true,
                    target_event: p.event.then_some(cause),
                    anchor: Some(p.anchor),
                    from_event,
                    kind: LinkKind::Cause,
                },
                None => Link {
                    span: cause,
                    resolved: false,
                    target_event: None,
                    anchor: None,
                    from_event,
                    kind: LinkKind::Cause,
                },
            };
            out.push(link);
        }
        let Some(value) = correlation.filter(|_| !callsite.correlate.is_empty()) else { return };
        let Some(key) = self.st.keys.numbers.get(&callsite.correlate) else { return };
        let Some(group) = self.st.groups.get(&(*key, value)) else { return };
        let first = group.first;
        if first == (ts_ns, self.process as u32, thread, id) {
            return;
        }
        if let Some(p) = self.place(first.3).filter(|p| p.span != shown_by) {
            let (target_event, anchor) = (p.event.then_some(first.3), Some(p.anchor));
            out.push(Link {
                span: p.span,
                resolved: true,
                target_event,
                anchor,
                from_event,
                kind: LinkKind::Correlated,
            });
        }
    }

    fn emit(&mut self, span: &OutSpan<'_>) {
        if self.error.is_none() {
            if let Err(e) = self.writer.span(&self.st.ctx, span) {
                self.error = Some(e);
            }
        }
    }

    /// An event shown as a span of its own.
    fn own_event(&mut self, thread: usize, id: u64, parent: Parent, ev: &Log) {
        let (parent, unresolved_parent, parent_anchor) = self.resolve_parent(parent);
        let mut links = Vec::new();
        if self.st.sealed {
            let item = (ev.raw, thread as u32, ev.ts_ns);
            self.links_of(&mut links, id, None, item, &ev.callsite, &ev.caused_by, ev.correlation);
        }
        let span = OutSpan {
            process: self.process,
            thread,
            id,
            callsite: &ev.callsite,
            fields: &ev.fields,
            start_ns: ev.ts_ns,
            end_ns: ev.ts_ns,
            parent,
            unresolved_parent,
            parent_anchor,
            caused_by: &ev.caused_by,
            links: &links,
            correlation: ev.correlation,
            ended: true,
            detached: false,
            stand_in: false,
            event: true,
            referred: ev.owns && self.st.targets.contains_key(&ev.raw),
            logs: &[],
        };
        self.emit(&span);
    }

    /// A span ends: it is written, with the events it shows.
    fn finish_span(&mut self, slot: usize, ticks: u64, ended: bool) {
        let mut s = self.slots[slot].take().expect("open");
        self.free.push(slot);
        if s.raw != 0 && self.open.get(&s.raw) == Some(&slot) {
            self.open.remove(&s.raw);
        }
        for t in &mut self.threads {
            if matches!(t.last, Last::Span(k) | Last::Log(k, _) if k == slot) {
                t.last = Last::None;
            }
        }
        let end_ns = self.ns(ticks).max(s.start_ns);
        // An event of another thread is shown only if it falls within the span.
        let (logs, strays): (Vec<Log>, Vec<Log>) = mem::take(&mut s.logs)
            .into_iter()
            .partition(|l| !l.off_thread || (s.start_ns..=end_ns).contains(&l.ts_ns));
        s.logs = logs;
        for l in s.logs.iter().filter(|l| l.off_thread && l.owns) {
            let anchor = self.event_anchor(l.thread, l.ts_ns, Some(&s));
            self.st.settle(l.raw, Place { span: s.id, fresh: s.fresh, event: true, anchor });
        }
        if self.st.sealed {
            let (parent, unresolved_parent, parent_anchor) = self.resolve_parent(s.parent);
            let mut links = Vec::new();
            let item = (s.raw, s.thread as u32, s.start_ns);
            self.links_of(&mut links, s.id, None, item, &s.callsite, &s.links, s.correlation);
            for l in &s.logs {
                let item = (l.raw, l.thread as u32, l.ts_ns);
                self.links_of(&mut links, s.id, Some(l.id), item, &l.callsite, &l.caused_by, l.correlation);
            }
            let span = OutSpan {
                process: self.process,
                thread: s.thread,
                id: s.id,
                callsite: &s.callsite,
                fields: &s.fields,
                start_ns: s.start_ns,
                end_ns,
                parent,
                unresolved_parent,
                parent_anchor,
                caused_by: &s.links,
                links: &links,
                correlation: s.correlation,
                ended,
                detached: s.detached,
                stand_in: s.raw == 0,
                event: false,
                referred: s.id == s.raw && self.st.targets.contains_key(&s.raw),
                logs: &s.logs,
            };
            self.emit(&span);
        }
        let host = Parent::Off(s.id, self.anchor(&s));
        for l in strays {
            if l.owns {
                let anchor = self.event_anchor(l.thread, l.ts_ns, None);
                self.st.settle(l.raw, Place { span: l.id, fresh: false, event: true, anchor });
            }
            if self.st.sealed {
                self.own_event(l.thread, l.id, host, &l);
            }
        }
    }
}

impl<W: SpanWriter> Sink for Assembler<'_, W> {
    type Span = usize;
    const FIELDS: bool = W::FIELDS;

    fn process(&mut self, header: &Header) {
        self.cal = Some(self.st.next_calibration.take().unwrap_or(header.calibration).converter());
        self.st.keys.next_process();
        self.process = self.st.processes_seen;
        self.st.processes_seen += 1;
        if !self.st.sealed {
            self.st.ctx.processes.push(ProcessInfo::new(header));
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

impl<W: SpanWriter> SpanWriter for &mut W {
    const LOGS: usize = W::LOGS;
    const FIELDS: bool = W::FIELDS;
    fn begin_process(&mut self, ctx: &Context, process: usize) -> io::Result<()> {
        (**self).begin_process(ctx, process)
    }
    fn span(&mut self, ctx: &Context, span: &OutSpan<'_>) -> io::Result<()> {
        (**self).span(ctx, span)
    }
    fn end_process(&mut self, ctx: &Context, process: usize) -> io::Result<()> {
        (**self).end_process(ctx, process)
    }
}

/// The trace id of the first process that has one; else one derived from the processes.
fn trace_id(ctx: &Context) -> u128 {
    if let Some(id) = ctx.processes.iter().map(|p| p.header.trace_id).find(|&id| id != 0) {
        return id;
    }
    let mut h = 0x5741_4646_u64; // "WAFF"
    for (p, first) in ctx.processes.iter().zip(&ctx.first_ns) {
        h = splitmix(h ^ u64::from(p.header.pid));
        h = splitmix(h ^ first.unwrap_or(0));
    }
    ((u128::from(splitmix(h)) << 64) | u128::from(splitmix(!h))).max(1)
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
