//! The second reading of `hang` on files ([`Details`]), when an open call waits on requests or
//! a send went unreceived: the calls that started those requests, which of them completed, and
//! those sends, kept only while they may be wanted.

use super::{
    sites::{span_index, value_at, Sites},
    waits::Call,
};
use crate::{
    decode::{stream::FileEnd, Header, Item, Sink},
    model::{Item as Kind, ItemRef, Value},
};
use std::collections::{HashMap, HashSet};

/// A call the second reading keeps, while it may be wanted: a send until its thread moves on
/// (kept then if its message went unreceived), a request's start until a later start of the
/// same request.
struct Tracked {
    call: Call,
    /// A send not yet known to be received.
    send: bool,
    /// The latest start of its request so far.
    start: bool,
}

/// The second reading's sink, for one file: the calls that started `requests`, which of
/// those completed as receives, and the sends whose values are in `unmatched` or that have
/// none. It keeps only those, and the calls of each thread's latest item.
pub(super) struct Details<'a> {
    process: usize,
    requests: HashSet<u64>,
    unmatched: &'a HashSet<u64>,
    /// Whether every send is a candidate whatever its value at its begin (a value recorded
    /// late replaced one a send began with, see [`Across::relabelled`]).
    every_send: bool,
    sites: Sites,
    /// Per thread: spans begun, and the key of its latest item if it is tracked.
    threads: Vec<(usize, Option<u64>)>,
    /// By key (from 1; 0 is an untracked span's handle).
    tracked: HashMap<u64, Tracked>,
    next: u64,
    /// By request: (thread, span index, key) of the last span that started it.
    starts: HashMap<u64, (usize, usize, u64)>,
    received: HashSet<u64>,
    /// The keys of the sends kept.
    sends: Vec<u64>,
}

impl<'a> Details<'a> {
    pub(super) fn new(
        process: usize,
        requests: HashSet<u64>,
        unmatched: &'a HashSet<u64>,
        every_send: bool,
    ) -> Self {
        Details {
            process,
            requests,
            unmatched,
            every_send,
            sites: Sites::default(),
            threads: Vec::new(),
            tracked: HashMap::new(),
            next: 1,
            starts: HashMap::new(),
            received: HashSet::new(),
            sends: Vec::new(),
        }
    }

    /// Whether a send with this value may be unmatched.
    fn candidate(&self, correlation: Option<u64>) -> bool {
        correlation.is_none_or(|v| self.unmatched.contains(&v))
    }

    /// Forgets `key` if nothing wants it any more.
    fn release(&mut self, key: u64) {
        if self.tracked.get(&key).is_some_and(|c| !c.send && !c.start) {
            self.tracked.remove(&key);
        }
    }

    /// The thread's latest item is complete: a send is kept if its value is unmatched.
    fn commit(&mut self, t: usize) {
        let Some(key) = self.threads[t].1.take() else { return };
        self.settle(key);
    }

    fn settle(&mut self, key: u64) {
        let Some(c) = self.tracked.get_mut(&key) else { return };
        if c.send {
            let kept = c.call.correlation.is_none_or(|v| self.unmatched.contains(&v));
            if kept {
                self.sends.push(key);
            } else {
                c.send = false;
                self.release(key);
            }
        }
    }

    /// The starts of the requests by number, the requests received, and the sends kept.
    pub(super) fn done(mut self) -> (HashMap<u64, Call>, HashSet<u64>, Vec<Call>) {
        let starts = self.starts.iter().map(|(&r, &(_, _, k))| (r, self.tracked[&k].call.clone())).collect();
        let mut sends: Vec<Call> = Vec::with_capacity(self.sends.len());
        for k in &self.sends {
            sends.extend(self.tracked.remove(k).map(|t| t.call));
        }
        sends.sort_by_key(|c| (c.at.thread, span_index(c)));
        (starts, self.received, sends)
    }
}

impl Sink for Details<'_> {
    /// The tracked call's key, or 0.
    type Span = u64;
    const TRACK_RECORDS: bool = true;

    fn process(&mut self, _source: &str, _header: &Header) {}

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.threads.push((0, None));
    }

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    fn span_begin(&mut self, t: usize, item: &Item<'_>) -> u64 {
        if item.id != 0 {
            self.commit(t);
        }
        let roles = self.sites.of(item);
        let span = self.threads[t].0;
        self.threads[t].0 += 1;
        let request = value_at(item.fields, roles.request).filter(|r| *r != 0 && self.requests.contains(r));
        let send = roles.send && (self.every_send || self.candidate(item.correlation));
        if !send && request.is_none() {
            return 0;
        }
        let call = Call {
            at: ItemRef { process: self.process, thread: t, item: Kind::Span(span) },
            id: item.id,
            callsite: item.callsite.clone(),
            values: item.fields.iter().map(|v| v.to_value()).collect::<Vec<Value>>(),
            correlation: item.correlation,
            ended: true,
        };
        let key = self.next;
        self.next += 1;
        self.tracked.insert(key, Tracked { call, send, start: request.is_some() });
        if let Some(r) = request {
            match self.starts.get(&r).copied() {
                Some((lt, ls, _)) if (t, span) < (lt, ls) => {
                    self.tracked.get_mut(&key).expect("just tracked").start = false;
                }
                previous => {
                    self.starts.insert(r, (t, span, key));
                    if let Some((_, _, old)) = previous {
                        self.tracked.get_mut(&old).expect("a start is tracked").start = false;
                        self.release(old);
                    }
                }
            }
        }
        if item.id != 0 {
            self.threads[t].1 = Some(key);
        } else {
            // A stand-in is no thread's latest item: nothing recorded later is its.
            self.settle(key);
        }
        self.release(key);
        key
    }

    fn event(&mut self, t: usize, item: &Item<'_>) {
        self.commit(t);
        let roles = self.sites.of(item);
        if roles.received {
            let request =
                value_at(item.fields, roles.request).filter(|r| *r != 0 && self.requests.contains(r));
            self.received.extend(request);
        }
    }

    fn span_end(&mut self, _t: usize, key: u64, _ticks: u64, ended: bool) {
        if let Some(c) = self.tracked.get_mut(&key) {
            c.call.ended = ended;
        }
    }

    fn detach(&mut self, _t: usize, _key: u64, _id: u64) {}

    fn detached_end(&mut self, t: usize, key: u64, ticks: u64, ended: bool) {
        self.span_end(t, key, ticks, ended);
    }

    fn late_correlation(&mut self, t: usize, value: u64) {
        if let Some(c) = self.threads[t].1.and_then(|k| self.tracked.get_mut(&k)) {
            c.call.correlation = Some(value);
        }
    }

    fn finish(&mut self, _end: &FileEnd) {
        for t in 0..self.threads.len() {
            self.commit(t);
        }
    }
}
