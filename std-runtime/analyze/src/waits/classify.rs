//! Which calls waited, of what kind, for whom (see the parent module for the rules).

use std::collections::HashMap;

use super::WaitKind;
use crate::timeline::{is_mpi, At, Run, Span, NO_RANK};

/// Whom a wait waited for: a lane, until a time; the call it waited for, if a span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cause {
    pub(crate) lane: u32,
    pub(crate) at_ns: u64,
    pub(crate) call: Option<At>,
}

/// One wait state, found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) at: At,
    pub(crate) kind: WaitKind,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) cause: Cause,
}

/// Every wait state of the run, by lane and begin; on each lane none overlaps another.
pub(crate) fn classify(run: &Run) -> Vec<Found> {
    let mut offered: Vec<Found> = Vec::new();
    let mut offer = |f: Found| {
        if f.end_ns > f.start_ns {
            offered.push(f);
        }
    };
    for m in &run.messages {
        let (recv, send, posted) = (run.span(m.received_in), run.span(m.send), run.span(m.posted));
        if !run.name(recv).starts_with("MPI_Test") && send.start_ns > recv.start_ns {
            offer(Found {
                at: m.received_in,
                kind: WaitKind::LateSender,
                start_ns: recv.start_ns,
                end_ns: send.start_ns.min(recv.end_ns),
                cause: Cause { lane: m.send.lane, at_ns: send.start_ns, call: Some(m.send) },
            });
        }
        if let Some(blocked) = m.send_blocked_in {
            let b = run.span(blocked);
            if posted.start_ns > b.start_ns && b.end_ns > posted.start_ns {
                offer(Found {
                    at: blocked,
                    kind: WaitKind::LateReceiver,
                    start_ns: b.start_ns,
                    end_ns: posted.start_ns,
                    cause: Cause { lane: m.posted.lane, at_ns: posted.start_ns, call: Some(m.posted) },
                });
            }
        }
    }
    for group in &run.collectives {
        collective(run, group, &mut offer);
    }
    for group in &run.nonblocking {
        nonblocking(run, group, &mut offer);
    }
    linked(run, &mut offer);
    // Per call the longest; of equal ones, the first offered (the sort is stable).
    offered.sort_by_key(|f| (f.at, std::cmp::Reverse(f.end_ns - f.start_ns)));
    offered.dedup_by_key(|f| f.at);
    let mut found = offered;
    found.sort_unstable_by_key(|f| (f.at.lane, f.start_ns, f.end_ns));
    // A span's own wait and a call's inside it can overlap: the call's is the more precise.
    let mut kept: Vec<Found> = Vec::with_capacity(found.len());
    for f in found {
        match kept.last_mut() {
            Some(last) if last.at.lane == f.at.lane && f.start_ns < last.end_ns => {
                if last.kind == WaitKind::Linked && f.kind != WaitKind::Linked {
                    *last = f;
                }
            }
            _ => kept.push(f),
        }
    }
    kept
}

/// The waits of one collective operation.
fn collective(run: &Run, group: &[At], offer: &mut impl FnMut(Found)) {
    let name = run.name(run.span(group[0]));
    let span = |at: &At| run.span(*at);
    let root = || {
        let root = Some(span(&group[0]).root).filter(|&r| r != NO_RANK)?;
        group.iter().copied().find(|&m| run.rank(m.lane) == root)
    };
    let wait = |at: At, kind, until: At| {
        let s = run.span(at);
        let end_ns = run.span(until).start_ns.min(s.end_ns);
        let cause = Cause { lane: until.lane, at_ns: run.span(until).start_ns, call: Some(until) };
        Found { at, kind, start_ns: s.start_ns, end_ns, cause }
    };
    match name {
        "MPI_Bcast" | "MPI_Scatter" | "MPI_Scatterv" => {
            let Some(root) = root() else { return };
            for &m in group.iter().filter(|&&m| m != root) {
                offer(wait(m, WaitKind::LateRoot, root));
            }
        }
        "MPI_Reduce" | "MPI_Gather" | "MPI_Gatherv" => {
            let Some(root) = root() else { return };
            let others = group.iter().copied().filter(|&m| m != root);
            if let Some(last) = others.max_by_key(|m| span(m).start_ns) {
                offer(wait(root, WaitKind::EarlyReduce, last));
            }
        }
        _ => {
            // The N×N collectives, and the others that synchronise their members (scans, the
            // calls that make communicators and windows): every member waits for the last.
            let kind = if name == "MPI_Barrier" { WaitKind::Barrier } else { WaitKind::Collective };
            let Some(last) = group.iter().copied().max_by_key(|m| span(m).start_ns) else { return };
            for &m in group.iter().filter(|&&m| m != last) {
                offer(wait(m, kind, last));
            }
        }
    }
}

/// The waits of one nonblocking collective operation: a member's Wait that began before the
/// last member started the operation waited for it (every member of a nonblocking barrier,
/// reduction or exchange needs every other's contribution).
fn nonblocking(run: &Run, group: &[(At, Option<At>)], offer: &mut impl FnMut(Found)) {
    let Some(&(last, _)) = group.iter().max_by_key(|(start, _)| run.span(*start).start_ns) else { return };
    let entered = run.span(last).start_ns;
    let kind =
        if run.name(run.span(last)) == "MPI_Ibarrier" { WaitKind::Barrier } else { WaitKind::Collective };
    for &(_, wait) in group.iter().filter(|(start, _)| *start != last) {
        let Some(wait) = wait else { continue };
        let w = run.span(wait);
        offer(Found {
            at: wait,
            kind,
            start_ns: w.start_ns,
            end_ns: entered.min(w.end_ns),
            cause: Cause { lane: last.lane, at_ns: entered, call: Some(last) },
        });
    }
}

/// Spans of the program's own that waited for an item they link to.
fn linked(run: &Run, offer: &mut impl FnMut(Found)) {
    let links = |s: &Span| run.extra(s).map_or(&[][..], |e| e.links.as_slice());
    let linking = |s: &&Span| !links(s).is_empty() && !is_mpi(s);
    if !run.lanes.iter().flat_map(|l| &l.spans).any(|s| linking(&s)) {
        return;
    }
    // Where each item is, and when it happened (a span: when it ended).
    let mut items: HashMap<u64, (u32, u64, Option<At>)> = HashMap::new();
    for (l, lane) in run.lanes.iter().enumerate() {
        for (k, s) in lane.spans.iter().enumerate() {
            items.insert(s.id, (l as u32, s.end_ns, Some(At { lane: l as u32, span: k as u32 })));
        }
        for &(id, ts) in &lane.events {
            items.insert(id, (l as u32, ts, None));
        }
    }
    for (l, lane) in run.lanes.iter().enumerate() {
        for (k, s) in lane.spans.iter().enumerate().filter(|(_, s)| linking(s)) {
            let later = links(s)
                .iter()
                .filter_map(|id| items.get(id))
                .filter(|&&(cl, t, _)| cl != l as u32 && t > s.start_ns);
            if let Some(&(cl, t, call)) = later.max_by_key(|&&(_, t, _)| t) {
                offer(Found {
                    at: At { lane: l as u32, span: k as u32 },
                    kind: WaitKind::Linked,
                    start_ns: s.start_ns,
                    end_ns: t.min(s.end_ns),
                    cause: Cause { lane: cl, at_ns: t, call },
                });
            }
        }
    }
}
