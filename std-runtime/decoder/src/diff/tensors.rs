//! Tensors of two runs aligned by rank, name, step and occurrence: the first divergence, and
//! the first NaN or Inf of each run.
//!
//! A tensor of the base run and one of the new run are the same tensor when they come from the
//! same file position among their run's files (the rank), and have the same name, step and
//! occurrence (the k-th of that name in that step, in time order). The **first divergence** is
//! the earliest base tensor, in the base run's time order, whose counterpart has another
//! `tensor.hash`; tensors found on one side only are counted apart and never diverge.

use super::{
    collect::{Names, TensorRec},
    steps::NO_STEP,
};
use crate::model::{ItemRef, Trace, Value};
use std::collections::HashMap;
use waffle::wire::reserved::tensor;

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
}

/// Compares two runs' tensors, each in time order (`Run::number_tensors`).
pub(crate) fn compare(base: &[TensorRec], new: &[TensorRec], names: &Names) -> TensorReport {
    let key = |t: &TensorRec| (t.rank, t.name, t.step, t.occurrence);
    let new_by_key: HashMap<_, &TensorRec> = new.iter().map(|t| (key(t), t)).collect();
    let mut report = TensorReport { base: base.len() as u64, new: new.len() as u64, ..Default::default() };
    for b in base {
        let Some(n) = new_by_key.get(&key(b)) else {
            report.only_base += 1;
            continue;
        };
        report.compared += 1;
        if b.hash == n.hash {
            continue;
        }
        report.differ += 1;
        match &mut report.first_divergence {
            Some(d) => d.later += 1,
            None => {
                report.first_divergence = Some(Divergence {
                    at: at(b, names),
                    base_hash: b.hash,
                    new_hash: n.hash,
                    base_rms: b.rms,
                    new_rms: n.rms,
                    later: 0,
                })
            }
        }
    }
    report.only_new = report.new - report.compared;
    for (side, run) in [base, new].into_iter().enumerate() {
        report.first_nonfinite[side] = run.iter().find(|t| t.nan + t.pinf + t.ninf > 0).map(|t| NonFinite {
            at: at(t, names),
            nan: t.nan,
            pinf: t.pinf,
            ninf: t.ninf,
        });
    }
    report
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
                if !e.callsite.fields.iter().any(|(n, _)| n == tensor::HASH) {
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
