//! Reading a run into lanes: from files as a stream of records (`stream.rs`), or from a decoded
//! model, by the same rules. Names are numbered once for all files; what each
//! callsite gives (its name's number, whether it is an MPI call, a send, a collective, a receive
//! event, where its fields are) is learnt once per callsite.

use std::{collections::HashMap, sync::Arc};

use super::{rank_of, At, Extra, Lane, ProcessFacts, Received, Run, Span, COLLECTIVE, MPI, NO_RANK, SEND};
use crate::{
    decode::stream::Header,
    model::{Callsite, Trace, Value},
};

/// The module of `waffle-mpi`'s callsites.
const MPI_MODULE: &str = "waffle_mpi";

/// The fields naming another rank that the checks read, in this order.
const NAMING: [&str; 4] = ["peer", "root", "dest", "target"];

/// What a callsite gives the lanes.
#[derive(Clone, Copy, Default)]
pub(crate) struct Site {
    pub(crate) name: u32,
    pub(crate) kind: u8,
    /// An event whose key is `mpi.message<`: a received message.
    pub(crate) received: bool,
    pub(crate) request: Option<usize>,
    pub(crate) requests: Option<usize>,
    pub(crate) step: Option<usize>,
    pub(crate) bytes: Option<usize>,
    /// The positions of [`NAMING`]'s fields (`root` is also the span's root).
    pub(crate) naming: [Option<usize>; 4],
    /// A received message's `peer`: the rank it came from.
    pub(crate) from: Option<usize>,
}

/// One file's callsites as the builder learnt them, by their index in the file: each callsite
/// is learnt once however many items it has.
#[derive(Default)]
pub(crate) struct Sites(Vec<Option<Site>>);

impl Sites {
    /// What callsite `cs`, numbered `index` in its file, gives.
    pub(crate) fn get(&mut self, b: &mut Builder, index: u32, cs: &Callsite) -> Site {
        let k = index as usize;
        if self.0.len() <= k {
            self.0.resize(k + 1, None);
        }
        *self.0[k].get_or_insert_with(|| b.site(cs))
    }
}

/// The fields of one item that the lanes keep.
#[derive(Default)]
pub(crate) struct Got {
    pub(crate) request: u64,
    pub(crate) root: i64,
    pub(crate) requests: Vec<u64>,
    pub(crate) step: Option<i64>,
    pub(crate) bytes: u64,
    pub(crate) named: [Option<i64>; 4],
    /// The rank a received message came from.
    pub(crate) from: Option<i64>,
}

impl Site {
    /// Whether it is an MPI call that names other ranks (the whole-run checks read them).
    pub(crate) fn names_ranks(&self) -> bool {
        self.naming.iter().any(Option::is_some)
    }

    /// Whether the lanes keep any of its items' field values (else they are stepped over): a
    /// request, the requests a Wait lists, a step, the ranks a call names, and what a received
    /// message's event says.
    pub(crate) fn has_fields(&self) -> bool {
        let kept = [self.request, self.requests, self.step];
        self.received || self.names_ranks() || kept.iter().any(Option::is_some)
    }

    /// Reads the fields through `int` and `text` (by position).
    pub(crate) fn read(
        &self,
        int: impl Fn(usize) -> Option<i64>,
        text: impl Fn(usize) -> Option<String>,
    ) -> Got {
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
            from: self.from.and_then(&int),
        }
    }
}

/// The run being built.
pub(crate) struct Builder {
    pub(crate) run: Run,
    /// The receive events, until messages are joined.
    pub(crate) received: Vec<Received>,
    names: HashMap<String, u32>,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        let run = Run {
            processes: Vec::new(),
            ranks: Vec::new(),
            names: Vec::new(),
            extras: Vec::new(),
            lanes: Vec::new(),
            messages: Vec::new(),
            collectives: Vec::new(),
            nonblocking: Vec::new(),
            notes: Vec::new(),
        };
        Builder { run, received: Vec::new(), names: HashMap::new() }
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

    pub(crate) fn site(&mut self, cs: &Callsite) -> Site {
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
            from: if key == "mpi.message<" { at("peer") } else { None },
        }
    }

    pub(crate) fn process(&mut self, source: &str, header: &Header) -> usize {
        let k = self.run.processes.len();
        self.run.ranks.push(rank_of(k, header));
        self.run.processes.push(ProcessFacts {
            source: source.to_owned(),
            header: header.clone(),
            complete: false,
            last_ns: 0,
            times: None,
            named: Vec::new(),
        });
        k
    }

    pub(crate) fn lane(&mut self, process: usize, thread: usize) -> u32 {
        self.run.lanes.push(Lane {
            process,
            thread,
            spans: Vec::new(),
            parent: Vec::new(),
            events: Vec::new(),
        });
        self.run.lanes.len() as u32 - 1
    }

    /// The ranks a call of process `p` names, the first time each is named.
    pub(crate) fn named(&mut self, p: usize, site: &Site, got: &Got) {
        let facts = &mut self.run.processes[p];
        for (k, r) in got.named.iter().enumerate() {
            if let Some(r) = r.filter(|&r| r >= 0 && !facts.named.iter().any(|n| n.0 == r)) {
                facts.named.push((r, site.name, NAMING[k]));
            }
        }
    }

    /// A span begins on `lane` at `ts` (ticks while a file is read).
    pub(crate) fn span(
        &mut self,
        lane: u32,
        site: &Site,
        item: (u64, u64, Option<u64>, Option<u32>),
        got: Got,
        links: &[u64],
    ) -> At {
        let (id, ts, value, parent) = item;
        self.named(self.run.lanes[lane as usize].process, site, &got);
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
    pub(crate) fn finish(mut self) -> Run {
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
            for r in self.received.iter_mut().filter(|r| r.at.lane == l as u32) {
                r.at.span = place[r.at.span as usize];
            }
        }
        self.run.join(&self.received);
        self.run
    }

    /// `trace`'s processes, by the same rules as files.
    pub(crate) fn from_trace(trace: &Trace) -> Run {
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
                    b.received.push(Received { at, value, request: got.request });
                }
            }
            let facts = &mut b.run.processes[p];
            (facts.complete, facts.last_ns) = (process.complete, trace.last_ns(p));
        }
        b.finish()
    }
}

pub(crate) fn int(v: Option<&Value>) -> Option<i64> {
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
