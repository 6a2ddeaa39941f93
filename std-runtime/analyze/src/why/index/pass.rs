//! The first reading of a file: a [`Sink`] that keeps, of the records, where each item is and
//! what `why` asks of every item at once (see the module docs of `index`). It steps over field
//! values but those of spans with a `rank` field and of tensors.

use super::{Corr, FileIndex, Interner, Mark, OrderKey, Read, Run, Site, ThreadIndex};
use crate::{
    correlation,
    decode::{resume::Checkpoint, FieldValue, Hand, Header, Item, Sink},
    matching::{self, RankField},
    model::{Callsite, Item as Kind, ItemRef, Track, Value},
};
use std::{
    collections::{BinaryHeap, HashSet},
    sync::Arc,
};
use waffle_wire::{reserved::tensor, Calibration};

/// A candidate symptom: time, file, thread, index among the thread's spans or events, id.
pub(super) type Candidate = (u64, u32, u32, u64, u64);

/// The symptom asked for by name: the `nth` (from 0) item of `name`, events before spans.
pub(super) struct ByName {
    pub(super) name: String,
    pub(super) nth: usize,
    /// The `nth + 1` earliest events and spans of the name (greatest on top), and how many.
    pub(super) events: (BinaryHeap<Candidate>, usize),
    pub(super) spans: (BinaryHeap<Candidate>, usize),
}

impl ByName {
    fn offer(&mut self, event: bool, c: Candidate) {
        let (heap, count) = if event { &mut self.events } else { &mut self.spans };
        *count += 1;
        if heap.len() <= self.nth {
            heap.push(c);
        } else if heap.peek().is_some_and(|top| c < *top) {
            heap.pop();
            heap.push(c);
        }
    }
}

/// What the first reading of every file adds to.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) names: Interner<String>,
    pub(super) groups: Interner<(String, bool)>,
    pub(super) runs: Vec<Run>,
    pub(super) corr: Vec<Corr>,
    /// Windows of the files read before this one.
    pub(super) windows: u32,
    pub(super) by_name: Option<ByName>,
    /// The first tensor with a NaN element so far: (time, file, thread, event index, id), if
    /// asked for.
    pub(super) first_nan: Option<Option<Candidate>>,
    /// Names of the items with an id, interned.
    pub(super) present: HashSet<u32>,
}

/// One thread's state in the first reading.
#[derive(Default)]
struct PassThread {
    /// Its current run, in `Shared::runs`.
    run: Option<usize>,
    /// Its latest item with an id: its correlation group key and window (a late correlation
    /// is its).
    latest: Option<(Option<u32>, u32)>,
    /// By callsite index: its order key + 1, for callsites without a `rank` field.
    keys: Vec<u32>,
}

/// The sink of the first reading of one file.
pub(super) struct Pass<'a> {
    pub(super) shared: &'a mut Shared,
    pub(super) file: FileIndex,
    number: u32,
    /// What times are compared with: the file's last calibration, found before (its
    /// header's when it has no CLOCK frame).
    clock: Option<Calibration>,
    cal: Calibration,
    /// The calibration the file turned out to end with.
    last_cal: Option<Calibration>,
    pub(super) earliest: Option<u64>,
    window: u32,
    window_corr: HashSet<(u32, u64)>,
    threads: Vec<PassThread>,
    tensors: Vec<bool>,
}

impl<'a> Pass<'a> {
    pub(super) fn new(
        shared: &'a mut Shared,
        file: FileIndex,
        number: u32,
        clock: Option<Calibration>,
    ) -> Self {
        Pass {
            shared,
            file,
            number,
            clock,
            cal: Header::default().calibration,
            last_cal: None,
            earliest: None,
            window: 0,
            window_corr: HashSet::new(),
            threads: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// The calibration times were compared with, if it is the one the file ends with (else
    /// the file must be read again with that one).
    pub(super) fn calibration(&self) -> Result<Calibration, Calibration> {
        match self.last_cal {
            Some(last) if last != self.cal => Err(last),
            _ => Ok(self.cal),
        }
    }

    /// A checkpoint: the next window begins.
    pub(super) fn checkpoint(&mut self, cp: Checkpoint<()>) {
        self.file.checkpoints.push(cp);
        self.window = self.file.checkpoints.len() as u32 - 1;
        self.window_corr.clear();
    }

    /// The site of callsite `index`, learnt on first sight.
    fn site(&mut self, index: u32, callsite: &Callsite) -> Site {
        let i = index as usize;
        if let Some(Some(site)) = self.file.sites.get(i) {
            return site.clone();
        }
        let site = site_of(&mut self.shared.names, &mut self.shared.groups, callsite);
        if self.file.sites.len() <= i {
            self.file.sites.resize(i + 1, None);
            self.tensors.resize(i + 1, false);
        }
        self.file.sites[i] = Some(site.clone());
        self.tensors[i] = callsite.field_index(tensor::HASH).is_some();
        site
    }

    fn item(&mut self, t: usize, item: &Item<'_>, span: bool) {
        self.earliest = Some(self.earliest.map_or(item.ticks, |e| e.min(item.ticks)));
        let site = self.site(item.callsite_index, item.callsite);
        let window = self.window;
        let th = &mut self.file.threads[t];
        if th.track {
            return self.whole(t, item, site);
        }
        if th.marks.last().is_none_or(|m| m.window != window) {
            th.marks.push(Mark { window, items: th.items, spans: th.spans, events: th.events });
        }
        let index = if span { &mut th.spans } else { &mut th.events };
        let at = *index;
        *index += 1;
        if item.id == 0 {
            return; // a stand-in: no id, not in the model's index
        }
        let ordinal = th.items;
        th.items += 1;
        let pt = &mut self.threads[t];
        match pt.run.map(|r| &mut self.shared.runs[r]) {
            Some(run) if run.first.wrapping_add(run.len) == item.id => run.len += 1,
            _ => {
                pt.run = Some(self.shared.runs.len());
                let run = Run { first: item.id, len: 1, file: self.number, thread: t as u32, ordinal };
                self.shared.runs.push(run);
            }
        }
        pt.latest = Some((site.group, window));
        self.shared.present.insert(site.name);
        if let (Some(key), Some(value)) = (site.group, item.correlation) {
            self.correlated(key, value, window);
        }
        if span && site.order {
            let key = self.order_key(t, item, &site);
            let k = &mut self.file.keys[key as usize];
            if k.marks.last().is_none_or(|m| m.0 != window) {
                k.marks.push((window, k.count));
            }
            k.count += 1;
        }
        self.candidate(t, item, span, at);
    }

    /// A device track's slice, kept whole.
    fn whole(&mut self, t: usize, item: &Item<'_>, site: Site) {
        let th = &mut self.file.threads[t];
        let at = ItemRef { process: self.number as usize, thread: t, item: Kind::Span(th.spans as usize) };
        th.spans += 1;
        let rank = match site.rank_at {
            Some(k) => RankField::of(item.fields.iter().nth(k)),
            None => RankField::None,
        };
        let index = self.file.whole.len() as u32;
        if site.order && item.id != 0 {
            let key = self.key(t, site.name, rank.clone());
            let k = &mut self.file.keys[key as usize];
            k.count += 1;
            k.whole.push(index);
        }
        if item.id != 0 {
            self.shared.present.insert(site.name);
        }
        self.file.whole.push(Read {
            id: item.id,
            at,
            callsite: item.callsite.clone(),
            ticks: item.ticks,
            parent: item.parent,
            links: item.links.to_vec(),
            correlation: item.correlation,
            rank,
            fields: Some(item.fields.iter().map(FieldValue::to_value).collect::<Vec<Value>>()),
        });
        if item.id != 0 {
            let at = match at.item {
                Kind::Span(i) | Kind::Event(i) => i as u64,
            };
            self.candidate(t, item, true, at);
        }
    }

    fn correlated(&mut self, key: u32, value: u64, window: u32) {
        if self.window_corr.insert((key, value)) || window != self.window {
            self.shared.corr.push(Corr { key, value, window: self.shared.windows + window });
        }
    }

    /// The order key of a span taking part.
    fn order_key(&mut self, t: usize, item: &Item<'_>, site: &Site) -> u32 {
        if let Some(k) = site.rank_at {
            let rank = RankField::of(item.fields.iter().nth(k));
            return self.key(t, site.name, rank);
        }
        let i = item.callsite_index as usize;
        if let Some(&k) = self.threads[t].keys.get(i).filter(|&&k| k != 0) {
            return k - 1;
        }
        let key = self.key(t, site.name, RankField::None);
        let keys = &mut self.threads[t].keys;
        if keys.len() <= i {
            keys.resize(i + 1, 0);
        }
        keys[i] = key + 1;
        key
    }

    fn key(&mut self, t: usize, name: u32, rank: RankField) -> u32 {
        let f = &mut self.file;
        *f.key_of.entry((t as u32, name, rank.clone())).or_insert_with(|| {
            let thread = t as u32;
            f.keys.push(OrderKey { thread, name, rank, count: 0, marks: Vec::new(), whole: Vec::new() });
            f.keys.len() as u32 - 1
        })
    }

    /// The item as a candidate symptom: by name, or as the first tensor with a NaN.
    fn candidate(&mut self, t: usize, item: &Item<'_>, span: bool, at: u64) {
        let c = || (self.cal.to_unix_ns(item.ticks), self.number, t as u32, at, item.id);
        if let Some(by) = self.shared.by_name.as_mut().filter(|b| item.callsite.name == b.name) {
            by.offer(!span, c());
        }
        if let Some(best) = self.shared.first_nan.as_mut().filter(|_| !span) {
            let tensor = self.tensors.get(item.callsite_index as usize).copied().unwrap_or(false);
            if tensor && best.is_none_or(|b| c() < b) && nan(item) > 0 {
                *best = Some(c());
            }
        }
    }
}

/// A tensor's NaN count, as `diff::first_nan` reads it.
fn nan(item: &Item<'_>) -> u64 {
    let names = item.callsite.field_names();
    let mut nan = 0;
    for (name, value) in names.zip(item.fields.iter()) {
        match (name, value) {
            (tensor::NAN, FieldValue::U64(n)) => nan = n,
            (tensor::NAN, FieldValue::I64(n)) => nan = n.max(0) as u64,
            _ => {}
        }
    }
    nan
}

/// What the index keeps of a callsite.
pub(super) fn site_of(
    names: &mut Interner<String>,
    groups: &mut Interner<(String, bool)>,
    cs: &Callsite,
) -> Site {
    let group = (!cs.correlate.is_empty()).then(|| {
        let (stem, role) = correlation::role(&cs.correlate);
        groups.intern((stem.to_owned(), role.directed()))
    });
    let order = matching::takes_part(cs);
    Site {
        name: names.intern(cs.name.to_string()),
        group,
        order,
        rank_at: if order { matching::rank_index(cs) } else { None },
    }
}

impl Sink for Pass<'_> {
    type Span = ();
    const FIELDS: bool = false;
    const TRACK_RECORDS: bool = true;

    fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        let site = self.site(index, callsite);
        if site.rank_at.is_some() || (self.tensors[index as usize] && self.shared.first_nan.is_some()) {
            Hand::Every
        } else {
            Hand::Referring
        }
    }

    fn process(&mut self, source: &str, header: &Header) {
        self.last_cal = Some(header.calibration);
        self.cal = self.clock.unwrap_or(header.calibration);
        source.clone_into(&mut self.file.source);
        self.file.header = header.clone();
    }

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.file.threads.push(ThreadIndex::default());
        self.threads.push(PassThread::default());
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        let t = &mut self.file.threads[thread];
        t.tid = tid;
        name.clone_into(&mut t.name);
    }

    fn span_begin(&mut self, thread: usize, span: &Item<'_>) {
        self.item(thread, span, true);
    }

    fn event(&mut self, thread: usize, event: &Item<'_>) {
        self.item(thread, event, false);
    }

    fn span_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn detach(&mut self, _thread: usize, _span: (), _id: u64) {}

    fn detached_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn late_correlation(&mut self, thread: usize, value: u64) {
        if let Some((Some(key), window)) = self.threads[thread].latest {
            self.correlated(key, value, window);
        }
    }

    fn calibration(&mut self, calibration: Calibration) {
        self.last_cal = Some(calibration);
    }

    fn device_track(&mut self, thread: usize, _track: &Track) {
        self.file.threads[thread].track = true;
        self.file.normal = self.file.normal.min(thread);
    }

    fn finish(&mut self, _end: &crate::decode::stream::FileEnd) {}
}
