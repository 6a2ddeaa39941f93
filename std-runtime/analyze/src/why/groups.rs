//! The groups the walk crosses between ranks (correlation groups, directed ones included, and
//! operations matched by order), the notes on names it could not match, and which visited
//! items reach a link.

use super::{
    source::{Group, Source},
    Options, Relation,
};
use crate::{
    matching::{self, Rank, RankField},
    model::Trace,
};
use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};

/// Each item in a group of two or more and its group: correlation groups, then (unless
/// `options` turn it off) operations matched by order; and the names that two or more ranks
/// have but that are not matched, with why.
pub(super) fn groups(trace: &Trace, options: &Options) -> (HashMap<u64, Rc<Group>>, matching::Matching) {
    let mut out = HashMap::new();
    let id = |r| trace.describe(r).id;
    let mut add = |group: Group| {
        let group = Rc::new(group);
        for &m in &group.members {
            out.insert(m, group.clone());
        }
    };
    for c in trace.correlations() {
        let relation = if c.directed { Relation::Message } else { Relation::CorrelatedWith };
        let (members, causes) =
            (c.members.into_iter().map(id).collect(), c.causes.into_iter().map(id).collect());
        add(Group { relation, occurrence: None, members, causes });
    }
    let mut decided = matching::Matching::default();
    if options.match_by_order {
        let (matching, operations) = matching::match_trace(trace);
        for op in operations.into_iter().filter(|op| op.members.len() > 1) {
            add(Group {
                relation: Relation::MatchedByOrder,
                occurrence: Some(op.occurrence),
                members: op.members.into_iter().map(id).collect(),
                causes: Vec::new(),
            });
        }
        decided = matching;
    }
    (out, decided)
}

/// A sentence for each name of a span the walk visited that is not matched by order, so that
/// a chain that stops at a rank's border says why it did not cross.
pub(super) fn notes<S: Source>(source: &S, visited: &HashSet<u64>) -> Vec<String> {
    let unmatched = &source.matching().unmatched;
    let mut names: Vec<&str> = visited
        .iter()
        .map(|&id| source.facts(id))
        .filter(|f| matches!(f.at.item, crate::model::Item::Span(_)))
        .map(|f| &*f.callsite.name)
        .filter(|name| unmatched.contains_key(*name))
        .collect();
    names.sort_unstable();
    names.dedup();
    names.into_iter().map(|name| unmatched[name].describe(name, &|r| rank_name(source, r))).collect()
}

/// A sentence for each process that head sampling thinned (`waffle.sample` label): a cause in
/// a root it dropped is not in its file, so a chain can stop short there.
pub(super) fn sampled<S: Source>(source: &S) -> Vec<String> {
    let sampled = (0..source.processes()).filter_map(|process| {
        let rate = source.process(process).1.label("waffle.sample")?;
        let who = rank_name(source, &Rank { process, field: RankField::None });
        Some(format!(
            "{who} was head-sampled (waffle.sample={rate}): its file holds only the roots it kept, \
             each whole, and no recorded item names a dropped one, but a cause in a dropped root was never recorded"
        ))
    });
    sampled.collect()
}

/// A rank as a reader knows it: the process's `rank` label (or its pid), and the span's own
/// `rank` field when it has one.
fn rank_name<S: Source>(source: &S, rank: &Rank) -> String {
    let header = source.process(rank.process).1;
    let process = match header.label("rank") {
        Some(label) => format!("rank {label}"),
        None => format!("pid {}", header.pid),
    };
    match &rank.field {
        RankField::None => process,
        field => format!("{process} (rank field {field})"),
    }
}

/// The visited items from which a link to a known item can be reached without following a
/// link: through parents and undirected groups. Those are not root causes. An effect of a
/// directed group has a link of its own, to each of the group's causes.
pub(super) fn reaching_links<S: Source>(source: &S, visited: &HashSet<u64>) -> HashSet<u64> {
    // Walk the parent and correlation edges backwards, from every item that has a link.
    let mut children: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut queue: Vec<u64> = Vec::new();
    for &id in visited {
        let facts = source.facts(id);
        if let Some(p) = facts.parent {
            children.entry(p).or_default().push(id);
        }
        let caused = source.group(id).is_some_and(|g| !g.causes_of(id).is_empty());
        if caused || facts.links.iter().any(|&l| source.contains(l)) {
            queue.push(id);
        }
    }
    let mut reached: HashSet<u64> = queue.iter().copied().collect();
    let mut groups_done: HashSet<*const Group> = HashSet::new();
    while let Some(id) = queue.pop() {
        let undirected = source.group(id).filter(|g| g.relation != Relation::Message);
        let group = undirected.filter(|g| groups_done.insert(Rc::as_ptr(g)));
        let peers = group.into_iter().flat_map(|g| g.members.iter().copied());
        let kids = children.get(&id).into_iter().flatten().copied();
        for next in peers.chain(kids).collect::<Vec<_>>() {
            if visited.contains(&next) && reached.insert(next) {
                queue.push(next);
            }
        }
    }
    reached
}
