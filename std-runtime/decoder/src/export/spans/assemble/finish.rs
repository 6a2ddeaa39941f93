//! A span that ends, and an event shown as a span of its own: handed to the writer with
//! their parents and links resolved, the events a span shows settled in its place.

use std::mem;

use super::{Assembler, Last, Open, Parent};
use crate::{
    correlation::{role, Role},
    export::spans::{state::Place, Log, OutSpan, SpanWriter},
    model::Callsite,
};

impl<W: SpanWriter> Assembler<'_, W> {
    pub(super) fn emit(&mut self, span: &OutSpan<'_>) {
        if self.error.is_none() {
            if let Err(e) = self.writer.span(&self.st.ctx, span) {
                self.error = Some(e);
            }
        }
    }

    /// An event shown as a span of its own.
    pub(super) fn own_event(&mut self, thread: usize, id: u64, parent: Parent, ev: &Log) {
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

    /// Whether `s`, ending in the first pass, is one of the quiet roots
    /// ([`Context`](crate::export::spans::Context)`::quiet_roots`): told by what it recorded,
    /// whether or not its links would resolve.
    fn quiet_root(&self, s: &Open) -> bool {
        let quiet = |links: &[u64], callsite: &Callsite, value: Option<u64>| {
            let role = role(&callsite.correlate).1;
            links.is_empty() && (value.is_none() || callsite.correlate.is_empty() || role == Role::Cause)
        };
        let targets = &self.st.targets;
        let referred =
            targets.contains_key(&s.raw) || s.logs.iter().any(|l| l.owns && targets.contains_key(&l.raw));
        referred
            && !s.fresh
            && s.raw != 0
            && matches!(s.parent, Parent::None)
            && quiet(&s.links, &s.callsite, s.correlation)
            && s.logs.iter().all(|l| quiet(&l.caused_by, &l.callsite, l.correlation))
    }

    /// A span ends: it is written, with the events it shows.
    pub(super) fn finish_span(&mut self, slot: usize, ticks: u64, ended: bool) {
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
        if !self.st.sealed && self.quiet_root(&s) {
            self.st.ctx.quiet_roots.insert(s.id);
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
