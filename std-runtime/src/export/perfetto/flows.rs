//! Causality as Perfetto flows: arrows from a cause's slice to its effect's.
//!
//! trace_processor reads flows in time order: the first event naming an id starts a flow,
//! each later `flow_ids` use draws an arrow from the previous one, and `terminating_flow_ids`
//! draws the last arrow and frees the id (a terminating id no flow is waiting on is ignored).
//! Ids are global over the trace, so one counter numbers every arrow and arrows cross
//! processes as easily as threads. Three relations become flows:
//! - a link (`caused_by`): the cause starts a flow of its own, the effect terminates it;
//!   links to ids that are not in the trace are counted on the effect and otherwise ignored;
//! - a correlation group (`correlate`): one flow chains its members in time order, every
//!   member but the last continuing it and the last terminating it;
//! - a parent that does not enclose its child on the child's track (a context entered on
//!   another thread or in another process, a detached span's children, a detached span's own
//!   parent): the parent starts a flow, the child terminates it.

use std::collections::HashMap;

use super::layout::{Layout, Node};
use crate::model::{Item, ItemRef, Trace};

/// The flow ids every span's begin and every instant carries.
#[derive(Default)]
pub(super) struct Flows {
    items: HashMap<ItemRef, Ends>,
    next: u64,
}

/// The flow ids on one span's begin or one instant, and what the annotations need.
#[derive(Debug, Default)]
pub(super) struct Ends {
    /// Flows it starts or continues (`flow_ids`).
    pub(super) out: Vec<u64>,
    /// Flows it ends (`terminating_flow_ids`).
    pub(super) into: Vec<u64>,
    /// How many of its links name ids that are not in the trace.
    pub(super) unresolved: u64,
    /// Whether another item's link names it.
    pub(super) is_cause: bool,
}

impl Flows {
    /// Numbers the arrows of `trace`: links, then correlation groups, then parents on other
    /// tracks, each in the order of the trace, so the output does not depend on hashing.
    pub(super) fn assign(trace: &Trace) -> Flows {
        let index = trace.index();
        let mut flows = Flows::default();
        for r in items(trace) {
            let links = trace.describe(r).links;
            for (k, cause) in links.iter().enumerate() {
                if links[..k].contains(cause) {
                    continue; // one arrow per cause, however often it is named
                }
                match index.get(cause) {
                    Some(&c) if c != r => {
                        flows.arrow(c, r);
                        flows.items.entry(c).or_default().is_cause = true;
                    }
                    Some(_) => {}
                    None => flows.items.entry(r).or_default().unresolved += 1,
                }
            }
        }
        for group in trace.correlations() {
            let mut members: Vec<_> = group.members.iter().map(|&r| (trace.describe(r), r)).collect();
            // Time order, as `correlations` gives it; ties on a thread in record (id) order.
            members.sort_by_key(|(v, r)| (v.ts_ns, r.process, r.thread, v.id));
            let f = flows.fresh();
            if let Some(((_, last), rest)) = members.split_last() {
                for (_, r) in rest {
                    flows.items.entry(*r).or_default().out.push(f);
                }
                flows.items.entry(*last).or_default().into.push(f);
            }
        }
        for (p, process) in trace.processes.iter().enumerate() {
            for (t, thread) in process.threads.iter().enumerate() {
                let layout = Layout::of(thread);
                let spans =
                    thread.spans.iter().enumerate().map(|(i, s)| (Node::Span(i), Item::Span(i), s.parent));
                let events =
                    thread.events.iter().enumerate().map(|(i, e)| (Node::Event(i), Item::Event(i), e.parent));
                for (node, item, parent) in spans.chain(events) {
                    let Some(parent) = parent else { continue };
                    if layout.encloses(thread, parent, node) {
                        continue;
                    }
                    let child = ItemRef { process: p, thread: t, item };
                    match index.get(&parent) {
                        Some(&from) if from != child => flows.arrow(from, child),
                        _ => {}
                    }
                }
            }
        }
        flows
    }

    /// The flow ids of an item, if it has any causal part.
    pub(super) fn get(&self, r: &ItemRef) -> Option<&Ends> {
        self.items.get(r)
    }

    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// An arrow from `from` to `to` under a fresh id.
    fn arrow(&mut self, from: ItemRef, to: ItemRef) {
        let f = self.fresh();
        self.items.entry(from).or_default().out.push(f);
        self.items.entry(to).or_default().into.push(f);
    }
}

/// Every span and event of the trace, in order (placeholders, with id 0, left out).
fn items(trace: &Trace) -> impl Iterator<Item = ItemRef> + '_ {
    trace.processes.iter().enumerate().flat_map(|(p, process)| {
        process.threads.iter().enumerate().flat_map(move |(t, thread)| {
            let spans =
                thread.spans.iter().enumerate().filter(|(_, s)| s.id != 0).map(|(i, _)| Item::Span(i));
            let events = (0..thread.events.len()).map(Item::Event);
            spans.chain(events).map(move |item| ItemRef { process: p, thread: t, item })
        })
    })
}
