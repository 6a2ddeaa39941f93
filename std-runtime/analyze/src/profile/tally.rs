//! One file's sums as its spans close: per name, how many, their time and their self time; its
//! time in outermost MPI calls; its first begin and last end; the messages it received, per
//! sending rank. Only the spans still open are held, so memory grows with the names and the
//! nesting, never with the records. Times are in the file's clock ticks until [`FileTally::finish`]
//! converts them on its last calibration.

use std::collections::HashMap;

use waffle_wire::Calibration;

/// A span still open, in [`FileTally::open`].
#[derive(Clone, Copy)]
struct Open {
    start: u64,
    name: u32,
    /// The time of its children that have closed.
    children: u64,
    /// Its parent, if it had one that is still open (a slot, told apart from a later span in the
    /// same slot by the serial).
    parent: Option<Handle>,
    serial: u64,
    mpi: bool,
    /// Whether an MPI call encloses it.
    under_mpi: bool,
}

/// A span being tallied: its slot among the open spans, and the serial of its begin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Handle {
    slot: u32,
    serial: u64,
}

/// Per name: how many, their time, their self time.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sums {
    pub(crate) count: u64,
    pub(crate) total: u64,
    pub(crate) self_time: u64,
}

/// One file's sums (see the module docs).
#[derive(Default)]
pub(crate) struct FileTally {
    /// By name number.
    sums: Vec<Sums>,
    open: Vec<Option<Open>>,
    free: Vec<u32>,
    serial: u64,
    /// The first begin and the last end.
    times: Option<(u64, u64)>,
    mpi: u64,
    /// Per sending rank: messages and bytes.
    received: HashMap<i64, (u64, u64)>,
}

/// What a file's tally comes to, in ns.
pub(crate) struct Tallied {
    /// Per name number that occurs.
    pub(crate) sums: Vec<(u32, Sums)>,
    pub(crate) times: Option<(u64, u64)>,
    pub(crate) mpi_ns: u64,
    pub(crate) received: HashMap<i64, (u64, u64)>,
    pub(crate) threads: usize,
}

impl FileTally {
    /// A span named `name` begins at `start` inside `parent` (if any).
    pub(crate) fn begin(&mut self, parent: Option<Handle>, start: u64, name: u32, mpi: bool) -> Handle {
        let parent = parent.filter(|&p| self.is_open(p));
        let under_mpi = parent.and_then(|p| self.open[p.slot as usize]).is_some_and(|p| p.mpi || p.under_mpi);
        self.serial += 1;
        let open = Open { start, name, children: 0, parent, serial: self.serial, mpi, under_mpi };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.open[slot as usize] = Some(open);
                slot
            }
            None => {
                self.open.push(Some(open));
                self.open.len() as u32 - 1
            }
        };
        Handle { slot, serial: self.serial }
    }

    fn is_open(&self, h: Handle) -> bool {
        self.open.get(h.slot as usize).copied().flatten().is_some_and(|o| o.serial == h.serial)
    }

    /// Span `h` ends at `end`. A span told to end twice counts once.
    pub(crate) fn end(&mut self, h: Handle, end: u64) {
        if !self.is_open(h) {
            return;
        }
        let o = self.open[h.slot as usize].take().expect("open");
        self.free.push(h.slot);
        let dur = end.saturating_sub(o.start);
        let k = o.name as usize;
        if self.sums.len() <= k {
            self.sums.resize(k + 1, Sums::default());
        }
        let sums = &mut self.sums[k];
        sums.count += 1;
        sums.total += dur;
        sums.self_time += dur.saturating_sub(o.children);
        if let Some(parent) = o.parent.filter(|&p| self.is_open(p)) {
            let p = self.open[parent.slot as usize].as_mut().expect("open");
            p.children += dur;
        }
        if o.mpi && !o.under_mpi {
            self.mpi += dur;
        }
        let (first, last) = self.times.unwrap_or((o.start, end.max(o.start)));
        self.times = Some((first.min(o.start), last.max(end)));
    }

    /// A message from rank `from` arrived, `bytes` long.
    pub(crate) fn received(&mut self, from: i64, bytes: u64) {
        let m = self.received.entry(from).or_default();
        m.0 += 1;
        m.1 += bytes;
    }

    /// The sums of a file of `threads` threads in ns: times on calibration `to_ns` (`None`: they are ns already), durations at its
    /// rate. A span never told to end
    /// counts as lasting nothing.
    pub(crate) fn finish(mut self, to_ns: Option<Calibration>, threads: usize) -> Tallied {
        // Innermost first, so that a parent's children are in before it closes.
        let mut left: Vec<(u64, Handle, u64)> = self
            .open
            .iter()
            .enumerate()
            .filter_map(|(slot, o)| {
                o.map(|o| (o.serial, Handle { slot: slot as u32, serial: o.serial }, o.start))
            })
            .collect();
        left.sort_unstable_by_key(|l| std::cmp::Reverse(l.0));
        for (_, h, start) in left {
            self.end(h, start);
        }
        let time = |t: u64| to_ns.map_or(t, |c| c.to_unix_ns(t));
        let span = |d: u64| to_ns.map_or(d, |c| c.ns_in(d));
        let sums = self
            .sums
            .iter()
            .enumerate()
            .filter(|(_, s)| s.count > 0)
            .map(|(k, s)| {
                (k as u32, Sums { count: s.count, total: span(s.total), self_time: span(s.self_time) })
            })
            .collect();
        Tallied {
            sums,
            times: self.times.map(|(a, b)| (time(a), time(b))),
            mpi_ns: span(self.mpi),
            received: self.received,
            threads,
        }
    }
}
