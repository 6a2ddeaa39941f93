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

use super::{Message, Wait, WaitKind};
use crate::{
    correlation::{role, Role},
    model::{Callsite, ItemRef, Value},
};
use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::Arc,
};

/// The event a completed receive records.
pub(super) const RECEIVED: &str = "MPI message received";
/// The stem of the messages' correlation keys.
pub(super) const MESSAGE: &str = "mpi.message";
/// The collectives' correlation key.
pub(super) const COLLECTIVE: &str = "mpi.collective";
/// Calls that block until a message from `peer` arrives.
const RECEIVES: &[&str] =
    &["MPI_Recv", "MPI_Probe", "MPI_Mprobe", "MPI_Mrecv", "MPI_Sendrecv", "MPI_Sendrecv_replace"];
/// Sends that may block until their destination receives.
const BLOCKING_SENDS: &[&str] = &["MPI_Send", "MPI_Ssend", "MPI_Rsend", "MPI_Bsend"];
/// Source value for any source.
const ANY_SOURCE: i64 = -1;

/// A span as the rules read it: an MPI call still open, a call that started a request, or a
/// send.
#[derive(Clone, Debug)]
pub(super) struct Call {
    pub(super) at: ItemRef,
    pub(super) id: u64,
    pub(super) callsite: Arc<Callsite>,
    /// Values in the callsite's field order.
    pub(super) values: Vec<Value>,
    pub(super) correlation: Option<u64>,
    pub(super) ended: bool,
}

impl Call {
    fn name(&self) -> &str {
        &self.callsite.name
    }

    fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.callsite.field_names().zip(&self.values)
    }

    /// Its field `name`, if it has it.
    pub(super) fn field(&self, name: &str) -> Option<&Value> {
        get(self.fields(), name)
    }

    /// Whether it is a send: a cause of a message.
    pub(super) fn is_send(&self) -> bool {
        is_send(&self.callsite)
    }
}

/// Whether spans of `callsite` are sends: causes of messages.
pub(super) fn is_send(callsite: &Callsite) -> bool {
    role(&callsite.correlate) == (MESSAGE, Role::Cause)
}

/// Whether items of `callsite` with a value are received messages: effects of messages.
pub(super) fn is_effect(callsite: &Callsite) -> bool {
    role(&callsite.correlate) == (MESSAGE, Role::Effect)
}

/// What [`find`] finds.
pub(super) struct Found {
    pub(super) waits: Vec<Wait>,
    pub(super) unmatched_receives: Vec<Message>,
}

/// What the rules look up, gathered over the whole trace: from a model, or from files read
/// one after another (`stream.rs`), which gather only what the open calls need.
pub(super) struct Facts {
    /// Each process's rank and file.
    pub(super) ranks: Vec<Option<i64>>,
    pub(super) files: Vec<String>,
    /// Per communicator key, the ranks whose files show it.
    pub(super) members: HashMap<u64, BTreeSet<i64>>,
    /// (rank, `mpi.collective` value) of every collective begun.
    pub(super) entered: HashSet<(i64, u64)>,
    /// (process, request) of the receive requests completed, at least of those open calls
    /// wait for.
    pub(super) received: HashSet<(usize, u64)>,
    /// Spans holding a received message, at least the open ones.
    pub(super) holds_message: HashSet<u64>,
    /// Values of every message received, sorted.
    pub(super) effects: Vec<u64>,
    /// (process, request) to the span that started it (the last one), at least for the
    /// requests open calls wait for.
    pub(super) starts: HashMap<(usize, u64), Call>,
}

/// The requests open `Wait*`/`Test*` calls wait for, as (process, request): what
/// [`Facts::received`] and [`Facts::starts`] must hold.
pub(super) fn wanted(open: &[Call]) -> HashSet<(usize, u64)> {
    let waiting =
        open.iter().filter(|c| c.name().starts_with("MPI_Wait") || c.name().starts_with("MPI_Test"));
    let listed = waiting.filter_map(|c| match c.field("requests") {
        Some(Value::Str(list)) => Some((c.at.process, list.clone())),
        _ => None,
    });
    let each = |(p, list): (usize, String)| {
        let requests: Vec<u64> = list.split(',').filter_map(|r| r.trim().parse::<u64>().ok()).collect();
        requests.into_iter().map(move |r| (p, r))
    };
    listed.flat_map(each).collect()
}

/// The waits of the `open` calls (spans that never ended, in process, thread and begin
/// order), and the receives they wait for that no send in `unmatched_sends` could satisfy.
pub(super) fn find(facts: &Facts, open: &[Call], unmatched_sends: &[Message]) -> Found {
    let mut waits = Vec::new();
    let mut pending: Vec<Message> = Vec::new();
    for call in open {
        let Some(me) = facts.ranks[call.at.process] else { continue };
        facts.waits_of(me, call, &mut waits, &mut pending);
    }
    let unmatched_receives = pending.into_iter().filter(|r| !could_match(r, unmatched_sends)).collect();
    Found { waits, unmatched_receives }
}

impl Facts {
    /// The waits of the open call `s` of rank `me`; the receives it still waits for go to
    /// `pending`.
    fn waits_of(&self, me: i64, s: &Call, waits: &mut Vec<Wait>, pending: &mut Vec<Message>) {
        let name = s.name();
        let at = s.at;
        let mut wait = |to: i64, kind: WaitKind, start: &Call| {
            waits.push(Wait {
                from: me,
                to,
                call: name.to_owned(),
                started_by: matches!(kind, WaitKind::Request(_)).then(|| start.name().to_owned()),
                comm: start.field("comm").and_then(unsigned),
                tag: start.field("tag").and_then(signed),
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
                pending.push(self.message(s, None));
            }
        } else if BLOCKING_SENDS.contains(&name) {
            if !self.delivered(s) {
                if let Some(to) = s.field("peer").and_then(signed).filter(|&p| p >= 0) {
                    wait(to, WaitKind::Send, s);
                }
            }
        } else if name.starts_with("MPI_Wait") || name.starts_with("MPI_Test") {
            let Some(Value::Str(list)) = s.field("requests") else { return };
            for request in list.split(',').filter_map(|r| r.trim().parse::<u64>().ok()) {
                let Some(start) = self.starts.get(&(at.process, request)) else { continue };
                let kind = WaitKind::Request(request);
                if start.callsite.correlate == COLLECTIVE {
                    for to in self.not_arrived(me, start) {
                        wait(to, kind, start);
                    }
                } else if start.is_send() {
                    if !self.delivered(start) {
                        if let Some(to) = start.field("peer").and_then(signed).filter(|&p| p >= 0) {
                            wait(to, kind, start);
                        }
                    }
                } else if start.name().to_ascii_lowercase().contains("recv")
                    && !self.received.contains(&(at.process, request))
                {
                    for to in self.sources(me, start) {
                        wait(to, kind, start);
                    }
                    pending.push(self.message(start, Some(request)));
                }
            }
        }
    }

    /// Whether a send's message was received.
    pub(super) fn delivered(&self, send: &Call) -> bool {
        send.correlation.is_some_and(|v| self.effects.binary_search(&v).is_ok())
    }

    /// The ranks a receive from `s`'s `peer` on its `comm` waits for.
    fn sources(&self, me: i64, s: &Call) -> Vec<i64> {
        match s.field("peer").and_then(signed) {
            Some(ANY_SOURCE) => self.others(me, s.field("comm").and_then(unsigned)),
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
    fn not_arrived(&self, me: i64, s: &Call) -> Vec<i64> {
        let Some(value) = s.correlation else { return Vec::new() };
        let Some(comm) = s.field("comm").and_then(unsigned) else { return Vec::new() };
        self.others(me, Some(comm)).into_iter().filter(|&r| !self.entered.contains(&(r, value))).collect()
    }

    /// A send or receive as a message nothing matched.
    pub(super) fn message(&self, s: &Call, request: Option<u64>) -> Message {
        Message {
            rank: self.ranks[s.at.process],
            file: self.files[s.at.process].clone(),
            call: s.name().to_owned(),
            peer: s.field("peer").and_then(signed),
            comm: s.field("comm").and_then(unsigned),
            tag: s.field("tag").and_then(signed),
            bytes: s.field("bytes").and_then(unsigned),
            request: request.filter(|&r| r != 0),
            open: !s.ended,
            at: s.at,
        }
    }

    /// The unmatched sends among `sends` (in trace order): those whose message no rank
    /// received.
    /// They are consumed as they are read: there may be many.
    pub(super) fn unmatched_sends(&self, sends: Vec<Call>) -> Vec<Message> {
        let unmatched = sends.into_iter().filter(|s| s.is_send() && !self.delivered(s));
        unmatched.map(|s| self.message(&s, s.field("request").and_then(unsigned))).collect()
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

/// An unsigned integer field.
pub(super) fn unsigned(v: &Value) -> Option<u64> {
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
