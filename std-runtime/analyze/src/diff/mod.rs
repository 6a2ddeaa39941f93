//! `diff`: what changed between two runs of one program — kernels that got slower, appeared,
//! vanished, were fused or split, and the first tensor whose values differ.
//!
//! Each run is one or many `trace.bin` files (one per rank). Both runs are streamed once, at
//! the same time (one thread each, file by file, `decode::stream`), and kept as sums, never
//! as records:
//!
//! - **kernels** (every span but the step markers) are summed per (step, name): count, total time, first start.
//!   A span's step is the step marker enclosing it on its thread, or on another thread the
//!   step whose time range holds it (`steps.rs`; a step is a span with a `step` field, see
//!   `waffle_wire::reserved`). A step's sums are kept while it is in flight, then folded into
//!   totals per name and its shape (which names, how often), kept per run of like steps
//!   (`window.rs`): memory grows with names and with changes of shape, not with spans or
//!   steps. [`kernels`] aligns them by rank, step, name and occurrence, and [`align`] pairs
//!   what is left on one side only as fused or split;
//! - **tensors** (events whose schema holds `tensor.hash`) are handed from each run's thread
//!   as they are read, and [`tensors`] matches them by rank, name, step and occurrence with a
//!   bounded window of unmatched ones per side, keeping only the counts, the first divergence
//!   and the first NaN or Inf: memory does not grow with the tensors either.
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
//!            "kernel_ns": 1830000,            // the compared kernels' time, summed
//!            "late": 0},                      // kernels counted but not aligned (window.rs)
//!   "new":  {"files": ["b.bin"], "spans": 1200, "tensors": 40, "steps": 4, "step_ns": 11600000,
//!            "kernel_ns": 9800000, "late": 0},
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
//!                                             // step), missing_in_new, missing_in_base, fused,
//!                                             // split, renamed (same launching op, see align.rs)
//!      "partners": [],                        // fused, split or renamed: the other side's kernels
//!      "base_count": 16, "new_count": 16, "base_ns": 3200000, "new_ns": 16000000,
//!      "base_mean_ns": 200000.0, "new_mean_ns": 1000000.0,
//!      "ratio": 5.0,                          // new_ns / base_ns; null when base_ns is 0
//!      "change_ns": 12800000,                 // new_ns - base_ns
//!      "matched": 16, "only_base": 0, "only_new": 0, "steps": 4}
//!   ]
//! }
//! ```

use crate::{decode::run, reader::Warning, Error};
use collect::lock;
use handoff::Msg;
use names::Names;
use std::{
    path::Path,
    sync::{mpsc, Mutex},
    thread,
};
use window::Shapes;

/// How many batches of tensors (`handoff::BATCH`) a run's reader may hand over before the
/// comparison takes them.
const CHANNEL: usize = 16;

pub mod align;
mod collect;
mod handoff;
mod html;
pub mod kernels;
mod names;
mod render;
mod roles;
mod steps;
pub mod tensors;
mod window;

pub use kernels::{KernelRow, Status};
pub use tensors::{first_nan, Divergence, NonFinite, TensorAt, TensorReport, WINDOW};

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
    /// The time of the kernels it compared, summed, ns.
    pub kernel_ns: u64,
}

/// What a diff compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiffOptions {
    /// In files that hold device queues (another tool's profile, converted: its header's
    /// `device.queues` label), compare the host threads' spans (CPU ops) too, not only the
    /// queues' kernels, copies and sets. Files without device queues always compare every span.
    pub cpu: bool,
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
/// the same order). The two runs are read at the same time, one thread each, and their
/// tensors compared as they come. `progress` is told the bytes read. A file that is missing,
/// not a trace or unreadable from its start is an error naming it (the base run's first when
/// both fail); later damage is a warning.
pub fn diff_files<P: AsRef<Path> + Sync>(
    base: &[P],
    new: &[P],
    progress: &mut dyn FnMut(u64),
) -> Result<Diff, Error> {
    diff_files_with(base, new, DiffOptions::default(), progress)
}

/// [`diff_files`] with options.
pub fn diff_files_with<P: AsRef<Path> + Sync>(
    base: &[P],
    new: &[P],
    options: DiffOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Diff, Error> {
    let (names, shapes) = (Mutex::new(Names::default()), Mutex::new(Shapes::default()));
    let mut matcher = tensors::Matcher::default();
    let (base_read, new_read) = thread::scope(|s| {
        let mut rx = Vec::new();
        let mut readers = Vec::new();
        for files in [base, new] {
            let (tx, r) = mpsc::sync_channel(CHANNEL);
            rx.push(r);
            let (names, shapes) = (&names, &shapes);
            readers.push(s.spawn(move || read_run(files, (names, shapes), options, &tx)));
        }
        compare_as_read(&rx, &mut matcher, progress);
        let mut joined =
            readers.into_iter().map(|r| r.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (joined.next().expect("two readers"), joined.next().expect("two readers"))
    });
    let (base_run, base_info, mut warnings) = base_read?;
    let (new_run, new_info, new_warnings) = new_read?;
    warnings.extend(new_warnings);
    let (names, shapes) = (names.into_inner().unwrap_or_else(|e| e.into_inner()), lock(&shapes));
    Ok(Diff {
        base: base_info,
        new: new_info,
        kernels: kernels::compare(&base_run.kernels, &new_run.kernels, &shapes, &names),
        tensors: matcher.report(&names),
        warnings,
    })
}

/// Takes the two runs' tensors as their readers hand them over until both are done, from the
/// run that is behind (the lower rank, else the fewer tensors of that rank taken), so that
/// counterparts arrive close together.
fn compare_as_read(
    rx: &[mpsc::Receiver<Msg>],
    matcher: &mut tensors::Matcher,
    progress: &mut dyn FnMut(u64),
) {
    // Per side: (rank, tensors of that rank taken), and whether its reader is done.
    let mut at = [(0u32, 0u64); 2];
    let mut done = [false; 2];
    while !(done[0] && done[1]) {
        let side = match done {
            [false, false] => usize::from(at[1] < at[0]),
            [true, _] => 1,
            [_, true] => 0,
        };
        match rx[side].recv() {
            Ok(Msg::Tensors(batch)) => {
                for t in batch {
                    at[side] = if t.rank == at[side].0 { (t.rank, at[side].1 + 1) } else { (t.rank, 1) };
                    matcher.add(side, t);
                }
            }
            Ok(Msg::Read(bytes)) => progress(bytes),
            Err(mpsc::RecvError) => done[side] = true,
        }
    }
}

type Read = (collect::Run, RunInfo, Vec<Warning>);

fn read_run<P: AsRef<Path>>(
    files: &[P],
    (names, shapes): (&Mutex<Names>, &Mutex<Shapes>),
    options: DiffOptions,
    out: &mpsc::SyncSender<Msg>,
) -> Result<Read, Error> {
    let mut run = collect::Run::default();
    let mut info = RunInfo::default();
    let mut warnings = Vec::new();
    for (rank, path) in files.iter().enumerate() {
        let path = path.as_ref();
        let calibration = run::final_calibration(path);
        let mut sink =
            collect::FileSink::new((&mut run, names, shapes), out, (rank as u32, options.cpu), calibration);
        warnings.extend(run::decode_path(path, &mut sink)?);
        let _ = out.send(Msg::Read(std::fs::metadata(path).map_or(0, |m| m.len())));
        info.files.push(path.display().to_string());
    }
    info.spans = run.spans;
    info.tensors = run.tensors;
    let runs = run.kernels.ranks.iter().flatten().filter(|r| r.first != steps::NO_STEP);
    info.steps = runs.map(|r| (i128::from(r.last) - i128::from(r.first) + 1) as u64).sum();
    info.late = run.kernels.late;
    info.step_ns = run.steps.1;
    info.kernel_ns = run.kernel_ns;
    Ok((run, info, warnings))
}
