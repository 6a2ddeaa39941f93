//! Matching by order in the Perfetto export: what the first pass counts, and the flows the
//! plan gives the names it matches ([`crate::matching`] has the rule).
//!
//! The decoder counts the spans of each callsite that can be matched, per thread
//! (`Hand::Counted`), except those with a `rank` field, whose every span the first pass is
//! handed with the field's value (`Hand::SpansWithFields`). In a trace of one file only those
//! can be matched: the others are all on one rank.

use crate::{
    decode::{stream::Hand, Item},
    matching::{self, Rank, RankField, Seen},
    model::Callsite,
};
use std::sync::Arc;

/// A callsite whose spans are counted, in the process being read.
struct Counted {
    callsite: Arc<Callsite>,
    /// Where its `rank` field is among its fields.
    rank: Option<usize>,
    /// Spans so far, per value of the rank field and thread.
    seen: Vec<(RankField, Seen)>,
}

impl Counted {
    fn add(&mut self, rank: RankField, seen: Seen) {
        match self.seen.iter_mut().find(|(r, _)| *r == rank) {
            Some((_, s)) => s.add(seen),
            None => self.seen.push((rank, seen)),
        }
    }
}

/// What the first pass counts for matching by order.
#[derive(Default)]
pub(super) struct OrderCount {
    /// Whether the trace has more than one file: then every span can be matched, else only
    /// those with a `rank` field.
    many_files: bool,
    /// The current process's counted callsites, by callsite index.
    counted: Vec<Option<Counted>>,
    /// Counted callsites of the processes read: (process, callsite index, callsite, rank
    /// field's index).
    sites: Vec<(usize, u32, Arc<Callsite>, Option<usize>)>,
    /// Spans counted per callsite and rank, in the order the processes were read (added up by
    /// name when the plan is made).
    seen: Vec<(Arc<Callsite>, Rank, Seen)>,
}

/// A callsite's spans as matching by order sees them: the matched name they take their flows
/// from (`name`, an index into the plan's matched names; [`OrderSite::NONE`] if not matched),
/// and where their `rank` field is.
#[derive(Clone, Copy)]
pub(super) struct OrderSite {
    pub(super) name: u32,
    pub(super) rank: Option<usize>,
}

impl OrderSite {
    pub(super) const NONE: u32 = u32::MAX;
    const UNMATCHED: OrderSite = OrderSite { name: Self::NONE, rank: None };
}

impl OrderCount {
    /// Counting for a trace of `files` files.
    pub(super) fn new(files: usize) -> OrderCount {
        OrderCount { many_files: files > 1, ..OrderCount::default() }
    }

    /// Which items of callsite `index` the first pass needs (see `Sink::hand`).
    pub(super) fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        if !matching::takes_part(callsite) {
            return Hand::Referring;
        }
        let rank = matching::rank_index(callsite);
        if rank.is_none() && !self.many_files {
            return Hand::Referring;
        }
        let i = index as usize;
        if self.counted.len() <= i {
            self.counted.resize_with(i + 1, || None);
        }
        self.counted[i] = Some(Counted { callsite: callsite.clone(), rank, seen: Vec::new() });
        if rank.is_some() {
            Hand::SpansWithFields
        } else {
            Hand::Counted
        }
    }

    /// `thread` began `spans` spans of callsite `index` (see `Sink::counted`).
    pub(super) fn counted(&mut self, thread: usize, index: u32, spans: u64) {
        if let Some(Some(c)) = self.counted.get_mut(index as usize) {
            c.add(RankField::None, Seen::on(thread, spans));
        }
    }

    /// A span handed to the first pass: counted here if it has a rank field (by its value).
    pub(super) fn span(&mut self, thread: usize, span: &Item<'_>) {
        if let Some(Some(c)) = self.counted.get_mut(span.callsite_index as usize) {
            if let (Some(k), true) = (c.rank, span.id != 0) {
                let value = span.fields.iter().nth(k);
                match c.seen.iter_mut().find(|(r, _)| r.is(value)) {
                    Some((_, seen)) => seen.add(Seen::on(thread, 1)),
                    None => c.seen.push((RankField::of(value), Seen::on(thread, 1))),
                }
            }
        }
    }

    /// The file of process `process` is read.
    pub(super) fn finish_process(&mut self, process: usize) {
        for (index, c) in self.counted.drain(..).enumerate() {
            let Some(c) = c else { continue };
            for (field, seen) in c.seen {
                self.seen.push((c.callsite.clone(), Rank { process, field }, seen));
            }
            self.sites.push((process, index as u32, c.callsite, c.rank));
        }
    }

    /// `later`, what the files after this one's counted, their first process numbered
    /// `processes`, joins it.
    pub(super) fn merge(&mut self, later: OrderCount, processes: usize) {
        let sites = later.sites.into_iter().map(|(p, index, c, rank)| (p + processes, index, c, rank));
        self.sites.extend(sites);
        let seen = later
            .seen
            .into_iter()
            .map(|(c, rank, seen)| (c, Rank { process: rank.process + processes, ..rank }, seen));
        self.seen.extend(seen);
    }

    /// The matched names, by name, each with its first flow id (taken from `next`, one per
    /// occurrence), and per process, by callsite index, the callsites matched.
    pub(super) fn plan(self, processes: usize, next: &mut u64) -> (Vec<(String, u64)>, Vec<Vec<OrderSite>>) {
        let mut tally = matching::Tally::default();
        for (callsite, rank, seen) in self.seen {
            tally.add(&callsite.name, rank, seen);
        }
        let matched: Vec<(String, u64)> = tally
            .decide()
            .matched
            .into_iter()
            .map(|(name, count)| {
                let flow = *next;
                *next += count;
                (name, flow)
            })
            .collect();
        let mut by_process: Vec<Vec<OrderSite>> = vec![Vec::new(); processes];
        for (process, index, callsite, rank) in self.sites {
            let Ok(name) = matched.binary_search_by(|(n, _)| n.as_str().cmp(&callsite.name)) else {
                continue;
            };
            let sites = &mut by_process[process];
            if sites.len() <= index as usize {
                sites.resize(index as usize + 1, OrderSite::UNMATCHED);
            }
            sites[index as usize] = OrderSite { name: name as u32, rank };
        }
        (matched, by_process)
    }
}
