//! The one pass of `follow`: a [`Sink`] that encodes each span (OTLP, or Zipkin JSON) the
//! moment its end is read, and queues it, and (with `-o`) appends it, and each event, to the
//! Chrome JSON output. It keeps the spans still open (with the events shown on them)
//! and nothing once a span is queued.

use std::sync::Arc;

use waffle_wire::{Calibration, Converter};

use super::{
    chrome_out::ChromeOut,
    queue::{Encoder, Entry, Queue},
};
use crate::{
    decode::{
        stream::{FileEnd, Header, Item},
        Fields, Sink,
    },
    model::Callsite,
    send::Protocol,
    spans::{Link, LinkKind, Log, OutSpan, ProcessInfo, TraceInfo, LOGS},
};

/// Ids for spans whose begin was lost, counting up as the file exports do.
const FRESH_IDS: u64 = 0xffff_ffff_0000_0001;

/// A span begun and not yet ended.
struct Open {
    thread: usize,
    /// Its id as recorded (0 for a stand-in) and as sent.
    raw: u64,
    id: u64,
    callsite: Arc<Callsite>,
    fields: Fields,
    start_ns: u64,
    parent: Option<u64>,
    caused_by: Vec<u64>,
    links: Vec<Link>,
    correlation: Option<u64>,
    detached: bool,
    logs: Vec<Log>,
}

/// What a thread's latest item was, for links and correlations recorded after it.
#[derive(Clone, Copy)]
enum Last {
    None,
    Span(usize),
    Log(usize, usize),
}

/// One file's pass.
pub(crate) struct Follower {
    queue: Option<Arc<Queue>>,
    /// The Chrome output and this file's process in it.
    out: Option<(Arc<ChromeOut>, usize)>,
    protocol: Protocol,
    ctx: TraceInfo,
    encoder: Option<Arc<Encoder>>,
    cal: Option<Converter>,
    slots: Vec<Option<Open>>,
    free: Vec<usize>,
    stacks: Vec<Vec<usize>>,
    last: Vec<Last>,
    fresh: u64,
    /// Spans and events read, records dropped by the producer, and how the file ended.
    pub(crate) spans: u64,
    pub(crate) events: u64,
    pub(crate) end: Option<FileEnd>,
}

/// A cause named by an item: linked by its id as recorded (follow mode resolves nothing).
fn cause(target: u64, from_event: Option<u64>) -> Link {
    Link {
        span: target,
        resolved: true,
        target_event: None,
        anchor: None,
        from_event,
        kind: LinkKind::Cause,
        target: None,
        quiet: false,
    }
}

/// A finished span (or an event shown as one) as the formats take it.
fn out_span(o: &Open, end_ns: u64, ended: bool, event: bool) -> OutSpan<'_> {
    OutSpan {
        process: 0,
        thread: o.thread,
        id: o.id,
        callsite: &o.callsite,
        fields: &o.fields,
        start_ns: o.start_ns,
        end_ns: end_ns.max(o.start_ns),
        parent: o.parent,
        unresolved_parent: None,
        parent_anchor: None,
        caused_by: &o.caused_by,
        links: &o.links,
        correlation: o.correlation,
        ended,
        detached: o.detached,
        stand_in: o.raw == 0 && !event,
        event,
        referred: false,
        logs: &o.logs,
    }
}

impl Follower {
    pub(crate) fn new(
        queue: Option<Arc<Queue>>,
        protocol: Protocol,
        out: Option<Arc<ChromeOut>>,
    ) -> Follower {
        Follower {
            queue,
            out: out.map(|o| (o, 0)),
            protocol,
            ctx: TraceInfo { processes: Vec::new(), first_ns: vec![None], trace_id: 0, targets: 0 },
            encoder: None,
            cal: None,
            slots: Vec::new(),
            free: Vec::new(),
            stacks: Vec::new(),
            last: Vec::new(),
            fresh: FRESH_IDS,
            spans: 0,
            events: 0,
            end: None,
        }
    }

    /// Records the producer dropped, as the file says so far (all of them once it is read).
    pub(crate) fn dropped_records(&self) -> u64 {
        self.ctx.processes.first().map_or(0, |p| p.dropped)
    }

    fn ns(&self, ticks: u64) -> u64 {
        self.cal.as_ref().map_or(0, |c| c.to_unix_ns(ticks))
    }

    fn open(&mut self, open: Open) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(open);
                slot
            }
            None => {
                self.slots.push(Some(open));
                self.slots.len() - 1
            }
        }
    }

    fn slot(&mut self, slot: usize) -> &mut Open {
        self.slots[slot].as_mut().expect("an open span")
    }

    /// The parent of an item of `thread`: as recorded, or the stand-in it sits in.
    fn parent(&self, thread: usize, recorded: Option<u64>) -> Option<u64> {
        recorded.or_else(|| {
            let top = self.slots[*self.stacks[thread].last()?].as_ref()?;
            (top.raw == 0).then_some(top.id)
        })
    }

    /// Encodes and queues one finished span (or an event shown as one), and appends it to the
    /// Chrome output.
    fn queue(&mut self, o: &Open, end_ns: u64, ended: bool, event: bool) {
        let span = out_span(o, end_ns, ended, event);
        if let Some((out, p)) = &self.out {
            out.span(*p, &span);
        }
        let (Some(encoder), Some(queue)) = (&self.encoder, &self.queue) else { return };
        let bytes = encoder.span(&self.ctx, &span);
        queue.push(Entry { process: encoder.clone(), bytes, end_ns: span.end_ns });
    }

    /// An event shown on a span (as a log) is still an instant of its own in the Chrome output.
    fn queue_out(&self, own: &Open, ts_ns: u64) {
        if let Some((out, p)) = &self.out {
            out.span(*p, &out_span(own, ts_ns, true, true));
        }
    }

    /// An event as an item of its own.
    fn event_open(&self, thread: usize, r: &Item<'_>, fields: Fields) -> Open {
        Open {
            thread,
            raw: r.id,
            id: r.id,
            callsite: r.callsite.clone(),
            fields,
            start_ns: self.ns(r.ticks),
            parent: self.parent(thread, r.parent),
            caused_by: r.links.to_vec(),
            links: r.links.iter().filter(|&&l| l != r.id).map(|&l| cause(l, None)).collect(),
            correlation: r.correlation,
            detached: false,
            logs: Vec::new(),
        }
    }

    fn finish_span(&mut self, slot: usize, ticks: u64, ended: bool) {
        let o = self.slots[slot].take().expect("an open span");
        self.free.push(slot);
        for last in &mut self.last {
            if matches!(*last, Last::Span(s) | Last::Log(s, _) if s == slot) {
                *last = Last::None;
            }
        }
        let end_ns = self.ns(ticks);
        self.queue(&o, end_ns, ended, false);
    }
}

impl Sink for Follower {
    type Span = usize;
    const EAGER_TAILS: bool = true;

    fn process(&mut self, source: &str, header: &Header) {
        self.cal = Some(header.calibration.converter());
        let mut info = ProcessInfo::new(source, header);
        // Sent while it runs: whether it ends cleanly, or drops, is not known yet.
        info.complete = true;
        self.ctx.processes = vec![info];
        self.ctx.trace_id = if header.trace_id != 0 {
            header.trace_id
        } else {
            (u128::from(header.pid) << 64 | u128::from(header.calibration.anchor_unix_ns)).max(1)
        };
        if self.queue.is_some() {
            self.encoder = Some(Arc::new(Encoder::new(self.protocol, &self.ctx, 0)));
        }
        if let Some((out, p)) = &mut self.out {
            *p = out.process(header);
        }
    }

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.ctx.processes[0].thread();
        if let Some((out, p)) = &self.out {
            out.thread(*p);
        }
        self.stacks.push(Vec::new());
        self.last.push(Last::None);
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        self.ctx.processes[0].thread_named(thread, tid, name);
        if let Some((out, p)) = &self.out {
            out.thread_named(*p, thread, tid, name);
        }
    }

    fn span_begin(&mut self, thread: usize, r: &Item<'_>) -> usize {
        self.spans += 1;
        let id = if r.id == 0 {
            self.fresh += 1;
            self.fresh - 1
        } else {
            r.id
        };
        let open = Open {
            thread,
            raw: r.id,
            id,
            callsite: r.callsite.clone(),
            fields: r.fields.clone(),
            start_ns: self.ns(r.ticks),
            parent: self.parent(thread, r.parent),
            caused_by: r.links.to_vec(),
            links: r.links.iter().filter(|&&l| l != id).map(|&l| cause(l, None)).collect(),
            correlation: r.correlation,
            detached: false,
            logs: Vec::new(),
        };
        let slot = self.open(open);
        self.stacks[thread].push(slot);
        self.last[thread] = Last::Span(slot);
        slot
    }

    fn event(&mut self, thread: usize, r: &Item<'_>) {
        self.events += 1;
        let ts_ns = self.ns(r.ticks);
        let host = self.stacks[thread].last().copied().filter(|&slot| {
            let o = self.slots[slot].as_ref().expect("an open span");
            r.parent.map_or(o.raw == 0, |p| p == o.raw) && o.logs.len() < LOGS
        });
        let log = Log::on_own_thread(
            r.id,
            thread,
            ts_ns,
            r.callsite.clone(),
            r.fields.clone(),
            r.links.to_vec(),
            r.correlation,
        );
        match host {
            Some(slot) => {
                if self.out.is_some() {
                    let own = self.event_open(thread, r, r.fields.clone());
                    self.queue_out(&own, ts_ns);
                }
                let o = self.slot(slot);
                o.links.extend(r.links.iter().filter(|&&l| l != o.id).map(|&l| cause(l, Some(r.id))));
                o.logs.push(log);
                self.last[thread] = Last::Log(slot, o.logs.len() - 1);
            }
            None => {
                let own = self.event_open(thread, r, log.fields);
                self.queue(&own, ts_ns, true, true);
                self.last[thread] = Last::None;
            }
        }
    }

    fn span_end(&mut self, thread: usize, slot: usize, ticks: u64, ended: bool) {
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == slot) {
            stack.remove(pos);
        }
        self.finish_span(slot, ticks, ended);
    }

    fn detach(&mut self, thread: usize, slot: usize, _id: u64) {
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == slot) {
            stack.remove(pos);
        }
        self.slot(slot).detached = true;
    }

    fn detached_end(&mut self, _thread: usize, slot: usize, ticks: u64, ended: bool) {
        self.finish_span(slot, ticks, ended);
    }

    fn late_link(&mut self, thread: usize, target: u64) {
        match self.last[thread] {
            Last::Span(slot) => {
                let o = self.slot(slot);
                o.caused_by.push(target);
                if target != o.id {
                    o.links.push(cause(target, None));
                }
            }
            Last::Log(slot, k) => {
                let o = self.slot(slot);
                o.logs[k].caused_by.push(target);
                let from = o.logs[k].id;
                o.links.push(cause(target, Some(from)));
            }
            Last::None => {}
        }
    }

    fn late_correlation(&mut self, thread: usize, value: u64) {
        match self.last[thread] {
            Last::Span(slot) => self.slot(slot).correlation = Some(value),
            Last::Log(slot, k) => self.slot(slot).logs[k].correlation = Some(value),
            Last::None => {}
        }
    }

    fn dropped(&mut self, thread: usize, records: u64) {
        self.ctx.processes[0].dropped(thread, records);
    }

    fn calibration(&mut self, calibration: Calibration) {
        // Spans still to come use the refined clock; those sent keep the header's.
        self.cal = Some(calibration.converter());
    }

    fn finish(&mut self, end: &FileEnd) {
        self.ctx.processes[0].finish(end);
        self.end = Some(*end);
    }
}
