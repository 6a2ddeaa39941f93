//! What a run's reader hands to the comparison: tensor fingerprints, numbered (the k-th of a
//! name in a step) and sent in batches through a bounded channel, and the bytes read.

use super::steps::{KEPT, NO_STEP};
use std::{
    collections::{BTreeMap, HashMap},
    sync::mpsc::SyncSender,
};

/// One tensor fingerprint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TensorRec {
    /// The file's position among its run's files.
    pub rank: u32,
    /// Its name (`tensor.name`, else the event's name).
    pub name: u32,
    /// Its step, [`NO_STEP`] when it lies in none.
    pub step: i64,
    /// Which tensor of this name, step and rank it is, from 0 in the order its file hands them
    /// over (time order on each thread).
    pub occurrence: u32,
    /// When, Unix ns.
    pub ns: u64,
    /// `tensor.hash`.
    pub hash: u64,
    /// `tensor.rms` (NaN when not recorded).
    pub rms: f64,
    /// `tensor.nan`.
    pub nan: u64,
    /// `tensor.pinf`.
    pub pinf: u64,
    /// `tensor.ninf`.
    pub ninf: u64,
}

/// What a run's reader hands to the comparison, in the order it reads it.
#[derive(Clone, Debug)]
pub(crate) enum Msg {
    /// Tensors, numbered, their step known: up to [`BATCH`] at once (one message per tensor
    /// would wake the comparison for each).
    Tensors(Vec<TensorRec>),
    /// A file was read: its size in bytes.
    Read(u64),
}

/// The most steps of a file whose tensors are still counted by name (for their occurrence):
/// twice the ended steps kept to place items (`steps::KEPT`). A tensor of an older step (the
/// file would hand it over thousands of steps late) is numbered from 0 again.
const COUNTED_STEPS: usize = 2 * KEPT;

/// How many tensors a file's reader hands over at once.
pub(crate) const BATCH: usize = 256;

/// Numbers a file's tensors (the k-th of a name in a step) and hands them on.
pub(crate) struct Tensors<'a> {
    /// Per step, per name, how many were handed on; the latest [`COUNTED_STEPS`] steps, and
    /// [`NO_STEP`] always.
    counts: BTreeMap<i64, HashMap<u32, u32>>,
    batch: Vec<TensorRec>,
    out: &'a SyncSender<Msg>,
}

impl<'a> Tensors<'a> {
    /// Tensors handed to `out`.
    pub(crate) fn new(out: &'a SyncSender<Msg>) -> Self {
        Tensors { counts: BTreeMap::new(), batch: Vec::with_capacity(BATCH), out }
    }

    pub(crate) fn add(&mut self, mut t: TensorRec) {
        let per_name = self.counts.entry(t.step).or_default();
        let n = per_name.entry(t.name).or_insert(0);
        t.occurrence = *n;
        *n += 1;
        if self.counts.len() > COUNTED_STEPS + 1 {
            let oldest = self.counts.keys().copied().find(|&s| s != NO_STEP);
            if let Some(oldest) = oldest {
                self.counts.remove(&oldest);
            }
        }
        self.batch.push(t);
        if self.batch.len() == BATCH {
            self.flush();
        }
    }

    /// Hands on what is batched.
    pub(crate) fn flush(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
            // The receiver only goes away when the comparison has stopped (a panic): nothing
            // to do.
            let _ = self.out.send(Msg::Tensors(batch));
        }
    }
}
