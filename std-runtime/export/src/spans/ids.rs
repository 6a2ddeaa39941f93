//! Which ids the trace uses, learnt as runs of consecutive ids (a thread's items are numbered
//! one after the other, so a thread with no lost records is one run): whether an id exists,
//! the fresh ids handed to stand-ins and repeats, and which items repeat an id that an earlier
//! run already holds.

/// Fresh ids count up from here: ids of the last stream of the largest process salt, which no
/// real run reaches.
const FRESH_BASE: u64 = 0xffff_ffff_0000_0000;

/// A thread's run being extended, and its number among all runs (the order they began in).
#[derive(Clone, Copy, Default)]
pub(super) struct Run {
    current: Option<(u64, u64, u32)>,
}

/// Every run of the trace, and what follows from them once the first pass is over.
#[derive(Default)]
pub(super) struct Ids {
    /// Runs as `(first, last, number)`; merged and sorted by [`Ids::seal`].
    runs: Vec<(u64, u64, u32)>,
    started: u32,
    /// After [`Ids::seal`]: the ids in use, as sorted, disjoint, inclusive ranges.
    used: Vec<(u64, u64)>,
    /// After [`Ids::seal`]: per run number, the ranges of its ids that an earlier run holds.
    taken: Vec<(u32, u64, u64)>,
    sealed: bool,
    /// Fresh ids handed out in this pass.
    fresh: u64,
}

impl Ids {
    /// Where `id` (not 0) falls in `run`; the number of the run that holds it.
    pub(super) fn place(&mut self, run: &mut Run, id: u64) -> u32 {
        match &mut run.current {
            Some((_, last, n)) if last.wrapping_add(1) == id => {
                *last = id;
                *n
            }
            current => {
                if let Some(done) = current.take() {
                    self.runs.push(done);
                }
                let n = self.started;
                self.started += 1;
                *current = Some((id, id, n));
                n
            }
        }
    }

    /// A thread's stream is read: its run is complete.
    pub(super) fn close(&mut self, run: &mut Run) {
        if let Some(done) = run.current.take() {
            self.runs.push(done);
        }
    }

    /// The first pass is over: every id is known. Starts the count of runs and fresh ids
    /// again, for the second pass to find the same ones.
    pub(super) fn seal(&mut self) {
        let mut runs = std::mem::take(&mut self.runs);
        runs.sort_unstable();
        for &(first, last, _) in &runs {
            match self.used.last_mut() {
                Some((_, l)) if first <= l.saturating_add(1) => *l = (*l).max(last),
                _ => self.used.push((first, last)),
            }
        }
        // A run's ids that an earlier run (by number) also has are not its own. Runs overlap
        // only when ids repeat (a file given twice, colliding salts), so this is short.
        for (k, &(_, last, n)) in runs.iter().enumerate() {
            for &(first2, last2, n2) in runs[k + 1..].iter().take_while(|&&(first2, ..)| first2 <= last) {
                self.taken.push((n.max(n2), first2, last2.min(last)));
            }
        }
        self.taken.sort_unstable();
        self.started = 0;
        self.fresh = 0;
        self.sealed = true;
    }

    /// Whether an item of run `run` holds `id` as its own (not a repeat of an earlier run's).
    /// Before [`Ids::seal`], every item does.
    pub(super) fn owns(&self, run: u32, id: u64) -> bool {
        let start = self.taken.partition_point(|&(n, _, _)| n < run);
        !self.taken[start..]
            .iter()
            .take_while(|&&(n, _, _)| n == run)
            .any(|&(_, lo, hi)| (lo..=hi).contains(&id))
    }

    /// The next fresh id: above [`FRESH_BASE`], not used by the trace. Before [`Ids::seal`]
    /// the trace's ids are not all known, so the first pass hands out counts (1, 2, ...) that
    /// [`Ids::nth_fresh`] turns into the ids the second pass hands out.
    pub(super) fn fresh(&mut self) -> u64 {
        self.fresh += 1;
        if self.sealed {
            self.nth_fresh(self.fresh)
        } else {
            self.fresh
        }
    }

    /// The `k`-th fresh id (from 1) of a sealed pass.
    pub(super) fn nth_fresh(&self, k: u64) -> u64 {
        let mut id = FRESH_BASE + k;
        let above = self.used.partition_point(|&(_, last)| last <= FRESH_BASE);
        for &(first, last) in &self.used[above..] {
            let first = first.max(FRESH_BASE + 1);
            if first > id {
                break;
            }
            id = id.saturating_add(last - first + 1);
        }
        id
    }
}
