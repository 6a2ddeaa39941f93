//! Kernels of two runs aligned by step, name and occurrence, summed per name.
//!
//! In each step of each rank, the k-th occurrence of a name on one side is the k-th on the
//! other: a name seen `b` times in a base step and `n` times in the new one has `min(b, n)`
//! occurrences matched and the rest missing on one side. Steps are compared by their shapes
//! (see `window.rs`), so a million like steps cost one comparison. A name present in a step on
//! one side only is a lone kernel of that step, which [`align`](super::align) may pair as fused
//! or split, from each name's time per step and mean start offset in its steps over the run.
//! The report has one [`KernelRow`] per name, over all steps, slowest regressions first
//! (largest increase of total time).

use super::{
    align::{pair, Lone},
    names::Names,
    window::{Folded, NameStat, Shapes, StepRun},
};
use std::collections::HashMap;

/// What became of a kernel between the runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// On both sides in at least one step.
    Matched,
    /// On both sides, but never in the same step.
    OtherSteps,
    /// Only in the base run (and paired with nothing).
    MissingInNew,
    /// Only in the new run (and paired with nothing).
    MissingInBase,
    /// Base kernels fused: this base kernel's work is done by the named new kernel(s), or this
    /// new kernel does the named base kernels' work.
    Fused(Vec<String>),
    /// A base kernel split: this base kernel became the named new kernels, or this new kernel
    /// is a part of the named base kernel.
    Split(Vec<String>),
    /// The same host operation launched it on one side and the named kernel on the other: the
    /// same work under another name (another vendor's or library's kernel).
    Renamed(Vec<String>),
}

impl Status {
    /// Its name in the JSON and the text: `matched`, `other_steps`, `missing_in_new`,
    /// `missing_in_base`, `fused`, `split`, `renamed`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Matched => "matched",
            Status::OtherSteps => "other_steps",
            Status::MissingInNew => "missing_in_new",
            Status::MissingInBase => "missing_in_base",
            Status::Fused(_) => "fused",
            Status::Split(_) => "split",
            Status::Renamed(_) => "renamed",
        }
    }

    /// The kernels on the other side it is paired with (fused, split or renamed), else none.
    pub fn partners(&self) -> &[String] {
        match self {
            Status::Fused(p) | Status::Split(p) | Status::Renamed(p) => p,
            _ => &[],
        }
    }
}

/// One kernel name, both runs, over all steps.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRow {
    /// The span name.
    pub name: String,
    /// What became of it.
    pub status: Status,
    /// Occurrences in the base run.
    pub base_count: u64,
    /// Occurrences in the new run.
    pub new_count: u64,
    /// Total time in the base run, ns.
    pub base_ns: u64,
    /// Total time in the new run, ns.
    pub new_ns: u64,
    /// Occurrences aligned with one on the other side (same step, name and occurrence).
    pub matched: u64,
    /// Occurrences of the base run with none in the new one at their step.
    pub only_base: u64,
    /// Occurrences of the new run with none in the base one at their step.
    pub only_new: u64,
    /// Steps it appears in, on either side.
    pub steps: u64,
}

impl KernelRow {
    /// new / base total time; `None` when the base time is 0.
    pub fn ratio(&self) -> Option<f64> {
        (self.base_ns > 0).then(|| self.new_ns as f64 / self.base_ns as f64)
    }

    /// Mean time per occurrence in the base run, ns (0 without occurrences).
    pub(crate) fn base_mean_ns(&self) -> f64 {
        mean(self.base_ns, self.base_count)
    }

    /// Mean time per occurrence in the new run, ns (0 without occurrences).
    pub(crate) fn new_mean_ns(&self) -> f64 {
        mean(self.new_ns, self.new_count)
    }

    /// new - base total time, ns.
    pub fn change_ns(&self) -> i128 {
        i128::from(self.new_ns) - i128::from(self.base_ns)
    }
}

fn mean(total: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        total as f64 / count as f64
    }
}

#[derive(Default)]
struct Sum {
    matched: u64,
    only_base: u64,
    only_new: u64,
    steps: u64,
    matched_steps: u64,
    fused: Vec<u32>,
    split: Vec<u32>,
    renamed: Vec<u32>,
}

/// Every kernel name of either run, slowest regressions first (then by name).
pub(crate) fn compare(base: &Folded, new: &Folded, shapes: &Shapes, names: &Names) -> Vec<KernelRow> {
    // How many steps have each pair of shapes (a rank's step missing on one side: `None`).
    let mut pairs: HashMap<(Option<u32>, Option<u32>), u64> = HashMap::new();
    for rank in 0..base.ranks.len().max(new.ranks.len()) {
        let side = |f: &Folded| f.ranks.get(rank).cloned().unwrap_or_default();
        sweep(side(base), side(new), &mut |n, b, w| *pairs.entry((b, w)).or_default() += n);
    }
    let mut sums: HashMap<u32, Sum> = HashMap::new();
    let shape = |id: Option<u32>| id.map_or(&[][..], |id| shapes.get(id));
    let mut pairs: Vec<_> = pairs.into_iter().collect();
    pairs.sort_unstable();
    for ((b, n), steps) in pairs {
        let (b, n) = (shape(b), shape(n));
        let mut all: Vec<u32> = b.iter().chain(n).map(|&(name, _)| name).collect();
        all.sort_unstable();
        all.dedup();
        let (mut lone_base, mut lone_new): (Vec<Lone>, Vec<Lone>) = (Vec::new(), Vec::new());
        for name in all {
            let count = |s: &[(u32, u64)]| s.iter().find(|x| x.0 == name).map_or(0, |x| x.1);
            let (cb, cn) = (count(b), count(n));
            let sum = sums.entry(name).or_default();
            sum.steps += steps;
            sum.matched += cb.min(cn) * steps;
            sum.only_base += cb.saturating_sub(cn) * steps;
            sum.only_new += cn.saturating_sub(cb) * steps;
            let lone = |f: &Folded| {
                let s = f.names.get(&name).copied().unwrap_or_default();
                (s.mean_offset_ns(), name, s.per_step_ns())
            };
            match (cb > 0, cn > 0) {
                (true, true) => sum.matched_steps += steps,
                (true, false) => lone_base.push(lone(base)),
                (false, true) => lone_new.push(lone(new)),
                (false, false) => {}
            }
        }
        lone_base.sort_unstable();
        lone_new.sort_unstable();
        for p in pair(&lone_base, &lone_new, &|name| names.op(name)) {
            let split = p.base.len() == 1;
            let renamed = split && p.new.len() == 1;
            let (one, many) = if split { (&p.base, &p.new) } else { (&p.new, &p.base) };
            let mut list = |name: u32, other: &[u32]| {
                let s = sums.entry(name).or_default();
                let l = match (renamed, split) {
                    (true, _) => &mut s.renamed,
                    (false, true) => &mut s.split,
                    (false, false) => &mut s.fused,
                };
                for o in other {
                    if !l.contains(o) {
                        l.push(*o);
                    }
                }
            };
            list(one[0], many);
            for &m in many {
                list(m, one);
            }
        }
    }
    // Names only ever late (never folded in a step) still have totals.
    for name in base.names.keys().chain(new.names.keys()) {
        sums.entry(*name).or_default();
    }
    let names_of = |ids: &[u32]| ids.iter().map(|&i| names.get(i).to_owned()).collect::<Vec<_>>();
    let mut rows: Vec<KernelRow> = sums
        .into_iter()
        .map(|(name, s)| {
            let (b, n) = (stat(base, name), stat(new, name));
            let status = if s.matched_steps > 0 {
                Status::Matched
            } else if !s.fused.is_empty() {
                Status::Fused(names_of(&s.fused))
            } else if !s.split.is_empty() {
                Status::Split(names_of(&s.split))
            } else if !s.renamed.is_empty() {
                Status::Renamed(names_of(&s.renamed))
            } else if b.count > 0 && n.count > 0 {
                Status::OtherSteps
            } else if b.count > 0 {
                Status::MissingInNew
            } else {
                Status::MissingInBase
            };
            KernelRow {
                name: names.get(name).to_owned(),
                status,
                base_count: b.count,
                new_count: n.count,
                base_ns: b.total_ns,
                new_ns: n.total_ns,
                matched: s.matched,
                only_base: s.only_base,
                only_new: s.only_new,
                steps: s.steps,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.change_ns().cmp(&a.change_ns()).then_with(|| a.name.cmp(&b.name)));
    rows
}

fn stat(f: &Folded, name: u32) -> NameStat {
    f.names.get(&name).copied().unwrap_or_default()
}

/// Walks two ranks' step runs by step number: `emit(steps, base shape, new shape)` for each
/// stretch of steps, a side without the steps giving `None`.
fn sweep(mut a: Vec<StepRun>, mut b: Vec<StepRun>, emit: &mut impl FnMut(u64, Option<u32>, Option<u32>)) {
    a.sort_unstable_by_key(|r| r.first);
    b.sort_unstable_by_key(|r| r.first);
    let len = |first: i64, last: i64| (i128::from(last) - i128::from(first) + 1) as u64;
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        match (a.peek_mut(), b.peek_mut()) {
            (None, None) => return,
            (Some(x), None) => {
                emit(len(x.first, x.last), Some(x.shape), None);
                a.next();
            }
            (None, Some(y)) => {
                emit(len(y.first, y.last), None, Some(y.shape));
                b.next();
            }
            (Some(x), Some(y)) => {
                if x.last < y.first {
                    emit(len(x.first, x.last), Some(x.shape), None);
                    a.next();
                } else if y.last < x.first {
                    emit(len(y.first, y.last), None, Some(y.shape));
                    b.next();
                } else if x.first < y.first {
                    emit(len(x.first, y.first - 1), Some(x.shape), None);
                    x.first = y.first;
                } else if y.first < x.first {
                    emit(len(y.first, x.first - 1), None, Some(y.shape));
                    y.first = x.first;
                } else {
                    let end = x.last.min(y.last);
                    emit(len(x.first, end), Some(x.shape), Some(y.shape));
                    let (x_done, y_done) = (x.last == end, y.last == end);
                    if !x_done {
                        x.first = end + 1;
                    }
                    if !y_done {
                        y.first = end + 1;
                    }
                    if x_done {
                        a.next();
                    }
                    if y_done {
                        b.next();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_pairs_steps_by_number() {
        let run = |first, last, shape| StepRun { first, last, shape };
        let mut out = Vec::new();
        sweep(vec![run(0, 9, 1), run(20, 29, 2)], vec![run(5, 24, 3)], &mut |n, a, b| out.push((n, a, b)));
        assert_eq!(
            out,
            [
                (5, Some(1), None),
                (5, Some(1), Some(3)),
                (10, None, Some(3)),
                (5, Some(2), Some(3)),
                (5, Some(2), None)
            ]
        );
    }
}
