//! Reading a run into lanes: from files as a stream of records (a decoder [`Sink`]: the spans
//! kept compact, their times converted with each file's last calibration once it is read), or
//! from a decoded model, by the same rules. Names are numbered once for all files; what each
//! callsite gives (its name's number, whether it is an MPI call, a send, a collective, a receive
//! event, where its fields are) is learnt once per callsite.

use std::{collections::HashMap, path::Path, sync::Arc};

use waffle_wire::Calibration;

use super::{rank_of, At, Extra, Lane, ProcessFacts, Received, Run, Span, COLLECTIVE, MPI, NO_RANK, SEND};
use crate::{
    decode::{
        run::decode_path,
        stream::{FileEnd, Header, Item, Sink},
        FieldValue,
    },
    model::{Callsite, Trace, Value},
    reader::Warning,
    Error,
};

/// The module of `waffle-mpi`'s callsites.
const MPI_MODULE: &str = "waffle_mpi";

/// The fields naming another rank that the checks read, in this order.
const NAMING: [&str; 4] = ["peer", "root", "dest", "target"];

/// What a callsite gives the lanes.
#[derive(Clone, Copy, Default)]
struct Site {
    name: u32,
    kind: u8,
    /// An event whose key is `mpi.message<`: a received message.
    received: bool,
    request: Option<usize>,
    requests: Option<usize>,
    step: Option<usize>,
    bytes: Option<usize>,
    /// The positions of [`NAMING`]'s fields (`root` is also the span's root).
    naming: [Option<usize>; 4],
}

/// The fields of one item that the lanes keep.
#[derive(Default)]
struct Got {
    request: u64,
    root: i64,
    requests: Vec<u64>,
    step: Option<i64>,
    bytes: u64,
    named: [Option<i64>; 4],
}

impl Site {
    /// Reads the fields through `int` and `text` (by position).
    fn read(&self, int: impl Fn(usize) -> Option<i64>, text: impl Fn(usize) -> Option<String>) -> Got {
        let requests = self
            .requests
            .and_then(&text)
            .map(|t| t.split(',').filter_map(|n| n.trim().parse().ok()).collect());
        let named = self.naming.map(|k| k.and_then(&int));
        Got {
            request: self.request.and_then(&int).and_then(|r| u64::try_from(r).ok()).unwrap_or(0),
            root: named[1].unwrap_or(NO_RANK),
            requests: requests.unwrap_or_default(),
            step: self.step.and_then(&int),
            bytes: self.bytes.and_then(&int).and_then(|b| u64::try_from(b).ok()).unwrap_or(0),
            named,
        }
    }
}

/// The run being built.
pub(super) struct Builder {
    run: Run,
    names: HashMap<String, u32>,
}

impl Builder {
    pub(super) fn new() -> Builder {
        let run = Run {
            processes: Vec::new(),
            ranks: Vec::new(),
            names: Vec::new(),
            extras: Vec::new(),
            lanes: Vec::new(),
            received: Vec::new(),
            messages: Vec::new(),
            collectives: Vec::new(),
        };
        Builder { run, names: HashMap::new() }
    }

    fn name(&mut self, name: &str) -> u32 {
        if let Some(&n) = self.names.get(name) {
            return n;
        }
        let n = self.run.names.len() as u32;
        self.run.names.push(name.to_owned());
        self.names.insert(name.to_owned(), n);
        n
    }

    fn site(&mut self, cs: &Callsite) -> Site {
        let mpi = cs.name.starts_with("MPI_") && cs.module.starts_with(MPI_MODULE);
        let key = &*cs.correlate;
        let mut kind = if mpi { MPI } else { 0 };
        if key == "mpi.message>" {
            kind |= SEND;
        }
        if key == "mpi.collective" {
            kind |= COLLECTIVE;
        }
        let at = |name: &str| cs.field_index(name);
        Site {
            name: self.name(&cs.name),
            kind,
            received: key == "mpi.message<",
            request: at("request"),
            requests: if mpi { at("requests") } else { None },
            step: if mpi { None } else { at("step").or_else(|| at("iteration")) },
            bytes: at("bytes"),
            naming: if mpi { NAMING.map(at) } else { [None; 4] },
        }
    }

    fn process(&mut self, source: &str, header: &Header) -> usize {
        let k = self.run.processes.len();
        self.run.ranks.push(rank_of(k, header));
        self.run.processes.push(ProcessFacts {
            source: source.to_owned(),
            header: header.clone(),
            complete: false,
            last_ns: 0,
            named: Vec::new(),
        });
        k
    }

    fn lane(&mut self, process: usize, thread: usize) -> u32 {
        self.run.lanes.push(Lane {
            process,
            thread,
            spans: Vec::new(),
            parent: Vec::new(),
            events: Vec::new(),
        });
        self.run.lanes.len() as u32 - 1
    }

    /// A span begins on `lane` at `ts` (ticks while a file is read).
    fn span(
        &mut self,
        lane: u32,
        site: &Site,
        item: (u64, u64, Option<u64>, Option<u32>),
        got: Got,
        links: &[u64],
    ) -> At {
        let (id, ts, value, parent) = item;
        let p = self.run.lanes[lane as usize].process;
        for (k, r) in got.named.iter().enumerate() {
            let facts = &mut self.run.processes[p];
            if let Some(r) = r.filter(|&r| r >= 0 && !facts.named.iter().any(|n| n.0 == r)) {
                facts.named.push((r, site.name, NAMING[k]));
            }
        }
        let extra = if links.is_empty() && got.requests.is_empty() && got.step.is_none() {
            u32::MAX
        } else {
            self.run.extras.push(Extra { links: links.to_vec(), requests: got.requests, step: got.step });
            self.run.extras.len() as u32 - 1
        };
        let l = &mut self.run.lanes[lane as usize];
        l.spans.push(Span {
            start_ns: ts,
            end_ns: ts,
            id,
            value: value.unwrap_or(0),
            request: got.request,
            root: got.root,
            name: site.name,
            extra,
            kind: site.kind,
        });
        l.parent.push(parent);
        At { lane, span: l.spans.len() as u32 - 1 }
    }

    /// Every lane by begin (a stream's records come in order, but a clock may step back), then
    /// messages and collectives.
    pub(super) fn finish(mut self) -> Run {
        for l in 0..self.run.lanes.len() {
            let lane = &mut self.run.lanes[l];
            if lane.spans.windows(2).all(|w| w[0].start_ns <= w[1].start_ns) {
                continue;
            }
            let mut order: Vec<u32> = (0..lane.spans.len() as u32).collect();
            order.sort_by_key(|&k| lane.spans[k as usize].start_ns);
            let mut place = vec![0u32; order.len()];
            for (new, &old) in order.iter().enumerate() {
                place[old as usize] = new as u32;
            }
            lane.spans = order.iter().map(|&k| lane.spans[k as usize]).collect();
            lane.parent = order.iter().map(|&k| lane.parent[k as usize].map(|p| place[p as usize])).collect();
            for r in self.run.received.iter_mut().filter(|r| r.at.lane == l as u32) {
                r.at.span = place[r.at.span as usize];
            }
        }
        self.run.join();
        self.run
    }

    /// `trace`'s processes, by the same rules as files.
    pub(super) fn from_trace(trace: &Trace) -> Run {
        let mut b = Builder::new();
        let mut sites: HashMap<*const Callsite, Site> = HashMap::new();
        let mut site =
            |b: &mut Builder, cs: &Arc<Callsite>| *sites.entry(Arc::as_ptr(cs)).or_insert_with(|| b.site(cs));
        for (p, process) in trace.processes.iter().enumerate() {
            b.process(&process.source, &process.header);
            for (t, thread) in process.threads.iter().enumerate() {
                let lane = b.lane(p, t);
                let mut spans: Vec<&crate::model::Span> = thread.spans.iter().collect();
                spans.sort_by_key(|s| (s.start_ns, s.depth));
                let mut ids: HashMap<u64, u32> = HashMap::new();
                for s in spans {
                    let st = site(&mut b, &s.callsite);
                    let got = st.read(|k| int(s.fields.get(k)), |k| text(s.fields.get(k)));
                    let parent = s.parent.and_then(|id| ids.get(&id).copied());
                    let at = b.span(lane, &st, (s.id, s.start_ns, s.correlation, parent), got, &s.links);
                    b.run.lanes[lane as usize].spans[at.span as usize].end_ns = s.end_ns;
                    if s.id != 0 {
                        ids.insert(s.id, at.span);
                    }
                }
                for e in &thread.events {
                    b.run.lanes[lane as usize].events.push((e.id, e.ts_ns));
                    let st = site(&mut b, &e.callsite);
                    let (Some(value), true) = (e.correlation, st.received) else { continue };
                    let Some(span) = e.parent.and_then(|id| ids.get(&id).copied()) else { continue };
                    let got = st.read(|k| int(e.fields.get(k)), |k| text(e.fields.get(k)));
                    let at = At { lane, span };
                    b.run.received.push(Received { at, value, request: got.request, bytes: got.bytes });
                }
            }
            let facts = &mut b.run.processes[p];
            (facts.complete, facts.last_ns) = (process.complete, trace.last_ns(p));
        }
        b.finish()
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::I64(i) => Some(*i),
        Value::U64(u) => i64::try_from(*u).ok(),
        _ => None,
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Str(s) => Some(s.clone()),
        _ => None,
    }
}

fn field_int(v: Option<FieldValue<'_>>) -> Option<i64> {
    match v? {
        FieldValue::I64(i) => Some(i),
        FieldValue::U64(u) => i64::try_from(u).ok(),
        _ => None,
    }
}

fn field_text(v: Option<FieldValue<'_>>) -> Option<String> {
    match v? {
        FieldValue::Str(s) => Some(s.to_owned()),
        _ => None,
    }
}

/// What a thread's latest item was, for a correlation or link recorded after it.
#[derive(Clone, Copy)]
enum Last {
    None,
    Span(At),
    Received(usize),
}

/// One file read into the builder.
struct FileSink<'b> {
    b: &'b mut Builder,
    process: usize,
    sites: Vec<Option<Site>>,
    lanes: Vec<u32>,
    stacks: Vec<Vec<u32>>,
    last: Vec<Last>,
    cal: Option<Calibration>,
    first_lane: usize,
    last_ticks: u64,
    converted: bool,
}

impl FileSink<'_> {
    fn site(&mut self, index: u32, cs: &Arc<Callsite>) -> Site {
        let k = index as usize;
        if self.sites.len() <= k {
            self.sites.resize(k + 1, None);
        }
        if let Some(s) = self.sites[k] {
            return s;
        }
        let s = self.b.site(cs);
        self.sites[k] = Some(s);
        s
    }

    fn seen(&mut self, ticks: u64) {
        self.last_ticks = self.last_ticks.max(ticks);
    }
}

impl Sink for FileSink<'_> {
    type Span = At;

    fn process(&mut self, source: &str, header: &Header) {
        self.process = self.b.process(source, header);
        self.cal = Some(header.calibration);
        self.first_lane = self.b.run.lanes.len();
        self.last_ticks = header.calibration.anchor_ticks;
    }

    fn thread(&mut self, thread: usize, _stream: u32) {
        let lane = self.b.lane(self.process, thread);
        self.lanes.push(lane);
        self.stacks.push(Vec::new());
        self.last.push(Last::None);
    }

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    fn span_begin(&mut self, thread: usize, r: &Item<'_>) -> At {
        self.seen(r.ticks);
        let site = self.site(r.callsite_index, r.callsite);
        let got = site.read(|k| field_int(r.fields.iter().nth(k)), |k| field_text(r.fields.iter().nth(k)));
        let parent = if r.held { self.stacks[thread].last().copied() } else { None };
        let at = self.b.span(self.lanes[thread], &site, (r.id, r.ticks, r.correlation, parent), got, r.links);
        self.stacks[thread].push(at.span);
        self.last[thread] = Last::Span(at);
        at
    }

    fn event(&mut self, thread: usize, r: &Item<'_>) {
        self.seen(r.ticks);
        let lane = self.lanes[thread];
        self.b.run.lanes[lane as usize].events.push((r.id, r.ticks));
        self.last[thread] = Last::None;
        let site = self.site(r.callsite_index, r.callsite);
        let top = self.stacks[thread].last().copied();
        let (true, true, Some(span)) = (site.received, r.held, top) else { return };
        let got = site.read(|k| field_int(r.fields.iter().nth(k)), |_| None);
        let received = Received {
            at: At { lane, span },
            value: r.correlation.unwrap_or(0),
            request: got.request,
            bytes: got.bytes,
        };
        self.b.run.received.push(received);
        self.last[thread] = Last::Received(self.b.run.received.len() - 1);
    }

    fn span_end(&mut self, thread: usize, span: At, ticks: u64, _ended: bool) {
        self.seen(ticks);
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == span.span) {
            stack.remove(pos);
        }
        self.b.run.lanes[span.lane as usize].spans[span.span as usize].end_ns = ticks;
    }

    fn detach(&mut self, thread: usize, span: At, _id: u64) {
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == span.span) {
            stack.remove(pos);
        }
    }

    fn detached_end(&mut self, _thread: usize, span: At, ticks: u64, _ended: bool) {
        self.seen(ticks);
        self.b.run.lanes[span.lane as usize].spans[span.span as usize].end_ns = ticks;
    }

    fn late_link(&mut self, thread: usize, target: u64) {
        let Last::Span(at) = self.last[thread] else { return };
        let run = &mut self.b.run;
        let s = &mut run.lanes[at.lane as usize].spans[at.span as usize];
        if s.extra == u32::MAX {
            run.extras.push(Extra::default());
            s.extra = run.extras.len() as u32 - 1;
        }
        run.extras[s.extra as usize].links.push(target);
    }

    fn late_correlation(&mut self, thread: usize, value: u64) {
        match self.last[thread] {
            Last::Span(at) => self.b.run.lanes[at.lane as usize].spans[at.span as usize].value = value,
            Last::Received(k) => self.b.run.received[k].value = value,
            Last::None => {}
        }
    }

    fn calibration(&mut self, calibration: Calibration) {
        self.cal = Some(calibration);
    }

    fn finish(&mut self, end: &FileEnd) {
        self.convert(end.complete);
    }
}

impl FileSink<'_> {
    /// The file is read (`complete`: to its clean end): its ticks become times, every one on
    /// its last calibration.
    fn convert(&mut self, complete: bool) {
        if std::mem::replace(&mut self.converted, true) {
            return;
        }
        let Some(cal) = self.cal else { return };
        let c = cal.converter();
        for lane in &mut self.b.run.lanes[self.first_lane..] {
            for s in &mut lane.spans {
                (s.start_ns, s.end_ns) = (c.to_unix_ns(s.start_ns), c.to_unix_ns(s.end_ns));
            }
            for e in &mut lane.events {
                e.1 = c.to_unix_ns(e.1);
            }
        }
        let facts = &mut self.b.run.processes[self.process];
        (facts.complete, facts.last_ns) = (complete, c.to_unix_ns(self.last_ticks));
    }
}

/// Reads `paths` into the builder, one file after the other; the warnings of the reading.
pub(super) fn read_files<P: AsRef<Path>>(b: &mut Builder, paths: &[P]) -> Result<Vec<Warning>, Error> {
    let mut warnings = Vec::new();
    for path in paths {
        let mut sink = FileSink {
            b: &mut *b,
            process: 0,
            sites: Vec::new(),
            lanes: Vec::new(),
            stacks: Vec::new(),
            last: Vec::new(),
            cal: None,
            first_lane: 0,
            last_ticks: 0,
            converted: false,
        };
        warnings.extend(decode_path(path.as_ref(), &mut sink)?);
        // A file cut short may end without its end being told.
        sink.convert(false);
    }
    Ok(warnings)
}
