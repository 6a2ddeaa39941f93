//! "Why is it slow?": the time ranks spent waiting for each other, and the delays it comes back
//! to (`waffle-decode waits`).
//!
//! **Wait states.** Every blocking call that had to wait for another rank is one, of a kind
//! (after Scalasca's; [`WaitKind`]):
//! - **late sender**: a receive (`MPI_Recv`, `MPI_Sendrecv`, or the Wait that completed an
//!   `MPI_Irecv`) began before the matching send did; it waited from its begin to the send's;
//! - **late receiver**: a send that blocks (`MPI_Send` of a message too large to buffer,
//!   `MPI_Ssend`, or the Wait of an `MPI_Isend`) was still inside when the receive was posted,
//!   and the receive was posted after it began: it waited from its begin to the post;
//! - **wait at an N×N collective** (`MPI_Allreduce`, `MPI_Allgather`, `MPI_Alltoall`, ...) or
//!   **at a barrier**: each member waited from its begin to the begin of the last to enter;
//! - **late broadcast root** (`MPI_Bcast`, `MPI_Scatter`): a member waited for the root to enter;
//! - **early reduce** (`MPI_Reduce`, `MPI_Gather`): the root waited for the last member;
//! - **linked wait**: a span of the program's own, with a causal link to an item of another
//!   thread or rank that happened after the span began, waited for it.
//!
//! A call with several candidates (an `MPI_Sendrecv` is a receive and a send) counts the longest.
//! A wait never outlasts its call. Nonblocking collectives, and Test calls, never block.
//!
//! **Root causes.** A wait of rank A on rank B from `t0` to `t1` happened because B was doing
//! something else meanwhile; what B did over `[t0, t1]` is charged with that wait, piece by
//! piece: a span of the program's own (the innermost), an MPI call's time outside its own waits,
//! or the gap between two calls (named by the calls on either side). Where B was itself waiting
//! (on rank C), that piece is charged, in turn, to what C did over it: the delay **propagates**.
//! So every nanosecond of waiting is charged once, to work somewhere: a delay on one rank that
//! held up a chain of others is charged with all of their waiting ([`RootCause::caused_wait_ns`]),
//! against the time it took itself ([`RootCause::delay_ns`]).
//!
//! Clocks: the times of all files are compared as they are, so the ranks must share a clock (one
//! host, or hosts whose clocks are synchronised well below the waits that matter).
//!
//! ```
//! use waffle_analyze::waits;
//! # let trace = waffle_read::model::Trace::default();
//! let report = waits::waits(&trace);
//! assert_eq!(report.total_wait_ns, 0);
//! print!("{}", report.to_text());
//! ```

use std::{path::Path, sync::Arc};

use crate::{model::Trace, reader::Warning, timeline, timeline::Run, RunError};

mod blame;
pub(crate) mod classify;
mod render;
#[cfg(test)]
mod tests;

/// What a wait waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    /// A receive waited for its send to begin.
    LateSender,
    /// A blocking send waited for its receive to be posted.
    LateReceiver,
    /// A member of an N×N collective waited for the last to enter.
    Collective,
    /// A member of a barrier waited for the last to enter.
    Barrier,
    /// A member of a broadcast or scatter waited for its root.
    LateRoot,
    /// The root of a reduce or gather waited for the last member.
    EarlyReduce,
    /// A span waited for an item it links to.
    Linked,
}

impl WaitKind {
    /// The name the JSON and the text give it.
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::LateSender => "late_sender",
            WaitKind::LateReceiver => "late_receiver",
            WaitKind::Collective => "wait_at_nxn",
            WaitKind::Barrier => "wait_at_barrier",
            WaitKind::LateRoot => "late_broadcast_root",
            WaitKind::EarlyReduce => "early_reduce",
            WaitKind::Linked => "linked_wait",
        }
    }
}

/// One wait state.
#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    /// The waiting process (its file's place among the files given).
    pub process: usize,
    /// The waiting rank.
    pub rank: i64,
    /// Its thread (index in its file).
    pub thread: usize,
    /// The call (span name).
    pub call: Arc<str>,
    /// The call and the program's innermost span around it: `MPI_Recv in solve`.
    pub site: Arc<str>,
    /// The call's span id.
    pub span_id: u64,
    /// What it waited for.
    pub kind: WaitKind,
    /// When the wait began (the call's begin), Unix ns.
    pub start_ns: u64,
    /// How long it waited.
    pub wait_ns: u64,
    /// The rank it waited for.
    pub waited_for_rank: i64,
    /// The call it waited for (a span name; `an event` for a link to one).
    pub waited_for: Arc<str>,
    /// The root cause charged with most of it, by its index in [`Waits::root_causes`].
    pub root_cause: Option<usize>,
}

/// A delay that waits come back to.
#[derive(Clone, Debug, PartialEq)]
pub struct RootCause {
    /// The rank that was busy.
    pub rank: i64,
    /// Its thread.
    pub thread: usize,
    /// What it was busy with: a span's name, or `gap MPI_Recv → MPI_Send`.
    pub span: String,
    /// How much of its time the waits overlapped (each moment once).
    pub delay_ns: u64,
    /// How much waiting it caused: directly, and through waits it caused that made others wait.
    pub caused_wait_ns: u64,
    /// Of it, the waits it caused directly.
    pub direct_ns: u64,
    /// Of it, the waits it caused through other waits.
    pub propagated_ns: u64,
    /// The instance charged the most: its span id (0 for a gap).
    pub span_id: u64,
    /// When that instance began, Unix ns.
    pub start_ns: u64,
}

/// A piece of what a rank was doing that waits were charged to: the instances of a root cause,
/// each with the waits it caused.
#[derive(Clone, Debug, PartialEq)]
pub struct Charged {
    /// Its root cause, by its index in [`Waits::root_causes`].
    pub root_cause: usize,
    /// The process (its file's place), rank and thread that was busy.
    pub process: usize,
    /// Its rank.
    pub rank: i64,
    /// Its thread.
    pub thread: usize,
    /// The part of the piece the waits overlapped, Unix ns: from the first to the last moment.
    pub start_ns: u64,
    /// Its end.
    pub end_ns: u64,
    /// The waits charged to it, by their indices in [`Waits::waits`].
    pub waits: Vec<usize>,
}

/// Waiting per rank.
#[derive(Clone, Debug, PartialEq)]
pub struct RankTotal {
    /// The rank.
    pub rank: i64,
    /// Its wait states.
    pub waits: usize,
    /// Their time.
    pub wait_ns: u64,
}

/// Waiting per call site and kind.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteTotal {
    /// The rank.
    pub rank: i64,
    /// The call and the program's span around it.
    pub site: String,
    /// The kind of wait.
    pub kind: WaitKind,
    /// How many.
    pub waits: usize,
    /// Their time.
    pub wait_ns: u64,
}

/// The report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Waits {
    /// Every wait state, by rank, thread and time.
    pub waits: Vec<Wait>,
    /// The delays they come back to, the one that caused the most waiting first.
    pub root_causes: Vec<RootCause>,
    /// Per rank, by rank.
    pub per_rank: Vec<RankTotal>,
    /// Per rank, call site and kind, the most waiting first.
    pub per_site: Vec<SiteTotal>,
    /// The pieces of work the waits were charged to, by lane and time.
    pub charged: Vec<Charged>,
    /// All the waiting.
    pub total_wait_ns: u64,
    /// What the reader should know about the input (files that end early).
    pub notes: Vec<String>,
}

/// The wait states of a decoded run and their root causes.
pub fn waits(trace: &Trace) -> Waits {
    waits_of(&Run::from_trace(trace))
}

/// The wait states of a run read with [`crate::read_run`] and their root causes.
pub fn waits_of(run: &Run) -> Waits {
    let found = classify::classify(run);
    let mut report = blame::report(run, found);
    report.notes = timeline::cut_notes(run);
    report
}

/// [`waits`] of the files of one run, checked to be one whole run (one trace id, no rank missing
/// or given twice: [`RunError`]); a file that was cut gives the waits up to its cut, and a note.
pub fn waits_files<P: AsRef<Path>>(paths: &[P]) -> Result<(Waits, Vec<Warning>), RunError> {
    let (run, warnings) = timeline::read_run(paths)?;
    Ok((waits_of(&run), warnings))
}
