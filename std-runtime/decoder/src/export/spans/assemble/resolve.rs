//! Where an item's parent and causes are, as the span showing them is written: resolved
//! against the open spans of the file and the places the first pass settled.

use super::{Assembler, Open, Parent};
use crate::{
    correlation::{group_key, role, Role},
    export::spans::{state::Place, Anchor, Link, LinkKind, SpanWriter},
    model::Callsite,
};

impl<W: SpanWriter> Assembler<'_, W> {
    /// The span showing `id`, if it is in the trace.
    pub(super) fn place(&self, id: u64) -> Option<Place> {
        self.st.targets.get(&id).and_then(|t| t.place)
    }

    /// The parent written, the parent not found, and where the parent is when it does not
    /// enclose the child on its thread.
    pub(super) fn resolve_parent(&self, parent: Parent) -> (Option<u64>, Option<u64>, Option<Anchor>) {
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
    pub(super) fn anchor(&self, o: &Open) -> Anchor {
        Anchor {
            process: self.process as u32,
            thread: o.thread as u32,
            ts_ns: o.start_ns,
            detached: o.detached.then_some(o.id),
        }
    }

    /// Where an event shown by `host` (if any) is.
    pub(super) fn event_anchor(&self, thread: usize, ts_ns: u64, host: Option<&Open>) -> Anchor {
        let detached = host.filter(|h| h.detached).map(|h| h.id);
        Anchor { process: self.process as u32, thread: thread as u32, ts_ns, detached }
    }

    /// The links of an item shown by span `shown_by`: to the spans showing its causes, to the
    /// first member of its correlation group, and, for an effect of a directed group, to the
    /// spans showing the group's causes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn links_of(
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
        let Some(key) = self.st.keys.numbers.get(group_key(&callsite.correlate).as_ref()) else { return };
        let Some(group) = self.st.groups.get(&(*key, value)) else { return };
        match role(&callsite.correlate).1 {
            Role::Member => {}
            // A cause links to none of its effects: they follow from it, not it from them.
            Role::Cause => return,
            // An effect links to each cause of its group.
            Role::Effect => {
                for &cause in &group.causes {
                    let Some(p) = self.place(cause).filter(|p| p.span != shown_by) else { continue };
                    let link = Link {
                        span: p.span,
                        resolved: true,
                        target_event: p.event.then_some(cause),
                        anchor: Some(p.anchor),
                        from_event,
                        kind: LinkKind::Message,
                    };
                    if !out.contains(&link) {
                        out.push(link);
                    }
                }
                return;
            }
        }
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
}
