//! What a report is made of, read from a decoded model: every thread's open spans, and the
//! facts the MPI rules look up (`waits.rs`).

use super::{
    rank_of,
    waits::{self, unsigned, Call, Facts, COLLECTIVE, RECEIVED},
    Gathered, OpenSpan, ProcessEnd, ThreadState,
};
use crate::model::{Item, ItemRef, Span, Trace};
use std::collections::HashMap;

/// A span as the rules read it.
fn call(at: ItemRef, s: &Span) -> Call {
    Call {
        at,
        id: s.id,
        callsite: s.callsite.clone(),
        values: s.fields.clone(),
        correlation: s.correlation,
        ended: s.ended,
    }
}

pub(super) fn gather(trace: &Trace) -> Gathered {
    let processes: Vec<ProcessEnd> = trace
        .processes
        .iter()
        .enumerate()
        .map(|(p, process)| ProcessEnd {
            rank: rank_of(&process.header),
            file: process.source.clone(),
            pid: process.header.pid,
            last_ns: trace.last_ns(p),
            complete: process.complete,
        })
        .collect();
    let mut facts = Facts {
        ranks: processes.iter().map(|p| p.rank).collect(),
        files: processes.iter().map(|p| p.file.clone()).collect(),
        members: HashMap::new(),
        entered: Default::default(),
        received: Default::default(),
        holds_message: Default::default(),
        effects: Vec::new(),
        starts: HashMap::new(),
    };
    let (mut threads, mut open) = (Vec::new(), Vec::new());
    let spans = || {
        trace.processes.iter().enumerate().flat_map(|(p, process)| {
            process.threads.iter().enumerate().flat_map(move |(t, thread)| {
                let at = move |i| ItemRef { process: p, thread: t, item: Item::Span(i) };
                thread.spans.iter().enumerate().map(move |(i, s)| (at(i), s))
            })
        })
    };
    for (p, process) in trace.processes.iter().enumerate() {
        let rank = facts.ranks[p];
        for (t, thread) in process.threads.iter().enumerate() {
            let mut inside: Vec<(u32, u64, OpenSpan)> = Vec::new();
            for (i, s) in thread.spans.iter().enumerate() {
                let at = ItemRef { process: p, thread: t, item: Item::Span(i) };
                if let (Some(rank), Some(comm)) =
                    (rank, s.fields().find(|f| f.0 == "comm").and_then(|f| unsigned(f.1)))
                {
                    facts.members.entry(comm).or_default().insert(rank);
                }
                if let (Some(rank), Some(v), COLLECTIVE) = (rank, s.correlation, &*s.callsite.correlate) {
                    facts.entered.insert((rank, v));
                }
                if !s.ended {
                    let fields = s.fields().map(|(k, v)| (k.to_owned(), v.clone())).collect();
                    let for_ns = processes[p].last_ns.saturating_sub(s.start_ns);
                    let o = OpenSpan { at, id: s.id, name: s.name().to_owned(), for_ns, fields };
                    inside.push((s.depth, s.start_ns, o));
                    open.push(call(at, s));
                }
            }
            for e in &thread.events {
                if let (Some(rank), Some(comm)) =
                    (rank, e.fields().find(|f| f.0 == "comm").and_then(|f| unsigned(f.1)))
                {
                    facts.members.entry(comm).or_default().insert(rank);
                }
                if let (Some(v), true) = (e.correlation, waits::is_effect(&e.callsite)) {
                    facts.effects.push(v);
                }
                if e.name() == RECEIVED {
                    facts.holds_message.extend(e.parent);
                }
            }
            // Innermost first: deepest, then latest begun.
            inside.sort_by_key(|o| std::cmp::Reverse((o.0, o.1)));
            threads.push(ThreadState {
                process: p,
                rank,
                file: process.source.clone(),
                name: thread.name.clone(),
                tid: thread.tid,
                open: inside.into_iter().map(|(_, _, o)| o).collect(),
            });
        }
    }
    facts.effects.sort_unstable();
    facts.effects.dedup();
    // What the open calls' requests need: the calls that started them (the last of each
    // number), whether receives completed.
    let wanted = waits::wanted(&open);
    for (at, s) in spans() {
        let request = s.fields().find(|f| f.0 == "request").and_then(|f| unsigned(f.1)).filter(|&r| r != 0);
        if let Some(key) = request.map(|r| (at.process, r)).filter(|k| wanted.contains(k)) {
            facts.starts.insert(key, call(at, s));
        }
    }
    for (p, process) in trace.processes.iter().enumerate() {
        for e in process.threads.iter().flat_map(|t| &t.events).filter(|e| e.name() == RECEIVED) {
            let request =
                e.fields().find(|f| f.0 == "request").and_then(|f| unsigned(f.1)).filter(|&r| r != 0);
            facts.received.extend(request.map(|r| (p, r)).filter(|k| wanted.contains(k)));
        }
    }
    let sends = spans()
        .filter(|(_, s)| {
            waits::is_send(&s.callsite)
                && s.correlation.is_none_or(|v| facts.effects.binary_search(&v).is_err())
        })
        .map(|(at, s)| call(at, s))
        .collect();
    Gathered { processes, threads, open, facts, sends }
}
