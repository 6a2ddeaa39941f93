//! Chrome's rows (one per `(pid, tid)`): their ids, where a span's slice lies on its row, and
//! where a flow binds to it, learnt as spans end.
//!
//! A thread's row holds its spans as complete (`X`) slices and its events as instants. A
//! detached span, which may end on another thread long after the spans around its begin, gets
//! a row of its own. A row's slices must nest. Spans come as they end, children before their
//! parents, and one thread's records go forward in time, so they do. When recorded times say
//! otherwise (a clock that went back, damaged records, a model built by hand), the slices
//! written before cannot be cut; the new one is stretched instead, and marked
//! `waffle.stretched`: to end no earlier than any slice of its row written before it, and to
//! begin no later than the slices it would otherwise cross among the latest ones (those that
//! overlap each other up to the row's latest end). That is all a row keeps: the extent of its
//! latest overlapping slices.
//!
//! The binding rule, used here and by the tests: a flow event at time `ts` on a row binds to
//! the innermost slice with `start <= ts < end`; if there is none, to a zero-length slice at
//! `ts`. A span's flows are placed at the first time in it that none of its children covers,
//! so they bind to the span and not to a child begun at the same nanosecond; an event's at its
//! time. For that, what a span's children on its row (the spans it enclosed on its thread: its
//! `parent` without a `parent_anchor`) tell is kept while it is open: how far the run of them
//! from its first child reaches without a gap. Children recorded inside a context entered on
//! its thread are not counted.

use crate::{
    index::IdMap,
    process::{Assigned, OsIds},
    spans::{Anchor, OutSpan, TraceInfo},
};

/// Where a flow binds: a row and a time (Unix ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Point {
    pub(super) pid: i64,
    pub(super) tid: i64,
    pub(super) ts: u64,
}

/// A span's slice as written, Unix ns.
pub(super) struct Slice {
    pub(super) start: u64,
    pub(super) end: u64,
    /// Whether it was stretched to keep its row nested.
    pub(super) stretched: bool,
    /// Where its flows bind.
    pub(super) bind: u64,
}

/// The run of an open span's children on its row, from its first child: where it begins and
/// how far it reaches without a gap.
#[derive(Clone, Copy)]
struct Children {
    first: u64,
    reach: u64,
    /// Whether the run has ended (a gap before a later child).
    broken: bool,
}

impl Children {
    fn add(&mut self, start: u64, end: u64) {
        if !self.broken && start <= self.reach {
            self.reach = self.reach.max(end);
        } else {
            self.broken = true;
        }
    }
}

/// A thread's row.
struct Row {
    tid: i64,
    /// The extent of its latest slices that overlap each other, up to the latest end.
    latest: Option<(u64, u64)>,
}

/// The pid of each process and the tid of each row as written, unique over the trace, and the
/// children of open spans.
#[derive(Default)]
pub(super) struct Rows {
    pids: Vec<i64>,
    /// Per process, each thread's row.
    threads: Vec<Vec<Row>>,
    /// Every pid and tid handed out, for fresh ones for detached spans' rows.
    ids: OsIds,
    /// Per process, its rows so far: its threads', then its detached spans' as they end.
    rows: Vec<usize>,
    /// Open spans with children written, by id.
    children: IdMap<u64, Children>,
}

impl Rows {
    /// The rows of every process and thread of the trace.
    pub(super) fn new(ctx: &TraceInfo) -> Rows {
        let (ids, Assigned { pids, tids }) = OsIds::assign(&ctx.processes);
        let threads: Vec<Vec<Row>> =
            tids.into_iter().map(|t| t.into_iter().map(|tid| Row { tid, latest: None }).collect()).collect();
        let rows = threads.iter().map(Vec::len).collect();
        Rows { pids, threads, ids, rows, children: IdMap::default() }
    }

    pub(super) fn pid(&self, process: usize) -> i64 {
        self.pids[process]
    }

    /// The tid of a thread's row.
    pub(super) fn thread(&self, process: usize, thread: usize) -> i64 {
        self.threads[process][thread].tid
    }

    /// A new row for a detached span of `process`: its tid and sort index.
    pub(super) fn detached(&mut self, process: usize) -> (i64, usize) {
        let index = self.rows[process];
        self.rows[process] += 1;
        (self.ids.fresh(), index)
    }

    /// Where an anchor points on a thread's row; `None` for a detached span's row, whose tid
    /// is known only while it is written.
    pub(super) fn anchored(&self, a: Anchor) -> Option<Point> {
        let (process, thread) = (a.process as usize, a.thread as usize);
        a.detached.is_none().then(|| Point {
            pid: self.pid(process),
            tid: self.thread(process, thread),
            ts: a.ts_ns,
        })
    }

    /// Places a span (not an event) that has ended: its slice, and where its flows bind.
    pub(super) fn slice(&mut self, s: &OutSpan<'_>) -> Slice {
        let (mut start, mut end) = (s.start_ns, s.end_ns.max(s.start_ns));
        let kids = self.children.remove(&s.id);
        // A detached span's row holds it alone; its children sit on its thread's row.
        if !s.detached {
            let row = &mut self.threads[s.process][s.thread];
            if let Some((first, last)) = row.latest {
                end = end.max(last);
                if first < start && start < last {
                    start = first;
                }
            }
            if start < end {
                row.latest = match row.latest {
                    Some((first, last)) if start < last => Some((first.min(start), end)),
                    _ => Some((start, end)),
                };
            }
            if let (Some(parent), None) = (s.parent, s.parent_anchor) {
                self.children.entry(parent).and_modify(|k| k.add(start, end)).or_insert(Children {
                    first: start,
                    reach: end,
                    broken: false,
                });
            }
        }
        let mut bind = start;
        if let Some(k) = kids.filter(|k| k.first <= start && start < k.reach && !s.detached) {
            bind = k.reach;
        }
        if bind >= end {
            bind = start;
        }
        let stretched = start < s.start_ns || end > s.end_ns.max(s.start_ns);
        Slice { start, end, stretched, bind }
    }

    /// Open spans whose children are kept, for tests of the memory held.
    #[cfg(test)]
    pub(super) fn open_parents(&self) -> usize {
        self.children.len()
    }
}
