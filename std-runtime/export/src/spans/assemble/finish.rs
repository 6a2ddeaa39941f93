//! A span that ends, and an event shown as a span of its own: handed to the writer with
//! their parents and links resolved, the events a span shows settled in its place.

use std::{io, mem};

use super::{Assembler, Open, Parent};
use crate::{
    correlation::{role, Role},
    model::Callsite,
    spans::{groups::Membership, Log, OutSpan, Place, SpanWriter, TraceInfo},
};

/// Hands `span` to `writer`, unless it has failed before: its first error is kept.
fn emit<W: SpanWriter>(writer: &mut W, error: &mut Option<io::Error>, ctx: &TraceInfo, span: &OutSpan<'_>) {
    if error.is_none() {
        if let Err(e) = writer.span(ctx, span) {
            *error = Some(e);
        }
    }
}

impl<W: SpanWriter> Assembler<'_, W> {
    /// Whether item `raw` (correlation target `target`, if any) is named by another item.
    fn referred(&self, raw: u64, target: Option<u32>) -> bool {
        self.st.named(raw).is_some() || target.is_some()
    }

    /// An event shown as a span of its own.
    pub(super) fn own_event(&mut self, thread: usize, id: u64, parent: Parent, ev: &Log) {
        let (parent, unresolved_parent, parent_anchor) = self.resolve_parent(parent);
        let mut links = mem::take(&mut self.links);
        links.clear();
        let item = (ev.raw, thread as u32, ev.ts_ns);
        self.links_of(&mut links, id, None, item, &ev.caused_by, ev.member.as_ref());
        let target = ev.member.and_then(|m| m.target);
        let referred = ev.owns && self.referred(ev.raw, target);
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
            referred,
            logs: &[],
        };
        emit(&mut self.writer, &mut self.error, &self.st.ctx, &span);
        self.links = links;
    }

    /// Whether `s`, ending in the first pass, is a quiet root ([`Link::quiet`]): told by what
    /// it recorded, whether or not its links would resolve.
    ///
    /// [`Link::quiet`]: crate::spans::Link::quiet
    fn quiet_root(&self, s: &Open) -> bool {
        let quiet = |links: &[u64], callsite: &Callsite, value: Option<u64>| {
            let role = role(&callsite.correlate).1;
            links.is_empty() && (value.is_none() || callsite.correlate.is_empty() || role == Role::Cause)
        };
        let named = |raw: u64, m: Option<Membership>| {
            self.st.named(raw).is_some() || m.is_some_and(|m| m.target.is_some())
        };
        let referred = named(s.raw, s.member) || s.logs.iter().any(|l| l.owns && named(l.raw, l.member));
        referred
            && !s.fresh
            && s.raw != 0
            && matches!(s.parent, Parent::None)
            && quiet(&s.links, &s.callsite, s.correlation)
            && s.logs.iter().all(|l| quiet(&l.caused_by, &l.callsite, l.correlation))
    }

    /// Marks the links to `s`, and to the events it shows, as links to a quiet root.
    fn mark_quiet(&mut self, slot: usize) {
        let s = &self.slots[slot];
        let st = &mut *self.st;
        let mut mark = |raw: u64, member: Option<Membership>| {
            if let Some(t) = member.and_then(|m| m.target) {
                st.groups.quiet(t);
            }
            if let Some(t) = st.targets.get_mut(&raw) {
                t.quiet = true;
            }
        };
        mark(s.raw, s.member);
        for l in s.logs.iter().filter(|l| l.owns) {
            mark(l.raw, l.member);
        }
    }

    /// A span ends: it is written, with the events it shows.
    pub(super) fn finish_span(&mut self, slot: usize, ticks: u64, ended: bool) {
        let raw = self.slots[slot].raw;
        if raw != 0 && self.open.get(&raw) == Some(&slot) {
            self.open.remove(&raw);
        }
        let end_ns = self.ns(ticks).max(self.slots[slot].start_ns);
        // An event of another thread is shown only if it falls within the span.
        let mut strays = Vec::new();
        let s = &mut self.slots[slot];
        if s.logs.iter().any(|l| l.off_thread) {
            let start_ns = s.start_ns;
            let within = |l: &Log| !l.off_thread || (start_ns..=end_ns).contains(&l.ts_ns);
            let (logs, out): (Vec<Log>, Vec<Log>) = mem::take(&mut s.logs).into_iter().partition(within);
            (s.logs, strays) = (logs, out);
            let s = &self.slots[slot];
            let settled: Vec<_> = s
                .logs
                .iter()
                .filter(|l| l.off_thread && l.owns)
                .map(|l| {
                    (l.raw, l.member.and_then(|m| m.target), self.event_anchor(l.thread, l.ts_ns, Some(s)))
                })
                .collect();
            let (id, fresh) = (s.id, s.fresh);
            for (raw, target, anchor) in settled {
                self.st.settle(raw, target, Place { span: id, fresh, event: true, anchor });
            }
        }
        if !self.st.sealed && self.quiet_root(&self.slots[slot]) {
            self.mark_quiet(slot);
        }
        if self.st.sealed {
            self.write_span(slot, end_ns, ended);
        }
        let s = &self.slots[slot];
        let host = Parent::Off(s.id, self.anchor(s));
        for l in strays {
            if l.owns {
                let anchor = self.event_anchor(l.thread, l.ts_ns, None);
                let place = Place { span: l.id, fresh: false, event: true, anchor };
                self.st.settle(l.raw, l.member.and_then(|m| m.target), place);
            }
            if self.st.sealed {
                self.own_event(l.thread, l.id, host, &l);
            }
            self.pool.push(l);
        }
        self.release(slot);
    }

    /// Hands the span in `slot`, ending at `end_ns`, to the writer.
    fn write_span(&mut self, slot: usize, end_ns: u64, ended: bool) {
        let mut links = mem::take(&mut self.links);
        links.clear();
        let s = &self.slots[slot];
        let (parent, unresolved_parent, parent_anchor) = self.resolve_parent(s.parent);
        let item = (s.raw, s.thread as u32, s.start_ns);
        self.links_of(&mut links, s.id, None, item, &s.links, s.member.as_ref());
        for l in &s.logs {
            let item = (l.raw, l.thread as u32, l.ts_ns);
            self.links_of(&mut links, s.id, Some(l.id), item, &l.caused_by, l.member.as_ref());
        }
        let target = s.member.and_then(|m| m.target);
        let referred = s.id == s.raw && self.referred(s.raw, target);
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
            referred,
            logs: &s.logs,
        };
        emit(&mut self.writer, &mut self.error, &self.st.ctx, &span);
        self.links = links;
    }
}
