//! "What caused this event?": the causal chain from a symptom back to its root causes.
//!
//! [`why`] walks the cause graph of a decoded [`Trace`] backwards from one span or event (the
//! symptom), breadth first, across threads and files. From each item it follows
//!
//! - its **links**, the ids named in `caused_by` ([`Relation::CausedBy`]);
//! - its **parent** span, which may be on another thread or in another process
//!   ([`Relation::Inside`]);
//! - for an item with a correlation value, the **other members of its correlation group**, such
//!   as the same allreduce on the other ranks ([`Relation::CorrelatedWith`]);
//! - for an **effect** of a directed correlation group (a key ending in `<`, see
//!   [`crate::correlation`]), **the group's causes** (keys ending in `>`), such as the send of
//!   the message a receive got ([`Relation::Message`]). A cause is never walked forward to its
//!   effects: a send did not happen because of its receive;
//! - for a span matched by order ([`crate::matching`]: the k-th span of its name on every
//!   rank of an SPMD program), **the same operation on the other ranks**
//!   ([`Relation::MatchedByOrder`]), unless [`Options::match_by_order`] is off. The step says
//!   it was matched by order, so that a reader can tell it from a recorded link.
//!
//! Every item is visited once, so cycles (a group always is one) end the walk. Ids
//! that none of the files holds are reported as unknown and not followed.
//!
//! The **root causes** are the items reached through a causal link or a message whose own
//! causes are not in the walk: neither they, their ancestors, nor what they are correlated with
//! (and that one's ancestors) carry a link (or are the effect of a message) to an item of these
//! files; likewise for what it is matched with. A root cause whose links all point outside the
//! files is still one, as far as these files can tell. When no link is reachable from the
//! symptom at all, there is no root cause to name: [`Explanation::root_causes`] is empty and the
//! steps show only where the symptom happened.
//!
//! [`Explanation::to_text`] renders the result as an indented tree and
//! [`Explanation::to_json`] as JSON (its shape is documented there).
//!
//! ```
//! use waffle_decode::analysis::{why, Selector};
//! # let trace = waffle_decode::model::Trace::default();
//! match why(&trace, &Selector::name("Output buffer is NaN after AllReduce", 0)) {
//!     Ok(explanation) => print!("{}", explanation.to_text()),
//!     Err(e) => eprintln!("{e}"),
//! }
//! ```

use crate::model::{Item, ItemRef, Trace, Value};
use groups::{groups, notes, reaching_links, Group};
use std::{
    collections::{HashSet, VecDeque},
    rc::Rc,
};

mod groups;
pub mod hang;
#[cfg(test)]
mod message_tests;
#[cfg(test)]
mod order_tests;
mod render;
mod select;
#[cfg(test)]
mod tests;

pub use render::JSON_VERSION;
pub use select::{Selector, WhyError};

/// How a step's item relates to the item it was reached from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Relation {
    /// Named in the other item's `caused_by`.
    CausedBy,
    /// The other item's parent span.
    Inside,
    /// In the same correlation group as the other item (same key and value).
    CorrelatedWith,
    /// The same operation as the other item on another rank: the k-th span of the same name
    /// on each rank, matched by order, not by anything recorded.
    MatchedByOrder,
    /// A cause of the other item through a directed correlation: the other item is an effect
    /// (key `stem<`) of the group this item is a cause of (key `stem>`, same value), such as
    /// the send of a received message.
    Message,
}

impl Relation {
    /// The relation as the text and JSON outputs write it: `caused by`, `inside`,
    /// `correlated with`, `matched by order with`, `caused by message`.
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::CausedBy => "caused by",
            Relation::Inside => "inside",
            Relation::CorrelatedWith => "correlated with",
            Relation::MatchedByOrder => "matched by order with",
            Relation::Message => "caused by message",
        }
    }

    /// Whether it goes from an effect to its cause: a recorded link or a message.
    pub fn causal(self) -> bool {
        matches!(self, Relation::CausedBy | Relation::Message)
    }
}

/// A span or event, described for a reader.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemInfo {
    /// Where it is in the trace.
    pub at: ItemRef,
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// `"span"` or `"event"`.
    pub kind: &'static str,
    /// The file it was read from, as given.
    pub source: String,
    /// OS process id.
    pub pid: u32,
    /// Process name.
    pub process_name: String,
    /// Host name.
    pub host: String,
    /// The process's `rank` label, if any.
    pub rank: Option<String>,
    /// All the process's labels.
    pub labels: Vec<(String, String)>,
    /// Thread name ("" if unnamed).
    pub thread_name: String,
    /// OS thread id.
    pub tid: u64,
    /// Begin (span) or time (event), in µs after the earliest timestamp of the trace.
    pub offset_us: f64,
    /// Field names and values.
    pub fields: Vec<(String, Value)>,
    /// Correlation key and value, if any.
    pub correlation: Option<(String, u64)>,
    /// Its parent span's id.
    pub parent: Option<u64>,
    /// Ids of its causes.
    pub links: Vec<u64>,
}

/// What a step reached.
#[derive(Clone, Debug, PartialEq)]
pub enum Reached {
    /// An item seen here for the first time; the walk continues from it.
    Item(ItemInfo),
    /// An item already shown higher up (only causal links are shown again, so that cycles of
    /// causes are visible).
    Again(ItemInfo),
    /// An id that none of the files holds.
    Unknown(u64),
}

/// One edge of the walk, in tree order (each step's predecessor is the closest step above it
/// with a smaller depth, or the symptom).
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Edges from the symptom: 1 for what is reached from the symptom directly.
    pub depth: usize,
    /// How the item relates to the item it was reached from.
    pub relation: Relation,
    /// The id of the item it was reached from.
    pub from: u64,
    /// What it reached.
    pub reached: Reached,
    /// For [`Relation::MatchedByOrder`]: k, the occurrence of its name on each rank (from 0).
    pub occurrence: Option<u64>,
}

impl Step {
    /// The id of the item reached.
    pub fn id(&self) -> u64 {
        match &self.reached {
            Reached::Item(i) | Reached::Again(i) => i.id,
            Reached::Unknown(id) => *id,
        }
    }

    /// The item reached, unless its id is unknown.
    pub fn item(&self) -> Option<&ItemInfo> {
        match &self.reached {
            Reached::Item(i) | Reached::Again(i) => Some(i),
            Reached::Unknown(_) => None,
        }
    }
}

/// The answer to "what caused this?".
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The item asked about.
    pub symptom: ItemInfo,
    /// The walk as a tree, depth first, in the order the walk found each step's siblings
    /// (causes, then correlated items, then the parent).
    pub steps: Vec<Step>,
    /// The root causes, in the order the walk reached them (nearest first).
    pub root_causes: Vec<ItemInfo>,
    /// Ids named as causes or parents that none of the files holds.
    pub unknown_ids: Vec<u64>,
    /// How many causal links (recorded, or messages) between items of these files the walk
    /// followed.
    pub links_followed: usize,
    /// Why spans the walk passed were not matched by order with other ranks, one sentence per
    /// name (see [`crate::matching::Unmatched`]).
    pub notes: Vec<String>,
}

/// How the walk may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Whether spans are matched by order across ranks (default: yes).
    pub match_by_order: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { match_by_order: true }
    }
}

/// A node of the walk's tree, before it is flattened into steps.
struct Node {
    relation: Relation,
    from: u64,
    reached: Target,
    depth: usize,
    occurrence: Option<u64>,
    children: Vec<usize>,
}

#[derive(Clone, Copy)]
enum Target {
    Item(ItemRef),
    Again(ItemRef),
    Unknown(u64),
}

/// Explains the span or event `selector` picks: the causal chain back to its root causes.
pub fn why(trace: &Trace, selector: &Selector) -> Result<Explanation, WhyError> {
    why_with(trace, selector, &Options::default())
}

/// [`why`], with options.
pub fn why_with(trace: &Trace, selector: &Selector, options: &Options) -> Result<Explanation, WhyError> {
    let index = trace.index();
    let symptom = select::select(trace, &index, selector)?;
    let t0 = earliest_ns(trace);
    let (groups, unmatched) = groups(trace, options);
    let symptom_id = trace.describe(symptom).id;

    // Breadth first, so every item hangs under the nearest way to reach it.
    let mut nodes: Vec<Node> = Vec::new();
    let mut top: Vec<usize> = Vec::new();
    let mut visited: HashSet<u64> = HashSet::from([symptom_id]);
    let (mut unknown, mut unknown_seen): (Vec<u64>, HashSet<u64>) = Default::default();
    let (mut link_targets, mut targets_seen): (Vec<u64>, HashSet<u64>) = Default::default();
    // A group's members all reach each other: expanding it once is enough (and keeps a group
    // of n members from costing n² steps).
    let mut groups_done: HashSet<*const Group> = HashSet::new();
    let mut links_followed = 0;
    let mut queue: VecDeque<(ItemRef, Option<usize>, usize)> = VecDeque::from([(symptom, None, 0)]);
    while let Some((at, node, depth)) = queue.pop_front() {
        let view = trace.describe(at);
        let mut edges: Vec<(Relation, u64, Option<u64>)> =
            view.links.iter().map(|&l| (Relation::CausedBy, l, None)).collect();
        if let Some(g) = groups.get(&at) {
            if g.relation == Relation::Message {
                // Each effect has its own causes to show; a cause has none here.
                let causes = g.causes_of(at).iter().map(|&c| trace.describe(c).id);
                edges.extend(causes.map(|id| (Relation::Message, id, None)));
            } else if groups_done.insert(Rc::as_ptr(g)) {
                let peers = g.members.iter().filter(|&&m| m != at).map(|&m| trace.describe(m).id);
                edges.extend(peers.map(|id| (g.relation, id, g.occurrence)));
            }
        }
        edges.extend(view.parent.map(|p| (Relation::Inside, p, None)));
        for (relation, id, occurrence) in edges.into_iter().filter(|&(_, id, _)| id != 0) {
            let target = match index.get(&id) {
                Some(&r) if visited.insert(id) => {
                    queue.push_back((r, Some(nodes.len()), depth + 1));
                    Target::Item(r)
                }
                Some(&r) if relation.causal() => Target::Again(r),
                Some(_) => continue,
                None if !unknown_seen.insert(id) => continue,
                None => {
                    unknown.push(id);
                    Target::Unknown(id)
                }
            };
            if relation.causal() && !matches!(target, Target::Unknown(_)) {
                links_followed += 1;
                if id != symptom_id && targets_seen.insert(id) {
                    link_targets.push(id);
                }
            }
            let i = nodes.len();
            nodes.push(Node {
                relation,
                from: view.id,
                reached: target,
                depth: depth + 1,
                occurrence,
                children: Vec::new(),
            });
            match node {
                Some(n) => nodes[n].children.push(i),
                None => top.push(i),
            }
        }
    }

    let reaches_link = reaching_links(trace, &index, &groups, &visited);
    let root_causes = link_targets
        .iter()
        .filter(|id| !reaches_link.contains(id))
        .map(|id| info(trace, index[id], t0))
        .collect();

    let mut steps = Vec::with_capacity(nodes.len());
    let mut stack: Vec<usize> = top.into_iter().rev().collect();
    while let Some(n) = stack.pop() {
        let node = &nodes[n];
        let reached = match node.reached {
            Target::Item(r) => Reached::Item(info(trace, r, t0)),
            Target::Again(r) => Reached::Again(info(trace, r, t0)),
            Target::Unknown(id) => Reached::Unknown(id),
        };
        let occurrence = node.occurrence;
        steps.push(Step { depth: node.depth, relation: node.relation, from: node.from, reached, occurrence });
        stack.extend(node.children.iter().rev());
    }
    let mut notes = notes(trace, &index, &visited, &unmatched);
    notes.extend(groups::sampled(trace));

    Ok(Explanation {
        symptom: info(trace, symptom, t0),
        steps,
        root_causes,
        unknown_ids: unknown,
        links_followed,
        notes,
    })
}

/// The earliest timestamp of the trace, which offsets count from.
fn earliest_ns(trace: &Trace) -> u64 {
    let threads = trace.processes.iter().flat_map(|p| &p.threads);
    threads
        .flat_map(|t| t.spans.iter().map(|s| s.start_ns).chain(t.events.iter().map(|e| e.ts_ns)))
        .min()
        .unwrap_or(0)
}

fn info(trace: &Trace, at: ItemRef, t0: u64) -> ItemInfo {
    let p = &trace.processes[at.process];
    let th = &p.threads[at.thread];
    let (kind, fields): (_, Vec<(String, Value)>) = match at.item {
        Item::Span(i) => ("span", th.spans[i].fields().map(|(k, v)| (k.to_owned(), v.clone())).collect()),
        Item::Event(i) => ("event", th.events[i].fields().map(|(k, v)| (k.to_owned(), v.clone())).collect()),
    };
    let v = trace.describe(at);
    ItemInfo {
        at,
        id: v.id,
        name: v.callsite.name.clone(),
        kind,
        source: p.source.clone(),
        pid: p.header.pid,
        process_name: p.header.name.clone(),
        host: p.header.host.clone(),
        rank: p.header.label("rank").map(str::to_owned),
        labels: p.header.labels.clone(),
        thread_name: th.name.clone(),
        tid: th.tid,
        offset_us: v.ts_ns.saturating_sub(t0) as f64 / 1000.0,
        fields,
        correlation: v
            .correlation
            .filter(|_| !v.callsite.correlate.is_empty())
            .map(|c| (v.callsite.correlate.clone(), c)),
        parent: v.parent,
        links: v.links.to_vec(),
    }
}
