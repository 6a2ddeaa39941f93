//! The trace as one flat list of spans, with ids, parents and causes resolved: what the
//! span-list formats are written from (Zipkin, and Jaeger, which uses this module too).
//!
//! The rules both formats share:
//! - **Times** are whole microseconds since the Unix epoch, floored. A span's duration is its
//!   floored end minus its floored start (so a child never pokes out of its parent), and may
//!   be 0; each format applies its own minimum.
//! - **Ids.** A span or event keeps its id. A placeholder (id 0: a span whose begin record was
//!   dropped) and an item repeating an id already used earlier in the trace get fresh ids,
//!   counting up from `ffffffff00000001` (ids of the last stream of the last process salt,
//!   which no real run reaches) and skipping any id the trace uses; the same trace always gets
//!   the same ids. The decoder leaves the children of a placeholder without a parent; here they
//!   get it back, spans by nesting depth and events by time.
//! - **Events.** An event is a log (Jaeger) or annotation (Zipkin) of its parent span when that
//!   span is in the trace and the event's time falls within it. Any other event becomes a span
//!   of its own, zero-length and marked as an event, the child of its parent if that is in the
//!   trace. So every log lies within its span, and so within the trace.
//! - **Causes.** A link names a span or an event; it resolves to the span that shows it: the
//!   span itself, the event's own span, or the span the event is a log of. Links to ids that
//!   are not in the trace are counted.
//! - **Correlation.** Each member of a correlation group but the first follows the member
//!   before it in time.
//! - **Trace id.** One decode is one trace: the trace id of the first process that recorded
//!   one. Processes recorded under another id keep theirs as a `waffle.trace_id` tag. When no
//!   process has one, an id is derived from the processes' pids and first times, so the same
//!   files always give the same id, never zero.

use std::collections::{HashMap, HashSet};

use crate::model::{Callsite, Item, ItemRef, Thread, Trace, Value};

/// Fresh ids count up from here.
const FRESH_ID_BASE: u64 = 0xffff_ffff_0000_0000;
/// The largest integer a JavaScript number (and so a JSON reader in a browser) holds exactly.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A trace flattened into spans.
pub struct Flat<'t> {
    /// The trace id every span is written under.
    pub trace_id: u128,
    /// Every span: the model's spans in trace order, then events that are spans of their own.
    pub spans: Vec<FlatSpan<'t>>,
}

/// One span as the span-list formats write it.
pub struct FlatSpan<'t> {
    /// Index of its process in [`Trace::processes`].
    pub process: usize,
    /// Index of its thread in the process.
    pub thread: usize,
    /// Its id, unique over the output.
    pub id: u64,
    /// Name and field names.
    pub callsite: &'t Callsite,
    /// Field values, in the callsite's order.
    pub fields: &'t [Value],
    /// Start, µs since the Unix epoch.
    pub start_us: u64,
    /// Length in µs (may be 0).
    pub duration_us: u64,
    /// Its parent, when that is in the output.
    pub parent: Option<u64>,
    /// Its parent's id, when the parent is not in the trace.
    pub unresolved_parent: Option<u64>,
    /// The ids its `caused_by` names, as recorded.
    pub caused_by: &'t [u64],
    /// How many of them are not in the trace.
    pub unresolved_links: u64,
    /// The spans it follows from: those showing its causes, then its correlation peer before
    /// it; no repeats, never itself.
    pub follows: Vec<u64>,
    /// `key=value` of its correlation.
    pub correlation: Option<String>,
    /// Whether its end was never recorded.
    pub unfinished: bool,
    /// Whether it stands for an event (zero-length).
    pub event: bool,
    /// The events shown on it, in time order.
    pub logs: Vec<Log<'t>>,
}

impl<'t> FlatSpan<'t> {
    /// The span's (or event's) name.
    pub fn name(&self) -> &'t str {
        &self.callsite.name
    }

    /// Field `(name, value)` pairs.
    pub fn fields(&self) -> impl Iterator<Item = (&'t str, &'t Value)> {
        field_pairs(self.callsite, self.fields)
    }

    /// Whether the time `ts_us` lies within the span.
    fn holds(&self, ts_us: u64) -> bool {
        (self.start_us..=self.start_us + self.duration_us).contains(&ts_us)
    }
}

/// An event shown on a span.
pub struct Log<'t> {
    /// The event's id.
    pub id: u64,
    /// When, µs since the Unix epoch.
    pub ts_us: u64,
    /// Name and field names.
    pub callsite: &'t Callsite,
    /// Field values, in the callsite's order.
    pub fields: &'t [Value],
    /// The ids its `caused_by` names.
    pub caused_by: &'t [u64],
    /// `key=value` of its correlation.
    pub correlation: Option<String>,
    /// Whether a link elsewhere names it (then its id is shown, so the link can be followed).
    pub is_cause: bool,
}

impl<'t> Log<'t> {
    /// The event's name.
    pub fn name(&self) -> &'t str {
        &self.callsite.name
    }

    /// Field `(name, value)` pairs.
    pub fn fields(&self) -> impl Iterator<Item = (&'t str, &'t Value)> {
        field_pairs(self.callsite, self.fields)
    }
}

fn field_pairs<'t>(
    callsite: &'t Callsite,
    fields: &'t [Value],
) -> impl Iterator<Item = (&'t str, &'t Value)> {
    callsite.fields.iter().map(|(n, _)| n.as_str()).zip(fields)
}

/// A span or event of the model: (process, thread, index).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Loc {
    Span(usize, usize, usize),
    Event(usize, usize, usize),
}

/// Where an event went: a log of the span at this index, or a span of its own at this index.
#[derive(Clone, Copy)]
enum Placed {
    Log(usize),
    Own(usize),
}

/// Flattens `trace` (see the module docs for the rules).
pub fn flatten(trace: &Trace) -> Flat<'_> {
    let trace_id = trace_id(trace);
    // Ids: the first holder of an id keeps it; placeholders and repeats get fresh ones.
    let mut holder: HashMap<u64, Loc> = HashMap::new();
    let mut causes: HashSet<u64> = HashSet::new();
    for (p, process) in trace.processes.iter().enumerate() {
        for (t, thread) in process.threads.iter().enumerate() {
            for (i, s) in thread.spans.iter().enumerate().filter(|(_, s)| s.id != 0) {
                holder.entry(s.id).or_insert(Loc::Span(p, t, i));
                causes.extend(&s.links);
            }
            for (i, e) in thread.events.iter().enumerate().filter(|(_, e)| e.id != 0) {
                holder.entry(e.id).or_insert(Loc::Event(p, t, i));
                causes.extend(&e.links);
            }
        }
    }
    let mut next_fresh = FRESH_ID_BASE;
    let mut fresh = || loop {
        next_fresh += 1;
        if !holder.contains_key(&next_fresh) {
            break next_fresh;
        }
    };
    let mut own_id = |id: u64, at: Loc| if holder.get(&id) == Some(&at) { id } else { fresh() };

    // The model's spans, in trace order; `first[p][t]` is where a thread's spans start.
    let mut spans = Vec::new();
    let mut origin = Vec::new(); // what each output span stands for
    let mut first = Vec::new();
    // Parents restored to the children of placeholders, by output index.
    let mut restored: HashMap<usize, usize> = HashMap::new();
    for (p, process) in trace.processes.iter().enumerate() {
        let mut starts = Vec::new();
        for (t, thread) in process.threads.iter().enumerate() {
            let base = spans.len();
            starts.push(base);
            let mut open: Vec<usize> = Vec::new(); // span index by depth
            for (i, s) in thread.spans.iter().enumerate() {
                let depth = s.depth as usize;
                open.truncate(depth);
                if s.parent.is_none() && depth > 0 && open.len() == depth {
                    if let Some(&enclosing) = open.last().filter(|&&e| thread.spans[e].id == 0) {
                        restored.insert(base + i, base + enclosing);
                    }
                }
                if open.len() == depth {
                    open.push(i);
                }
                let (start_us, end_us) = (us(s.start_ns), us(s.end_ns));
                origin.push(Loc::Span(p, t, i));
                spans.push(FlatSpan {
                    process: p,
                    thread: t,
                    id: own_id(s.id, Loc::Span(p, t, i)),
                    callsite: &s.callsite,
                    fields: &s.fields,
                    start_us,
                    duration_us: end_us.saturating_sub(start_us),
                    parent: None,
                    unresolved_parent: None,
                    caused_by: &s.links,
                    unresolved_links: 0,
                    follows: Vec::new(),
                    correlation: correlation(&s.callsite, s.correlation),
                    unfinished: !s.ended,
                    event: false,
                    logs: Vec::new(),
                });
            }
        }
        first.push(starts);
    }
    let span_at = |loc: Loc| match loc {
        Loc::Span(p, t, i) => Some(first[p][t] + i),
        Loc::Event(..) => None,
    };

    // Events: logs of their parent span when it holds them, spans of their own otherwise.
    let mut placed: HashMap<Loc, Placed> = HashMap::new();
    for (p, process) in trace.processes.iter().enumerate() {
        for (t, thread) in process.threads.iter().enumerate() {
            let placeholders: Vec<usize> =
                thread.spans.iter().enumerate().filter(|(_, s)| s.id == 0).map(|(i, _)| i).collect();
            for (i, e) in thread.events.iter().enumerate() {
                let host = match e.parent {
                    Some(parent) => holder.get(&parent).copied().and_then(span_at),
                    None => enclosing_placeholder(thread, &placeholders, e.ts_ns).map(|s| first[p][t] + s),
                };
                let ts_us = us(e.ts_ns);
                let at = Loc::Event(p, t, i);
                let correlation = correlation(&e.callsite, e.correlation);
                match host {
                    Some(h) if spans[h].holds(ts_us) => {
                        spans[h].logs.push(Log {
                            id: e.id,
                            ts_us,
                            callsite: &e.callsite,
                            fields: &e.fields,
                            caused_by: &e.links,
                            correlation,
                            is_cause: causes.contains(&e.id),
                        });
                        placed.insert(at, Placed::Log(h));
                    }
                    _ => {
                        if let (Some(h), None) = (host, e.parent) {
                            restored.insert(spans.len(), h);
                        }
                        placed.insert(at, Placed::Own(spans.len()));
                        origin.push(at);
                        spans.push(FlatSpan {
                            process: p,
                            thread: t,
                            id: own_id(e.id, at),
                            callsite: &e.callsite,
                            fields: &e.fields,
                            start_us: ts_us,
                            duration_us: 0,
                            parent: None,
                            unresolved_parent: None,
                            caused_by: &e.links,
                            unresolved_links: 0,
                            follows: Vec::new(),
                            correlation,
                            unfinished: false,
                            event: true,
                            logs: Vec::new(),
                        });
                    }
                }
            }
        }
    }
    for s in &mut spans {
        s.logs.sort_by_key(|l| l.ts_us);
    }

    // The output span that shows a model id.
    let target = |id: u64| -> Option<usize> {
        match *holder.get(&id)? {
            loc @ Loc::Span(..) => span_at(loc),
            loc @ Loc::Event(..) => match placed.get(&loc)? {
                Placed::Log(h) | Placed::Own(h) => Some(*h),
            },
        }
    };
    let ids: Vec<u64> = spans.iter().map(|s| s.id).collect();
    for (k, &at) in origin.iter().enumerate() {
        let (parent, links) = match at {
            Loc::Span(p, t, i) => {
                let s = &trace.processes[p].threads[t].spans[i];
                (s.parent, s.links.as_slice())
            }
            Loc::Event(p, t, i) => {
                let e = &trace.processes[p].threads[t].events[i];
                (e.parent, e.links.as_slice())
            }
        };
        let s = &mut spans[k];
        if let Some(&r) = restored.get(&k) {
            s.parent = Some(ids[r]);
        } else if let Some(parent) = parent {
            match target(parent) {
                Some(r) if r != k => s.parent = Some(ids[r]),
                Some(_) => {}
                None => s.unresolved_parent = Some(parent),
            }
        }
        for &link in links {
            match target(link) {
                Some(r) if r != k && !s.follows.contains(&ids[r]) => s.follows.push(ids[r]),
                Some(_) => {}
                None => s.unresolved_links += 1,
            }
        }
    }
    // Correlation: each member that is a span follows the span showing the member before it.
    for group in trace.correlations() {
        let at = |r: ItemRef| -> Option<Placed> {
            match r.item {
                Item::Span(i) => span_at(Loc::Span(r.process, r.thread, i)).map(Placed::Own),
                Item::Event(i) => placed.get(&Loc::Event(r.process, r.thread, i)).copied(),
            }
        };
        for pair in group.members.windows(2) {
            let (Some(Placed::Own(before) | Placed::Log(before)), Some(Placed::Own(k))) =
                (at(pair[0]), at(pair[1]))
            else {
                continue;
            };
            let peer = ids[before];
            if before != k && !spans[k].follows.contains(&peer) {
                spans[k].follows.push(peer);
            }
        }
    }
    Flat { trace_id, spans }
}

/// Nanoseconds to whole microseconds, floored.
fn us(ns: u64) -> u64 {
    ns / 1000
}

fn correlation(callsite: &Callsite, value: Option<u64>) -> Option<String> {
    value.filter(|_| !callsite.correlate.is_empty()).map(|v| format!("{}={v}", callsite.correlate))
}

/// The innermost of a thread's placeholder spans (by index) open at `ts_ns`: where an event
/// recorded inside a span whose begin was lost belongs.
fn enclosing_placeholder(thread: &Thread, placeholders: &[usize], ts_ns: u64) -> Option<usize> {
    placeholders
        .iter()
        .map(|&i| (i, &thread.spans[i]))
        .filter(|(_, s)| s.start_ns <= ts_ns && ts_ns <= s.end_ns)
        .max_by_key(|(i, s)| (s.depth, *i))
        .map(|(i, _)| i)
}

/// The trace id of the first process that has one; else one derived from the processes.
fn trace_id(trace: &Trace) -> u128 {
    if let Some(id) = trace.processes.iter().map(|p| p.trace_id).find(|&id| id != 0) {
        return id;
    }
    let mut h = 0x5741_4646_u64; // "WAFF"
    for p in &trace.processes {
        let earliest = p.threads.iter().flat_map(|t| t.spans.first().map(|s| s.start_ns)).min().unwrap_or(0);
        h = splitmix(h ^ u64::from(p.pid));
        h = splitmix(h ^ earliest);
    }
    ((u128::from(splitmix(h)) << 64) | u128::from(splitmix(!h))).max(1)
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
