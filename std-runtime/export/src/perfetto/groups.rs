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
use std::collections::HashMap;

mod flows;
mod number;

pub(super) use flows::{Correlations, Flows, Group, Queue};

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
    /// Per process, the number of its first noted member: a process's members are noted
    /// one after another (its file is read whole), so each has a run of numbers.
    starts: Vec<u64>,
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
            starts: Vec::new(),
            noted: 0,
        }
    }
}

impl Groups {
    /// The next file's process.
    pub(super) fn process(&mut self) {
        self.first = self.items.len();
        self.threads.push(0);
        self.starts.push(self.noted);
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
        self.starts.extend(later.starts.into_iter().map(|n| n + noted));
        self.noted += later.noted;
    }
}

#[cfg(test)]
mod tests;
