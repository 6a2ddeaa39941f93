//! The assembler as the decoder's record sink: each record begins, ends or annotates a span
//! in an open slot, and a span that ends goes to the writer (`finish.rs`).

use waffle_wire::Calibration;

use super::{Assembler, Last, Parent, ThreadState};
use crate::{
    decode::stream::{FileEnd, Header, Item, Sink},
    model::Track,
    spans::{ids::Run, Anchor, Place, ProcessInfo, SpanWriter},
};

impl<W: SpanWriter> Sink for Assembler<'_, W> {
    type Span = usize;
    const FIELDS: bool = W::FIELDS;
    const EAGER_TAILS: bool = W::ONE_PASS;

    fn process(&mut self, source: &str, header: &Header) {
        self.cal = Some(self.st.next_calibration.take().unwrap_or(header.calibration).converter());
        self.st.keys.next_process();
        self.process = self.st.processes_seen;
        self.st.processes_seen += 1;
        if W::ONE_PASS {
            self.st.live_process(source, header);
        } else if !self.st.sealed {
            self.st.ctx.processes.push(ProcessInfo::new(source, header));
            self.st.ctx.first_ns.push(None);
        }
        if self.st.sealed {
            if let Err(e) = self.writer.begin_process(&self.st.ctx, self.process) {
                self.error = Some(e);
            }
        }
    }

    fn thread(&mut self, thread: usize, _stream: u32) {
        self.threads.push(ThreadState { stack: Vec::new(), run: Run::default(), last: Last::None });
        if self.learns() {
            self.info().thread();
        }
        if W::ONE_PASS {
            self.writer.thread(&self.st.ctx, self.process, thread, false);
        }
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        if self.learns() {
            self.info().thread_named(thread, tid, name);
        }
        if W::ONE_PASS {
            self.writer.thread(&self.st.ctx, self.process, thread, true);
        }
    }

    fn device_track(&mut self, thread: usize, _track: &Track) {
        if self.learns() {
            self.info().device_track(thread);
        }
    }

    fn span_begin(&mut self, thread: usize, r: &Item<'_>) -> usize {
        let start_ns = self.ns(r.ticks);
        if self.learns() {
            self.info().spans += 1;
            self.first_seen(start_ns);
        }
        let member = self.refer_item(thread, r, start_ns);
        let (id, fresh, owns) = self.id_of(thread, r.id);
        let parent = self.parent_of(thread, r.parent);
        if owns {
            let anchor = Anchor {
                process: self.process as u32,
                thread: thread as u32,
                ts_ns: start_ns,
                detached: None,
            };
            let place = Place { span: id, fresh, event: false, anchor };
            self.st.settle(r.id, member.and_then(|m| m.target), place);
        }
        let slot = self.take_slot(r.callsite);
        let o = &mut self.slots[slot];
        (o.thread, o.raw, o.id, o.fresh, o.callsite_index) = (thread, r.id, id, fresh, r.callsite_index);
        (o.start_ns, o.parent, o.correlation, o.member, o.detached) =
            (start_ns, parent, r.correlation, member, false);
        if W::FIELDS {
            o.fields.copy_from(r.fields);
        }
        o.links.extend_from_slice(r.links);
        let generation = o.generation;
        if owns {
            self.open.insert(r.id, slot);
        }
        let t = &mut self.threads[thread];
        t.stack.push(slot);
        t.last = if r.id != 0 { Last::Span(slot, generation) } else { t.last };
        slot
    }

    fn event(&mut self, thread: usize, r: &Item<'_>) {
        let ts_ns = self.ns(r.ticks);
        if self.learns() {
            self.info().events += 1;
            self.first_seen(ts_ns);
        }
        let member = self.refer_item(thread, r, ts_ns);
        let (id, fresh, owns) = self.id_of(thread, r.id);
        let mut log = self.log_of(thread, r, ts_ns, id, owns);
        log.member = member;
        let target = member.and_then(|m| m.target);
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
        match host.filter(|&(slot, _)| self.slots[slot].logs.len() < logs) {
            Some((slot, off_thread)) => {
                let anchor = self.event_anchor(thread, ts_ns, Some(&self.slots[slot]));
                let host = &mut self.slots[slot];
                let place = Place { span: host.id, fresh: host.fresh, event: true, anchor };
                let (k, generation) = (host.logs.len(), host.generation);
                log.off_thread = off_thread;
                host.logs.push(log);
                if owns && !off_thread {
                    self.st.settle(r.id, target, place);
                }
                self.threads[thread].last = Last::Log(slot, generation, k);
            }
            None => {
                let parent = match host {
                    Some((slot, false)) => Parent::Known(self.slots[slot].id, slot),
                    Some((slot, true)) => {
                        let o = &self.slots[slot];
                        Parent::Off(o.id, self.anchor(o))
                    }
                    None => self.parent_of(thread, r.parent),
                };
                if owns {
                    let anchor = self.event_anchor(thread, ts_ns, None);
                    self.st.settle(r.id, target, Place { span: id, fresh, event: true, anchor });
                }
                if self.st.sealed {
                    self.own_event(thread, id, parent, &log);
                }
                self.pool.push(log);
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
        let o = &mut self.slots[slot];
        o.detached = true;
        let (raw, id, fresh, start) = (o.raw, o.id, o.fresh, o.start_ns);
        let target = o.member.and_then(|m| m.target);
        if raw != 0 && self.open.get(&raw) == Some(&slot) {
            let anchor = Anchor {
                process: self.process as u32,
                thread: thread as u32,
                ts_ns: start,
                detached: Some(id),
            };
            self.st.settle(raw, target, Place { span: id, fresh, event: false, anchor });
        }
    }

    fn detached_end(&mut self, _thread: usize, slot: usize, ticks: u64, ended: bool) {
        self.finish_span(slot, ticks, ended);
    }

    fn late_link(&mut self, thread: usize, target: u64) {
        self.st.refer(target, true);
        match self.last_of(thread) {
            Last::Span(slot, _) => self.slots[slot].links.push(target),
            Last::Log(slot, _, k) => self.slots[slot].logs[k].caused_by.push(target),
            Last::None => {}
        }
    }

    /// A late correlation joins its group as one recorded with its item does.
    fn late_correlation(&mut self, thread: usize, value: u64) {
        let (slot, k) = match self.last_of(thread) {
            Last::Span(slot, _) => (slot, None),
            Last::Log(slot, _, k) => (slot, Some(k)),
            Last::None => return,
        };
        let o = &self.slots[slot];
        let (callsite, index, id, ts, item_thread, had) = match k {
            None => (o.callsite.clone(), o.callsite_index, o.raw, o.start_ns, o.thread, o.member.is_some()),
            Some(k) => {
                let l = &o.logs[k];
                (l.callsite.clone(), l.callsite_index, l.raw, l.ts_ns, l.thread, l.member.is_some())
            }
        };
        // A second value for an item already in a group keeps the first group.
        let member =
            if had { None } else { self.join(item_thread, index, &callsite.correlate, Some(value), id, ts) };
        let o = &mut self.slots[slot];
        let (correlation, slot_member) = match k {
            None => (&mut o.correlation, &mut o.member),
            Some(k) => {
                let l = &mut o.logs[k];
                (&mut l.correlation, &mut l.member)
            }
        };
        *correlation = Some(value);
        if member.is_some() {
            *slot_member = member;
        }
    }

    fn dropped(&mut self, thread: usize, records: u64) {
        if self.learns() {
            self.info().dropped(thread, records);
        }
    }

    /// The two passes apply a file's last calibration to all of it (`Records::calibration`);
    /// one pass applies each from where it is read.
    fn calibration(&mut self, calibration: Calibration) {
        if W::ONE_PASS {
            self.cal = Some(calibration.converter());
        }
    }

    fn finish(&mut self, end: &FileEnd) {
        for t in &mut self.threads {
            self.st.ids.close(&mut t.run);
        }
        self.threads.clear();
        if self.learns() {
            self.info().finish(end);
        }
        if self.st.sealed && self.error.is_none() {
            if let Err(e) = self.writer.end_process(&self.st.ctx, self.process) {
                self.error = Some(e);
            }
        }
    }
}
