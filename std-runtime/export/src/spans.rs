//! The trace as a stream of finished spans, each with its events and its causes resolved:
//! what the span-list formats (Zipkin, Jaeger, OTLP) and Chrome's JSON are written from.
//!
//! Files are read twice, both times as a stream of records (`decode::stream`), and nothing
//! keeps the records: memory grows with the spans open at once (each with at most
//! [`SpanWriter::LOGS`] events) and with cross-references (ids that links name, parents on
//! other threads or processes, correlation groups), never with the file. The first
//! pass learns the processes and their threads (a thread's name may come after its records),
//! which ids exist, the correlation groups, and where each referenced item ends up; the second
//! hands every span to a [`SpanWriter`] once it has ended. A model is played back as the same
//! records (`replay`), so a format has one writer for files and for models.
//!
//! The rules every format shares:
//! - **Ids.** A span or event keeps its id. A stand-in (id 0: a span whose begin record was
//!   lost) and an item repeating an id that an earlier run of ids already holds (a file given
//!   twice) get fresh ids, counting up from `ffffffff00000001` (ids of the last stream of the
//!   largest process salt, which no real run reaches) and skipping every id the trace uses; the
//!   same files always get the same ids. Children of a stand-in get it as their parent back.
//! - **Events.** An event is a log of its parent span when that span is in the same file, still
//!   open when the event is read, holds fewer than [`SpanWriter::LOGS`] logs, and (for an event
//!   of another thread, whose records interleave with the span's by chunks) its time falls
//!   within the span. Any other event is a span of its own, zero-length, with `event` set, the
//!   child of its parent.
//! - **Causes.** A link names a span or an event; it resolves to the span that shows it: the
//!   span itself, or the span the event is a log of, or the event's own span. A link from an
//!   event that is a log belongs to the span showing it (`from_event`). Links to ids that are
//!   not in the trace stay unresolved, by their id; links to the span itself are left out.
//! - **Correlation.** Each member of a correlation group (`key`, value) but the first links to
//!   the first, in time (then process, thread and id): a pair of ranks' collectives is one
//!   link, and a group of any size costs one entry, not one per member.
//! - **Trace id.** One decode is one trace: the trace id of the first process that recorded
//!   one. When none has, an id is derived from the processes' pids and first times, so the same
//!   files always give the same id, never zero.
//! - **Order.** Spans come in the order they end in the files (children before their parents),
//!   an event of its own when it is read; processes one after the other, in the order given.

use std::{io, sync::Arc};

use super::passes::{self, FirstPass, Pass, Records};
#[cfg(test)]
use crate::model::Trace;
use crate::{
    decode::{FieldValue, Fields},
    model::Callsite,
    reader::Warning,
    Error,
};

mod assemble;
mod groups;
mod ids;
pub(crate) mod notation;
pub(crate) mod one_pass;
mod state;

pub(crate) use super::process::ProcessInfo;
pub(crate) use assemble::Assembler;
pub(crate) use state::State;

/// What the first pass learnt about the whole trace, for writers to look up.
pub(crate) struct TraceInfo {
    /// Processes, in input order.
    pub(crate) processes: Vec<ProcessInfo>,
    /// Per process, its earliest span begin or event, Unix ns.
    pub(crate) first_ns: Vec<Option<u64>>,
    /// The trace id every span is written under.
    pub(crate) trace_id: u128,
    /// How many correlation targets the trace has: [`OutSpan::target`] and [`Link::target`]
    /// are below it, so a writer may keep what it learns of them in an array.
    pub(crate) targets: u32,
}

/// A finished span, as a format writes it.
pub(crate) struct OutSpan<'a> {
    /// Index of its process in [`TraceInfo::processes`].
    pub(crate) process: usize,
    /// Index of its thread in the process.
    pub(crate) thread: usize,
    /// Its id, unique over the output.
    pub(crate) id: u64,
    /// Name, field names, correlation key.
    pub(crate) callsite: &'a Callsite,
    /// Field values, in the callsite's order (empty in a pass that does not read them).
    pub(crate) fields: &'a Fields,
    /// Begin and end, Unix ns (`end_ns >= start_ns`; equal for an event).
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    /// Its parent, when that is in the output.
    pub(crate) parent: Option<u64>,
    /// Its parent's id, when the parent is not in the trace.
    pub(crate) unresolved_parent: Option<u64>,
    /// Where its parent is, when that is not the span enclosing it on its thread.
    pub(crate) parent_anchor: Option<Anchor>,
    /// The ids its `caused_by` names, as recorded.
    pub(crate) caused_by: &'a [u64],
    /// Its links, and those of the events it shows as logs.
    pub(crate) links: &'a [Link],
    /// Its correlation value (the key is the callsite's).
    pub(crate) correlation: Option<u64>,
    /// Whether its end was recorded.
    pub(crate) ended: bool,
    /// Whether it was detached to follow a future (it may end on another thread).
    pub(crate) detached: bool,
    /// Whether it stands for a span whose begin was lost.
    pub(crate) stand_in: bool,
    /// Whether it is an event shown as a span of its own.
    pub(crate) event: bool,
    /// Whether another item names it (a link, a correlation peer, a child it does not enclose
    /// on the child's thread), so that a writer may need to find it after it is written.
    pub(crate) referred: bool,
    /// The events shown on it, in the order read (time order on one thread).
    pub(crate) logs: &'a [Log],
}

impl OutSpan<'_> {
    /// Field `(name, value)` pairs.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&str, FieldValue<'_>)> {
        field_pairs(self.callsite, self.fields)
    }
}

/// An event shown on a span.
pub(crate) struct Log {
    /// The event's id.
    pub(crate) id: u64,
    /// Its thread (the span's may be another).
    pub(crate) thread: usize,
    /// When, Unix ns.
    pub(crate) ts_ns: u64,
    /// Name and field names.
    pub(crate) callsite: Arc<Callsite>,
    /// Field values.
    pub(crate) fields: Fields,
    /// The ids its `caused_by` names, as recorded.
    pub(crate) caused_by: Vec<u64>,
    /// Its correlation value.
    pub(crate) correlation: Option<u64>,
    /// Whether a link elsewhere names it (then its id is worth showing).
    pub(crate) linked: bool,
    /// Whether it happened on another thread than the span's.
    off_thread: bool,
    /// The id recorded, and whether the event holds it (not a repeat).
    raw: u64,
    owns: bool,
    /// Its callsite's number in its process (`Item::callsite_index`).
    callsite_index: u32,
    /// Its correlation membership, if it is correlated.
    member: Option<groups::Membership>,
}

impl Log {
    /// An event shown on a span of its own thread, nothing known yet of what names it (the
    /// assembler's pool fills in the rest).
    pub(crate) fn on_own_thread(
        id: u64,
        thread: usize,
        ts_ns: u64,
        callsite: Arc<Callsite>,
        fields: Fields,
        caused_by: Vec<u64>,
        correlation: Option<u64>,
    ) -> Log {
        let (linked, off_thread, raw, owns) = (false, false, id, true);
        let (callsite_index, member) = (0, None);
        Log {
            id,
            thread,
            ts_ns,
            callsite,
            fields,
            caused_by,
            correlation,
            linked,
            off_thread,
            raw,
            owns,
            callsite_index,
            member,
        }
    }

    /// Field `(name, value)` pairs.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&str, FieldValue<'_>)> {
        field_pairs(&self.callsite, &self.fields)
    }
}

fn field_pairs<'a>(
    callsite: &'a Callsite,
    fields: &'a Fields,
) -> impl Iterator<Item = (&'a str, FieldValue<'a>)> {
    callsite.field_names().zip(fields.iter())
}

/// A link from a span (or an event it shows) to the span showing a cause or a correlated peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    /// The span showing the target; the target's own id when it is not in the trace.
    pub(crate) span: u64,
    /// Whether the target is in the trace.
    pub(crate) resolved: bool,
    /// The target, when it is an event (shown by `span`).
    pub(crate) target_event: Option<u64>,
    /// Where the target is, when it is in the trace.
    pub(crate) anchor: Option<Anchor>,
    /// The event of this span the link is from, when it is not the span itself.
    pub(crate) from_event: Option<u64>,
    /// Why.
    pub(crate) kind: LinkKind,
    /// The target's number among the correlation targets ([`OutSpan::target`]), for a link
    /// to a correlation peer.
    pub(crate) target: Option<u32>,
    /// Whether the span showing the target is a root that links to nothing, nor any event it
    /// shows, and that something named by the time it ended (as a send's message names the
    /// send from its begin): a span may hang under one in a tree built from first references
    /// (Jaeger's) without any loop passing through it.
    pub(crate) quiet: bool,
}

impl Link {
    /// Whether two links say the same (the same target shown the same way, from the same
    /// item, for the same reason), however the target was found.
    pub(crate) fn same(&self, other: &Link) -> bool {
        (self.span, self.resolved, self.target_event, self.anchor, self.from_event, self.kind)
            == (other.span, other.resolved, other.target_event, other.anchor, other.from_event, other.kind)
    }
}

/// Where a referenced item ends up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// The span showing it.
    pub(super) span: u64,
    /// In the first pass: `span` is the count of a fresh id, not the id.
    pub(super) fresh: bool,
    /// Whether it is an event.
    pub(super) event: bool,
    /// Where it is.
    pub(super) anchor: Anchor,
}

/// Where an item is: its process, thread and time, and whether it is (or is shown by) a
/// detached span, which formats with rows may put on a row of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anchor {
    /// Index of its process in [`TraceInfo::processes`].
    pub(crate) process: u32,
    /// Index of its thread in the process.
    pub(crate) thread: u32,
    /// Its begin (span) or time (event), Unix ns.
    pub(crate) ts_ns: u64,
    /// The detached span showing it, if any (by id).
    pub(crate) detached: Option<u64>,
}

/// Why one item links to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkKind {
    /// The item names the target in `caused_by`.
    Cause,
    /// The target is the first member of its correlation group.
    Correlated,
    /// The item is an effect of a directed correlation group and the target one of its
    /// causes (see [`crate::correlation`]): a message and its sender.
    Message,
}

/// How many events a span shows as logs unless its format says otherwise: OpenTelemetry SDKs
/// keep 128 events a span by default, and so do we.
pub(crate) const LOGS: usize = 128;

/// What a format does with the spans.
pub(crate) trait SpanWriter {
    /// How many events a span shows as logs; later ones are spans of their own.
    const LOGS: usize = LOGS;

    /// Whether the writer reads field values (the first pass does not).
    const FIELDS: bool = true;

    /// Whether the writer takes the spans of one pass over a file that may still be written
    /// (`OnePass`), not of the two passes over finished files.
    const ONE_PASS: bool = false;

    /// A process begins; `ctx` knows all of them already (in one pass: all so far).
    fn begin_process(&mut self, _ctx: &TraceInfo, _process: usize) -> io::Result<()> {
        Ok(())
    }

    /// (One pass only.) A thread of `process` appears, or (`named`) its id and name are read.
    fn thread(&mut self, _ctx: &TraceInfo, _process: usize, _thread: usize, _named: bool) {}

    /// A finished span (or an event shown as one).
    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()>;

    /// A process's last span has been handed over.
    fn end_process(&mut self, _ctx: &TraceInfo, _process: usize) -> io::Result<()> {
        Ok(())
    }
}

/// The first pass's writer: nothing is written, no field is read.
struct NoWrite;

impl SpanWriter for NoWrite {
    const FIELDS: bool = false;
    fn span(&mut self, _ctx: &TraceInfo, _span: &OutSpan<'_>) -> io::Result<()> {
        Ok(())
    }
}

impl<W: SpanWriter> SpanWriter for &mut W {
    const LOGS: usize = W::LOGS;
    const FIELDS: bool = W::FIELDS;
    const ONE_PASS: bool = W::ONE_PASS;
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        (**self).begin_process(ctx, process)
    }
    fn thread(&mut self, ctx: &TraceInfo, process: usize, thread: usize, named: bool) {
        (**self).thread(ctx, process, thread, named);
    }
    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> io::Result<()> {
        (**self).span(ctx, span)
    }
    fn end_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        (**self).end_process(ctx, process)
    }
}

/// Where spans come from: a model in memory, or files the first pass has read.
pub(crate) type Source<'a> = passes::Source<'a, State>;

/// Hands every span of `source` to `writer`.
pub(crate) fn write_spans<W: SpanWriter>(source: Source<'_>, writer: &mut W) -> io::Result<()> {
    source.run(|_| first_pass(W::LOGS), |state| WritePass::new(state, writer))
}

/// The first pass, for a writer whose [`SpanWriter::LOGS`] is `logs`: it assembles the spans
/// as the second will, writing none, and leaves the [`State`] the second starts from.
pub(crate) fn first_pass(logs: usize) -> impl FirstPass<Plan = State> {
    ScanPass(State::new(logs))
}

/// Hands every span of `trace` to `writer`, by the same rules as files.
#[cfg(test)]
pub(crate) fn write_trace<W: SpanWriter>(trace: &Trace, writer: &mut W) -> io::Result<()> {
    write_spans(passes::Source::Trace(trace), writer)
}

/// See [`first_pass`].
struct ScanPass(State);

impl Pass for ScanPass {
    /// Each file is its own assembly: nothing but the state carries over to the next.
    fn read(&mut self, records: &mut Records<'_>) -> Result<Vec<Warning>, Error> {
        self.0.next_calibration = records.calibration();
        records.decode(&mut Assembler::new(&mut self.0, NoWrite))
    }
}

impl FirstPass for ScanPass {
    type Plan = State;

    fn into_plan(mut self) -> State {
        self.0.seal();
        self.0
    }
}

/// The second pass: the same assembly, handing each finished span to the writer.
struct WritePass<'w, W> {
    state: State,
    writer: &'w mut W,
    /// The writer's first error on the file just read.
    error: Option<io::Error>,
}

impl<'w, W: SpanWriter> WritePass<'w, W> {
    fn new(state: State, writer: &'w mut W) -> Self {
        assert_eq!(state.logs, W::LOGS, "scanned for another writer");
        WritePass { state, writer, error: None }
    }
}

impl<W: SpanWriter> Pass for WritePass<'_, W> {
    fn read(&mut self, records: &mut Records<'_>) -> Result<Vec<Warning>, Error> {
        self.state.next_calibration = records.calibration();
        let mut pass = Assembler::new(&mut self.state, &mut *self.writer);
        let warnings = records.decode(&mut pass)?;
        self.error = pass.result().err();
        Ok(warnings)
    }

    fn written(&mut self) -> io::Result<()> {
        self.error.take().map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests;
