//! The walk of `why` over any [`Source`]: breadth first from the symptom, one depth at a time,
//! so that a source that reads files loads each depth's items and groups at once.

use super::{
    groups::{notes, reaching_links, sampled},
    source::{Group, Source},
    Explanation, ItemInfo, Reached, Relation, Step,
};
use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};

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
    Item(u64),
    Again(u64),
    Unknown(u64),
}

/// Explains the item `symptom` (an id `source` holds): the causal chain back to its root
/// causes (see the module docs of `analysis`).
pub(super) fn walk<S: Source>(source: &mut S, symptom: u64) -> Result<Explanation, S::Error> {
    // Every item hangs under the nearest way to reach it; items of one depth are handled in
    // the order they were reached, as a queue would.
    let mut nodes: Vec<Node> = Vec::new();
    let mut top: Vec<usize> = Vec::new();
    let mut visited: HashSet<u64> = HashSet::from([symptom]);
    let (mut unknown, mut unknown_seen): (Vec<u64>, HashSet<u64>) = Default::default();
    let (mut link_targets, mut targets_seen): (Vec<u64>, HashSet<u64>) = Default::default();
    // A group's members all reach each other: expanding it once is enough (and keeps a group
    // of n members from costing n² steps).
    let mut groups_done: HashSet<*const Group> = HashSet::new();
    let mut links_followed = 0;
    let mut level: Vec<(u64, Option<usize>, usize)> = vec![(symptom, None, 0)];
    while !level.is_empty() {
        let ids: Vec<u64> = level.iter().map(|&(id, ..)| id).collect();
        source.load(&ids)?;
        source.load_groups(&ids)?;
        let mut next = Vec::new();
        for (at, node, depth) in level {
            let facts = source.facts(at);
            let mut edges: Vec<(Relation, u64, Option<u64>)> =
                facts.links.iter().map(|&l| (Relation::CausedBy, l, None)).collect();
            if let Some(g) = source.group(at) {
                if g.relation == Relation::Message {
                    // Each effect has its own causes to show; a cause has none here.
                    edges.extend(g.causes_of(at).iter().map(|&id| (Relation::Message, id, None)));
                } else if groups_done.insert(Rc::as_ptr(g)) {
                    let peers = g.members.iter().filter(|&&m| m != at);
                    edges.extend(peers.map(|&id| (g.relation, id, g.occurrence)));
                }
            }
            edges.extend(facts.parent.map(|p| (Relation::Inside, p, None)));
            for (relation, id, occurrence) in edges.into_iter().filter(|&(_, id, _)| id != 0) {
                let target = match source.contains(id) {
                    true if visited.insert(id) => {
                        next.push((id, Some(nodes.len()), depth + 1));
                        Target::Item(id)
                    }
                    true if relation.causal() => Target::Again(id),
                    true => continue,
                    false if !unknown_seen.insert(id) => continue,
                    false => {
                        unknown.push(id);
                        Target::Unknown(id)
                    }
                };
                if relation.causal() && !matches!(target, Target::Unknown(_)) {
                    links_followed += 1;
                    if id != symptom && targets_seen.insert(id) {
                        link_targets.push(id);
                    }
                }
                let i = nodes.len();
                nodes.push(Node {
                    relation,
                    from: at,
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
        level = next;
    }

    let reaches_link = reaching_links(source, &visited);
    let root_causes: Vec<u64> = link_targets.into_iter().filter(|id| !reaches_link.contains(id)).collect();
    let mut shown: Vec<u64> = visited.iter().copied().collect();
    shown.sort_unstable();
    source.load_fields(&shown)?;
    let t0 = source.earliest_ns();
    let infos: HashMap<u64, ItemInfo> = shown.iter().map(|&id| (id, info(source, id, t0))).collect();

    let mut steps = Vec::with_capacity(nodes.len());
    let mut stack: Vec<usize> = top.into_iter().rev().collect();
    while let Some(n) = stack.pop() {
        let node = &nodes[n];
        let reached = match node.reached {
            Target::Item(id) => Reached::Item(infos[&id].clone()),
            Target::Again(id) => Reached::Again(infos[&id].clone()),
            Target::Unknown(id) => Reached::Unknown(id),
        };
        let occurrence = node.occurrence;
        steps.push(Step { depth: node.depth, relation: node.relation, from: node.from, reached, occurrence });
        stack.extend(node.children.iter().rev());
    }
    let mut notes = notes(source, &visited);
    notes.extend(sampled(source));

    Ok(Explanation {
        symptom: infos[&symptom].clone(),
        steps,
        root_causes: root_causes.iter().map(|id| infos[id].clone()).collect(),
        unknown_ids: unknown,
        links_followed,
        notes,
    })
}

/// A loaded item, its fields loaded, described for a reader; offsets from `t0`.
fn info<S: Source>(source: &S, id: u64, t0: u64) -> ItemInfo {
    let f = source.facts(id);
    let (src, header) = source.process(f.at.process);
    let (thread_name, tid) = source.thread(f.at.process, f.at.thread);
    ItemInfo {
        at: f.at,
        id: f.id,
        name: f.callsite.name.to_string(),
        kind: match f.at.item {
            crate::model::Item::Span(_) => "span",
            crate::model::Item::Event(_) => "event",
        },
        source: src.to_owned(),
        pid: header.pid,
        process_name: header.name.clone(),
        host: header.host.clone(),
        rank: header.label("rank").map(str::to_owned),
        labels: header.labels.clone(),
        thread_name: thread_name.to_owned(),
        tid,
        offset_us: f.ts_ns.saturating_sub(t0) as f64 / 1000.0,
        fields: source.fields(id),
        correlation: f
            .correlation
            .filter(|_| !f.callsite.correlate.is_empty())
            .map(|c| (f.callsite.correlate.to_string(), c)),
        parent: f.parent,
        links: f.links.clone(),
    }
}
