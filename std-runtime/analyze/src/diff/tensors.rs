//! Tensors of two runs aligned by rank, name, step and occurrence: the first divergence, and
//! the first NaN or Inf of each run.
//!
//! A tensor of the base run and one of the new run are the same tensor when they come from the
//! same file position among their run's files (the rank), and have the same name, step and
//! occurrence (the k-th of that name in that step, in the order its file hands them over:
//! time order on each thread). The **first divergence** is the earliest base tensor, in the
//! base run's time order, whose counterpart has another `tensor.hash`; tensors found on one
//! side only are counted apart and never diverge.
//!
//! The two runs are read at the same time and their tensors compared as they come
//! (`Matcher`): a tensor waits for its counterpart among at most [`WINDOW`] of its side;
//! past that the one that has waited longest is dropped, and counted as found on its side
//! only. Only the counts, the first divergence and each run's first NaN or Inf are kept, so
//! memory does not grow with the number of tensors.

use super::{handoff::TensorRec, names::Names, steps::NO_STEP};
use crate::model::{ItemRef, Trace, Value};
use std::collections::{BTreeMap, HashMap};
use waffle_wire::reserved::tensor;

/// A tensor as the report names it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorAt {
    /// `tensor.name` (the event's name when absent).
    pub name: String,
    /// Its step; `None` when it lies in no step.
    pub step: Option<i64>,
    /// Its file's position among its run's files, from 0.
    pub rank: u32,
    /// Which tensor of this name, step and rank, from 0.
    pub occurrence: u32,
}

/// The earliest tensor whose hash differs between the runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// Which tensor.
    pub at: TensorAt,
    /// Its `tensor.hash` in the base run.
    pub base_hash: u64,
    /// Its `tensor.hash` in the new run.
    pub new_hash: u64,
    /// Its `tensor.rms` in the base run (NaN when not recorded).
    pub base_rms: f64,
    /// Its `tensor.rms` in the new run.
    pub new_rms: f64,
    /// How many later tensors (base time order) differ too.
    pub later: u64,
}

/// The first tensor of a run with a NaN or an infinite element.
#[derive(Clone, Debug, PartialEq)]
pub struct NonFinite {
    /// Which tensor.
    pub at: TensorAt,
    /// `tensor.nan`.
    pub nan: u64,
    /// `tensor.pinf`.
    pub pinf: u64,
    /// `tensor.ninf`.
    pub ninf: u64,
}

/// What the tensors of the two runs say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TensorReport {
    /// Tensors in the base run.
    pub base: u64,
    /// Tensors in the new run.
    pub new: u64,
    /// Tensors aligned with one on the other side.
    pub compared: u64,
    /// Aligned tensors whose hashes differ.
    pub differ: u64,
    /// Base tensors with no counterpart.
    pub only_base: u64,
    /// New tensors with no counterpart.
    pub only_new: u64,
    /// The first divergence, if any.
    pub first_divergence: Option<Divergence>,
    /// The first tensor with a NaN or Inf of the base run, then of the new run.
    pub first_nonfinite: [Option<NonFinite>; 2],
    /// The most tensors held at once waiting for their counterpart, both sides together (at
    /// most twice [`WINDOW`]).
    pub held: usize,
}

/// The most tensors of one side that wait for their counterpart.
pub const WINDOW: usize = 1 << 14;

type Key = (u32, u32, i64, u32);

fn key(t: &TensorRec) -> Key {
    (t.rank, t.name, t.step, t.occurrence)
}

/// Where a tensor lies in its run's time order (the order the first divergence and the first
/// NaN or Inf are taken in).
fn time_order(t: &TensorRec) -> (u64, u32, u32, i64, u32) {
    (t.ns, t.rank, t.name, t.step, t.occurrence)
}

/// Compares two runs' tensors as they come, in any order, each side's matched by key with
/// the other's: what is held does not grow with the tensors.
#[derive(Debug, Default)]
pub(crate) struct Matcher {
    /// Per side (base, new), the tensors waiting for their counterpart, with when they came.
    waiting: [HashMap<Key, (u64, TensorRec)>; 2],
    /// Per side, the waiting tensors' keys by when they came.
    arrived: [BTreeMap<u64, Key>; 2],
    came: u64,
    counts: TensorReport,
    /// The earliest differing pair (base, new).
    first: Option<(TensorRec, TensorRec)>,
    nonfinite: [Option<TensorRec>; 2],
}

impl Matcher {
    /// Tensor `t` of side `side` (0 base, 1 new).
    pub(crate) fn add(&mut self, side: usize, t: TensorRec) {
        let c = &mut self.counts;
        *[&mut c.base, &mut c.new][side] += 1;
        let nf = &mut self.nonfinite[side];
        if t.nan + t.pinf + t.ninf > 0 && nf.as_ref().is_none_or(|f| time_order(&t) < time_order(f)) {
            *nf = Some(t);
        }
        let other = 1 - side;
        let Some((came, o)) = self.waiting[other].remove(&key(&t)) else {
            self.came += 1;
            self.waiting[side].insert(key(&t), (self.came, t));
            self.arrived[side].insert(self.came, key(&t));
            if self.waiting[side].len() > WINDOW {
                if let Some((_, k)) = self.arrived[side].pop_first() {
                    self.waiting[side].remove(&k);
                }
            }
            self.counts.held = self.counts.held.max(self.waiting[0].len() + self.waiting[1].len());
            return;
        };
        self.arrived[other].remove(&came);
        let (b, n) = if side == 0 { (t, o) } else { (o, t) };
        self.counts.compared += 1;
        if b.hash != n.hash {
            self.counts.differ += 1;
            if self.first.as_ref().is_none_or(|(f, _)| time_order(&b) < time_order(f)) {
                self.first = Some((b, n));
            }
        }
    }

    /// The report, names looked up in `names`.
    pub(crate) fn report(self, names: &Names) -> TensorReport {
        let mut report = self.counts;
        report.only_base = report.base - report.compared;
        report.only_new = report.new - report.compared;
        report.first_divergence = self.first.map(|(b, n)| Divergence {
            at: at(&b, names),
            base_hash: b.hash,
            new_hash: n.hash,
            base_rms: b.rms,
            new_rms: n.rms,
            later: report.differ - 1,
        });
        report.first_nonfinite = self
            .nonfinite
            .map(|t| t.map(|t| NonFinite { at: at(&t, names), nan: t.nan, pinf: t.pinf, ninf: t.ninf }));
        report
    }
}

fn at(t: &TensorRec, names: &Names) -> TensorAt {
    TensorAt {
        name: names.get(t.name).to_owned(),
        step: (t.step != NO_STEP).then_some(t.step),
        rank: t.rank,
        occurrence: t.occurrence,
    }
}

/// The first tensor of a decoded trace, in time order across its processes, with a NaN
/// element (`tensor.nan` > 0): where `waffle-decode why --first-nan` starts its walk. Its
/// place and its name.
pub fn first_nan(trace: &Trace) -> Option<(ItemRef, String)> {
    let mut best: Option<(u64, ItemRef, String)> = None;
    for (p, process) in trace.processes.iter().enumerate() {
        for (t, thread) in process.threads.iter().enumerate() {
            for (i, e) in thread.events.iter().enumerate() {
                if best.as_ref().is_some_and(|b| b.0 <= e.ts_ns) {
                    continue;
                }
                let mut fields = e.fields();
                if e.callsite.field_index(tensor::HASH).is_none() {
                    continue;
                }
                let mut name = e.name().to_owned();
                let mut nan = 0;
                for (k, v) in &mut fields {
                    match (k, v) {
                        (tensor::NAME, Value::Str(s)) => name.clone_from(s),
                        (tensor::NAN, Value::U64(n)) => nan = *n,
                        (tensor::NAN, Value::I64(n)) => nan = (*n).max(0) as u64,
                        _ => {}
                    }
                }
                if nan > 0 {
                    let r = ItemRef { process: p, thread: t, item: crate::model::Item::Event(i) };
                    best = Some((e.ts_ns, r, name));
                }
            }
        }
    }
    best.map(|(_, r, name)| (r, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: u32, step: i64, ns: u64, hash: u64) -> TensorRec {
        TensorRec { rank: 0, name, step, occurrence: 0, ns, hash, rms: f64::NAN, nan: 0, pinf: 0, ninf: 0 }
    }

    #[test]
    fn counterparts_match_in_any_order_and_the_earliest_difference_leads() {
        let mut names = Names::default();
        let (a, b) = (names.intern("a"), names.intern("b"));
        let mut m = Matcher::default();
        // The new run's tensors come first; the later base tensor (step 2) differs first in
        // arrival but not in time.
        m.add(1, rec(a, 1, 50, 7));
        m.add(1, rec(b, 2, 60, 8));
        m.add(0, rec(b, 2, 20, 9));
        m.add(0, rec(a, 1, 10, 6));
        let mut nan = rec(a, 3, 5, 1);
        nan.nan = 2;
        m.add(0, nan);
        let r = m.report(&names);
        assert_eq!((r.base, r.new, r.compared, r.differ, r.only_base, r.only_new), (3, 2, 2, 2, 1, 0));
        let d = r.first_divergence.unwrap();
        assert_eq!(
            (d.at.name.as_str(), d.at.step, d.base_hash, d.new_hash, d.later),
            ("a", Some(1), 6, 7, 1)
        );
        assert_eq!(r.first_nonfinite[0].as_ref().map(|f| (f.at.step, f.nan)), Some((Some(3), 2)));
        assert_eq!(r.first_nonfinite[1], None);
        assert_eq!(r.held, 2);
    }

    #[test]
    fn a_tensor_waiting_past_the_window_is_counted_on_its_side_only() {
        let mut names = Names::default();
        let a = names.intern("a");
        let mut m = Matcher::default();
        let steps = WINDOW as i64 + 1;
        for step in 0..steps {
            m.add(0, rec(a, step, step as u64, 1));
        }
        // Step 0 waited longest and was dropped: its counterpart finds nothing.
        for step in 0..steps {
            m.add(1, rec(a, step, step as u64, 2));
        }
        let r = m.report(&names);
        // The window full on the base side, and the new step 0 waiting in vain.
        assert_eq!(r.held, WINDOW + 1);
        assert_eq!((r.compared, r.only_base, r.only_new, r.differ), (WINDOW as u64, 1, 1, WINDOW as u64));
        assert_eq!(r.first_divergence.unwrap().at.step, Some(1));
    }
}
