//! The run as the analyses of why it is slow read it ([`crate::waits`], [`crate::profile`]):
//! each thread's spans in time order (its **lane**), which of them are MPI calls, and what joins
//! the ranks: messages (a send, the call that posted its receive, the call that completed it)
//! and collectives (the calls of one operation on every member), as `waffle-mpi` records them
//! (`docs/mpi.md`).
//!
//! Before anything is read into it, the files are checked to be one whole run: one trace id,
//! each rank once, and every rank there that the files name (the `size` label a launcher gives,
//! the ranks from 0 to the highest, the peers and roots of the calls).

use std::{collections::HashMap, path::PathBuf};

use crate::{
    decode::decode_files,
    model::{Span, Trace, Value},
    reader::Warning,
};

/// Why files cannot be read as one run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file could not be read.
    #[error(transparent)]
    Read(#[from] crate::Error),
    /// Two files hold different trace ids: they were recorded by different launches.
    #[error(
        "{first} and {other} are from different runs (trace ids {first_id:032x} and {other_id:032x}); \
         give the files of one run"
    )]
    DifferentRuns {
        /// The first file with a trace id.
        first: PathBuf,
        /// Its trace id.
        first_id: u128,
        /// A file with another id, and its id.
        other: PathBuf,
        /// That id.
        other_id: u128,
    },
    /// Two files hold the same rank.
    #[error("{first} and {other} are both rank {rank}; give each rank's file once")]
    DuplicateRank {
        /// The rank.
        rank: i64,
        /// The first file.
        first: PathBuf,
        /// The second file.
        other: PathBuf,
    },
    /// No span of the program's own is in the step asked for.
    #[error("no span of the program's own has a step or iteration field equal to {0}")]
    NoStep(i64),
    /// A rank the run had is not among the files.
    #[error(
        "rank {rank} is missing: {named_by}, but no file given is rank {rank} (files are ranks {given})"
    )]
    MissingRank {
        /// The rank.
        rank: i64,
        /// What names it ("rank0.bin says the run had 4 ranks", "rank 0's MPI_Send sends to it").
        named_by: String,
        /// The ranks given, as text.
        given: String,
    },
}

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

/// Reads `paths` as one run; the warnings of the reading.
pub(crate) fn read<P: AsRef<std::path::Path>>(paths: &[P]) -> Result<(Trace, Vec<Warning>), RunError> {
    let decoded = decode_files(paths)?;
    check(&decoded.trace)?;
    Ok((decoded.trace, decoded.warnings))
}

/// A note for each file that did not end cleanly: what it holds is analysed, up to its cut.
pub(crate) fn cut_notes(trace: &Trace) -> Vec<String> {
    let first = trace
        .processes
        .iter()
        .filter_map(|p| p.threads.iter().flat_map(|t| &t.spans).map(|s| s.start_ns).min())
        .min();
    trace
        .processes
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.complete)
        .map(|(k, p)| {
            let at = trace.last_ns(k).saturating_sub(first.unwrap_or(0));
            format!(
                "{} did not end cleanly (cut, or its program was killed): read up to its last record, {} into the run",
                p.source,
                crate::units::duration(at)
            )
        })
        .collect()
}

/// Each process's rank.
pub(crate) fn ranks(trace: &Trace) -> Vec<i64> {
    let label = |p: &crate::model::Process| p.header.label("rank").and_then(|r| r.trim().parse().ok());
    trace.processes.iter().enumerate().map(|(k, p)| label(p).unwrap_or(k as i64)).collect()
}

/// That the processes are one whole run (see the module docs).
pub(crate) fn check(trace: &Trace) -> Result<(), RunError> {
    let file = |p: usize| PathBuf::from(&trace.processes[p].source);
    let with_id = trace.processes.iter().enumerate().filter(|(_, p)| p.header.trace_id != 0);
    let mut first: Option<(usize, u128)> = None;
    for (k, p) in with_id {
        match first {
            None => first = Some((k, p.header.trace_id)),
            Some((f, id)) if id != p.header.trace_id => {
                return Err(RunError::DifferentRuns {
                    first: file(f),
                    first_id: id,
                    other: file(k),
                    other_id: p.header.trace_id,
                })
            }
            Some(_) => {}
        }
    }
    let ranks = ranks(trace);
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for (k, &r) in ranks.iter().enumerate() {
        if let Some(&f) = seen.get(&r) {
            return Err(RunError::DuplicateRank { rank: r, first: file(f), other: file(k) });
        }
        seen.insert(r, k);
    }
    let mut sorted = ranks.clone();
    sorted.sort_unstable();
    let given = sorted.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
    let missing =
        |rank: i64, named_by: String| RunError::MissingRank { rank, named_by, given: given.clone() };
    for p in &trace.processes {
        if let Some(size) = p.header.label("size").and_then(|s| s.trim().parse::<i64>().ok()) {
            if let Some(r) = (0..size).find(|r| !seen.contains_key(r)) {
                let source = &p.source;
                return Err(missing(r, format!("{source} says the run had {size} ranks")));
            }
        }
    }
    if let Some(&top) = sorted.last() {
        if let Some(r) = (0..top).find(|r| !seen.contains_key(r)) {
            return Err(missing(r, format!("rank {top} is given")));
        }
    }
    for (p, process) in trace.processes.iter().enumerate() {
        let spans = process.threads.iter().flat_map(|t| &t.spans).filter(|s| is_mpi(s));
        for s in spans {
            for key in ["peer", "root", "dest", "target"] {
                if let Some(r) = int(s, key).filter(|&r| r >= 0 && !seen.contains_key(&r)) {
                    let how = if key == "root" { "has it as its root" } else { "names it as its peer" };
                    return Err(missing(r, format!("rank {}'s {} {how}", ranks[p], s.name())));
                }
            }
        }
    }
    Ok(())
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

    /// A piece of activity as the report names it.
    pub(crate) fn doing(&self, lane: u32, doing: Doing) -> String {
        let spans = &self.lanes[lane as usize].spans;
        let name =
            |k: Option<u32>, none: &str| k.map_or(none.to_owned(), |k| spans[k as usize].name().to_owned());
        match doing {
            Doing::Span(k) => spans[k as usize].name().to_owned(),
            Doing::Gap(before, after) => format!("gap {} → {}", name(before, "start"), name(after, "end")),
        }
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
        let mut groups: Vec<Vec<At>> = groups.into_values().filter(|g| g.len() > 1).collect();
        groups.iter_mut().for_each(|g| g.sort_unstable());
        groups.sort_unstable();
        self.collectives = groups;
    }
}
