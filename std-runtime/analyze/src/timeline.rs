//! The run as the analyses of why it is slow read it ([`crate::waits`], [`crate::profile`],
//! [`crate::critical_path`]): each thread's spans in time order (its **lane**), compact (times,
//! id, name number, correlation value, the fields the analyses read), which of them are MPI
//! calls, and what joins the ranks: messages (a send, the call that posted its receive, the call
//! that completed it) and collectives (the calls of one operation on every member), as
//! `waffle-mpi` records them (`docs/mpi.md`); each rank's `MPI_Init` (or `MPI_Init_thread`) and
//! `MPI_Finalize` are one operation each too, which every rank takes part in.
//!
//! Files are read into it as a stream (`build.rs`), never into the model: memory grows with
//! the spans (about 80 bytes each) and the events that receive messages, not with their
//! fields. Before the analyses read it, the files are checked to be one whole run
//! (`whole.rs`).

use std::collections::HashMap;

use waffle_read::id_hash::IdMap;
use waffle_wire::Header;

mod build;
mod stream;
mod whole;

pub(crate) use build::{int, Builder, Site, Sites};
pub(crate) use stream::{field_int, field_text};
#[cfg(test)]
pub(crate) use whole::check;
pub(crate) use whole::{check_facts, cut_notes, notes_of};
pub use whole::{read_run, RunError};

/// A span of the run: lane and index in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct At {
    pub(crate) lane: u32,
    pub(crate) span: u32,
}

/// A span as the analyses read it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    /// Begin and end, Unix ns (clock ticks while its file is read).
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    /// Its id (0: a stand-in whose begin was lost).
    pub(crate) id: u64,
    /// Its correlation value, if its callsite has a key (0: none).
    pub(crate) value: u64,
    /// Its `request` field (0: none).
    pub(crate) request: u64,
    /// Its `root` field ([`NO_RANK`]: none).
    pub(crate) root: i64,
    /// Its name, by number ([`Run::name`]).
    pub(crate) name: u32,
    /// What else it holds, by number in [`Run::extras`] (`u32::MAX`: nothing).
    pub(crate) extra: u32,
    /// [`MPI`], [`SEND`], [`COLLECTIVE`].
    pub(crate) kind: u8,
}

/// No rank given.
pub(crate) const NO_RANK: i64 = i64::MIN;
/// A span of an MPI call, as `waffle-mpi` records them (a span of the program's own may be named
/// `MPI_...` too).
pub(crate) const MPI: u8 = 1;
/// Its callsite's key is `mpi.message>`: a send.
pub(crate) const SEND: u8 = 2;
/// Its callsite's key is `mpi.collective`.
pub(crate) const COLLECTIVE: u8 = 4;

/// What few spans hold besides: links, the requests a Wait or Test lists, a step number.
#[derive(Clone, Debug, Default)]
pub(crate) struct Extra {
    pub(crate) links: Vec<u64>,
    pub(crate) requests: Vec<u64>,
    pub(crate) step: Option<i64>,
}

/// One thread's spans, by begin (then depth), and its events' ids and times.
pub(crate) struct Lane {
    pub(crate) process: usize,
    pub(crate) thread: usize,
    pub(crate) spans: Vec<Span>,
    /// Each span's enclosing span on the lane.
    pub(crate) parent: Vec<Option<u32>>,
    /// Its events' ids and times, for links to them.
    pub(crate) events: Vec<(u64, u64)>,
}

/// An event of a received message: the span it was recorded in, its value and its request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Received {
    pub(crate) at: At,
    pub(crate) value: u64,
    pub(crate) request: u64,
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
}

/// One file's process, as the checks and notes need it.
pub(crate) struct ProcessFacts {
    pub(crate) source: String,
    pub(crate) header: Header,
    pub(crate) complete: bool,
    /// Its latest time: the last record, or the stop a CLOCK frame vouches for.
    pub(crate) last_ns: u64,
    /// Its first span's begin and its last span's end, once read (`None`: no span).
    pub(crate) times: Option<(u64, u64)>,
    /// The ranks its MPI calls name (peer, root, destination, target), each once, with the
    /// first call's name and the field.
    pub(crate) named: Vec<(i64, u32, &'static str)>,
}

/// A run read for the analyses of why it is slow: [`read_run`] reads one from files.
pub struct Run {
    pub(crate) processes: Vec<ProcessFacts>,
    /// Each process's rank: its `rank` label, else its place among the files.
    pub(crate) ranks: Vec<i64>,
    pub(crate) names: Vec<String>,
    pub(crate) extras: Vec<Extra>,
    pub(crate) lanes: Vec<Lane>,
    pub(crate) messages: Vec<Message>,
    /// The blocking calls of each collective operation, two or more.
    pub(crate) collectives: Vec<Vec<At>>,
    /// Each nonblocking collective operation of two or more members: each member's start
    /// (`MPI_Iallreduce`, ...) and the Wait that completed it, if one did.
    pub(crate) nonblocking: Vec<Vec<(At, Option<At>)>>,
    /// What the checks of a whole run noted.
    pub(crate) notes: Vec<String>,
}

/// Whether a span is an MPI call as `waffle-mpi` records them.
pub(crate) fn is_mpi(s: &Span) -> bool {
    s.kind & MPI != 0
}

/// Sends that block until their message is received or buffered.
fn blocking_send(name: &str) -> bool {
    matches!(name, "MPI_Send" | "MPI_Ssend" | "MPI_Rsend" | "MPI_Sendrecv" | "MPI_Sendrecv_replace")
}

/// Each process's rank: its `rank` label, else its place.
pub(crate) fn rank_of(k: usize, header: &Header) -> i64 {
    header.label("rank").and_then(|r| r.trim().parse().ok()).unwrap_or(k as i64)
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
pub(crate) fn activity(lane: &Lane) -> Vec<(u64, Doing)> {
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

/// The names of what lanes do, numbered once each: a span by its name's number in the run, a
/// gap by the names on either side (numbers past the run's names). Reports compare and sum by
/// number and spell a name out once.
#[derive(Default)]
pub(crate) struct Labels {
    gaps: HashMap<(u32, u32), u32>,
    names: Vec<String>,
}

impl Labels {
    /// The number of what lane `lane` of `run` is doing: `d`.
    pub(crate) fn of(&mut self, run: &Run, lane: u32, d: Doing) -> u32 {
        let spans = &run.lanes[lane as usize].spans;
        match d {
            Doing::Span(k) => spans[k as usize].name,
            Doing::Gap(before, after) => {
                // Past the last number a span name can have: the edges of the lane.
                let side = |k: Option<u32>, edge| k.map_or(edge, |k| spans[k as usize].name);
                let key = (side(before, u32::MAX - 1), side(after, u32::MAX));
                if let Some(&id) = self.gaps.get(&key) {
                    return id;
                }
                let name = |id: u32, edge: &'static str| {
                    if id >= u32::MAX - 1 {
                        edge
                    } else {
                        run.names[id as usize].as_str()
                    }
                };
                self.names.push(format!("gap {} → {}", name(key.0, "start"), name(key.1, "end")));
                let id = (run.names.len() + self.names.len() - 1) as u32;
                self.gaps.insert(key, id);
                id
            }
        }
    }

    /// The name numbered `id`.
    pub(crate) fn name<'a>(&'a self, run: &'a Run, id: u32) -> &'a str {
        match (id as usize).checked_sub(run.names.len()) {
            Some(gap) => &self.names[gap],
            None => &run.names[id as usize],
        }
    }
}

impl Run {
    pub(crate) fn span(&self, at: At) -> &Span {
        &self.lanes[at.lane as usize].spans[at.span as usize]
    }

    /// A span's name.
    pub(crate) fn name(&self, s: &Span) -> &str {
        &self.names[s.name as usize]
    }

    /// What a span holds besides, if anything.
    pub(crate) fn extra(&self, s: &Span) -> Option<&Extra> {
        self.extras.get(s.extra as usize)
    }

    /// The rank of a lane.
    pub(crate) fn rank(&self, lane: u32) -> i64 {
        self.ranks[self.lanes[lane as usize].process]
    }

    /// Messages and collectives, from the spans and the receive events.
    fn join(&mut self, received: &[Received]) {
        let mut sends: IdMap<u64, At> = IdMap::default();
        let mut started: IdMap<(usize, u64), At> = IdMap::default();
        let mut completed: IdMap<(usize, u64), At> = IdMap::default();
        let mut groups: IdMap<u64, Vec<At>> = IdMap::default();
        let mut started_groups: IdMap<u64, Vec<At>> = IdMap::default();
        // MPI_Init and MPI_Finalize carry no correlation, yet every rank takes part in each
        // (the launch's wire-up, the closing fence): one group each, of each process's first.
        let mut init: IdMap<usize, At> = IdMap::default();
        let mut finalize: IdMap<usize, At> = IdMap::default();
        for (l, lane) in self.lanes.iter().enumerate() {
            for (k, s) in lane.spans.iter().enumerate() {
                let at = At { lane: l as u32, span: k as u32 };
                let name = self.names[s.name as usize].as_str();
                if s.kind & SEND != 0 && s.value != 0 {
                    sends.insert(s.value, at);
                }
                if s.kind & COLLECTIVE != 0 && s.value != 0 {
                    let nonblocking = name.starts_with("MPI_I");
                    (if nonblocking { &mut started_groups } else { &mut groups })
                        .entry(s.value)
                        .or_default()
                        .push(at);
                }
                if s.request > 0 {
                    started.insert((lane.process, s.request), at);
                }
                if let Some(extra) = self.extras.get(s.extra as usize) {
                    for &r in &extra.requests {
                        // The last call listing a request is the one that completed it.
                        completed.insert((lane.process, r), at);
                    }
                }
                if s.kind & MPI != 0 {
                    match name {
                        "MPI_Init" | "MPI_Init_thread" => {
                            init.entry(lane.process).or_insert(at);
                        }
                        "MPI_Finalize" => {
                            finalize.entry(lane.process).or_insert(at);
                        }
                        _ => {}
                    }
                }
            }
        }
        for r in received {
            let Some(&send) = sends.get(&r.value) else { continue };
            let p = self.lanes[r.at.lane as usize].process;
            let posted =
                if r.request == 0 { r.at } else { started.get(&(p, r.request)).copied().unwrap_or(r.at) };
            let sender = self.span(send);
            let send_blocked_in = if blocking_send(self.name(sender)) {
                Some(send)
            } else {
                let process = self.lanes[send.lane as usize].process;
                let wait = (sender.request > 0)
                    .then(|| completed.get(&(process, sender.request)).copied())
                    .flatten();
                wait.filter(|&w| self.name(self.span(w)).starts_with("MPI_Wait"))
            };
            self.messages.push(Message { send, send_blocked_in, posted, received_in: r.at });
        }
        let completion = |at: At| {
            let s = self.span(at);
            let wait = completed.get(&(self.lanes[at.lane as usize].process, s.request)).copied();
            wait.filter(|&w| s.request > 0 && self.name(self.span(w)).starts_with("MPI_Wait"))
        };
        let mut nonblocking: Vec<Vec<(At, Option<At>)>> = started_groups
            .into_values()
            .filter(|g| g.len() > 1)
            .map(|g| {
                let mut g: Vec<(At, Option<At>)> = g.into_iter().map(|at| (at, completion(at))).collect();
                g.sort_unstable();
                g
            })
            .collect();
        nonblocking.sort_unstable();
        self.nonblocking = nonblocking;
        let implicit = [init, finalize].into_iter().map(|m| m.into_values().collect::<Vec<_>>());
        let mut groups: Vec<Vec<At>> = groups.into_values().chain(implicit).filter(|g| g.len() > 1).collect();
        groups.iter_mut().for_each(|g| g.sort_unstable());
        groups.sort_unstable();
        self.collectives = groups;
    }
}
