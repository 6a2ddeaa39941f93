//! Correlation groups in the Perfetto export: each member's flows worked out before the second
//! pass writes it, so that the second pass finds them without searching.
//!
//! The first pass ([`Groups`]) notes each correlated item in a partition by its value's top
//! bits: its group (key number and value), its role, its time and where it stands in its
//! thread's records. Once every file is read, the plan counts each partition's groups in a
//! table that stays in cache, numbers their flows as the export always has (keys by name, then
//! values in order: the partitions are in value order, and each one's groups are sorted), and
//! turns the notes into each thread's queue of its correlated items' flows, in record order, a
//! [`Queue`]. The second pass meets a thread's records in the same order, so it takes its next
//! correlated item's flows from the front of that thread's queue. Message correlations are
//! values hashed from the message's tuple, so groups found by value have no locality:
//! searching a table of millions for each member, as the second pass did before, cost more per
//! member the more messages a run had. (Values that are small numbers all fall in one
//! partition: the plan is slower then, not wrong.)
//!
//! A group that takes more than [`QUEUED`] members while it stays in the first pass's cache of
//! recent groups (a key shared by a step of every thread over a long run, say) is *large*: the
//! members beyond are only counted, and the second pass looks every member of a large group
//! up in a map of them by key and value, numbering causes and effects as it meets them. So a
//! group costs at most `QUEUED` notes while it is in the cache.

use crate::{
    correlation::Role,
    index::{IdHash, IdMap},
};
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    },
};

/// The members of a group noted while it stays in the first pass's cache of recent groups;
/// a group that takes more is large.
pub(super) const QUEUED: u32 = 256;

/// Noted members are kept in 2^PARTS_BITS partitions by their value's top bits: a partition's
/// groups are counted at once, in a table that stays in cache, and the partitions come in
/// value order.
const PARTS_BITS: u32 = 10;

/// The first pass's cache of recent groups: sets of two.
const SETS: usize = 2048;

/// The plan puts noted members back in record order this many at a time (a window that stays
/// in cache).
const WINDOW: u64 = 1 << 16;

/// A group by its key's number (`Keys`) and its value.
pub(super) type GroupKey = (u32, u64);

/// A correlated item by (time in Unix ns, stream, id): the order in which an undirected
/// group's flow goes through its members. Streams are numbered by process, then thread, so
/// this is the order of (time, process, thread, id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Member {
    pub(super) ns: u64,
    pub(super) stream: u32,
    pub(super) id: u64,
}

/// The hash that places a group in a set of the cache.
fn hash((key, value): GroupKey) -> u64 {
    let mut x = value ^ u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The partition of a group: its value's top bits, so that partitions come in value order.
fn part(value: u64) -> usize {
    (value >> (64 - PARTS_BITS)) as usize
}

/// A noted member, in its group's partition, in the order the first pass met them: `n` counts
/// noted members, `k` the stream's correlated items.
#[derive(Clone, Copy)]
struct Rec {
    value: u64,
    n: u64,
    ns: u64,
    id: u64,
    k: u64,
    key: u32,
    stream: u32,
    role: Role,
}

impl Rec {
    fn member(&self) -> Member {
        Member { ns: self.ns, stream: self.stream, id: self.id }
    }
}

/// Members of a group counted in the cache, not noted: their causes, effects, members and
/// latest member.
#[derive(Clone, Copy, Default)]
struct Counted {
    causes: u32,
    effects: u32,
    members: u32,
    last: Member,
}

impl Counted {
    fn add(&mut self, role: Role, member: impl FnOnce() -> Member) {
        match role {
            Role::Cause => self.causes = self.causes.saturating_add(1),
            Role::Effect => self.effects = self.effects.saturating_add(1),
            Role::Member => self.member(1, member()),
        }
    }

    /// `n` more members, `last` the latest of them.
    fn member(&mut self, n: u32, last: Member) {
        self.last = if self.members == 0 { last } else { self.last.max(last) };
        self.members = self.members.saturating_add(n);
    }

    fn sum(&mut self, other: &Counted) {
        self.causes = self.causes.saturating_add(other.causes);
        self.effects = self.effects.saturating_add(other.effects);
        if other.members > 0 {
            self.member(other.members, other.last);
        }
    }

    fn any(&self) -> bool {
        self.causes > 0 || self.effects > 0 || self.members > 0
    }
}

/// A group in the cache: how many of its members were noted while it was there, and those
/// counted since.
#[derive(Clone, Copy, Default)]
struct Hot {
    key: GroupKey,
    used: bool,
    noted: u32,
    counted: Counted,
}

/// What the first pass learns of correlation groups.
pub(super) struct Groups {
    /// Noted members by partition.
    parts: Vec<Vec<Rec>>,
    /// Members counted in the cache, once their group left it (or at the end).
    counted: Vec<(GroupKey, Counted)>,
    hot: Vec<Hot>,
    /// Correlated items so far per stream, by process then thread; the current process's first.
    items: Vec<u64>,
    first: usize,
    /// Per process, its threads' streams.
    threads: Vec<usize>,
    /// Noted members so far.
    noted: u64,
}

impl Default for Groups {
    fn default() -> Self {
        Groups {
            parts: vec![Vec::new(); 1 << PARTS_BITS],
            counted: Vec::new(),
            hot: vec![Hot::default(); 2 * SETS],
            items: Vec::new(),
            first: 0,
            threads: Vec::new(),
            noted: 0,
        }
    }
}

impl Groups {
    /// The next file's process.
    pub(super) fn process(&mut self) {
        self.first = self.items.len();
        self.threads.push(0);
    }

    /// A new thread of the process.
    pub(super) fn thread(&mut self) {
        self.items.push(0);
        *self.threads.last_mut().expect("the process comes first") += 1;
    }

    /// Item `id` of `thread` (of the last process) is in group `key` as `role`; `ns`, its
    /// time, is only read for an undirected group.
    #[inline]
    pub(super) fn add(
        &mut self,
        thread: usize,
        key: GroupKey,
        role: Role,
        id: u64,
        ns: impl FnOnce() -> u64,
    ) {
        let stream = self.first + thread;
        let k = self.items[stream];
        self.items[stream] += 1;
        let set = 2 * (hash(key) as usize % SETS);
        let way = if self.hot[set].used && self.hot[set].key == key {
            set
        } else if self.hot[set + 1].used && self.hot[set + 1].key == key {
            set + 1
        } else {
            // The one that took fewer members leaves.
            let weight = |h: &Hot| {
                let c = &h.counted;
                h.noted.saturating_add(c.causes).saturating_add(c.effects).saturating_add(c.members)
            };
            let way = if weight(&self.hot[set]) <= weight(&self.hot[set + 1]) { set } else { set + 1 };
            self.evict(way);
            self.hot[way] = Hot { key, used: true, noted: 0, counted: Counted::default() };
            way
        };
        let hot = &mut self.hot[way];
        let stream = stream as u32;
        if hot.noted < QUEUED {
            hot.noted += 1;
            let ns = if role == Role::Member { ns() } else { 0 };
            let (value, n) = (key.1, self.noted);
            self.noted += 1;
            let rec = Rec { value, n, ns, id, k, key: key.0, stream, role };
            self.parts[part(value)].push(rec);
        } else {
            hot.counted.add(role, || Member { ns: ns(), stream, id });
        }
    }

    /// The group in cache slot `way` leaves it: what it counted there is kept.
    fn evict(&mut self, way: usize) {
        let hot = &mut self.hot[way];
        if hot.used && hot.counted.any() {
            self.counted.push((hot.key, hot.counted));
        }
        hot.used = false;
    }

    /// `later`, what the files after this one's noted, joins it: its streams numbered after
    /// these, its notes after these, its key numbers turned into this one's (`keys`, see
    /// `Keys::merge`). Each file's cache is its own: a group is large if it was in any.
    pub(super) fn merge(&mut self, mut later: Groups, keys: &[u32]) {
        (0..self.hot.len()).for_each(|way| self.evict(way));
        (0..later.hot.len()).for_each(|way| later.evict(way));
        let (streams, noted) = (self.items.len() as u32, self.noted);
        let key = |(k, v): GroupKey| (keys[k as usize], v);
        for (part, recs) in self.parts.iter_mut().zip(later.parts) {
            part.extend(recs.into_iter().map(|r| Rec {
                n: r.n + noted,
                stream: r.stream + streams,
                key: keys[r.key as usize],
                ..r
            }));
        }
        self.counted.extend(later.counted.into_iter().map(|(k, c)| {
            let last = Member { stream: c.last.stream + streams, ..c.last };
            (key(k), Counted { last, ..c })
        }));
        self.items.extend(later.items);
        self.threads.extend(later.threads);
        self.noted += later.noted;
    }

    /// Numbers the groups' flows from `next` on (keys by name, `rank` giving each key number's
    /// place; each key's groups in value order) and works out every noted member's flows: each
    /// thread's queue, per process, and the large groups. The partitions are counted and
    /// numbered on up to `threads` threads, each one by itself; the result is the same with
    /// any number.
    pub(super) fn plan(mut self, next: &mut u64, rank: &[u32], threads: usize) -> Correlations {
        (0..self.hot.len()).for_each(|way| self.evict(way));
        let Groups { parts, counted, items, threads: streams, noted, .. } = self;
        let mut counted_by_part: Vec<Vec<(GroupKey, Counted)>> = vec![Vec::new(); parts.len()];
        for (key, c) in counted {
            counted_by_part[part(key.1)].push((key, c));
        }
        // Each partition's groups, and each note's group among them.
        let parts: Vec<_> = parts.into_iter().zip(counted_by_part).collect();
        let counts = on_threads(parts, threads, |(recs, counted): (Vec<Rec>, Vec<(GroupKey, Counted)>)| {
            let mut index: HashMap<GroupKey, u32, IdHash> = HashMap::default();
            let mut groups: Vec<Group> = Vec::new();
            let at: Vec<u32> =
                recs.iter().map(|r| group(&mut index, &mut groups, (r.key, r.value))).collect();
            for &(key, ref c) in &counted {
                let at = group(&mut index, &mut groups, key);
                let g = &mut groups[at as usize];
                g.large = true;
                g.counted.sum(c);
            }
            for (r, &g) in recs.iter().zip(&at) {
                groups[g as usize].counted.add(r.role, || r.member());
            }
            // The flows each key takes in this partition, by key.
            let mut flows: Vec<(u32, u64)> = Vec::new();
            for g in &groups {
                match flows.binary_search_by_key(&g.key.0, |&(k, _)| k) {
                    Ok(i) => flows[i].1 += g.flows(),
                    Err(i) => flows.insert(i, (g.key.0, g.flows())),
                }
            }
            (recs, groups, at, flows)
        });
        // Each key's first flow (keys by name), then where it stands at each partition: the
        // partitions are in value order.
        let keys = rank.len();
        let mut base = vec![0u64; keys];
        for (_, _, _, flows) in &counts {
            flows.iter().for_each(|&(k, f)| base[k as usize] += f);
        }
        let mut names: Vec<usize> = (0..keys).collect();
        names.sort_unstable_by_key(|&n| rank[n]);
        for n in names {
            let flows = base[n];
            (base[n], *next) = (*next, *next + flows);
        }
        let counts: Vec<_> = counts
            .into_iter()
            .map(|(recs, groups, at, mut flows)| {
                for (k, f) in &mut flows {
                    (*f, base[*k as usize]) = (base[*k as usize], base[*k as usize] + *f);
                }
                (recs, groups, at, flows)
            })
            .collect();
        let numbered = on_threads(counts, threads, |(recs, mut groups, at, mut bases)| {
            // The partition's groups in value order, each key's flows numbered on.
            let mut order: Vec<u32> = (0..groups.len() as u32).collect();
            order.sort_unstable_by_key(|&g| {
                let (key, value) = groups[g as usize].key;
                (rank[key as usize], value)
            });
            for &g in &order {
                let g = &mut groups[g as usize];
                let i = bases.binary_search_by_key(&g.key.0, |&(k, _)| k).expect("counted");
                g.flow = bases[i].1;
                bases[i].1 += g.flows();
            }
            let done: Vec<Done> = recs
                .iter()
                .zip(&at)
                .map(|(r, &g)| {
                    let g = &mut groups[g as usize];
                    let flows = if g.large { Flows::large(1) } else { g.next(r.role, r.member()) };
                    Done { n: r.n, k: r.k, stream: r.stream, flows }
                })
                .collect();
            let large: Vec<Group> = groups.into_iter().filter(|g| g.large).collect();
            (done, large)
        });
        let mut large = IdMap::default();
        let mut done: Vec<Vec<Done>> = Vec::with_capacity(numbered.len());
        for (d, l) in numbered {
            done.push(d);
            large.extend(l.into_iter().map(|g| (g.key, g)));
        }
        // Back to record order, a window of noted members at a time: each partition holds its
        // own in that order, so each gives the window a run from where it stopped.
        let mut queues: Vec<Queue> =
            (0..items.len()).map(|s| Queue { stream: s as u32, ..Queue::default() }).collect();
        let mut next_k = vec![0u64; items.len()];
        let mut cursors = vec![0usize; done.len()];
        let mut window: Vec<Option<Done>> = vec![None; WINDOW.min(noted) as usize];
        let mut start = 0;
        while start < noted {
            let end = start.saturating_add(WINDOW);
            for (part, at) in done.iter().zip(&mut cursors) {
                while let Some(d) = part.get(*at).filter(|d| d.n < end) {
                    window[(d.n - start) as usize] = Some(*d);
                    *at += 1;
                }
            }
            for d in window.iter_mut().filter_map(Option::take) {
                let (q, k) = (&mut queues[d.stream as usize], &mut next_k[d.stream as usize]);
                // Items missing between two notes are members of large groups.
                if d.k > *k {
                    q.push(Flows::large(d.k - *k));
                }
                q.push(d.flows);
                *k = d.k + 1;
            }
            start = end;
        }
        drop(done);
        let mut queues = queues.into_iter();
        let queues = streams.iter().map(|&n| queues.by_ref().take(n).collect()).collect();
        Correlations { queues, large }
    }
}

/// `f` of each of `items`, in their order, on up to `threads` threads (each taking the next
/// item as it is free: partitions differ in size).
fn on_threads<T: Send, R: Send>(items: Vec<T>, threads: usize, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let n = items.len();
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let results: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.min(n) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { break };
                let item = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(item) = item {
                    let r = f(item);
                    *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|r| r.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every item is done"))
        .collect()
}

/// The index of group `key` in `groups`, added if new.
fn group(index: &mut HashMap<GroupKey, u32, IdHash>, groups: &mut Vec<Group>, key: GroupKey) -> u32 {
    let at = *index.entry(key).or_insert(groups.len() as u32);
    if at as usize == groups.len() {
        groups.push(Group { key, ..Group::default() });
    }
    at
}

/// A group as the plan counts it (and, large, as the second pass meets its members): its members, whether any were counted in the cache (then it
/// is large: looked up in the second pass), its first flow, and its causes and effects so far
/// as the plan goes through its notes.
#[derive(Clone, Default)]
pub(super) struct Group {
    key: GroupKey,
    counted: Counted,
    large: bool,
    flow: u64,
    causes_met: u32,
    effects_met: u32,
}

impl Group {
    /// Whether it has causes or effects: then its members' flows depend on how many came
    /// before them, in every file.
    pub(super) fn directed(&self) -> bool {
        self.counted.causes > 0 || self.counted.effects > 0
    }

    /// How many flow ids it takes: one arrow from each cause to each effect of a directed group,
    /// one flow through the members of an undirected one; none for a group of one side or one
    /// member.
    fn flows(&self) -> u64 {
        let c = &self.counted;
        if c.causes > 0 || c.effects > 0 {
            u64::from(c.causes) * u64::from(c.effects)
        } else {
            u64::from(c.members > 1)
        }
    }

    /// The flows of its next member, `member` as `role`: a cause starts an arrow to each
    /// effect, an effect ends one from each cause (flow + cause number x effects + effect
    /// number, causes and effects numbered as they come in record order); an undirected
    /// group's members start its flow but the last, which ends it.
    pub(super) fn next(&mut self, role: Role, member: Member) -> Flows {
        let Counted { causes: c, effects: e, members, last } = self.counted;
        match role {
            Role::Cause if self.causes_met < c && e > 0 => {
                let i = next_number(&mut self.causes_met);
                Flows::out(self.flow + u64::from(i) * u64::from(e), e)
            }
            Role::Effect if self.effects_met < e && c > 0 => {
                Flows::into(self.flow + u64::from(next_number(&mut self.effects_met)), c, e)
            }
            Role::Member if c == 0 && e == 0 && members > 1 => Flows::member(self.flow, member == last),
            _ => Flows::NONE,
        }
    }
}

/// A noted member's flows, where it goes in record order.
#[derive(Clone, Copy)]
struct Done {
    n: u64,
    k: u64,
    stream: u32,
    flows: Flows,
}

/// The flows of one correlated item: ids `first + k * step` for `k < count`, which it starts
/// (`step` 0: consecutive ids) or ends (`step` > 0). In a queue, an entry with no ids stands for
/// one item without flows (`first` 0) or for the next `first` items, members of large groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Flows {
    first: u64,
    count: u32,
    step: u32,
}

impl Flows {
    const NONE: Flows = Flows { first: 0, count: 0, step: 0 };

    /// Starts `count` consecutive flows from `first`.
    fn out(first: u64, count: u32) -> Flows {
        Flows { first, count, step: 0 }
    }

    /// Ends `count` flows from `first`, `step` apart.
    fn into(first: u64, count: u32, step: u32) -> Flows {
        Flows { first, count, step }
    }

    /// The flow through an undirected group: ended by its last member, started by the others.
    fn member(flow: u64, last: bool) -> Flows {
        if last {
            Flows::into(flow, 1, 1)
        } else {
            Flows::out(flow, 1)
        }
    }

    /// (In a queue) the next `items` items are members of large groups.
    fn large(items: u64) -> Flows {
        Flows { first: items, count: 0, step: 0 }
    }

    fn is_large(&self) -> bool {
        self.count == 0 && self.first > 0
    }

    /// Adds its ids to the flows the item starts (`out`) or ends (`into`).
    pub(super) fn push(self, out: &mut Vec<u64>, into: &mut Vec<u64>) {
        let ids = (0..u64::from(self.count)).map(|k| self.first + k * u64::from(self.step.max(1)));
        if self.step == 0 {
            out.extend(ids);
        } else {
            into.extend(ids);
        }
    }
}

/// A thread's correlated items' flows, in record order.
#[derive(Default)]
pub(super) struct Queue {
    entries: Vec<Flows>,
    at: usize,
    /// The thread's stream number (see [`Member`]).
    stream: u32,
}

impl Queue {
    /// The flows of the thread's next correlated item, `id` at `at_ns`; else, if it is a
    /// member of a large group (or beyond what the first pass read), which member it is.
    #[inline]
    pub(super) fn next(&mut self, at_ns: u64, id: u64) -> Result<Flows, Member> {
        self.take().ok_or(Member { ns: at_ns, stream: self.stream, id })
    }

    /// Adds `flows` at the end, one run of large groups' members with the run before it.
    fn push(&mut self, flows: Flows) {
        match self.entries.last_mut() {
            Some(e) if e.is_large() && flows.is_large() => e.first += flows.first,
            _ => self.entries.push(flows),
        }
    }

    fn take(&mut self) -> Option<Flows> {
        let e = self.entries.get_mut(self.at)?;
        if e.is_large() {
            e.first -= 1;
            if e.first == 0 {
                self.at += 1;
            }
            return None;
        }
        self.at += 1;
        Some(*e)
    }
}

/// `*n`, then counts one more.
fn next_number(n: &mut u32) -> u32 {
    let number = *n;
    *n = number.saturating_add(1);
    number
}

/// Every correlated item's flows: per process and thread, the queue of those the first pass
/// noted; and the large groups by key, for the others.
#[derive(Default)]
pub(super) struct Correlations {
    pub(super) queues: Vec<Vec<Queue>>,
    pub(super) large: IdMap<GroupKey, Group>,
}

#[cfg(test)]
mod tests;
