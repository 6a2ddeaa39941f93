//! `diff`: what changed between two runs of one program — kernels that got slower, appeared,
//! vanished, were fused or split, and the first tensor whose values differ.
//!
//! Each run is one or many `trace.bin` files (one per rank). Both runs are streamed once,
//! file by file (`decode::stream`), and kept as sums, never as records:
//!
//! - **kernels** (every span but the step markers) are summed per (step, name): count, total time, first start.
//!   A span's step is the step marker enclosing it on its thread, or on another thread the
//!   step whose time range holds it (`steps.rs`; a step is a span with a `step` field, see
//!   `waffle::wire::reserved`). A step's sums are kept while it is in flight, then folded into
//!   totals per name and its shape (which names, how often), kept per run of like steps
//!   (`window.rs`): memory grows with names and with changes of shape, not with spans or
//!   steps. [`kernels`] aligns them by rank, step, name and occurrence, and [`align`] pairs
//!   what is left on one side only as fused or split;
//! - **tensors** (events whose schema holds `tensor.hash`) are kept as one 64-byte record
//!   each — a run records far fewer tensors than kernels — and [`tensors`] aligns them by
//!   rank, name, step and occurrence to find the first divergence and the first NaN or Inf.
//!
//! [`Diff::to_text`] is what `waffle-decode diff` prints, [`Diff::to_json`] what it prints
//! with `--json`, [`Diff::to_html`] the self-contained page `--html OUT` writes (inline CSS,
//! script and SVG: it opens without a network).
//!
//! # JSON
//!
//! ```text
//! {
//!   "version": 1,
//!   "base": {"files": ["a.bin"], "spans": 1200, "tensors": 40, "steps": 4,
//!            "step_ns": 2150000,              // step markers' time, summed
//!            "late": 0},                      // kernels counted but not aligned (window.rs)
//!   "new":  {"files": ["b.bin"], "spans": 1200, "tensors": 40, "steps": 4, "step_ns": 11600000},
//!   "first_divergence": {                     // null when every aligned tensor is equal
//!     "name": "blk2/attn", "step": 0,         // step: null when the tensor is in no step
//!     "rank": 0, "occurrence": 0,             // file position in its run; k-th of name and step
//!     "base_hash": "00a1...", "new_hash": "7f3c...",   // 16 hex digits
//!     "base_rms": 0.51, "new_rms": 0.73,      // null when not recorded or NaN
//!     "later_differing": 27                   // later tensors (base time order) that differ
//!   },
//!   "first_nonfinite": {                      // per run, null when none
//!     "base": null,
//!     "new": {"name": "blk3/mlp", "step": 2, "rank": 0, "occurrence": 0,
//!             "nan": 12, "pinf": 0, "ninf": 0}
//!   },
//!   "tensors": {"base": 40, "new": 40, "compared": 40, "differ": 28,
//!               "only_base": 0, "only_new": 0},
//!   "kernels": [                              // slowest regressions first
//!     {"name": "softmax", "status": "matched", // other_steps (on both sides, never in the same
//!                                             // step), missing_in_new, missing_in_base, fused, split
//!      "partners": [],                        // fused or split: the other side's kernels
//!      "base_count": 16, "new_count": 16, "base_ns": 3200000, "new_ns": 16000000,
//!      "base_mean_ns": 200000.0, "new_mean_ns": 1000000.0,
//!      "ratio": 5.0,                          // new_ns / base_ns; null when base_ns is 0
//!      "change_ns": 12800000,                 // new_ns - base_ns
//!      "matched": 16, "only_base": 0, "only_new": 0, "steps": 4}
//!   ]
//! }
//! ```

use crate::{decode::stream, error::Error, reader::Warning};
use std::path::Path;

pub mod align;
mod collect;
mod html;
pub mod kernels;
mod render;
mod roles;
mod steps;
pub mod tensors;
mod window;

pub use kernels::{KernelRow, Status};
pub use tensors::{first_nan, Divergence, NonFinite, TensorAt, TensorReport};

/// One run as the report describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// Its files, as given.
    pub files: Vec<String>,
    /// Spans read.
    pub spans: u64,
    /// Tensors read.
    pub tensors: u64,
    /// Steps its kernels lie in, summed over its files.
    pub steps: u64,
    /// Kernels that reached a step after it was folded (see `window.rs`): in the totals, not
    /// aligned.
    pub late: u64,
    /// The time of its step markers, summed, ns.
    pub step_ns: u64,
}

/// What changed between two runs.
#[derive(Clone, Debug, Default)]
pub struct Diff {
    /// The base run.
    pub base: RunInfo,
    /// The new run.
    pub new: RunInfo,
    /// Every kernel name, slowest regressions first.
    pub kernels: Vec<KernelRow>,
    /// The tensors' comparison.
    pub tensors: TensorReport,
    /// What was wrong in the files and worked around (each names its file and offset).
    pub warnings: Vec<Warning>,
}

/// Compares the run recorded in `base` with the one in `new` (each one file per rank, ranks in
/// the same order). `progress` is told the bytes read. A file that is missing, not a trace or
/// unreadable from its start is an error naming it; later damage is a warning.
pub fn diff_files<P: AsRef<Path>>(
    base: &[P],
    new: &[P],
    progress: &mut dyn FnMut(u64),
) -> Result<Diff, Error> {
    let mut names = collect::Names::default();
    let mut shapes = window::Shapes::default();
    let mut warnings = Vec::new();
    let (mut base_run, base_info) = read_run(base, (&mut names, &mut shapes), &mut warnings, progress)?;
    let (mut new_run, new_info) = read_run(new, (&mut names, &mut shapes), &mut warnings, progress)?;
    base_run.number_tensors();
    new_run.number_tensors();
    Ok(Diff {
        base: base_info,
        new: new_info,
        kernels: kernels::compare(&base_run.kernels, &new_run.kernels, &shapes, &names),
        tensors: tensors::compare(&base_run.tensors, &new_run.tensors, &names),
        warnings,
    })
}

fn read_run<P: AsRef<Path>>(
    files: &[P],
    (names, shapes): (&mut collect::Names, &mut window::Shapes),
    warnings: &mut Vec<Warning>,
    progress: &mut dyn FnMut(u64),
) -> Result<(collect::Run, RunInfo), Error> {
    let mut run = collect::Run::default();
    let mut info = RunInfo::default();
    for (rank, path) in files.iter().enumerate() {
        let path = path.as_ref();
        let calibration = stream::final_calibration(path);
        let mut sink = collect::FileSink::new((&mut run, names, shapes), rank as u32, calibration);
        warnings.extend(stream::decode_path(path, &mut sink)?);
        progress(std::fs::metadata(path).map_or(0, |m| m.len()));
        info.files.push(path.display().to_string());
    }
    info.spans = run.spans;
    info.tensors = run.tensors.len() as u64;
    let runs = run.kernels.ranks.iter().flatten().filter(|r| r.first != steps::NO_STEP);
    info.steps = runs.map(|r| (i128::from(r.last) - i128::from(r.first) + 1) as u64).sum();
    info.late = run.kernels.late;
    info.step_ns = run.steps.1;
    Ok((run, info))
}
