//! What a report is made of, read from files without a model.
//!
//! The first reading ([`Ends`]) keeps each thread's open spans (their values copied into
//! reused slots), the spans that never ended, the communicators' ranks and the collectives
//! begun, and the values of every message sent and received (8 bytes each, sorted when all
//! files are read). Whether a receive holds its message is marked on its slot while it is
//! open (or, for a message received on another thread inside it, by id). A second reading
//! (`details.rs`) comes only if an open call waits on requests or a send went unreceived: it
//! keeps the calls that started those requests, which of them completed, and those sends.
//!
//! A correlation value recorded after other records belongs to the latest item of its thread
//! (as in the model), so an item's value counts once its thread has moved on to the next.

use super::{
    details::Details,
    rank_of,
    sites::{span_index, value_at, Roles, Sites},
    waits::{self, Call, Facts},
    Gathered, OpenSpan, ProcessEnd, ThreadState,
};
use crate::{
    decode::{run::decode_path, stream::FileEnd, Fields, Header, Item, Sink},
    model::{Callsite, Item as Kind, ItemRef},
    reader::Warning,
    Error,
};
use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::Arc,
};
use waffle_wire::Calibration;

mod sink;

/// The first reading, then the second if needed.
pub(super) fn gather<P: AsRef<Path>>(paths: &[P]) -> Result<(Gathered, Vec<Warning>), Error> {
    let mut acc = Across::default();
    let (mut processes, mut threads, mut open, mut warnings) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (p, path) in paths.iter().enumerate() {
        let mut ends = Ends::new(p, &mut acc);
        warnings.extend(decode_path(path.as_ref(), &mut ends)?);
        let (process, t, o) = ends.done();
        processes.push(process);
        threads.extend(t);
        open.extend(o);
    }
    acc.effects.sort_unstable();
    acc.effects.dedup();
    let mut facts = Facts {
        ranks: processes.iter().map(|p: &ProcessEnd| p.rank).collect(),
        files: processes.iter().map(|p| p.file.clone()).collect(),
        members: std::mem::take(&mut acc.members),
        entered: std::mem::take(&mut acc.entered),
        received: HashSet::new(),
        holds_message: HashSet::new(),
        effects: std::mem::take(&mut acc.effects),
        starts: HashMap::new(),
    };
    let open: Vec<Call> = open
        .into_iter()
        .map(|(call, holds)| {
            if holds || acc.foreign.contains(&call.id) {
                facts.holds_message.insert(call.id);
            }
            call
        })
        .collect();
    let wanted = waits::wanted(&open);
    let mut sent = std::mem::take(&mut acc.sends);
    sent.sort_unstable();
    sent.dedup();
    let unmatched: HashSet<u64> =
        sent.into_iter().filter(|v| facts.effects.binary_search(v).is_err()).collect();
    let mut sends = Vec::new();
    if !wanted.is_empty() || !unmatched.is_empty() || acc.uncorrelated {
        for (p, path) in paths.iter().enumerate() {
            let requests = wanted.iter().filter(|w| w.0 == p).map(|w| w.1).collect();
            let mut details = Details::new(p, requests, &unmatched, acc.relabelled);
            decode_path(path.as_ref(), &mut details)?;
            let (starts, received, s) = details.done();
            facts.starts.extend(starts.into_iter().map(|(r, c)| ((p, r), c)));
            facts.received.extend(received.into_iter().map(|r| (p, r)));
            sends.extend(s);
        }
    }
    Ok((Gathered { processes, threads, open, facts, sends }, warnings))
}

/// What the first reading learns across files.
#[derive(Default)]
struct Across {
    members: HashMap<u64, std::collections::BTreeSet<i64>>,
    entered: HashSet<(i64, u64)>,
    effects: Vec<u64>,
    sends: Vec<u64>,
    /// Whether a send had no value (it is unmatched).
    uncorrelated: bool,
    /// Whether a send's value recorded late replaced the one it began with: the second
    /// reading cannot then tell a send by its value at its begin.
    relabelled: bool,
    /// Spans holding a message received on a thread they were not open on, by id.
    foreign: HashSet<u64>,
}

/// An open span.
#[derive(Default)]
struct Slot {
    id: u64,
    span: usize,
    depth: u32,
    start: u64,
    callsite: Option<Arc<Callsite>>,
    fields: Fields,
    correlation: Option<u64>,
    /// Whether a message was received inside it.
    holds: bool,
}

/// A span that never ended.
struct Unended {
    call: Call,
    depth: u32,
    start: u64,
    holds: bool,
}

/// A thread's latest item with an id, until the next: what a late correlation is for.
#[derive(Clone, Copy)]
enum Latest {
    Span { slot: Option<u32>, unended: Option<usize>, roles: Roles, correlation: Option<u64> },
    Event { roles: Roles, correlation: Option<u64> },
}

#[derive(Default)]
struct EndsThread {
    tid: u64,
    name: String,
    spans: usize,
    /// Its open spans not detached, innermost last.
    stack: Vec<u32>,
    latest: Option<Latest>,
    unended: Vec<Unended>,
}

/// The first reading's sink, for one file.
struct Ends<'a> {
    process: usize,
    across: &'a mut Across,
    source: String,
    header: Header,
    rank: Option<i64>,
    cal: Option<Calibration>,
    clocked: bool,
    last_ticks: u64,
    complete: bool,
    threads: Vec<EndsThread>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    sites: Sites,
}

impl<'a> Ends<'a> {
    fn new(process: usize, across: &'a mut Across) -> Self {
        Ends {
            process,
            across,
            source: String::new(),
            header: Header::default(),
            rank: None,
            cal: None,
            clocked: false,
            last_ticks: 0,
            complete: false,
            threads: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            sites: Sites::default(),
        }
    }

    /// The thread's latest item is complete: its value counts.
    fn commit(&mut self, t: usize) {
        match self.threads[t].latest.take() {
            Some(Latest::Span { roles, correlation, .. }) => self.count_span(roles, correlation),
            Some(Latest::Event { roles, correlation: Some(v) }) if roles.effect => {
                self.across.effects.push(v)
            }
            _ => {}
        }
    }

    /// A span's value, final.
    fn count_span(&mut self, roles: Roles, correlation: Option<u64>) {
        if roles.send {
            match correlation {
                Some(v) => self.across.sends.push(v),
                None => self.across.uncorrelated = true,
            }
        }
        if let (true, Some(rank), Some(v)) = (roles.collective, self.rank, correlation) {
            self.across.entered.insert((rank, v));
        }
    }

    fn member(&mut self, roles: Roles, item: &Item<'_>) {
        if let (Some(rank), Some(comm)) = (self.rank, value_at(item.fields, roles.comm)) {
            self.across.members.entry(comm).or_default().insert(rank);
        }
    }

    fn end(&mut self, t: usize, slot: u32, ticks: u64, ended: bool) {
        self.last_ticks = self.last_ticks.max(ticks);
        let th = &mut self.threads[t];
        if let Some(pos) = th.stack.iter().rposition(|&s| s == slot) {
            th.stack.remove(pos);
        }
        let s = std::mem::take(&mut self.slots[slot as usize]);
        if !ended {
            let call = Call {
                at: ItemRef { process: self.process, thread: t, item: Kind::Span(s.span) },
                id: s.id,
                callsite: s.callsite.expect("set at its begin"),
                values: s.fields.to_values(),
                correlation: s.correlation,
                ended: false,
            };
            th.unended.push(Unended { call, depth: s.depth, start: s.start, holds: s.holds });
            if let Some(Latest::Span { slot: latest @ Some(_), unended, .. }) = th.latest.as_mut() {
                if *latest == Some(slot) {
                    (*latest, *unended) = (None, Some(th.unended.len() - 1));
                }
            }
        } else if let Some(Latest::Span { slot: latest, .. }) = th.latest.as_mut() {
            if *latest == Some(slot) {
                *latest = None;
            }
        }
        let mut fields = s.fields;
        fields.clear();
        self.slots[slot as usize].fields = fields;
        self.free.push(slot);
    }

    /// The process, its threads and the spans that never ended (with whether each holds a
    /// message), in thread and begin order.
    fn done(self) -> (ProcessEnd, Vec<ThreadState>, Vec<(Call, bool)>) {
        let cal = self.cal.unwrap_or(self.header.calibration);
        let measured = if self.clocked { cal.anchor_unix_ns.saturating_add(cal.ns) } else { 0 };
        let last_ns = cal.to_unix_ns(self.last_ticks).max(measured);
        let process = ProcessEnd {
            rank: self.rank,
            file: self.source.clone(),
            pid: self.header.pid,
            last_ns,
            complete: self.complete,
        };
        let (mut threads, mut open) = (Vec::new(), Vec::new());
        for th in self.threads {
            let mut unended = th.unended;
            unended.sort_by_key(|u| span_index(&u.call));
            let mut inside: Vec<(u32, u64, OpenSpan)> = unended
                .iter()
                .map(|u| {
                    let start = cal.to_unix_ns(u.start);
                    let c = &u.call;
                    let names = c.callsite.field_names().map(str::to_owned);
                    let fields = names.zip(c.values.iter().cloned()).collect();
                    let o = OpenSpan {
                        at: c.at,
                        id: c.id,
                        name: c.callsite.name.to_string(),
                        for_ns: last_ns.saturating_sub(start),
                        fields,
                    };
                    (u.depth, start, o)
                })
                .collect();
            inside.sort_by_key(|o| std::cmp::Reverse((o.0, o.1)));
            threads.push(ThreadState {
                process: self.process,
                rank: self.rank,
                file: self.source.clone(),
                name: th.name,
                tid: th.tid,
                open: inside.into_iter().map(|(_, _, o)| o).collect(),
            });
            open.extend(unended.into_iter().map(|u| (u.call, u.holds)));
        }
        (process, threads, open)
    }
}
