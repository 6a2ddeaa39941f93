//! Matching by order: the same collective on every rank is one operation.
//!
//! SPMD programs (MPI, NCCL, JAX) run the same code on every rank, so they begin the same
//! collectives in the same order: the k-th span named `MPI_Allreduce_op` on rank 0 and the k-th
//! on rank 1 are two halves of one allreduce, even though nothing in the program ties them
//! together. `why` crosses between ranks through such matches (saying that it matched by
//! order), and the Perfetto export joins them with flow arrows. Explicit causes and
//! correlation keys are stronger: a span with a correlation is matched by its key, never by
//! order.
//!
//! The rule, which every user of this module applies the same way:
//! - a **rank** is a process (one input file) and, inside it, the span's own `rank` field if
//!   it has one: the ranks of a program that runs them as threads of one process are told
//!   apart by that field. A span's rank is `(process, its rank field or none)`.
//! - a name is **matched** when two or more ranks have spans of it (spans only, not events;
//!   neither stand-ins for lost begins nor spans of a callsite with a correlation key count),
//!   every one of those
//!   ranks has the same number of them, and each rank has all of them on one thread. Then the
//!   k-th span of the name on each rank, in begin order, is one operation.
//! - otherwise the name is not matched, and nothing is invented: different counts mean the
//!   ranks did not run the same sequence (or a file was cut), and spans of one rank on several
//!   threads have no order that the other ranks share.
//!
//! [`Tally`] learns the counts, [`Tally::decide`] applies the rule, and [`Matching`] says what
//! it decided, with a reason for each name it did not match.

use crate::{
    decode::FieldValue,
    model::{Callsite, Item, ItemRef, Trace, Value},
};
use std::collections::BTreeMap;
use waffle_wire::Kind;

/// The field that tells ranks apart inside one process.
pub(crate) const RANK_FIELD: &str = "rank";

/// A span's own `rank` field: an integer, a string, or none (floats and booleans are not
/// ranks, and count as none).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RankField {
    /// The span has no usable `rank` field.
    None,
    /// An integer rank.
    Int(i128),
    /// A rank given as text.
    Text(String),
}

impl RankField {
    /// The rank in a decoded field value.
    pub fn of(value: Option<FieldValue<'_>>) -> RankField {
        match value {
            Some(FieldValue::U64(v)) => RankField::Int(v.into()),
            Some(FieldValue::I64(v)) => RankField::Int(v.into()),
            Some(FieldValue::Str(s)) => RankField::Text(s.to_owned()),
            _ => RankField::None,
        }
    }

    /// The rank in a model value.
    pub(crate) fn of_value(value: Option<&Value>) -> RankField {
        RankField::of(value.map(FieldValue::from))
    }

    /// Whether `value` is this rank (without allocating).
    pub fn is(&self, value: Option<FieldValue<'_>>) -> bool {
        match (self, value) {
            (RankField::Int(r), Some(FieldValue::U64(v))) => *r == i128::from(v),
            (RankField::Int(r), Some(FieldValue::I64(v))) => *r == i128::from(v),
            (RankField::Text(r), Some(FieldValue::Str(s))) => r == s,
            (RankField::None, v) => RankField::of(v) == RankField::None,
            _ => false,
        }
    }
}

impl std::fmt::Display for RankField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RankField::None => Ok(()),
            RankField::Int(v) => write!(f, "{v}"),
            RankField::Text(s) => f.write_str(s),
        }
    }
}

/// Where a callsite's `rank` field is among its fields, if it is a span's callsite with one.
pub fn rank_index(callsite: &Callsite) -> Option<usize> {
    callsite.field_index(RANK_FIELD)
}

/// Whether spans of `callsite` take part in matching: spans without a correlation key (those
/// are matched by their key instead).
pub fn takes_part(callsite: &Callsite) -> bool {
    callsite.kind == Kind::Span && callsite.correlate.is_empty()
}

/// One operation matched by order: the k-th span of a name on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// The spans' name.
    pub name: String,
    /// k: how many spans of the name each rank began before it, from 0.
    pub occurrence: u64,
    /// One span per rank, in time order.
    pub members: Vec<ItemRef>,
}

/// The matching of a decoded trace: what [`Tally::decide`] decided, and the operations.
pub fn match_trace(trace: &Trace) -> (Matching, Vec<Operation>) {
    // Each span that takes part, with its rank.
    let spans = || {
        trace.processes.iter().enumerate().flat_map(|(p, process)| {
            process.threads.iter().enumerate().flat_map(move |(t, thread)| {
                // Stand-ins for lost begins (id 0) have no name of their own.
                let taking_part =
                    thread.spans.iter().enumerate().filter(|(_, s)| takes_part(&s.callsite) && s.id != 0);
                taking_part.map(move |(i, s)| {
                    let field = RankField::of_value(rank_index(&s.callsite).and_then(|k| s.fields.get(k)));
                    let at = ItemRef { process: p, thread: t, item: Item::Span(i) };
                    (at, s.name(), s.start_ns, Rank { process: p, field })
                })
            })
        })
    };
    let mut tally = Tally::default();
    for (at, name, _, rank) in spans() {
        tally.add(name, rank, Seen::on(at.thread, 1));
    }
    let matching = tally.decide();
    // Spans come thread by thread in begin order, and a matched name's spans of one rank are
    // on one thread: counting them as they come numbers them in begin order.
    let mut next: BTreeMap<(&str, Rank), u64> = BTreeMap::new();
    let mut operations: BTreeMap<(&str, u64), Vec<(u64, ItemRef)>> = BTreeMap::new();
    for (at, name, start, rank) in spans() {
        let Some((name, _)) = matching.matched.get_key_value(name) else { continue };
        let k = next.entry((name.as_str(), rank)).or_default();
        operations.entry((name.as_str(), *k)).or_default().push((start, at));
        *k += 1;
    }
    let operations = operations
        .into_iter()
        .map(|((name, occurrence), mut members)| {
            members.sort_by_key(|&(ts, r)| (ts, r.process, r.thread));
            let members = members.into_iter().map(|(_, r)| r).collect();
            Operation { name: name.to_owned(), occurrence, members }
        })
        .collect();
    (matching, operations)
}

/// A rank: a process (by its index among the inputs) and the span's own `rank` field.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank {
    /// Index of the process (input file).
    pub process: usize,
    /// The span's `rank` field.
    pub field: RankField,
}

/// How often a name begins on one rank, and on which thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Spans of the name on the rank.
    pub count: u64,
    /// The thread (index within its process) they are all on; `None` if on several.
    pub thread: Option<usize>,
}

impl Seen {
    /// `count` spans on `thread`.
    pub fn on(thread: usize, count: u64) -> Seen {
        Seen { count, thread: Some(thread) }
    }

    /// Adds what `other` saw.
    pub fn add(&mut self, other: Seen) {
        self.count += other.count;
        if self.thread != other.thread {
            self.thread = None;
        }
    }
}

/// Span counts per name and rank, learnt from a whole trace (every file).
#[derive(Debug, Default)]
pub struct Tally {
    names: BTreeMap<String, BTreeMap<Rank, Seen>>,
}

impl Tally {
    /// `seen` spans of `name` on `rank`.
    pub fn add(&mut self, name: &str, rank: Rank, seen: Seen) {
        if !self.names.contains_key(name) {
            self.names.insert(name.to_owned(), BTreeMap::new());
        }
        let ranks = self.names.get_mut(name).expect("inserted");
        match ranks.get_mut(&rank) {
            Some(s) => s.add(seen),
            None => {
                ranks.insert(rank, seen);
            }
        }
    }

    /// Applies the rule (see the module docs).
    pub fn decide(self) -> Matching {
        let mut matching = Matching::default();
        for (name, ranks) in self.names {
            if ranks.len() < 2 {
                continue;
            }
            if let Some((rank, _)) = ranks.iter().find(|(_, s)| s.thread.is_none()) {
                let reason = Unmatched::Threads(rank.clone());
                matching.unmatched.insert(name, reason);
                continue;
            }
            let count = ranks.values().next().expect("two or more").count;
            if ranks.values().all(|s| s.count == count) {
                matching.matched.insert(name, count);
            } else {
                let counts = ranks.into_iter().map(|(r, s)| (r, s.count)).collect();
                matching.unmatched.insert(name, Unmatched::Counts(counts));
            }
        }
        matching
    }
}

/// Why a name that two or more ranks have is not matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unmatched {
    /// The ranks have different numbers of its spans: each rank and its count.
    Counts(Vec<(Rank, u64)>),
    /// This rank has its spans on more than one thread.
    Threads(Rank),
}

/// What [`Tally::decide`] decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Matching {
    /// Matched names, with how many spans of it each rank has.
    pub matched: BTreeMap<String, u64>,
    /// Names on two or more ranks that are not matched, and why.
    pub unmatched: BTreeMap<String, Unmatched>,
}

impl Unmatched {
    /// A sentence for a reader; `rank` names a rank (say, `rank 1` or `pid 4242`).
    pub fn describe(&self, name: &str, rank: &dyn Fn(&Rank) -> String) -> String {
        match self {
            Unmatched::Counts(counts) => {
                let each: Vec<String> = counts.iter().map(|(r, n)| format!("{n} on {}", rank(r))).collect();
                format!(
                    "{name:?} is not matched by order: the ranks have different numbers of it ({})",
                    each.join(", ")
                )
            }
            Unmatched::Threads(r) => {
                format!("{name:?} is not matched by order: {} has it on more than one thread", rank(r))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(process: usize, field: Option<i128>) -> Rank {
        Rank { process, field: field.map_or(RankField::None, RankField::Int) }
    }

    #[test]
    fn equal_counts_on_two_ranks_match() {
        let mut t = Tally::default();
        t.add("allreduce", rank(0, None), Seen::on(0, 3));
        t.add("allreduce", rank(1, None), Seen::on(2, 1));
        t.add("allreduce", rank(1, None), Seen::on(2, 2));
        t.add("setup", rank(0, None), Seen::on(0, 1));
        let m = t.decide();
        assert_eq!(m.matched, BTreeMap::from([("allreduce".to_owned(), 3)]));
        // A name on one rank only is neither matched nor worth a reason.
        assert!(m.unmatched.is_empty());
    }

    #[test]
    fn different_counts_do_not_match() {
        let mut t = Tally::default();
        t.add("allreduce", rank(0, None), Seen::on(0, 3));
        t.add("allreduce", rank(1, None), Seen::on(0, 2));
        let m = t.decide();
        assert!(m.matched.is_empty());
        let reason = &m.unmatched["allreduce"];
        assert_eq!(reason, &Unmatched::Counts(vec![(rank(0, None), 3), (rank(1, None), 2)]));
        let text = reason.describe("allreduce", &|r| format!("rank {}", r.process));
        assert!(text.contains("3 on rank 0, 2 on rank 1"), "{text}");
    }

    #[test]
    fn a_rank_on_two_threads_does_not_match() {
        let mut t = Tally::default();
        t.add("step", rank(0, None), Seen::on(0, 1));
        t.add("step", rank(0, None), Seen::on(1, 1));
        t.add("step", rank(1, None), Seen::on(0, 2));
        let m = t.decide();
        assert!(m.matched.is_empty());
        assert_eq!(m.unmatched["step"], Unmatched::Threads(rank(0, None)));
    }

    #[test]
    fn rank_fields_split_one_process_into_ranks() {
        let mut t = Tally::default();
        t.add("NcclAllReduce", rank(0, Some(0)), Seen::on(0, 4));
        t.add("NcclAllReduce", rank(0, Some(1)), Seen::on(1, 4));
        assert_eq!(t.decide().matched, BTreeMap::from([("NcclAllReduce".to_owned(), 4)]));
    }

    #[test]
    fn rank_field_values() {
        assert_eq!(RankField::of(Some(FieldValue::U64(3))), RankField::Int(3));
        assert_eq!(RankField::of(Some(FieldValue::I64(-1))), RankField::Int(-1));
        assert_eq!(RankField::of(Some(FieldValue::Str("r1"))), RankField::Text("r1".into()));
        assert_eq!(RankField::of(Some(FieldValue::F64(1.0))), RankField::None);
        assert_eq!(RankField::of(None), RankField::None);
        assert!(RankField::Int(3).is(Some(FieldValue::I64(3))));
        assert!(RankField::Int(3).is(Some(FieldValue::U64(3))));
        assert!(!RankField::Int(3).is(Some(FieldValue::U64(4))));
        assert!(RankField::None.is(Some(FieldValue::Bool(true))));
        assert!(RankField::Text("a".into()).is(Some(FieldValue::Str("a"))));
    }
}
