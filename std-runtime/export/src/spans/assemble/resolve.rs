//! Where an item's parent and causes are, as the span showing them is written: resolved
//! against the open spans of the file, the places the passes settled, and the correlation
//! groups.

use super::{Assembler, Open, Parent};
use crate::spans::{groups::Membership, Anchor, Link, LinkKind, Place, SpanWriter};

impl<W: SpanWriter> Assembler<'_, W> {
    /// The span showing `id`, if it is in the trace and something names it.
    pub(super) fn place(&self, id: u64) -> Option<Place> {
        self.st.named(id).and_then(|t| t.place)
    }

    /// The parent written, the parent not found, and where the parent is when it does not
    /// enclose the child on its thread.
    pub(super) fn resolve_parent(&self, parent: Parent) -> (Option<u64>, Option<u64>, Option<Anchor>) {
        match parent {
            Parent::None => (None, None, None),
            Parent::Known(id, slot) => {
                // Detached after the child began: it no longer encloses the child's row.
                let o = &self.slots[slot];
                let moved = (o.id == id && o.detached).then(|| self.anchor(o));
                (Some(id), None, moved)
            }
            Parent::Off(id, anchor) => (Some(id), None, Some(anchor)),
            Parent::Lookup(id) => match self.open.get(&id) {
                Some(&slot) => {
                    let o = &self.slots[slot];
                    (Some(o.id), None, Some(self.anchor(o)))
                }
                None => match self.place(id) {
                    Some(p) => (Some(p.span), None, Some(p.anchor)),
                    // One pass sends the parent under the id recorded, before or after.
                    None if W::ONE_PASS => (Some(id), None, None),
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

    /// The links of an item (`raw` id, `thread`, at `ts_ns`) shown by span `shown_by`: to the
    /// spans showing its causes, then those of its correlation group (see
    /// [`Groups::links`](crate::spans::groups::Groups::links)).
    pub(super) fn links_of(
        &self,
        out: &mut Vec<Link>,
        shown_by: u64,
        from_event: Option<u64>,
        (raw, thread, ts_ns): (u64, u32, u64),
        causes: &[u64],
        member: Option<&Membership>,
    ) {
        for (k, &cause) in causes.iter().enumerate() {
            if cause == 0 || causes[..k].contains(&cause) || (W::ONE_PASS && cause == shown_by) {
                continue;
            }
            let target = self.st.named(cause);
            let link = match target.and_then(|t| t.place) {
                Some(p) if p.span == shown_by => continue,
                Some(p) => Link {
                    span: p.span,
                    resolved: true,
                    target_event: p.event.then_some(cause),
                    anchor: Some(p.anchor),
                    from_event,
                    kind: LinkKind::Cause,
                    target: None,
                    quiet: target.is_some_and(|t| t.quiet),
                },
                None => Link {
                    span: cause,
                    resolved: W::ONE_PASS,
                    target_event: None,
                    anchor: None,
                    from_event,
                    kind: LinkKind::Cause,
                    target: None,
                    quiet: false,
                },
            };
            out.push(link);
        }
        if let Some(m) = member {
            let order = (ts_ns, self.process as u32, thread, raw);
            self.st.groups.links(m, order, shown_by, from_event, out);
        }
    }
}
