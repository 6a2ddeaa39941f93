//! The first reading's sink: each thread's open spans, the spans that never ended, and every
//! message value sent and received, taken as the records stream by.

use super::*;

impl Sink for Ends<'_> {
    /// The span's slot.
    type Span = u32;
    const TRACK_RECORDS: bool = true;

    fn process(&mut self, source: &str, header: &Header) {
        source.clone_into(&mut self.source);
        self.header = header.clone();
        self.rank = rank_of(header);
        self.last_ticks = header.calibration.anchor_ticks;
    }

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.threads.push(EndsThread::default());
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        let t = &mut self.threads[thread];
        t.tid = tid;
        name.clone_into(&mut t.name);
    }

    fn span_begin(&mut self, t: usize, item: &Item<'_>) -> u32 {
        self.last_ticks = self.last_ticks.max(item.ticks);
        if item.id != 0 {
            self.commit(t);
        }
        let roles = self.sites.of(item);
        self.member(roles, item);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::default());
            self.slots.len() as u32 - 1
        });
        let th = &mut self.threads[t];
        let s = &mut self.slots[slot as usize];
        (s.id, s.span, s.depth, s.start) = (item.id, th.spans, item.depth, item.ticks);
        (s.callsite, s.correlation, s.holds) = (Some(item.callsite.clone()), item.correlation, false);
        s.fields.clear();
        item.fields.iter().for_each(|v| s.fields.push(v));
        th.spans += 1;
        th.stack.push(slot);
        if item.id != 0 {
            th.latest =
                Some(Latest::Span { slot: Some(slot), unended: None, roles, correlation: item.correlation });
        } else {
            // A stand-in is no thread's latest item: nothing recorded later is its.
            self.count_span(roles, item.correlation);
        }
        slot
    }

    fn event(&mut self, t: usize, item: &Item<'_>) {
        self.last_ticks = self.last_ticks.max(item.ticks);
        self.commit(t);
        let roles = self.sites.of(item);
        self.member(roles, item);
        if let (true, Some(parent)) = (roles.received, item.parent) {
            let th = &self.threads[t];
            let holder = th.stack.iter().rev().find(|&&s| self.slots[s as usize].id == parent);
            match holder {
                Some(&s) if item.held => self.slots[s as usize].holds = true,
                _ => {
                    self.across.foreign.insert(parent);
                }
            }
        }
        self.threads[t].latest = Some(Latest::Event { roles, correlation: item.correlation });
    }

    fn span_end(&mut self, t: usize, slot: u32, ticks: u64, ended: bool) {
        self.end(t, slot, ticks, ended);
    }

    fn detach(&mut self, t: usize, slot: u32, _id: u64) {
        let stack = &mut self.threads[t].stack;
        if let Some(pos) = stack.iter().rposition(|&s| s == slot) {
            stack.remove(pos);
        }
    }

    fn detached_end(&mut self, t: usize, slot: u32, ticks: u64, ended: bool) {
        self.end(t, slot, ticks, ended);
    }

    fn late_correlation(&mut self, t: usize, value: u64) {
        let th = &mut self.threads[t];
        match th.latest.as_mut() {
            Some(Latest::Span { slot, unended, correlation, roles }) => {
                self.across.relabelled |= roles.send && correlation.is_some();
                *correlation = Some(value);
                if let Some(s) = slot {
                    self.slots[*s as usize].correlation = Some(value);
                }
                if let Some(u) = unended {
                    th.unended[*u].call.correlation = Some(value);
                }
            }
            Some(Latest::Event { correlation, .. }) => *correlation = Some(value),
            None => {}
        }
    }

    fn calibration(&mut self, calibration: Calibration) {
        (self.cal, self.clocked) = (Some(calibration), true);
    }

    fn finish(&mut self, end: &FileEnd) {
        for t in 0..self.threads.len() {
            self.commit(t);
        }
        self.complete = end.complete;
    }
}
