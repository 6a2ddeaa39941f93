//! Chrome trace-event JSON (`.chrome.json`): `{"traceEvents": [...], "displayTimeUnit": "ns"}`,
//! for chrome://tracing, Perfetto UI's JSON import and other trace viewers, written from
//! `trace.bin` files or a [`Trace`] as spans end. The rules every format shares (ids, which
//! item a link resolves to, correlation groups, the order spans come in) are in
//! `spans`; every event is an item of its own here, none is a log of its span.
//!
//! The mapping:
//! - each process is a pid, its own unless another input already used it (or it is 0): then a
//!   fresh one above Linux's largest pid. Tids get the same treatment over the whole
//!   trace, and a main thread (tid = pid) follows its process. `M` events name processes
//!   (`process_name`, with the rank when the header has one; `process_labels` with the host and
//!   labels; `process_sort_index`) and rows (`thread_name`, `thread_sort_index`); those of
//!   processes and threads come first, those of a detached span's row when it ends;
//! - a span is a complete event (`X`) on its thread's row, written when it ends, so after its
//!   children; `ts` and `dur` are microseconds, written with three decimals so that nanoseconds
//!   survive. A double cannot hold Unix time in nanoseconds, so `ts` counts from the trace's
//!   earliest record, whose Unix time in nanoseconds is `otherData.waffle_origin_unix_ns` (a
//!   string). Fields are `args`, with `waffle.id`, `waffle.parent`, `waffle.caused_by` (ids in
//!   hex), `waffle.correlate` (`key=value`), and `waffle.unfinished`, `waffle.detached`,
//!   `waffle.stand_in`, `waffle.stretched` (its slice stretched to keep its row nested where
//!   recorded times do not, see `rows`) where they apply. A field named like one of these
//!   keeps its value. Integers beyond ±(2^53 − 1) and non-finite floats are strings, which
//!   JavaScript viewers read without loss;
//! - a detached span (an async span, which may end on another thread) gets a row of its own,
//!   named after it, so that the thread rows still nest (see `rows`);
//! - an event is an instant, `"ph": "i"` with thread scope `"s": "t"`, on its thread's row;
//! - causality is flows, one id per arrow, matched on `(id, cat, name)` with `cat` `waffle`:
//!   `s` on the cause (it binds to the enclosing slice) and `f` with `"bp": "e"` on the effect
//!   (binding to its enclosing slice, not the next one), written together once both slices
//!   are, and numbered in the order written (see `flows`). Names tell the relation: `caused_by`
//!   for each link, `correlated` from the first member of a correlation group to each other
//!   member, `message` from each cause of a directed correlation group to each effect, and
//!   `parent` from a parent that is not an enclosing slice on the child's row (a
//!   context entered on another thread or in another process, a detached span's children, a
//!   detached span's parent: that arrow starts where the detached span began on its thread's
//!   row, inside the parent, and is written with the detached span). An event takes part
//!   through the slice enclosing it: its arrows bind where its parent's do, written when the
//!   parent ends, since an event may lie at its parent's very end (an MPI receive ends its
//!   span), where no slice would hold it by the binding rule. An event whose parent does not
//!   enclose it on its row (it
//!   has none, or it is elsewhere) and that takes part in a flow, or that another item names,
//!   is a zero-length `X` slice instead of an instant, so that the flow has a slice to bind to,
//!   with `waffle.event` (true) to tell it from a span of no length.
//!
//! Memory: files stream through `spans`, and the writer keeps, besides a few numbers
//! per process and thread, what the children of spans still open tell about them, where each
//! item that another item names binds, and the arrows waiting for a cause still open: it grows
//! with open spans and cross-references, never with records.
//!
//! Children are written before their parents, so a viewer that takes complete events of one
//! start time in file order (chrome://tracing, older Perfetto) may nest a span inside a child
//! begun in the same nanosecond.

use std::io::{self, Write};

use serde_json::{json, Value as Json};

use super::index::IdMap;
use super::json_buf::JsonBuf;
use super::spans::{Anchor, LinkKind, OutSpan, Source, SpanWriter, TraceInfo};
use crate::model::Trace;

mod flows;
mod rows;
mod text;

use flows::{Flow, Flows};
use rows::{Point, Rows};
use text::{Arg, Args, Place};

/// How many events a span shows as logs: none, every event is an instant or a slice.
pub(crate) const LOGS: usize = 0;
/// The category of every flow.
const FLOW_CAT: &str = "waffle";
/// Integers a JavaScript number holds exactly.
pub(crate) const MAX_SAFE_INT: u64 = (1 << 53) - 1;

/// Writes `trace` as Chrome trace-event JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    write_from(Source::Trace(trace), out)
}

/// Writes the spans of `source` (files scanned with [`LOGS`]) to `out` as Chrome trace-event
/// JSON.
pub(crate) fn write_from(source: Source<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut w = ChromeWriter::new(out);
    crate::spans::write_spans(source, &mut w)?;
    w.finish()
}

/// The document, written as spans come.
struct ChromeWriter<'a> {
    out: &'a mut dyn Write,
    /// The text not yet handed to `out`.
    text: JsonBuf,
    /// The args' buffer.
    args: Args,
    /// Whether the document and the metadata are written (at the first process).
    started: bool,
    /// Trace events written.
    events: u64,
    /// The earliest record's time, Unix ns: `ts` 0.
    origin: u64,
    rows: Rows,
    flows: Flows,
    /// Arrows ready to be written, a reused buffer.
    ready: Vec<Flow>,
    /// Events with arrows that bind through the span enclosing them, by that span's id, until
    /// it ends.
    enclosed: IdMap<u64, Vec<Enclosed>>,
    /// Flow ids written.
    flow_ids: u64,
}

impl<'a> ChromeWriter<'a> {
    fn new(out: &'a mut dyn Write) -> Self {
        ChromeWriter {
            out,
            text: JsonBuf::default(),
            args: Args::default(),
            started: false,
            events: 0,
            origin: 0,
            rows: Rows::default(),
            flows: Flows::default(),
            ready: Vec::new(),
            enclosed: IdMap::default(),
            flow_ids: 0,
        }
    }

    /// Opens the document and names every process and thread.
    fn start(&mut self, ctx: &TraceInfo) -> io::Result<()> {
        self.started = true;
        self.origin = ctx.first_ns.iter().flatten().min().copied().unwrap_or(0);
        self.rows = Rows::new(ctx);
        self.text.raw(b"{\"traceEvents\":[");
        for (p, process) in ctx.processes.iter().enumerate() {
            let h = &process.header;
            let pid = self.rows.pid(p);
            let meta = |name: &str, args: Json| json!({ "ph": "M", "name": name, "pid": pid, "args": args });
            let name = match h.labels.iter().find(|(k, _)| k == "rank") {
                Some((_, rank)) => format!("{} (rank {rank})", h.name),
                None => h.name.clone(),
            };
            self.event(&meta("process_name", json!({ "name": name })))?;
            let mut labels = Vec::with_capacity(h.labels.len() + 1);
            if !h.host.is_empty() {
                labels.push(format!("host={}", h.host));
            }
            labels.extend(h.labels.iter().map(|(k, v)| format!("{k}={v}")));
            if !labels.is_empty() {
                self.event(&meta("process_labels", json!({ "labels": labels.join(", ") })))?;
            }
            self.event(&meta("process_sort_index", json!({ "sort_index": p })))?;
        }
        for (p, process) in ctx.processes.iter().enumerate() {
            for (t, thread) in process.threads.iter().enumerate() {
                let name = match thread.name.as_str() {
                    "" => format!("thread {}", thread.tid),
                    name => name.to_owned(),
                };
                self.row(self.rows.pid(p), self.rows.thread(p, t), &name, t)?;
            }
        }
        Ok(())
    }

    /// Names a row.
    fn row(&mut self, pid: i64, tid: i64, name: &str, sort_index: usize) -> io::Result<()> {
        self.event(
            &json!({ "ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": { "name": name } }),
        )?;
        let index = json!({ "sort_index": sort_index });
        self.event(&json!({ "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": index }))
    }

    fn event(&mut self, e: &Json) -> io::Result<()> {
        self.next_event();
        serde_json::to_writer(&mut self.text.bytes, e).map_err(io::Error::from)
    }

    /// Starts an event's text.
    fn next_event(&mut self) {
        self.text.raw(if self.events == 0 { b"\n" } else { b",\n" });
        self.events += 1;
    }

    /// `ns` as a `ts`, ns after the origin.
    fn at(&self, ns: u64) -> u64 {
        ns.saturating_sub(self.origin)
    }

    /// Writes the arrows that are ready.
    fn write_flows(&mut self) -> io::Result<()> {
        let ready = std::mem::take(&mut self.ready);
        for f in &ready {
            self.flow_ids += 1;
            for (end, p) in [(false, f.from), (true, f.to)] {
                self.next_event();
                let ts = self.at(p.ts);
                text::flow(&mut self.text, self.flow_ids, f, end, p, ts);
            }
        }
        self.ready = ready;
        self.ready.clear();
        self.text.flush_block(self.out)
    }

    /// Closes the document; arrows whose cause never turned up go where it was recorded.
    fn finish(mut self) -> io::Result<()> {
        if !self.started {
            self.text.raw(b"{\"traceEvents\":[");
        }
        self.ready = std::mem::take(&mut self.flows).rest();
        self.write_flows()?;
        self.text.raw(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"waffle_origin_unix_ns\":");
        self.text.u64_str(self.origin);
        self.text.raw(b"}}\n");
        self.text.flush(self.out)?;
        self.out.flush()
    }
}

impl SpanWriter for ChromeWriter<'_> {
    const LOGS: usize = LOGS;

    fn begin_process(&mut self, ctx: &TraceInfo, _process: usize) -> io::Result<()> {
        if !self.started {
            self.start(ctx)?;
        }
        Ok(())
    }

    fn span(&mut self, _ctx: &TraceInfo, s: &OutSpan<'_>) -> io::Result<()> {
        let pid = self.rows.pid(s.process);
        let thread_tid = self.rows.thread(s.process, s.thread);
        let mut args = self.args.of(s);
        let (at, within) = if s.event {
            let enclosed = s.parent.is_some() && s.parent_anchor.is_none();
            let flows = s.referred || s.parent_anchor.is_some() || s.links.iter().any(|l| l.resolved);
            let slice = flows && !enclosed;
            if flows && enclosed {
                let links = s.links.iter().filter(|l| l.resolved);
                let e = Enclosed {
                    id: s.id,
                    ts: s.start_ns,
                    referred: s.referred,
                    links: links.map(|l| (flow_name(l.kind), l.span, l.anchor)).collect(),
                };
                self.enclosed.entry(s.parent.expect("enclosed")).or_default().push(e);
            }
            if slice {
                // A zero-length slice, which a zero-length span would be too: this says which.
                args.add("waffle.event", Arg::True);
            }
            let place = Place { pid, tid: thread_tid, ts: self.at(s.start_ns), dur: slice.then_some(0) };
            self.next_event();
            text::record(&mut self.text, s, &mut args, place);
            self.args.done(args);
            if enclosed {
                // Its arrows wait for its parent (see the module docs).
                return self.write_flows();
            }
            (Point { pid, tid: thread_tid, ts: s.start_ns }, None)
        } else {
            let tid = if s.detached {
                let (tid, sort_index) = self.rows.detached(s.process);
                self.row(pid, tid, &s.callsite.name, sort_index)?;
                tid
            } else {
                thread_tid
            };
            let slice = self.rows.slice(s);
            let flags = [
                ("waffle.unfinished", !s.ended),
                ("waffle.detached", s.detached),
                ("waffle.stand_in", s.stand_in),
                ("waffle.stretched", slice.stretched),
            ];
            for (key, _) in flags.iter().filter(|(_, on)| *on) {
                args.add(key, Arg::True);
            }
            let place = Place { pid, tid, ts: self.at(slice.start), dur: Some(slice.end - slice.start) };
            self.next_event();
            text::record(&mut self.text, s, &mut args, place);
            self.args.done(args);
            (Point { pid, tid, ts: slice.bind }, Some((slice.start, slice.end)))
        };
        // Arrows waiting for this item, then its own: its links, its parent elsewhere; and those
        // of the events it encloses, at their time where the slice holds it, else where the
        // slice's own bind.
        self.flows.written(s.id, at, s.referred, &mut self.ready);
        let inside = self.enclosed.remove(&s.id).unwrap_or_default();
        let point = |ts: u64| match within {
            Some((start, end)) if start <= ts && ts < end => Point { ts, ..at },
            _ => at,
        };
        for e in &inside {
            self.flows.written(e.id, point(e.ts), e.referred, &mut self.ready);
        }
        let own = s.links.iter().filter(|l| l.resolved).map(|l| (flow_name(l.kind), l.span, l.anchor, at));
        let theirs = inside.iter().flat_map(|e| e.links.iter().map(|&(n, t, a)| (n, t, a, point(e.ts))));
        let links: Vec<_> = own.chain(theirs).collect();
        for (name, target, anchor, to) in links {
            // An arrow from this slice to itself draws nothing.
            if target == s.id || inside.iter().any(|e| e.id == target) {
                continue;
            }
            let recorded = anchor.and_then(|a| self.rows.anchored(a));
            self.flows.add(name, target, recorded, to, &mut self.ready);
        }
        match (s.parent, s.parent_anchor) {
            (Some(parent), Some(anchor)) => {
                let recorded = self.rows.anchored(anchor);
                self.flows.add("parent", parent, recorded, at, &mut self.ready);
            }
            // A detached span's parent enclosed its begin on its thread's row.
            (Some(_), None) if s.detached => {
                let from = Point { pid, tid: thread_tid, ts: s.start_ns };
                self.ready.push(Flow { name: "parent", from, to: at });
            }
            _ => {}
        }
        self.write_flows()
    }
}

/// An event whose arrows bind through the span enclosing it: its id, whether another item
/// names it, and its links (the relation, the span showing the target, where that is).
struct Enclosed {
    id: u64,
    ts: u64,
    referred: bool,
    links: Vec<(&'static str, u64, Option<Anchor>)>,
}

/// The name of an arrow for a link of this kind.
fn flow_name(kind: LinkKind) -> &'static str {
    match kind {
        LinkKind::Cause => "caused_by",
        LinkKind::Correlated => "correlated",
        LinkKind::Message => "message",
    }
}

/// Nanoseconds as microseconds with three decimals: the decimal text parsed to the nearest
/// double, which prints back as that text, so no nanosecond is lost or invented (while `ns` is
/// below 2^53, about 104 days from the origin).
pub(crate) fn us(ns: u64) -> Json {
    let text = format!("{}.{:03}", ns / 1000, ns % 1000);
    let us: f64 = text.parse().unwrap_or(0.0);
    serde_json::Number::from_f64(us).map_or(Json::Null, Json::Number)
}

#[cfg(test)]
mod tests;
