//! A decoded [`Trace`] played back as records, so that each exporter has one writer for files
//! and for models.
//!
//! The model keeps spans in begin order and events in time order, not the stream's record
//! order; `layout` recovers an order that nests (a span's begin, what it holds, its end), with
//! detached spans merged in by time. Times are already Unix nanoseconds: they go through as
//! ticks of a calibration that leaves them as they are.

use std::{collections::HashMap, sync::Arc};
use waffle_wire::Calibration;

use super::layout::{Layout, Step};
use crate::{
    decode::{
        stream::{FileEnd, Hand, Header, Item, Sink},
        track::defines_or_syncs,
        Fields,
    },
    model::{Callsite, Trace, Value},
};

/// Ticks that are nanoseconds already.
const NANOSECONDS: Calibration = Calibration { anchor_ticks: 0, anchor_unix_ns: 0, ticks: 1, ns: 1 };

/// Hands every process of `trace` to `sink`, one thread after the other.
pub(super) fn replay<S: Sink>(trace: &Trace, sink: &mut S) {
    let mut fields = Fields::new();
    let mut handles: Vec<S::Span> = Vec::new();
    // The spans open on the thread's track (a detached span leaves it), innermost last.
    let mut open: Vec<u64> = Vec::new();
    for process in &trace.processes {
        sink.process(&process.source, &Header { calibration: NANOSECONDS, ..process.header.clone() });
        for (t, thread) in process.threads.iter().enumerate() {
            sink.thread(t, thread.stream);
            sink.thread_named(t, thread.tid, &thread.name);
            if let Some(track) = process.track_of(t) {
                sink.device_track(t, track);
            }
            if thread.dropped > 0 {
                sink.dropped(t, thread.dropped);
            }
        }
        // Callsites numbered by first sight, as the decoder numbers them, and which of their
        // items the sink asks for.
        let mut sites: HashMap<*const Callsite, (u32, Hand)> = HashMap::new();
        let mut index = |cs: &Arc<Callsite>, sink: &mut S| {
            let next = sites.len() as u32 + 1;
            *sites
                .entry(Arc::as_ptr(cs))
                .or_insert_with(|| (next, if S::EVERY_ITEM { Hand::Referring } else { sink.hand(next, cs) }))
        };
        for (t, thread) in process.threads.iter().enumerate() {
            // Spans of each counted callsite (Hand::Counted) on this thread.
            let mut counted: std::collections::BTreeMap<u32, u64> = Default::default();
            handles.clear();
            handles.resize(thread.spans.len(), S::Span::default());
            open.clear();
            for step in Layout::of(thread).steps(thread) {
                match step {
                    Step::Begin(i) => {
                        let s = &thread.spans[i];
                        fill(&mut fields, &s.fields);
                        let held = s.parent.is_some_and(|p| open.contains(&p));
                        let (callsite_index, hand) = index(&s.callsite, sink);
                        if hand == Hand::Counted {
                            *counted.entry(callsite_index).or_default() += 1;
                        }
                        let item = Item {
                            id: s.id,
                            parent: s.parent,
                            held,
                            callsite: &s.callsite,
                            callsite_index,
                            fields: &fields,
                            ticks: s.start_ns,
                            depth: s.depth,
                            links: &s.links,
                            correlation: s.correlation,
                        };
                        let handed = S::EVERY_ITEM || item.refers() || hand == Hand::SpansWithFields;
                        if handed {
                            handles[i] = sink.span_begin(t, &item);
                        }
                        if !S::EVERY_ITEM {
                            sink.skipped(t, (s.id, s.id.wrapping_add(1)), u64::from(!handed), 0);
                        }
                        if s.detached {
                            sink.detach(t, handles[i], s.id);
                            if !S::EVERY_ITEM {
                                // Detached as it begins: it holds nothing yet.
                                sink.detached_from(t, s.id, 0, s.parent.filter(|_| held));
                            }
                        } else {
                            open.push(s.id);
                        }
                    }
                    Step::End(i) => {
                        let s = &thread.spans[i];
                        if s.detached {
                            sink.detached_end(t, handles[i], s.end_ns, s.ended);
                        } else {
                            if let Some(k) = open.iter().rposition(|&o| o == s.id) {
                                open.remove(k);
                            }
                            if S::EVERY_ITEM {
                                sink.span_end(t, handles[i], s.end_ns, s.ended);
                            }
                        }
                    }
                    Step::Instant(i) => {
                        let e = &thread.events[i];
                        if !S::TRACK_RECORDS && defines_or_syncs(&e.callsite) {
                            // As the stream hands them (`decode/track.rs`): not at all, their id
                            // taken.
                            if !S::EVERY_ITEM {
                                sink.skipped(t, (e.id, e.id.wrapping_add(1)), 0, 0);
                            }
                            continue;
                        }
                        fill(&mut fields, &e.fields);
                        let (callsite_index, _) = index(&e.callsite, sink);
                        let item = Item {
                            id: e.id,
                            parent: e.parent,
                            held: e.parent.is_some_and(|p| open.contains(&p)),
                            callsite: &e.callsite,
                            callsite_index,
                            fields: &fields,
                            ticks: e.ts_ns,
                            depth: 0,
                            links: &e.links,
                            correlation: e.correlation,
                        };
                        let handed = S::EVERY_ITEM || item.refers();
                        if handed {
                            sink.event(t, &item);
                        }
                        if !S::EVERY_ITEM {
                            sink.skipped(t, (e.id, e.id.wrapping_add(1)), 0, u64::from(!handed));
                        }
                    }
                }
            }
            counted.into_iter().for_each(|(index, n)| sink.counted(t, index, n));
        }
        sink.finish(&FileEnd { dropped: process.dropped, complete: process.complete });
    }
}

fn fill(fields: &mut Fields, values: &[Value]) {
    fields.clear();
    for v in values {
        fields.push(v.into());
    }
}
