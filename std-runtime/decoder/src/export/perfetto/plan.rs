//! The pre-pass: what the writer must know about the whole trace before it writes a record.
//!
//! Flows are pairs of ids on two packets, and either packet may come first in the output, so
//! both ends must be numbered before anything is written. A first pass over the records
//! ([`Scan`], a [`Sink`]) keeps only what cross-references need, so its memory grows with
//! references, not with records. It is handed only the items that refer elsewhere (links,
//! correlations, parents that do not hold them on their track); the decoder tells the rest in
//! numbers (`Sink::EVERY_ITEM`), and counts what each open span holds, for spans that are
//! detached. It learns:
//! - per id that something refers to: how many items link to it, how many children sit off its
//!   track (a context entered on another thread or process, a detached span's children, a
//!   detached span itself), and whether it is detached (then it gets a track of its own from
//!   its begin);
//! - the runs of ids that exist, so that links to ids outside the trace are told apart;
//! - per correlation group: its size and its last member in time;
//! - per span name and rank, how many spans and on which thread, for matching by order
//!   (`order.rs`);
//! - per process its header and threads, for the track descriptors written first.
//!
//! [`Plan`] turns that into flow ids: each referenced item starts one flow per arrow out of it,
//! numbered from a base; the n-th item to reference it in the second pass takes base + n. A
//! name matched by order gets one flow per occurrence, base + k, which its k-th span on every
//! rank carries: one chain through the ranks in time order.

use super::order::{OrderCount, OrderSite};
use crate::export::{
    index::Keys,
    passes::{self, FirstPass, Pass, Records},
    process::{Assigned, OsIds, ProcessInfo},
};
use crate::{
    decode::stream::{FileEnd, Hand, Header, Item, Sink},
    error::Error,
    model::Callsite,
    reader::Warning,
};
use std::sync::Arc;
use waffle::wire::{Calibration, Converter};

/// How an id is referred to.
#[derive(Clone, Copy, Default)]
struct Refs {
    /// Items whose links name it (each once, however often it names it).
    links: u32,
    /// Items whose parent it is and that do not sit inside it on their track.
    children: u32,
    detached: bool,
}

#[derive(Default)]
struct ThreadScan {
    /// The run of consecutive ids being extended (first, last).
    run: Option<(u64, u64)>,
}

/// A correlation group: members so far and the latest, by (time, process, thread, id).
#[derive(Clone, Copy)]
struct Group {
    members: u32,
    last: Member,
}

/// A correlated item by (time in Unix ns, process, thread, id): the order the group's flow
/// follows.
pub(super) type Member = (u64, usize, usize, u64);

/// The first pass over the records.
#[derive(Default)]
pub(crate) struct Scan {
    /// What matching by order counts.
    order: OrderCount,
    processes: Vec<ProcessInfo>,
    /// The calibration of the next file (its last CLOCK frame's), when known in advance.
    next_calibration: Option<Calibration>,
    cal: Option<Converter>,
    threads: Vec<ThreadScan>,
    runs: Vec<(u64, u64)>,
    refs: Tally<u64, Refs>,
    keys: Keys,
    groups: Tally<(u32, u64), Group>,
    /// Links counted and not yet in `refs`: (id, links), the latest first.
    hot: [(u64, u32); 2],
    /// The current process's spans and events so far.
    spans: u64,
    events: u64,
}

impl Scan {
    /// A first pass over `files` files.
    pub(crate) fn new(files: usize) -> Scan {
        Scan { order: OrderCount::new(files), ..Scan::default() }
    }

    /// An item that refers elsewhere (the decoder hands over no other).
    fn item(&mut self, r: &Item<'_>, t: usize) {
        if let (Some(parent), false) = (r.parent, r.held) {
            self.refs.add(parent, Refs { children: 1, ..Refs::default() });
        }
        if !r.links.is_empty() || r.correlation.is_some() {
            self.causes(t, r);
        }
    }

    /// `r`'s links and correlation.
    fn causes(&mut self, t: usize, r: &Item<'_>) {
        for (k, &cause) in r.links.iter().enumerate() {
            if cause != r.id && !r.links[..k].contains(&cause) {
                self.link(cause);
            }
        }
        if let (Some(value), key) = (r.correlation, &r.callsite.correlate) {
            if !key.is_empty() {
                let cal = self.cal.expect("the header comes first");
                let member = (cal.to_unix_ns(r.ticks), self.processes.len() - 1, t, r.id);
                let key = self.keys.number(r.callsite_index, key, true).expect("added");
                self.groups.add((key, value), Group { members: 1, last: member });
            }
        }
    }

    /// One more item links to `cause`. The two causes linked last keep their counts here
    /// until others push them out: a cause that many items name (a run's origin, say) then
    /// adds an entry to the references' tally once in a while, not once per link.
    fn link(&mut self, cause: u64) {
        match &mut self.hot {
            [(id, n), _] if *id == cause => *n = n.saturating_add(1),
            [a, b] if b.0 == cause => {
                b.1 = b.1.saturating_add(1);
                std::mem::swap(a, b);
            }
            [a, b] => {
                let (id, n) = std::mem::replace(b, std::mem::replace(a, (cause, 1)));
                self.count_links(id, n);
            }
        }
    }

    fn count_links(&mut self, id: u64, n: u32) {
        if n > 0 {
            self.refs.add(id, Refs { links: n, ..Refs::default() });
        }
    }

    fn process(&mut self) -> &mut ProcessInfo {
        self.processes.last_mut().expect("the header comes first")
    }
}

impl Pass for Scan {
    fn read(&mut self, records: &mut Records<'_>) -> Result<Vec<Warning>, Error> {
        self.next_calibration = records.calibration();
        records.decode(self)
    }
}

impl FirstPass for Scan {
    type Plan = Plan;

    fn into_plan(self) -> Plan {
        Plan::new(self)
    }
}

impl Sink for Scan {
    type Span = ();
    const FIELDS: bool = false;
    const EVERY_ITEM: bool = false;

    fn process(&mut self, header: &Header) {
        self.cal = Some(self.next_calibration.take().unwrap_or(header.calibration).converter());
        self.threads.clear();
        self.keys.next_process();
        self.processes.push(ProcessInfo::new(header));
    }

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.threads.push(ThreadScan::default());
        self.process().thread();
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        self.process().thread_named(thread, tid, name);
    }

    fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        self.order.hand(index, callsite)
    }

    fn counted(&mut self, thread: usize, index: u32, spans: u64) {
        self.order.counted(thread, index, spans);
    }

    fn span_begin(&mut self, thread: usize, span: &Item<'_>) {
        self.item(span, thread);
        self.spans += 1;
        self.order.span(thread, span);
    }

    fn event(&mut self, thread: usize, event: &Item<'_>) {
        self.item(event, thread);
        self.events += 1;
    }

    fn skipped(&mut self, thread: usize, (first, end): (u64, u64), spans: u64, events: u64) {
        self.spans += spans;
        self.events += events;
        // The chunk's ids extend the thread's run if they follow it (0 is no id).
        let first = first.max(1);
        if end <= first {
            return;
        }
        match &mut self.threads[thread].run {
            Some((_, last)) if last.wrapping_add(1) == first => *last = end - 1,
            run => {
                self.runs.extend(run.take());
                *run = Some((first, end - 1));
            }
        }
    }

    fn span_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn detach(&mut self, _thread: usize, _span: (), _id: u64) {}

    /// The span goes to a track of its own: what it held on the thread's track no longer sits
    /// inside it, nor does it sit inside its holder.
    fn detached_from(&mut self, _thread: usize, id: u64, items: u32, holder: Option<u64>) {
        self.refs.add(id, Refs { children: items, links: 0, detached: true });
        if let Some(holder) = holder {
            self.refs.add(holder, Refs { children: 1, ..Refs::default() });
        }
    }

    fn detached_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn dropped(&mut self, thread: usize, records: u64) {
        self.process().dropped(thread, records);
    }

    fn finish(&mut self, end: &FileEnd) {
        let runs = self.threads.iter_mut().filter_map(|t| t.run.take());
        self.runs.extend(runs);
        self.order.finish_process(self.processes.len() - 1);
        let (spans, events) = (std::mem::take(&mut self.spans), std::mem::take(&mut self.events));
        let p = self.processes.last_mut().expect("the header comes first");
        (p.spans, p.events) = (spans, events);
        p.finish(end);
    }
}

/// Values that add up: what a [`Tally`] keeps per key.
trait Add: Copy {
    fn add(&mut self, other: Self);
}

impl Add for Refs {
    fn add(&mut self, other: Refs) {
        self.links = self.links.saturating_add(other.links);
        self.children = self.children.saturating_add(other.children);
        self.detached |= other.detached;
    }
}

impl Add for Group {
    fn add(&mut self, other: Group) {
        self.members = self.members.saturating_add(other.members);
        self.last = self.last.max(other.last);
    }
}

/// Sums by key, kept as a log of additions that is sorted and summed up whenever it has
/// doubled since the last time (and once at the end). An addition is a push where a map
/// would look its key up (a tree's nodes, or a hash table at random, far from the last one
/// touched), and memory stays within twice the keys (plus a fixed allowance).
struct Tally<K, V> {
    log: Vec<(K, V)>,
    /// Entries after the last summing up.
    summed: usize,
}

impl<K, V> Default for Tally<K, V> {
    fn default() -> Self {
        Tally { log: Vec::new(), summed: 0 }
    }
}

impl<K: Ord + Copy, V: Add> Tally<K, V> {
    /// Entries the log may hold before it is first summed up.
    const ALLOWANCE: usize = 1 << 16;

    fn add(&mut self, key: K, value: V) {
        self.log.push((key, value));
        if self.log.len() >= (2 * self.summed).max(Self::ALLOWANCE) {
            self.sum();
        }
    }

    fn sum(&mut self) {
        // Stable, and quick on runs: each thread adds its keys mostly in ascending order.
        self.log.sort_by_key(|&(k, _)| k);
        self.log.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1.add(later.1);
            }
            same
        });
        self.summed = self.log.len();
    }

    /// Each key once, with its sum, in key order.
    fn into_sorted(mut self) -> Vec<(K, V)> {
        self.sum();
        self.log
    }
}

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

/// A correlation group of two or more, by key number and value: its flow, and its last
/// member, which ends the flow.
pub(super) struct GroupPlan {
    pub(super) key: (u32, u64),
    pub(super) flow: u64,
    pub(super) last: Member,
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
    /// Correlation keys, numbered as `groups` knows them.
    pub(super) keys: Keys,
    /// Groups of two or more, sorted by key number and value (a thread's values mostly grow,
    /// so the writer finds them near the last one it found, where a hash map would miss the
    /// cache on every one).
    pub(super) groups: Vec<GroupPlan>,
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
        // Flow ids: from 1, in id order, then the groups in key name and value order.
        let mut next = 1u64;
        for t in &mut targets {
            (t.link_base, t.child_base) = (next, next + u64::from(t.links));
            next += u64::from(t.links) + u64::from(t.children);
        }
        // The groups come in key number and value order: each key's flows start where those
        // of the keys before it by name end.
        let mut groups: Vec<GroupPlan> = groups
            .into_sorted()
            .into_iter()
            .filter(|(_, g)| g.members > 1)
            .map(|(key, g)| GroupPlan { key, flow: 0, last: g.last })
            .collect();
        let mut names: Vec<(&str, u32)> = keys.numbers.iter().map(|(k, &n)| (k.as_str(), n)).collect();
        names.sort_unstable();
        let mut base = vec![0u64; names.len()];
        groups.iter().for_each(|g| base[g.key.0 as usize] += 1);
        for &(_, n) in &names {
            (base[n as usize], next) = (next, next + base[n as usize]);
        }
        for g in &mut groups {
            g.flow = base[g.key.0 as usize];
            base[g.key.0 as usize] += 1;
        }
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
            groups,
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
