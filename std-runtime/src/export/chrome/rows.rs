//! Where spans and events sit on Chrome's rows (one per `(pid, tid)`), and where a flow binds.
//!
//! A thread's row holds its spans as complete (`X`) slices and its events as instants. A row's
//! slices must nest, so they are stacked by time: a span sits in the innermost slice still open
//! when it begins (one that ended exactly then is closed), and a span that outlives the slice
//! it sits in (out-of-order input, lost records) is cut at that slice's end and marked. A
//! detached span, which may end on another thread long after the spans around its begin, gets a
//! row of its own.
//!
//! The binding rule, used here and by the tests: a flow event at time `ts` on a row binds to
//! the innermost slice with `start <= ts < end`; if there is none, to a zero-length slice at
//! `ts`. A span's flows are placed at the first time in it that none of its children covers,
//! so they bind to the span and not to a child begun at the same nanosecond.

use std::collections::HashMap;

use crate::model::{Item, ItemRef, Trace};

/// One row of the trace: a thread, or a detached span.
pub(super) struct Row {
    pub(super) process: usize,
    /// The thread's index, also for a detached span's row.
    pub(super) thread: usize,
    /// For a detached span's row, the span's index in its thread.
    pub(super) detached: Option<usize>,
    /// Slices in begin order.
    pub(super) slices: Vec<Slice>,
    /// The row's records in output order: slices in begin order, each event after every slice
    /// begun at or before its time.
    pub(super) order: Vec<Entry>,
}

/// A span on a row, with its nesting.
pub(super) struct Slice {
    pub(super) span: usize,
    pub(super) start: u64,
    /// The end as written: at most the end of the slice it sits in.
    pub(super) end: u64,
    /// Whether `end` was cut to fit the enclosing slice.
    pub(super) cut: bool,
    /// The slice (index in the row) it sits in.
    pub(super) parent: Option<usize>,
    children: Vec<usize>,
}

/// A record of a row.
#[derive(Clone, Copy)]
pub(super) enum Entry {
    /// A slice, by index in the row.
    Slice(usize),
    /// An event, by index in its thread, and the slice (index in the row) enclosing it.
    Event(usize, Option<usize>),
}

/// Every row of a trace, and where each item is.
pub(super) struct Rows {
    pub(super) rows: Vec<Row>,
    /// Span or event → (row, slice of the span or the slice enclosing the event).
    at: HashMap<ItemRef, (usize, Option<usize>)>,
}

impl Rows {
    pub(super) fn of(trace: &Trace) -> Rows {
        let mut rows = Rows { rows: Vec::new(), at: HashMap::new() };
        for (p, process) in trace.processes.iter().enumerate() {
            for t in 0..process.threads.len() {
                rows.thread_row(trace, p, t);
            }
            for (t, thread) in process.threads.iter().enumerate() {
                for (i, s) in thread.spans.iter().enumerate().filter(|(_, s)| s.detached) {
                    let slice = Slice {
                        span: i,
                        start: s.start_ns,
                        end: s.end_ns.max(s.start_ns),
                        cut: false,
                        parent: None,
                        children: Vec::new(),
                    };
                    let r = ItemRef { process: p, thread: t, item: Item::Span(i) };
                    rows.at.insert(r, (rows.rows.len(), Some(0)));
                    rows.rows.push(Row {
                        process: p,
                        thread: t,
                        detached: Some(i),
                        slices: vec![slice],
                        order: vec![Entry::Slice(0)],
                    });
                }
            }
        }
        rows
    }

    fn thread_row(&mut self, trace: &Trace, p: usize, t: usize) {
        let thread = &trace.processes[p].threads[t];
        let mut spans: Vec<usize> = (0..thread.spans.len()).filter(|&i| !thread.spans[i].detached).collect();
        spans.sort_by_key(|&i| thread.spans[i].start_ns);
        let row_index = self.rows.len();
        let mut row = Row { process: p, thread: t, detached: None, slices: Vec::new(), order: Vec::new() };
        let mut open: Vec<usize> = Vec::new();
        let mut events = thread.events.iter().enumerate().peekable();
        let mut spans = spans.into_iter().peekable();
        loop {
            let next_span = spans.peek().map(|&i| thread.spans[i].start_ns);
            let next_event = events.peek().map(|(_, e)| e.ts_ns);
            match (next_span, next_event) {
                (Some(s), Some(e)) if s <= e => {}
                (Some(_), None) => {}
                (_, Some(ts)) => {
                    let (e, _) = events.next().expect("peeked");
                    close(&row.slices, &mut open, ts);
                    let here = open.last().copied();
                    row.order.push(Entry::Event(e, here));
                    self.at
                        .insert(ItemRef { process: p, thread: t, item: Item::Event(e) }, (row_index, here));
                    continue;
                }
                (None, None) => break,
            }
            let i = spans.next().expect("peeked");
            let s = &thread.spans[i];
            close(&row.slices, &mut open, s.start_ns);
            let parent = open.last().copied();
            let mut end = s.end_ns.max(s.start_ns);
            let limit = parent.map_or(u64::MAX, |p| row.slices[p].end);
            let cut = end > limit;
            end = end.min(limit);
            let k = row.slices.len();
            if let Some(p) = parent {
                row.slices[p].children.push(k);
            }
            row.slices.push(Slice { span: i, start: s.start_ns, end, cut, parent, children: Vec::new() });
            row.order.push(Entry::Slice(k));
            open.push(k);
            self.at.insert(ItemRef { process: p, thread: t, item: Item::Span(i) }, (row_index, Some(k)));
        }
        self.rows.push(row);
    }

    /// The row of an item, the slice a flow to or from it binds to, and the flow's time; `None`
    /// for an event no slice encloses (it becomes a zero-length slice of its own).
    pub(super) fn binding(&self, trace: &Trace, r: ItemRef) -> (usize, Option<usize>, u64) {
        let (row, slice) = self.at[&r];
        match r.item {
            Item::Span(_) => {
                let k = slice.expect("a span has a slice");
                (row, slice, self.rows[row].gap(k))
            }
            Item::Event(e) => (row, slice, trace.thread(r).events[e].ts_ns),
        }
    }

    /// Whether span `parent` is a slice that encloses `r` on `r`'s row.
    pub(super) fn encloses(&self, parent: ItemRef, r: ItemRef) -> bool {
        let (row, mut at) = self.at[&r];
        if let Item::Span(_) = r.item {
            at = at.and_then(|k| self.rows[row].slices[k].parent);
        }
        let Some(&(parent_row, Some(parent_slice))) = self.at.get(&parent) else { return false };
        while let Some(k) = at {
            if row == parent_row && k == parent_slice {
                return true;
            }
            at = self.rows[row].slices[k].parent;
        }
        false
    }
}

impl Row {
    /// The first time in slice `k` that none of its children covers (its start if there is
    /// none: a zero-length slice, or one filled by its children).
    fn gap(&self, k: usize) -> u64 {
        let slice = &self.slices[k];
        let mut t = slice.start;
        for &c in &slice.children {
            let child = &self.slices[c];
            if child.start > t {
                break;
            }
            if t < child.end {
                t = child.end;
            }
        }
        if t < slice.end {
            t
        } else {
            slice.start
        }
    }
}

/// Closes the open slices that ended at or before `t`.
fn close(slices: &[Slice], open: &mut Vec<usize>, t: u64) {
    while open.last().is_some_and(|&k| slices[k].end <= t) {
        open.pop();
    }
}
