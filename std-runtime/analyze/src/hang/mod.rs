//! "Where is it stuck?": what every thread was still inside when a run was stopped, and who
//! waits for whom among the ranks of an MPI program.
//!
//! [`hang`] reads a decoded [`Trace`] of a run that was killed or stopped while stuck:
//!
//! - for each thread of each process (a **rank**: the process's HEADER label `rank`, else its
//!   file), the spans it was still inside when its recording ended, innermost first, each with
//!   how long it had been open: from its begin to the latest time its process's file shows
//!   ([`Trace::last_ns`]: the last record, or the stop time a CLOCK frame vouches for);
//! - for the MPI calls among them (spans named and fielded as `waffle-mpi` records them, see
//!   `waits.rs`), the **wait-for graph** between ranks ([`Wait`]): an open receive or probe
//!   waits for its `peer`, an open blocking send for its `peer` (a rendezvous), an open
//!   `Wait*`/`Test*` for the peers of the requests it lists that did not complete, an open
//!   collective for the ranks of its communicator that have not entered the same-numbered
//!   collective on it; `MPI_ANY_SOURCE` waits for every other rank of the communicator;
//! - the sends no receive matched ([`Hang::unmatched_sends`]: a `mpi.message>` with no effect), and
//!   the receives still waiting that no unmatched send could satisfy ([`Hang::unmatched_receives`]);
//! - every **deadlock**: each elementary cycle of the wait-for graph once, starting at its
//!   lowest rank ([`Deadlock`]).
//!
//! A run that finished cleanly has no thread inside a span: [`Hang::stuck`] is false and the
//! text says "nothing is stuck".
//!
//! [`hang`] reads a model; [`hang_files`] (what `waffle-decode hang` runs) reads the files
//! without building one, with the same answer: one streaming reading that keeps the spans open
//! at each moment, the communicators' ranks, the collectives begun and the values of messages
//! sent and received (8 bytes each), then, only if some call waits on a request or some send
//! went unreceived, a second reading for those requests' calls and those sends.
//!
//! ```
//! use waffle_analyze::hang;
//! # let trace = waffle_read::model::Trace::default();
//! let report = hang::hang(&trace);
//! print!("{}", report.to_text());
//! assert!(!report.stuck());
//! ```

use crate::model::{ItemRef, Trace, Value};
use std::path::Path;
use waits::{Call, Facts};

mod cycles;
mod details;
mod gather;
mod render;
mod sites;
mod stream;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;
mod waits;

pub use render::JSON_VERSION;

/// At most this many deadlocks are listed (a graph with many waits on `MPI_ANY_SOURCE` can
/// have exponentially many cycles); [`Hang::deadlocks_truncated`] says when there were more.
pub const MAX_DEADLOCKS: usize = 1000;

/// What was stuck, and on what.
#[derive(Clone, Debug, PartialEq)]
pub struct Hang {
    /// Each process, in the order of its file.
    pub processes: Vec<ProcessEnd>,
    /// Every thread of every process, in file and stream order, with the spans it was inside.
    pub threads: Vec<ThreadState>,
    /// Who waits for whom, in the order of the ranks' open spans.
    pub waits: Vec<Wait>,
    /// Sends no receive matched.
    pub unmatched_sends: Vec<Message>,
    /// Receives still waiting that no unmatched send could satisfy.
    pub unmatched_receives: Vec<Message>,
    /// Each elementary cycle of the wait-for graph once, by lowest rank then path.
    pub deadlocks: Vec<Deadlock>,
    /// Whether there were more than [`MAX_DEADLOCKS`] cycles (only the first are listed).
    pub deadlocks_truncated: bool,
}

/// Where a process's recording ended.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessEnd {
    /// Its `rank` label as a number, if it has one that is.
    pub rank: Option<i64>,
    /// Its file, as given.
    pub file: String,
    /// OS process id.
    pub pid: u32,
    /// The latest time its file shows, Unix ns.
    pub last_ns: u64,
    /// Whether its file was closed cleanly (END frame).
    pub complete: bool,
}

/// A thread and the spans it was still inside.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadState {
    /// Index of its process in [`Hang::processes`].
    pub process: usize,
    /// Its process's rank.
    pub rank: Option<i64>,
    /// Its process's file.
    pub file: String,
    /// Thread name ("" if unnamed).
    pub name: String,
    /// OS thread id.
    pub tid: u64,
    /// Spans it was inside, innermost first.
    pub open: Vec<OpenSpan>,
}

/// A span that never ended.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenSpan {
    /// Where it is in the trace.
    pub at: ItemRef,
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// How long it had been open when its process's recording ended, ns.
    pub for_ns: u64,
    /// Its fields.
    pub fields: Vec<(String, Value)>,
}

/// Why a rank waits for another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// An open receive or probe waits for its source.
    Receive,
    /// An open blocking send waits for its destination to receive.
    Send,
    /// An open `Wait*`/`Test*` waits for a request that did not complete (its number).
    Request(u64),
    /// An open collective waits for a member of its communicator that has not entered it.
    Collective,
}

/// One edge of the wait-for graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    /// The rank waiting.
    pub from: i64,
    /// The rank waited for.
    pub to: i64,
    /// The open call that waits (`MPI_Recv`, `MPI_Waitall`, `MPI_Allreduce`, ...).
    pub call: String,
    /// For a request: the call that started it (`MPI_Irecv`, ...).
    pub started_by: Option<String>,
    /// Communicator key, if recorded.
    pub comm: Option<u64>,
    /// Tag, if recorded (-1: any).
    pub tag: Option<i64>,
    /// Why.
    pub kind: WaitKind,
    /// The open span that waits.
    pub at: ItemRef,
}

/// A send or receive that nothing matched.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The rank that sent or receives.
    pub rank: Option<i64>,
    /// Its file.
    pub file: String,
    /// The call (`MPI_Send`, `MPI_Irecv`, ...).
    pub call: String,
    /// The destination of a send, the source of a receive (-1: any source).
    pub peer: Option<i64>,
    /// Communicator key.
    pub comm: Option<u64>,
    /// Tag (-1: any).
    pub tag: Option<i64>,
    /// Bytes sent, or the receive buffer's capacity.
    pub bytes: Option<u64>,
    /// A nonblocking call's request number.
    pub request: Option<u64>,
    /// Whether its span was still open.
    pub open: bool,
    /// Its span.
    pub at: ItemRef,
}

/// An elementary cycle of the wait-for graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// The ranks around the cycle, from the lowest; each waits for the next, the last for
    /// the first.
    pub ranks: Vec<i64>,
}

impl Hang {
    /// Whether any thread was inside a span when its recording ended.
    pub fn stuck(&self) -> bool {
        self.threads.iter().any(|t| !t.open.is_empty())
    }
}

/// Reads what was stuck in `trace` (see the module docs).
pub fn hang(trace: &Trace) -> Hang {
    assemble(gather::gather(trace))
}

/// [`hang`] on files, without building the model (see the module docs); with the warnings of
/// decoding them.
pub fn hang_files<P: AsRef<Path>>(paths: &[P]) -> Result<(Hang, Vec<crate::reader::Warning>), crate::Error> {
    let (gathered, warnings) = stream::gather(paths)?;
    Ok((assemble(gathered), warnings))
}

/// What a report is made of, however it was read.
struct Gathered {
    processes: Vec<ProcessEnd>,
    threads: Vec<ThreadState>,
    /// Every span that never ended, in process, thread and begin order.
    open: Vec<Call>,
    facts: Facts,
    /// Sends that may be unmatched (at least every unmatched one), in the same order.
    sends: Vec<Call>,
}

fn assemble(g: Gathered) -> Hang {
    let Gathered { processes, threads, open, facts, sends } = g;
    let unmatched_sends = facts.unmatched_sends(sends);
    let found = waits::find(&facts, &open, &unmatched_sends);
    let (deadlocks, deadlocks_truncated) = cycles::elementary(&found.waits, MAX_DEADLOCKS);
    Hang {
        processes,
        threads,
        waits: found.waits,
        unmatched_sends,
        unmatched_receives: found.unmatched_receives,
        deadlocks,
        deadlocks_truncated,
    }
}

/// A process's `rank` label, read as a number.
fn rank_of(header: &waffle_wire::Header) -> Option<i64> {
    header.label("rank").and_then(|r| r.trim().parse().ok())
}
