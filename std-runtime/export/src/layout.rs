//! Where a thread's spans and events sit on its track, and the order of records that nests.
//!
//! A thread track shows what the thread did, so a slice sits inside the innermost span the
//! thread had open when it began. For ordinary nesting that is the recorded parent. It is not
//! for what a thread records inside an entered context: the parent is then a span of another
//! thread or process, or a detached span, while the slice still happens inside whatever the
//! thread had open. Such slices take their place on the track from time and get an arrow from
//! their parent instead (see `flows`).
//!
//! Detached spans (the spans of instrumented futures) leave the thread track altogether: one
//! may end on another thread, long after the spans around its begin, which would break the
//! track's nesting. Each gets a track of its own.

use crate::model::Thread;

/// A span or an event of one thread, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Span(usize),
    Event(usize),
}

/// One record of a thread's sequence, by index into its spans or events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Begin(usize),
    End(usize),
    Instant(usize),
}

/// The enclosing span on the thread track of each span and event.
pub(super) struct Layout {
    /// Per span: the span (index) it sits in; `None` at top level, and for detached spans.
    spans: Vec<Option<usize>>,
    /// Per event: the span it sits in.
    events: Vec<Option<usize>>,
    /// Spans (detached ones left out) and events in record order.
    order: Vec<Node>,
}

impl Layout {
    /// Places a thread's spans and events. Spans come in begin order and events in time order;
    /// they are merged by time, ties broken by id, which counts a stream's records in order.
    pub(super) fn of(thread: &Thread) -> Layout {
        let (spans, events) = (&thread.spans, &thread.events);
        let mut layout = Layout {
            spans: vec![None; spans.len()],
            events: vec![None; events.len()],
            order: Vec::with_capacity(spans.len() + events.len()),
        };
        // Spans open at the time reached, innermost last. Spans on one thread nest, so time
        // alone recovers the stack.
        let mut open: Vec<usize> = Vec::new();
        let (mut s, mut e) = (0, 0);
        loop {
            while spans.get(s).is_some_and(|span| span.detached) {
                s += 1;
            }
            let node = match (spans.get(s), events.get(e)) {
                (Some(span), Some(ev)) if (ev.ts_ns, ev.id) < (span.start_ns, span.id) => Node::Event(e),
                (Some(_), _) => Node::Span(s),
                (None, Some(_)) => Node::Event(e),
                (None, None) => break,
            };
            let (t, parent) = match node {
                Node::Span(i) => (spans[i].start_ns, spans[i].parent),
                Node::Event(i) => (events[i].ts_ns, events[i].parent),
            };
            // A span that ended before `t` is closed. One that ended exactly at `t` encloses
            // the record only if it is the recorded parent: at a tie, a sibling ended first.
            while let Some(&top) = open.last() {
                let (end, id) = (spans[top].end_ns, spans[top].id);
                if end > t || (end == t && parent == Some(id)) {
                    break;
                }
                open.pop();
            }
            let here = open.last().copied();
            match node {
                Node::Span(i) => {
                    layout.spans[i] = here;
                    open.push(i);
                    s += 1;
                }
                Node::Event(i) => {
                    layout.events[i] = here;
                    e += 1;
                }
            }
            layout.order.push(node);
        }
        layout
    }

    /// The thread's records in the order that nests: a span's begin, then its children in
    /// record order, then its end. The begins and ends of its detached spans, which go to
    /// their own tracks, are merged in by time, so the sequence's time never goes back.
    pub(super) fn steps(&self, thread: &Thread) -> Vec<Step> {
        let spans = &thread.spans;
        // Children of span i in kids[i]; top level in kids[spans.len()].
        let mut kids: Vec<Vec<Step>> = vec![Vec::new(); spans.len() + 1];
        for &node in &self.order {
            let (slot, step) = match node {
                Node::Span(i) => (self.spans[i], Step::Begin(i)),
                Node::Event(i) => (self.events[i], Step::Instant(i)),
            };
            kids[slot.unwrap_or(spans.len())].push(step);
        }
        let mut order = Vec::with_capacity(2 * spans.len() + thread.events.len());
        // An explicit stack of (list, position), so deep nesting cannot overflow the call stack.
        let mut stack = vec![(spans.len(), 0usize)];
        while let Some((list, pos)) = stack.last_mut() {
            match kids[*list].get(*pos) {
                Some(&step) => {
                    *pos += 1;
                    order.push(step);
                    if let Step::Begin(i) = step {
                        stack.push((i, 0));
                    }
                }
                None => {
                    let list = *list;
                    stack.pop();
                    if list < spans.len() {
                        order.push(Step::End(list));
                    }
                }
            }
        }
        let mut detached: Vec<(u64, u64, Step)> = spans
            .iter()
            .enumerate()
            .filter(|(_, s)| s.detached)
            .flat_map(|(i, s)| [(s.start_ns, s.id, Step::Begin(i)), (s.end_ns, u64::MAX, Step::End(i))])
            .collect();
        if detached.is_empty() {
            return order;
        }
        // Merged by (time as written, id): the time never goes back, and at a tie the record
        // order holds, so a flow's start still comes before its end in the file. A detached end
        // goes after whatever else happened at its time. The thread's own order never changes.
        detached.sort_by_key(|&(ts, id, _)| (ts, id));
        let mut pending = detached.into_iter().peekable();
        let mut merged = Vec::with_capacity(order.len() + pending.len());
        let (mut ts, mut id) = (0, 0);
        for step in order {
            ts = ts.max(time(thread, step));
            match step {
                Step::Begin(i) => id = spans[i].id,
                Step::Instant(i) => id = thread.events[i].id,
                Step::End(_) => {}
            }
            while let Some((_, _, d)) = pending.next_if(|&(d_ts, d_id, _)| (d_ts, d_id) < (ts, id)) {
                merged.push(d);
            }
            merged.push(step);
        }
        merged.extend(pending.map(|(_, _, d)| d));
        merged
    }
}

/// The time of a step as recorded.
fn time(thread: &Thread, step: Step) -> u64 {
    match step {
        Step::Begin(i) => thread.spans[i].start_ns,
        Step::End(i) => thread.spans[i].end_ns,
        Step::Instant(i) => thread.events[i].ts_ns,
    }
}
