//! What the writer knows before it starts, made of what the first pass (`scan.rs`) learnt.
//!
//! [`Plan`] turns the references into flow ids: each referenced item starts one flow per arrow
//! out of it, numbered from a base; the n-th item to reference it in the second pass takes
//! base + n. A name matched by order gets one flow per occurrence, base + k, which its k-th
//! span on every rank carries: one chain through the ranks in time order. A directed
//! correlation group with C causes and E effects gets C x E flows from base: its i-th cause
//! starts base + i E + j for each j, its j-th effect ends base + i E + j for each i, so each
//! arrow goes from one cause to one effect (`groups.rs`, which works out every member's flows
//! before the second pass).

use super::{groups::Correlations, order::OrderSite, scan::Scan};
use crate::export::{
    index::Keys,
    passes,
    process::{Assigned, OsIds, ProcessInfo},
};

/// A referenced item: its flows and whether it is detached. Counters advance in the second
/// pass as its references are met.
pub(super) struct Target {
    pub(super) id: u64,
    pub(super) detached: bool,
    /// Flows to the items that link to it: `link_base + 0 .. links`.
    pub(super) links: u32,
    pub(super) link_base: u64,
    pub(super) links_met: u32,
    /// Flows to its children off its track: `child_base + 0 .. children`.
    pub(super) children: u32,
    pub(super) child_base: u64,
    pub(super) children_met: u32,
    /// Whether its own packet (which starts its flows) is written.
    pub(super) written: bool,
}

/// What the writer knows before it starts.
pub(crate) struct Plan {
    pub(super) processes: Vec<ProcessInfo>,
    pub(super) pids: Vec<i32>,
    pub(super) tids: Vec<Vec<i64>>,
    /// Referenced items, by id.
    pub(super) targets: Vec<Target>,
    /// Their ids, in the same order: searched (8 bytes an entry, where a whole target takes
    /// a cache line).
    pub(super) ids: Vec<u64>,
    /// Targets found by [`target`](Plan::target)'s search, by id: (id, index).
    found: [(u64, usize); 8],
    /// Correlation keys, numbered as the groups know them.
    pub(super) keys: Keys,
    /// Every correlated item's flows: per process and thread in record order, and the large
    /// groups.
    pub(super) correlations: Correlations,
    /// Names matched by order, by name: each one's first flow (occurrence k takes base + k).
    pub(super) matched: Vec<(String, u64)>,
    /// Per process, by callsite index: the callsites whose spans are matched by order.
    pub(super) order: Vec<Vec<OrderSite>>,
}

impl Plan {
    pub(super) fn new(scan: Scan) -> Plan {
        let mut scan = scan;
        for (id, n) in std::mem::take(&mut scan.hot) {
            scan.count_links(id, n);
        }
        let Scan { processes, mut runs, refs, mut keys, groups, order, .. } = scan;
        runs.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
        for (first, last) in runs {
            match merged.last_mut() {
                Some((_, l)) if first <= l.saturating_add(1) => *l = (*l).max(last),
                _ => merged.push((first, last)),
            }
        }
        let exists = |id: u64| {
            let i = merged.partition_point(|&(first, _)| first <= id);
            i > 0 && merged[i - 1].1 >= id
        };
        let mut targets: Vec<Target> = refs
            .into_sorted()
            .into_iter()
            // 0 is the null id (stand-ins have it): never a target.
            .filter(|&(id, _)| id != 0)
            .filter_map(|(id, r)| {
                let (links, children) = if exists(id) { (r.links, r.children) } else { (0, 0) };
                (r.detached || links > 0 || children > 0).then_some(Target {
                    id,
                    detached: r.detached,
                    links,
                    link_base: 0,
                    links_met: 0,
                    children,
                    child_base: 0,
                    children_met: 0,
                    written: false,
                })
            })
            .collect();
        // Flow ids: from 1, the referenced items in id order.
        let mut next = 1u64;
        for t in &mut targets {
            (t.link_base, t.child_base) = (next, next + u64::from(t.links));
            next += u64::from(t.links) + u64::from(t.children);
        }
        // Then the correlation groups: keys by name, each key's groups by value.
        let mut rank = vec![0u32; keys.numbers.len()];
        let mut names: Vec<(&str, u32)> = keys.numbers.iter().map(|(k, &n)| (k.as_str(), n)).collect();
        names.sort_unstable();
        names.iter().enumerate().for_each(|(r, &(_, n))| rank[n as usize] = r as u32);
        let correlations = groups.plan(&mut next, &rank);
        // Then the names matched by order, one flow per occurrence.
        let (matched, by_process) = order.plan(processes.len(), &mut next);
        keys.next_process();
        let (_, Assigned { pids, tids }) = OsIds::assign(&processes);
        // `OsIds` hands out ids up to i32::MAX or fresh ones just above 2^22.
        let pids = pids.into_iter().map(|p| i32::try_from(p).unwrap_or(i32::MAX)).collect();
        let ids = targets.iter().map(|t| t.id).collect();
        Plan {
            processes,
            pids,
            tids,
            targets,
            ids,
            found: [(0, usize::MAX); 8],
            keys,
            correlations,
            matched,
            order: by_process,
        }
    }

    /// The index of the referenced item `id`, if it is one; looked for first just before
    /// `near` (a link's cause is most often a recent item of the same thread), then among the
    /// last found (or an item many refer to).
    pub(super) fn target(&mut self, id: u64, near: usize) -> Option<usize> {
        let ids = &self.ids;
        let from = near.saturating_sub(4).min(ids.len());
        let to = near.saturating_add(1).min(ids.len());
        if let Some(k) = ids[from..to].iter().position(|&x| x == id) {
            return Some(from + k);
        }
        let memo = &mut self.found[id as usize % self.found.len()];
        if memo.0 == id && ids.get(memo.1) == Some(&id) {
            return Some(memo.1);
        }
        let i = ids.binary_search(&id).ok()?;
        *memo = (id, i);
        Some(i)
    }
}

impl passes::Plan for Plan {
    fn processes(&self) -> &[ProcessInfo] {
        &self.processes
    }

    /// The writer takes each process track from here, never from the files' second reading.
    fn processes_mut(&mut self) -> &mut [ProcessInfo] {
        &mut self.processes
    }

    /// Forgets the matching by order: no flows between spans of different ranks but those
    /// recorded.
    fn unmatch(&mut self) {
        self.matched.clear();
        self.order.iter_mut().for_each(Vec::clear);
    }
}
