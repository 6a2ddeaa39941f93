//! The run as the analyses of why it is slow read it ([`crate::waits`], [`crate::profile`]):
//! each thread's spans in time order (its **lane**), which of them are MPI calls, and what joins
//! the ranks: messages (a send, the call that posted its receive, the call that completed it)
//! and collectives (the calls of one operation on every member), as `waffle-mpi` records them
//! (`docs/mpi.md`); each rank's `MPI_Init` (or `MPI_Init_thread`) and `MPI_Finalize` are one
//! operation each too, which every rank takes part in.
//!
//! Before anything is read into it, the files are checked to be one whole run: one trace id,
//! each rank once, and every rank there that the files name (the `size` label a launcher gives,
//! the ranks from 0 to the highest, the peers and roots of the calls).

use std::collections::HashMap;

use crate::model::{Span, Trace, Value};

mod whole;

#[cfg(test)]
pub(crate) use whole::check;
pub(crate) use whole::cut_notes;
pub use whole::{read_run, RunError};

/// A span of the run: lane and index in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct At {
    pub(crate) lane: u32,
    pub(crate) span: u32,
}

/// One thread's spans, by begin (then depth).
pub(crate) struct Lane<'t> {
    pub(crate) process: usize,
    pub(crate) thread: usize,
    pub(crate) spans: Vec<&'t Span>,
    /// Each span's enclosing span on the lane.
    pub(crate) parent: Vec<Option<u32>>,
}

/// One message: its send, and its receive as posted and as completed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Message {
    pub(crate) send: At,
    /// The call the sender may have blocked in until the receive was posted: the send itself if
    /// it is blocking, else the Wait that completed its request; `None` if none did (a Test).
    pub(crate) send_blocked_in: Option<At>,
    /// The call that posted the receive (the receive itself, or the `MPI_Irecv`).
    pub(crate) posted: At,
    /// The call in which the receive completed (the receive itself, or a Wait or Test).
    pub(crate) received_in: At,
    /// What arrived.
    pub(crate) bytes: u64,
}

/// What the analyses read.
pub(crate) struct Run<'t> {
    pub(crate) trace: &'t Trace,
    /// Each process's rank: its `rank` label, else its place among the files.
    pub(crate) ranks: Vec<i64>,
    pub(crate) lanes: Vec<Lane<'t>>,
    pub(crate) messages: Vec<Message>,
    /// The blocking calls of each collective operation, two or more.
    pub(crate) collectives: Vec<Vec<At>>,
}

/// The module of `waffle-mpi`'s callsites.
const MPI_MODULE: &str = "waffle_mpi";

/// Whether a span is an MPI call as `waffle-mpi` records them (a span of the program's own may
/// be named `MPI_...` too).
pub(crate) fn is_mpi(span: &Span) -> bool {
    span.name().starts_with("MPI_") && span.callsite.module.starts_with(MPI_MODULE)
}

/// An integer field of a span.
pub(crate) fn int(span: &Span, key: &str) -> Option<i64> {
    span.fields().find(|(k, _)| *k == key).and_then(|(_, v)| match v {
        Value::I64(i) => Some(*i),
        Value::U64(u) => i64::try_from(*u).ok(),
        _ => None,
    })
}

/// The request numbers a Wait or Test call lists.
fn requests(span: &Span) -> impl Iterator<Item = u64> + '_ {
    let text = span.fields().find(|(k, _)| *k == "requests").and_then(|(_, v)| match v {
        Value::Str(s) => Some(s.as_str()),
        _ => None,
    });
    text.into_iter().flat_map(|t| t.split(',')).filter_map(|n| n.trim().parse().ok())
}

/// Sends that block until their message is received or buffered.
fn blocking_send(name: &str) -> bool {
    matches!(name, "MPI_Send" | "MPI_Ssend" | "MPI_Rsend" | "MPI_Sendrecv" | "MPI_Sendrecv_replace")
}

/// Each process's rank.
pub(crate) fn ranks(trace: &Trace) -> Vec<i64> {
    let label = |p: &crate::model::Process| p.header.label("rank").and_then(|r| r.trim().parse().ok());
    trace.processes.iter().enumerate().map(|(k, p)| label(p).unwrap_or(k as i64)).collect()
}

/// What a lane is doing: its innermost open span, or nothing between two spans (the top-level
/// spans on either side, if any).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Doing {
    Span(u32),
    Gap(Option<u32>, Option<u32>),
}

/// A lane's activity, as pieces `(begin, doing)`, each lasting until the next begins (the
/// first begins at 0, the last lasts for ever).
pub(crate) fn activity(lane: &Lane<'_>) -> Vec<(u64, Doing)> {
    let spans = &lane.spans;
    let mut out: Vec<(u64, Doing)> = vec![(0, Doing::Gap(None, (!spans.is_empty()).then_some(0)))];
    let mut push = |t: u64, d: Doing| {
        let last = out.last_mut().expect("a first piece");
        let t = t.max(last.0);
        if last.0 == t {
            last.1 = d;
        } else if last.1 != d {
            out.push((t, d));
        }
    };
    let mut stack: Vec<u32> = Vec::new();
    let close =
        |stack: &mut Vec<u32>, until: Option<u64>, next: Option<u32>, push: &mut dyn FnMut(u64, Doing)| {
            while let Some(&top) = stack.last() {
                let end = spans[top as usize].end_ns;
                if until.is_some_and(|t| end > t) {
                    break;
                }
                stack.pop();
                let doing = stack.last().map_or(Doing::Gap(Some(top), next), |&p| Doing::Span(p));
                push(end, doing);
            }
        };
    for (k, s) in spans.iter().enumerate() {
        close(&mut stack, Some(s.start_ns), Some(k as u32), &mut push);
        push(s.start_ns, Doing::Span(k as u32));
        stack.push(k as u32);
    }
    close(&mut stack, None, None, &mut push);
    out
}

/// The names of what lanes do, numbered once each: a span by its name, a gap by the names on
/// either side. Reports compare and sum by number and spell a name out once.
#[derive(Default)]
pub(crate) struct Labels<'t> {
    spans: HashMap<&'t str, u32>,
    gaps: HashMap<(u32, u32), u32>,
    names: Vec<String>,
}

impl<'t> Labels<'t> {
    /// The number of a span's name.
    fn span(&mut self, name: &'t str) -> u32 {
        let names = &mut self.names;
        *self.spans.entry(name).or_insert_with(|| {
            names.push(name.to_owned());
            names.len() as u32 - 1
        })
    }

    /// The number of what lane `lane` of `run` is doing: `d`.
    pub(crate) fn of(&mut self, run: &Run<'t>, lane: u32, d: Doing) -> u32 {
        let spans = &run.lanes[lane as usize].spans;
        match d {
            Doing::Span(k) => self.span(spans[k as usize].name()),
            Doing::Gap(before, after) => {
                // Past the last number a span name can have: the edges of the lane.
                let side = |this: &mut Self, k: Option<u32>, edge| {
                    k.map_or(edge, |k| this.span(spans[k as usize].name()))
                };
                let key = (side(self, before, u32::MAX - 1), side(self, after, u32::MAX));
                if let Some(&id) = self.gaps.get(&key) {
                    return id;
                }
                let name = |id: u32, edge: &str| {
                    if id >= u32::MAX - 1 {
                        edge.to_owned()
                    } else {
                        self.names[id as usize].clone()
                    }
                };
                let text = format!("gap {} → {}", name(key.0, "start"), name(key.1, "end"));
                self.names.push(text);
                let id = self.names.len() as u32 - 1;
                self.gaps.insert(key, id);
                id
            }
        }
    }

    /// The name numbered `id`.
    pub(crate) fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}

impl<'t> Run<'t> {
    /// The lanes, messages and collectives of `trace`.
    pub(crate) fn new(trace: &'t Trace) -> Run<'t> {
        let mut lanes = Vec::new();
        let mut by_id: HashMap<(usize, u64), At> = HashMap::new();
        for (p, process) in trace.processes.iter().enumerate() {
            for (t, thread) in process.threads.iter().enumerate() {
                let lane = lanes.len() as u32;
                let mut spans: Vec<&Span> = thread.spans.iter().collect();
                spans.sort_by_key(|s| (s.start_ns, s.depth));
                let mut ids: HashMap<u64, u32> = HashMap::new();
                for (k, s) in spans.iter().enumerate() {
                    if s.id != 0 {
                        ids.insert(s.id, k as u32);
                        by_id.insert((p, s.id), At { lane, span: k as u32 });
                    }
                }
                let parent = spans.iter().map(|s| s.parent.and_then(|id| ids.get(&id).copied())).collect();
                lanes.push(Lane { process: p, thread: t, spans, parent });
            }
        }
        let mut run =
            Run { trace, ranks: ranks(trace), lanes, messages: Vec::new(), collectives: Vec::new() };
        run.join(&by_id);
        run
    }

    pub(crate) fn span(&self, at: At) -> &'t Span {
        self.lanes[at.lane as usize].spans[at.span as usize]
    }

    /// The rank of a lane.
    pub(crate) fn rank(&self, lane: u32) -> i64 {
        self.ranks[self.lanes[lane as usize].process]
    }

    /// Messages and collectives.
    fn join(&mut self, by_id: &HashMap<(usize, u64), At>) {
        let mut sends: HashMap<u64, At> = HashMap::new();
        let mut started: HashMap<(usize, u64), At> = HashMap::new();
        let mut completed: HashMap<(usize, u64), At> = HashMap::new();
        let mut groups: HashMap<u64, Vec<At>> = HashMap::new();
        for (l, lane) in self.lanes.iter().enumerate() {
            for (k, s) in lane.spans.iter().enumerate() {
                let at = At { lane: l as u32, span: k as u32 };
                match (&*s.callsite.correlate, s.correlation) {
                    ("mpi.message>", Some(v)) => {
                        sends.insert(v, at);
                    }
                    ("mpi.collective", Some(v)) if !s.name().starts_with("MPI_I") => {
                        groups.entry(v).or_default().push(at);
                    }
                    _ => {}
                }
                if let Some(r) = int(s, "request").filter(|&r| r > 0) {
                    started.insert((lane.process, r as u64), at);
                }
                if s.name().starts_with("MPI_Wait") || s.name().starts_with("MPI_Test") {
                    for r in requests(s) {
                        // The last call listing a request is the one that completed it.
                        completed.insert((lane.process, r), at);
                    }
                }
            }
        }
        for (p, process) in self.trace.processes.iter().enumerate() {
            for e in process.threads.iter().flat_map(|t| &t.events) {
                let (Some(v), "mpi.message<") = (e.correlation, &*e.callsite.correlate) else { continue };
                let (Some(&send), Some(&received_in)) =
                    (sends.get(&v), e.parent.and_then(|id| by_id.get(&(p, id))))
                else {
                    continue;
                };
                let field = |key: &str| {
                    e.fields().find(|(k, _)| *k == key).and_then(|(_, v)| match v {
                        Value::U64(u) => Some(*u),
                        Value::I64(i) => u64::try_from(*i).ok(),
                        _ => None,
                    })
                };
                let request = field("request").unwrap_or(0);
                let posted = if request == 0 {
                    received_in
                } else {
                    started.get(&(p, request)).copied().unwrap_or(received_in)
                };
                let sender = self.span(send);
                let send_blocked_in = if blocking_send(sender.name()) {
                    Some(send)
                } else {
                    let process = self.lanes[send.lane as usize].process;
                    let wait =
                        int(sender, "request").and_then(|r| completed.get(&(process, r as u64)).copied());
                    wait.filter(|&w| self.span(w).name().starts_with("MPI_Wait"))
                };
                let bytes = field("bytes").unwrap_or(0);
                self.messages.push(Message { send, send_blocked_in, posted, received_in, bytes });
            }
        }
        // MPI_Init and MPI_Finalize carry no correlation, yet every rank takes part in each
        // (the launch's wire-up, the closing fence): one group each, of each process's first.
        let mut init: HashMap<usize, At> = HashMap::new();
        let mut finalize: HashMap<usize, At> = HashMap::new();
        for (l, lane) in self.lanes.iter().enumerate() {
            for (k, s) in lane.spans.iter().enumerate().filter(|(_, s)| is_mpi(s)) {
                let at = At { lane: l as u32, span: k as u32 };
                let first = |m: &mut HashMap<usize, At>| {
                    m.entry(lane.process).or_insert(at);
                };
                match s.name() {
                    "MPI_Init" | "MPI_Init_thread" => first(&mut init),
                    "MPI_Finalize" => first(&mut finalize),
                    _ => {}
                }
            }
        }
        let implicit = [init, finalize].into_iter().map(|m| m.into_values().collect::<Vec<_>>());
        let mut groups: Vec<Vec<At>> = groups.into_values().chain(implicit).filter(|g| g.len() > 1).collect();
        groups.iter_mut().for_each(|g| g.sort_unstable());
        groups.sort_unstable();
        self.collectives = groups;
    }
}
