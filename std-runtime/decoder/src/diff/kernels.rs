//! Kernels of two runs aligned by step, name and occurrence, summed per name.
//!
//! In each step, the k-th occurrence of a name on one side is the k-th on the other: a name
//! seen `b` times in a base step and `n` times in the new one has `min(b, n)` occurrences
//! matched and the rest missing on one side. A name present in a step on one side only is a
//! lone kernel of that step, which [`align`](super::align) may pair as fused or split. The
//! report has one [`KernelRow`] per name, over all steps, slowest regressions first (largest
//! increase of total time).

use super::{
    align::{pair, Lone},
    collect::{Agg, Kernels, Names},
};
use std::collections::{BTreeMap, HashMap};

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
}

impl Status {
    /// Its name in the JSON and the text: `matched`, `other_steps`, `missing_in_new`,
    /// `missing_in_base`, `fused`, `split`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Matched => "matched",
            Status::OtherSteps => "other_steps",
            Status::MissingInNew => "missing_in_new",
            Status::MissingInBase => "missing_in_base",
            Status::Fused(_) => "fused",
            Status::Split(_) => "split",
        }
    }

    /// The kernels on the other side it is paired with (fused or split), else none.
    pub fn partners(&self) -> &[String] {
        match self {
            Status::Fused(p) | Status::Split(p) => p,
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
    pub fn base_mean_ns(&self) -> f64 {
        mean(self.base_ns, self.base_count)
    }

    /// Mean time per occurrence in the new run, ns (0 without occurrences).
    pub fn new_mean_ns(&self) -> f64 {
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
    base: Agg,
    new: Agg,
    matched: u64,
    only_base: u64,
    only_new: u64,
    steps: u64,
    matched_steps: u64,
    fused: Vec<u32>,
    split: Vec<u32>,
}

/// Every kernel name of either run, slowest regressions first (then by name).
pub(crate) fn compare(base: &Kernels, new: &Kernels, names: &Names) -> Vec<KernelRow> {
    // Per step, both sides' aggregates of each name.
    type Sides = (Option<Agg>, Option<Agg>);
    let mut by_step: BTreeMap<i64, HashMap<u32, Sides>> = BTreeMap::new();
    for (&(step, name), &agg) in base {
        by_step.entry(step).or_default().entry(name).or_default().0 = Some(agg);
    }
    for (&(step, name), &agg) in new {
        by_step.entry(step).or_default().entry(name).or_default().1 = Some(agg);
    }
    let mut sums: HashMap<u32, Sum> = HashMap::new();
    for kernels in by_step.values() {
        let (mut lone_base, mut lone_new): (Vec<Lone>, Vec<Lone>) = (Vec::new(), Vec::new());
        for (&name, &(b, n)) in kernels {
            let sum = sums.entry(name).or_default();
            sum.steps += 1;
            let (b, n) = (b.unwrap_or_default(), n.unwrap_or_default());
            add(&mut sum.base, b);
            add(&mut sum.new, n);
            sum.matched += b.count.min(n.count);
            sum.only_base += b.count.saturating_sub(n.count);
            sum.only_new += n.count.saturating_sub(b.count);
            match (b.count > 0, n.count > 0) {
                (true, true) => sum.matched_steps += 1,
                (true, false) => lone_base.push((b.first_ns, name, b.total_ns)),
                (false, true) => lone_new.push((n.first_ns, name, n.total_ns)),
                (false, false) => {}
            }
        }
        lone_base.sort_unstable();
        lone_new.sort_unstable();
        for p in pair(&lone_base, &lone_new) {
            let (one, many) = if p.base.len() == 1 { (&p.base, &p.new) } else { (&p.new, &p.base) };
            let list = |s: &mut Sum, other: &[u32]| {
                let l = if p.base.len() == 1 { &mut s.split } else { &mut s.fused };
                for o in other {
                    if !l.contains(o) {
                        l.push(*o);
                    }
                }
            };
            list(sums.entry(one[0]).or_default(), many);
            for &m in many {
                list(sums.entry(m).or_default(), one);
            }
        }
    }
    let names_of = |ids: &[u32]| ids.iter().map(|&i| names.get(i).to_owned()).collect::<Vec<_>>();
    let mut rows: Vec<KernelRow> = sums
        .into_iter()
        .map(|(name, s)| {
            let status = if s.matched_steps > 0 {
                Status::Matched
            } else if !s.fused.is_empty() {
                Status::Fused(names_of(&s.fused))
            } else if !s.split.is_empty() {
                Status::Split(names_of(&s.split))
            } else if s.base.count > 0 && s.new.count > 0 {
                Status::OtherSteps
            } else if s.base.count > 0 {
                Status::MissingInNew
            } else {
                Status::MissingInBase
            };
            KernelRow {
                name: names.get(name).to_owned(),
                status,
                base_count: s.base.count,
                new_count: s.new.count,
                base_ns: s.base.total_ns,
                new_ns: s.new.total_ns,
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

fn add(to: &mut Agg, a: Agg) {
    to.count += a.count;
    to.total_ns = to.total_ns.saturating_add(a.total_ns);
}
