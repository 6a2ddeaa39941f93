//! Kernels summed per step while the step can still change, then folded into a few numbers per
//! name and one entry per run of like steps: what keeps `diff`'s memory from growing with the
//! trace.
//!
//! A step's kernels (per name: occurrences, time, first start) are kept while the step is in
//! flight. Once [`WINDOW`] later steps have ended, nothing more is expected in it (records of
//! other threads reach the file within milliseconds of their time), and the step is folded:
//! its times are added to its names' [`NameStat`], and what alignment needs — which names it
//! holds and how often — becomes its **shape**, numbered once in [`Shapes`]. A rank's steps
//! are kept as runs of consecutive step numbers of one shape ([`StepRun`]): a training loop's
//! steps are alike, so a run of a million steps is a handful of entries. A kernel that still
//! arrives for a folded step is added to its name's totals and counted as late
//! ([`Folded::late`]), not aligned.

use super::steps::NO_STEP;
use std::collections::{HashMap, VecDeque};

/// How many steps may end after a step before it is folded.
pub(crate) const WINDOW: usize = 32;

/// The sum of a kernel's occurrences in one step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Agg {
    /// Occurrences.
    pub count: u64,
    /// Their time, ns.
    pub total_ns: u64,
    /// The earliest start among them, Unix ns.
    pub first_ns: u64,
}

/// One name over a whole run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NameStat {
    /// Occurrences.
    pub count: u64,
    /// Their time, ns.
    pub total_ns: u64,
    /// Steps it was folded in (the step of no step included).
    pub steps: u64,
    /// Over those steps, the sum of its first start's offset from the step's begin, ns: the
    /// order of kernels within a step, on average.
    pub offset_ns: u128,
}

impl NameStat {
    /// Its time per step it appears in, ns.
    pub(crate) fn per_step_ns(&self) -> u64 {
        self.total_ns / self.steps.max(1)
    }

    /// Its first start's mean offset in its steps, ns.
    pub(crate) fn mean_offset_ns(&self) -> u64 {
        (self.offset_ns / u128::from(self.steps.max(1))) as u64
    }
}

/// Step shapes: the (name, occurrences) list of a step, sorted by name, numbered once for
/// both runs.
#[derive(Debug, Default)]
pub(crate) struct Shapes {
    ids: HashMap<Vec<(u32, u64)>, u32>,
    list: Vec<Vec<(u32, u64)>>,
}

impl Shapes {
    fn intern(&mut self, shape: Vec<(u32, u64)>) -> u32 {
        if let Some(&id) = self.ids.get(&shape) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(shape.clone());
        self.ids.insert(shape, id);
        id
    }

    /// The shape numbered `id`.
    pub(crate) fn get(&self, id: u32) -> &[(u32, u64)] {
        &self.list[id as usize]
    }
}

/// Consecutive step numbers `first..=last` of one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StepRun {
    pub first: i64,
    pub last: i64,
    pub shape: u32,
}

/// What a run's folded steps say.
#[derive(Debug, Default)]
pub(crate) struct Folded {
    /// Per name, its totals.
    pub names: HashMap<u32, NameStat>,
    /// Per rank (file), its steps as runs, in the order folded.
    pub ranks: Vec<Vec<StepRun>>,
    /// Kernels that arrived for a step already folded.
    pub late: u64,
}

impl Folded {
    fn push(&mut self, rank: usize, step: i64, shape: u32) {
        if self.ranks.len() <= rank {
            self.ranks.resize(rank + 1, Vec::new());
        }
        let runs = &mut self.ranks[rank];
        match runs.last_mut() {
            Some(r)
                if r.shape == shape
                    && step != NO_STEP
                    && r.last != NO_STEP
                    && r.last.checked_add(1) == Some(step) =>
            {
                r.last = step;
            }
            _ => runs.push(StepRun { first: step, last: step, shape }),
        }
    }

    /// Whether `rank` has folded `step` already (runs are mostly in order: a binary search,
    /// then a look at the unordered tail).
    fn has(&self, rank: usize, step: i64) -> bool {
        let Some(runs) = self.ranks.get(rank) else { return false };
        let sorted = runs.partition_point(|r| r.first <= step);
        runs[..sorted].last().is_some_and(|r| r.last >= step)
            || runs[sorted..].iter().any(|r| r.first <= step && step <= r.last)
    }
}

/// A step in flight: its number, begin, and kernels (per name).
type InFlight = (i64, u64, Vec<(u32, Agg)>);

/// One file's steps in flight.
#[derive(Debug, Default)]
pub(crate) struct Window {
    /// Steps in flight (a few dozen): their number, begin and kernels.
    flight: Vec<InFlight>,
    /// The index in `flight` of the step last added to (most kernels follow their
    /// predecessor's step).
    last: usize,
    /// Ended steps still in flight, in the order they ended.
    ended: VecDeque<i64>,
}

impl Window {
    /// Step `step` begins at `begin` (a step met again keeps its first begin).
    pub(crate) fn open(&mut self, step: i64, begin: u64) {
        if self.find(step).is_none() {
            self.flight.push((step, begin, Vec::new()));
        }
    }

    /// Where step `step` is in flight.
    #[inline]
    fn find(&mut self, step: i64) -> Option<usize> {
        if self.flight.get(self.last).is_some_and(|f| f.0 == step) {
            return Some(self.last);
        }
        let i = self.flight.iter().rposition(|f| f.0 == step)?;
        self.last = i;
        Some(i)
    }

    /// Step `step` ends; the oldest ended step is folded once [`WINDOW`] more have ended.
    pub(crate) fn close(&mut self, step: i64, rank: usize, folded: &mut Folded, shapes: &mut Shapes) {
        self.ended.push_back(step);
        while self.ended.len() > WINDOW {
            let oldest = self.ended.pop_front().expect("not empty");
            self.fold(oldest, rank, folded, shapes);
        }
    }

    /// One kernel occurrence in `step`.
    #[inline]
    pub(crate) fn add(&mut self, step: i64, name: u32, start: u64, dur: u64, folded: &mut Folded) {
        if step == NO_STEP {
            self.open(NO_STEP, start);
        }
        let Some(i) = self.find(step) else {
            // Folded already (or never begun in this file, which a marker always is).
            let stat = folded.names.entry(name).or_default();
            stat.count += 1;
            stat.total_ns = stat.total_ns.saturating_add(dur);
            folded.late += 1;
            return;
        };
        let kernels = &mut self.flight[i].2;
        match kernels.iter_mut().find(|(n, _)| *n == name) {
            Some((_, agg)) => {
                agg.count += 1;
                agg.total_ns = agg.total_ns.saturating_add(dur);
                agg.first_ns = agg.first_ns.min(start);
            }
            None => kernels.push((name, Agg { count: 1, total_ns: dur, first_ns: start })),
        }
    }

    /// The file is read: every step still in flight is folded, in step order.
    pub(crate) fn finish(&mut self, rank: usize, folded: &mut Folded, shapes: &mut Shapes) {
        self.ended.clear();
        let mut steps: Vec<i64> = self.flight.iter().map(|f| f.0).collect();
        steps.sort_unstable();
        for step in steps {
            self.fold(step, rank, folded, shapes);
        }
    }

    fn fold(&mut self, step: i64, rank: usize, folded: &mut Folded, shapes: &mut Shapes) {
        let Some(i) = self.find(step) else { return };
        let (_, begin, mut kernels) = self.flight.swap_remove(i);
        self.last = 0;
        if folded.has(rank, step) {
            // The same step number ended twice in one file (two threads marking steps): the
            // second is counted, not aligned.
            for (name, agg) in kernels {
                let stat = folded.names.entry(name).or_default();
                stat.count += agg.count;
                stat.total_ns = stat.total_ns.saturating_add(agg.total_ns);
                folded.late += agg.count;
            }
            return;
        }
        if kernels.is_empty() {
            return;
        }
        kernels.sort_unstable_by_key(|(n, _)| *n);
        let begin = kernels.iter().map(|(_, a)| a.first_ns).min().unwrap_or(begin).min(begin);
        for &(name, agg) in &kernels {
            let stat = folded.names.entry(name).or_default();
            stat.count += agg.count;
            stat.total_ns = stat.total_ns.saturating_add(agg.total_ns);
            stat.steps += 1;
            stat.offset_ns += u128::from(agg.first_ns - begin);
        }
        let shape = shapes.intern(kernels.iter().map(|&(n, a)| (n, a.count)).collect());
        folded.push(rank, step, shape);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_steps_fold_into_one_run_and_memory_stays_flat() {
        let (mut w, mut folded, mut shapes) = (Window::default(), Folded::default(), Shapes::default());
        for step in 0..100_000i64 {
            let t = step as u64 * 100;
            w.open(step, t);
            w.add(step, 1, t + 1, 10, &mut folded);
            w.add(step, 2, t + 20, 30, &mut folded);
            w.add(step, 1, t + 60, 10, &mut folded);
            w.close(step, 0, &mut folded, &mut shapes);
            assert!(w.flight.len() <= WINDOW + 1);
        }
        w.finish(0, &mut folded, &mut shapes);
        assert_eq!(folded.ranks[0], [StepRun { first: 0, last: 99_999, shape: 0 }]);
        assert_eq!(shapes.get(0), [(1, 2), (2, 1)]);
        let one = folded.names[&1];
        assert_eq!(
            (one.count, one.total_ns, one.steps, one.mean_offset_ns()),
            (200_000, 2_000_000, 100_000, 1)
        );
        assert_eq!(folded.names[&2].mean_offset_ns(), 20);
        // A kernel for a step folded long ago is counted, not aligned.
        w.add(5, 2, 501, 7, &mut folded);
        assert_eq!((folded.late, folded.names[&2].count), (1, 100_001));
    }
}
