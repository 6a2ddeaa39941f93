//! The wait-for graph of an MPI run, read from the spans `waffle-mpi` records: one span per
//! MPI call, named like the function, with the fields `comm`, `peer`, `tag`, `bytes`,
//! `request` and `requests`; a send's span correlated as `mpi.message>`, a completed receive
//! as an event `MPI message received` (`mpi.message<`, with its `request`, 0 for blocking
//! calls) inside the call it completed in; collectives correlated as `mpi.collective`, the
//! same value for the k-th collective on a communicator on every rank.
//!
//! The rules (an open span is one that never ended):
//! - an open receive or probe (`MPI_Recv`, `MPI_Probe`, `MPI_Mprobe`, `MPI_Mrecv`,
//!   `MPI_Sendrecv`, `MPI_Sendrecv_replace`) that holds no received message waits for its
//!   `peer`;
//! - an open blocking send (`MPI_Send`, `MPI_Ssend`, `MPI_Rsend`, `MPI_Bsend`) whose message
//!   no rank received waits for its `peer` (a rendezvous);
//! - an open `MPI_Wait*`/`MPI_Test*` waits, for each request in its `requests` that did not
//!   complete, as the call that started the request would: a receive request completed when a
//!   `MPI message received` event of its process carries its number, a send request when its
//!   message was received, a collective one as a collective;
//! - an open collective waits for each rank of its communicator that has not entered its
//!   same-numbered collective (same `mpi.collective` value). A communicator's ranks are those
//!   whose files show its key in a `comm` field: a rank that never used it is not known to
//!   belong to it;
//! - `peer` -1 (`MPI_ANY_SOURCE`) waits for every other rank of the communicator, -2
//!   (`MPI_PROC_NULL`) for none.

use super::{Message, ProcessEnd, Wait, WaitKind};
use crate::{
    correlation::{role, Role},
    model::{Item, ItemRef, Span, Trace, Value},
};
use std::collections::{BTreeSet, HashMap, HashSet};

/// The event a completed receive records.
pub(super) const RECEIVED: &str = "MPI message received";
/// The stem of the messages' correlation keys.
const MESSAGE: &str = "mpi.message";
/// The collectives' correlation key.
const COLLECTIVE: &str = "mpi.collective";
/// Calls that block until a message from `peer` arrives.
const RECEIVES: &[&str] =
    &["MPI_Recv", "MPI_Probe", "MPI_Mprobe", "MPI_Mrecv", "MPI_Sendrecv", "MPI_Sendrecv_replace"];
/// Sends that may block until their destination receives.
const BLOCKING_SENDS: &[&str] = &["MPI_Send", "MPI_Ssend", "MPI_Rsend", "MPI_Bsend"];
/// Source value for any source.
const ANY_SOURCE: i64 = -1;

/// What [`find`] finds.
pub(super) struct Found {
    pub(super) waits: Vec<Wait>,
    pub(super) unmatched_sends: Vec<Message>,
    pub(super) unmatched_receives: Vec<Message>,
}

/// What the rules look up, gathered once over the whole trace.
struct Facts<'t> {
    trace: &'t Trace,
    ranks: Vec<Option<i64>>,
    /// Per communicator key, the ranks whose files show it.
    members: HashMap<u64, BTreeSet<i64>>,
    /// (rank, `mpi.collective` value) of every collective begun.
    entered: HashSet<(i64, u64)>,
    /// (process, request) of every receive request completed.
    received: HashSet<(usize, u64)>,
    /// Spans holding a received message.
    holds_message: HashSet<u64>,
    /// Values of every message received.
    effects: HashSet<u64>,
    /// (process, request) to the span that started it.
    starts: HashMap<(usize, u64), ItemRef>,
}

/// The waits, unmatched sends and unmatched receives of `trace`.
pub(super) fn find(trace: &Trace, processes: &[ProcessEnd]) -> Found {
    let facts = Facts::gather(trace, processes);
    let mut waits = Vec::new();
    let mut pending: Vec<Message> = Vec::new();
    for (p, process) in trace.processes.iter().enumerate() {
        let Some(me) = facts.ranks[p] else { continue };
        for (t, thread) in process.threads.iter().enumerate() {
            for (i, s) in thread.spans.iter().enumerate().filter(|(_, s)| !s.ended) {
                let at = ItemRef { process: p, thread: t, item: Item::Span(i) };
                facts.waits_of(me, at, s, &mut waits, &mut pending);
            }
        }
    }
    let unmatched_sends = facts.unmatched_sends();
    let unmatched_receives = pending.into_iter().filter(|r| !could_match(r, &unmatched_sends)).collect();
    Found { waits, unmatched_sends, unmatched_receives }
}

impl<'t> Facts<'t> {
    fn gather(trace: &'t Trace, processes: &[ProcessEnd]) -> Facts<'t> {
        let mut facts = Facts {
            trace,
            ranks: processes.iter().map(|p| p.rank).collect(),
            members: HashMap::new(),
            entered: HashSet::new(),
            received: HashSet::new(),
            holds_message: HashSet::new(),
            effects: HashSet::new(),
            starts: HashMap::new(),
        };
        for (p, process) in trace.processes.iter().enumerate() {
            let rank = facts.ranks[p];
            for (t, thread) in process.threads.iter().enumerate() {
                for (i, s) in thread.spans.iter().enumerate() {
                    let comm = get(s.fields(), "comm").and_then(unsigned);
                    if let (Some(rank), Some(comm)) = (rank, comm) {
                        facts.members.entry(comm).or_default().insert(rank);
                    }
                    if let (Some(rank), Some(v), COLLECTIVE) =
                        (rank, s.correlation, s.callsite.correlate.as_str())
                    {
                        facts.entered.insert((rank, v));
                    }
                    if let Some(request) = get(s.fields(), "request").and_then(unsigned).filter(|&r| r != 0) {
                        let at = ItemRef { process: p, thread: t, item: Item::Span(i) };
                        facts.starts.insert((p, request), at);
                    }
                }
                for e in &thread.events {
                    let comm = get(e.fields(), "comm").and_then(unsigned);
                    if let (Some(rank), Some(comm)) = (rank, comm) {
                        facts.members.entry(comm).or_default().insert(rank);
                    }
                    if let (Some(v), (MESSAGE, Role::Effect)) = (e.correlation, role(&e.callsite.correlate)) {
                        facts.effects.insert(v);
                    }
                    if e.name() == RECEIVED {
                        facts.holds_message.extend(e.parent);
                        if let Some(request) =
                            get(e.fields(), "request").and_then(unsigned).filter(|&r| r != 0)
                        {
                            facts.received.insert((p, request));
                        }
                    }
                }
            }
        }
        facts
    }

    /// The waits of the open span `s` of rank `me`; the receives it still waits for go to
    /// `pending`.
    fn waits_of(&self, me: i64, at: ItemRef, s: &Span, waits: &mut Vec<Wait>, pending: &mut Vec<Message>) {
        let name = s.name();
        let mut wait = |to: i64, kind: WaitKind, start: &Span| {
            waits.push(Wait {
                from: me,
                to,
                call: name.to_owned(),
                started_by: matches!(kind, WaitKind::Request(_)).then(|| start.name().to_owned()),
                comm: get(start.fields(), "comm").and_then(unsigned),
                tag: get(start.fields(), "tag").and_then(signed),
                kind,
                at,
            })
        };
        if s.callsite.correlate == COLLECTIVE {
            for to in self.not_arrived(me, s) {
                wait(to, WaitKind::Collective, s);
            }
        } else if RECEIVES.contains(&name) {
            if !self.holds_message.contains(&s.id) {
                for to in self.sources(me, s) {
                    wait(to, WaitKind::Receive, s);
                }
                pending.push(self.message(at, s, None));
            }
        } else if BLOCKING_SENDS.contains(&name) {
            if !self.delivered(s) {
                if let Some(to) = get(s.fields(), "peer").and_then(signed).filter(|&p| p >= 0) {
                    wait(to, WaitKind::Send, s);
                }
            }
        } else if name.starts_with("MPI_Wait") || name.starts_with("MPI_Test") {
            let Some(Value::Str(list)) = get(s.fields(), "requests") else { return };
            for request in list.split(',').filter_map(|r| r.trim().parse::<u64>().ok()) {
                let Some(&start_at) = self.starts.get(&(at.process, request)) else { continue };
                let start = self.span(start_at);
                let kind = WaitKind::Request(request);
                if start.callsite.correlate == COLLECTIVE {
                    for to in self.not_arrived(me, start) {
                        wait(to, kind, start);
                    }
                } else if role(&start.callsite.correlate) == (MESSAGE, Role::Cause) {
                    if !self.delivered(start) {
                        if let Some(to) = get(start.fields(), "peer").and_then(signed).filter(|&p| p >= 0) {
                            wait(to, kind, start);
                        }
                    }
                } else if start.name().to_ascii_lowercase().contains("recv")
                    && !self.received.contains(&(at.process, request))
                {
                    for to in self.sources(me, start) {
                        wait(to, kind, start);
                    }
                    pending.push(self.message(start_at, start, Some(request)));
                }
            }
        }
    }

    fn span(&self, at: ItemRef) -> &'t Span {
        match at.item {
            Item::Span(i) => &self.trace.thread(at).spans[i],
            Item::Event(_) => unreachable!("requests are started by spans"),
        }
    }

    /// Whether a send's message was received.
    fn delivered(&self, send: &Span) -> bool {
        send.correlation.is_some_and(|v| self.effects.contains(&v))
    }

    /// The ranks a receive from `s`'s `peer` on its `comm` waits for.
    fn sources(&self, me: i64, s: &Span) -> Vec<i64> {
        match get(s.fields(), "peer").and_then(signed) {
            Some(ANY_SOURCE) => self.others(me, get(s.fields(), "comm").and_then(unsigned)),
            Some(p) if p >= 0 => vec![p],
            _ => Vec::new(),
        }
    }

    /// The other ranks of a communicator (of the whole trace when it is not known).
    fn others(&self, me: i64, comm: Option<u64>) -> Vec<i64> {
        let all: BTreeSet<i64> = match comm.and_then(|c| self.members.get(&c)) {
            Some(members) => members.clone(),
            None => self.ranks.iter().flatten().copied().collect(),
        };
        all.into_iter().filter(|&r| r != me).collect()
    }

    /// The ranks of the collective `s`'s communicator that have not begun its same-numbered
    /// collective.
    fn not_arrived(&self, me: i64, s: &Span) -> Vec<i64> {
        let Some(value) = s.correlation else { return Vec::new() };
        let Some(comm) = get(s.fields(), "comm").and_then(unsigned) else { return Vec::new() };
        self.others(me, Some(comm)).into_iter().filter(|&r| !self.entered.contains(&(r, value))).collect()
    }

    /// Every send whose message no rank received.
    fn unmatched_sends(&self) -> Vec<Message> {
        let mut out = Vec::new();
        for (p, process) in self.trace.processes.iter().enumerate() {
            for (t, thread) in process.threads.iter().enumerate() {
                for (i, s) in thread.spans.iter().enumerate() {
                    if role(&s.callsite.correlate) == (MESSAGE, Role::Cause) && !self.delivered(s) {
                        let at = ItemRef { process: p, thread: t, item: Item::Span(i) };
                        out.push(self.message(at, s, get(s.fields(), "request").and_then(unsigned)));
                    }
                }
            }
        }
        out
    }

    fn message(&self, at: ItemRef, s: &Span, request: Option<u64>) -> Message {
        Message {
            rank: self.ranks[at.process],
            file: self.trace.processes[at.process].source.clone(),
            call: s.name().to_owned(),
            peer: get(s.fields(), "peer").and_then(signed),
            comm: get(s.fields(), "comm").and_then(unsigned),
            tag: get(s.fields(), "tag").and_then(signed),
            bytes: get(s.fields(), "bytes").and_then(unsigned),
            request: request.filter(|&r| r != 0),
            open: !s.ended,
            at,
        }
    }
}

/// Whether one of `sends` (unmatched) could be what the receive `r` waits for: from its
/// source (or any), to its rank, on its communicator, with its tag (or any).
fn could_match(r: &Message, sends: &[Message]) -> bool {
    sends.iter().any(|s| {
        let source = r.peer == Some(ANY_SOURCE) || (s.rank.is_some() && s.rank == r.peer);
        let tag = r.tag.is_none_or(|t| t == -1) || s.tag == r.tag;
        source && r.rank.is_some() && s.peer == r.rank && (r.comm.is_none() || s.comm == r.comm) && tag
    })
}

/// A field's value by name.
fn get<'a>(mut fields: impl Iterator<Item = (&'a str, &'a Value)>, name: &str) -> Option<&'a Value> {
    fields.find(|(n, _)| *n == name).map(|(_, v)| v)
}

fn unsigned(v: &Value) -> Option<u64> {
    match *v {
        Value::U64(v) => Some(v),
        Value::I64(v) => u64::try_from(v).ok(),
        _ => None,
    }
}

fn signed(v: &Value) -> Option<i64> {
    match *v {
        Value::I64(v) => Some(v),
        Value::U64(v) => i64::try_from(v).ok(),
        _ => None,
    }
}
