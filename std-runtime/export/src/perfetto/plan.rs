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
//!
//! It also numbers what the second pass would otherwise number as it goes, so that each file
//! can be written by itself, on a thread of its own, and give the same bytes: each process's
//! track uuids and sequence ids follow from the threads of the processes before it (a track
//! made on the way, for a detached span or a thread's steps, takes a uuid from its process's
//! own range), and each file is told ([`Part::met`]) how many of an item's references the
//! files before it met. Files are written apart only where nothing else carries from one to
//! the next ([`Plan::apart`]).

use super::{
    groups::{Group, GroupKey, Queue},
    order::OrderSite,
    scan::{Refs, Scan},
    tally::Tally,
    UUID_BASE,
};
use crate::{
    index::{IdMap, Keys},
    passes::{self, FirstPass, Split},
    process::{Assigned, OsIds, ProcessInfo},
};

/// A referenced item: its flows and whether it is detached.
pub(super) struct Target {
    pub(super) id: u64,
    pub(super) detached: bool,
    /// Flows to the items that link to it: `link_base + 0 .. links`.
    pub(super) links: u32,
    pub(super) link_base: u64,
    /// Flows to its children off its track: `child_base + 0 .. children`.
    pub(super) children: u32,
    pub(super) child_base: u64,
}

/// How far the second pass is through a referenced item's flows: the references met so far
/// (each takes the next flow), and whether its own packet, which starts them, is written.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(super) struct Met {
    pub(super) links: u32,
    pub(super) children: u32,
    pub(super) written: bool,
}

/// What the writer takes of the plan when it comes to a process.
#[derive(Default)]
pub(crate) struct Part {
    /// Its threads' correlated items' flows, in record order.
    pub(super) queues: Vec<Queue>,
    /// By callsite index: its callsites whose spans are matched by order.
    pub(super) order: Vec<OrderSite>,
    /// Where files are written apart: per referenced item (by index) that the files before
    /// this one referred to as well, the references they met.
    pub(super) met: Vec<(u32, Met)>,
}

/// Targets found by [`Plan::target`]'s search, by id: (id, index). A cache the caller keeps.
pub(super) type Found = [(u64, usize); 8];

/// What the writer knows before it starts.
pub(crate) struct Plan {
    pub(super) processes: Vec<ProcessInfo>,
    pub(super) pids: Vec<i32>,
    pub(super) tids: Vec<Vec<i64>>,
    /// Per process: its track's uuid and its sequence id, its threads' the next ones.
    pub(super) firsts: Vec<(u64, u32)>,
    /// The first sequence id no process uses.
    pub(super) free_sequence: u32,
    /// Referenced items, by id.
    pub(super) targets: Vec<Target>,
    /// Their ids, in the same order: searched (8 bytes an entry, where a whole target takes
    /// a cache line).
    pub(super) ids: Vec<u64>,
    /// Correlation keys, numbered as the groups know them.
    pub(super) keys: Keys,
    /// Names matched by order, by name: each one's first flow (occurrence k takes base + k).
    pub(super) matched: Vec<(String, u64)>,
    /// Per process, what the writer takes when it comes to it.
    pub(super) parts: Vec<Part>,
    /// The correlation groups too large for the queues, by key: their members are looked up.
    pub(super) large: IdMap<GroupKey, Group>,
    /// Whether each file can be written by itself: several files read apart, whose ids are
    /// each file's own, and no large directed group (whose causes and effects are numbered
    /// as they come, in every file). Then the second pass starts every file afresh from its
    /// [`Part`], however many threads write.
    pub(crate) apart: bool,
}

/// The first uuid of a process's tracks made on the way (detached spans, steps): each
/// process has 2^32 of its own, above the tracks numbered in advance (from [`UUID_BASE`]).
pub(super) fn made_uuids(process: usize) -> u64 {
    (process as u64 + 1) << 32
}

impl Plan {
    /// The plan of what `scan` learnt, made on up to `threads` threads where it can be.
    pub(super) fn new(scan: Scan, threads: usize) -> Plan {
        let mut scan = scan;
        for (id, n) in std::mem::take(&mut scan.hot) {
            scan.count_links(id, n);
        }
        let Scan { processes, mut runs, refs, mut keys, groups, order, file_refs, file_runs, .. } = scan;
        let apart_runs =
            file_runs.len() == processes.len() && processes.len() > 1 && !ids_shared(&runs, &file_runs);
        let refs = if file_refs.is_empty() {
            refs.into_sorted()
        } else {
            let mut all = Tally::default();
            file_refs.iter().flatten().for_each(|&(id, r)| all.add(id, r));
            all.into_sorted()
        };
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
                    children,
                    child_base: 0,
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
        let correlations = groups.plan(&mut next, &rank, threads);
        // Then the names matched by order, one flow per occurrence.
        let (matched, by_process) = order.plan(processes.len(), &mut next);
        keys.next_process();
        let (_, Assigned { pids, tids }) = OsIds::assign(&processes);
        // `OsIds` hands out ids up to i32::MAX or fresh ones just above 2^22.
        let pids = pids.into_iter().map(|p| i32::try_from(p).unwrap_or(i32::MAX)).collect();
        let ids: Vec<u64> = targets.iter().map(|t| t.id).collect();
        let large = correlations.large;
        let apart = apart_runs && !large.values().any(Group::directed);
        let mut met = if apart { met_before(&file_refs, &ids) } else { Vec::new() }.into_iter();
        let (mut queues, mut order) = (correlations.queues.into_iter(), by_process.into_iter());
        let parts = (0..processes.len())
            .map(|_| Part {
                queues: queues.next().unwrap_or_default(),
                order: order.next().unwrap_or_default(),
                met: met.next().unwrap_or_default(),
            })
            .collect();
        let mut firsts = Vec::with_capacity(processes.len());
        let (mut uuid, mut seq) = (UUID_BASE, 0u32);
        for p in &processes {
            firsts.push((uuid + 1, seq + 1));
            uuid += 1 + p.threads.len() as u64;
            seq = seq.saturating_add(1 + p.threads.len() as u32);
        }
        let free_sequence = seq.saturating_add(1);
        Plan {
            processes,
            pids,
            tids,
            firsts,
            free_sequence,
            targets,
            ids,
            keys,
            matched,
            parts,
            large,
            apart,
        }
    }

    /// The index of the referenced item `id`, if it is one; looked for first just before
    /// `near` (a link's cause is most often a recent item of the same thread), then among the
    /// last found (or an item many refer to).
    pub(super) fn target(&self, id: u64, near: usize, found: &mut Found) -> Option<usize> {
        let ids = &self.ids;
        let from = near.saturating_sub(4).min(ids.len());
        let to = near.saturating_add(1).min(ids.len());
        if let Some(k) = ids[from..to].iter().position(|&x| x == id) {
            return Some(from + k);
        }
        let memo = &mut found[id as usize % found.len()];
        if memo.0 == id && ids.get(memo.1) == Some(&id) {
            return Some(memo.1);
        }
        let i = ids.binary_search(&id).ok()?;
        *memo = (id, i);
        Some(i)
    }
}

/// Whether two files have ids in common (the same file given twice, say): then an item's
/// own packet is written in the first file that has it, which the next must know.
fn ids_shared(runs: &[(u64, u64)], file_runs: &[usize]) -> bool {
    let mut tagged: Vec<(u64, u64, usize)> = Vec::with_capacity(runs.len());
    for (f, &start) in file_runs.iter().enumerate() {
        let end = file_runs.get(f + 1).copied().unwrap_or(runs.len());
        tagged.extend(runs[start..end].iter().map(|&(first, last)| (first, last, f)));
    }
    tagged.sort_unstable();
    // The furthest run so far, and its file.
    let mut reach: Option<(u64, usize)> = None;
    for (first, last, f) in tagged {
        match reach {
            Some((end, g)) if first <= end && g != f => return true,
            Some((end, _)) if end >= last => {}
            _ => reach = Some((last, f)),
        }
    }
    false
}

/// Per file, the references to each item (by index in `ids`) that the files before it met,
/// for the items it refers to as well.
fn met_before(file_refs: &[Vec<(u64, Refs)>], ids: &[u64]) -> Vec<Vec<(u32, Met)>> {
    let mut so_far = vec![Met::default(); ids.len()];
    file_refs
        .iter()
        .map(|refs| {
            let mut met = Vec::new();
            for (id, r) in refs {
                let Ok(i) = ids.binary_search(id) else { continue };
                let m = &mut so_far[i];
                if m.links > 0 || m.children > 0 {
                    met.push((i as u32, *m));
                }
                m.links = m.links.saturating_add(r.links);
                m.children = m.children.saturating_add(r.children);
            }
            met
        })
        .collect()
}

/// The first pass makes the plan.
impl FirstPass for Scan {
    type Plan = Plan;

    fn into_plan(self) -> Plan {
        Plan::new(self, 1)
    }
}

/// Passes over single files, merged in file order: the plan is the same whether they were
/// read on one thread or several.
impl Split for Scan {
    fn merge(&mut self, later: Scan) {
        self.merge_file(later);
    }

    /// The correlation groups' partitions are counted and numbered on the threads.
    fn into_plan_on(self, threads: usize) -> Plan {
        Plan::new(self, threads)
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
        self.parts.iter_mut().for_each(|p| p.order.clear());
    }
}
