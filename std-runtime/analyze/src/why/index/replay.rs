//! Reading a file again, a window at a time, from its checkpoints: the items the walk asks for
//! by place, the k-th span of an order key, how many spans of a key came before an item, the
//! members of a correlation group in a window.
//!
//! Decoding resumed from a checkpoint hands over exactly what the first reading handed from
//! there (`decode::resume`), so counting from the marks of the window it starts at gives every
//! item its place again. An item is complete once its thread hands over its next item (a
//! link or correlation recorded later belongs to the latest item), or at the end of the file.
//! What is wanted is read in window order; reading stops when nothing is wanted in or before
//! the window it is in and starts again at the next checkpoint that something is wanted from.

use super::{FileIndex, Read};
use crate::{
    decode::{resume::resume, stream::FileEnd, Hand, Item, Sink},
    matching::RankField,
    model::{Callsite, Item as Kind, ItemRef},
    Error,
};
use std::{
    collections::{HashMap, HashSet},
    io,
    sync::Arc,
};

/// Something wanted of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Want {
    /// The item with id `id`, its thread's `ordinal`-th item with an id.
    Item { thread: usize, ordinal: u64, id: u64 },
    /// How many spans of order key `key` began before that item.
    CountAt { thread: usize, ordinal: u64, key: u32 },
    /// The `k`-th (from 0) span of order key `key`.
    Kth { key: u32, k: u64 },
    /// The members of correlation group `key`/`value` handed over in window `window`.
    Group { key: u32, value: u64, window: u32 },
}

/// What was found, by want: the items read (one for `Item` and `Kth`, any number for
/// `Group`) and the counts of `CountAt`.
pub(super) struct Found {
    pub(super) items: Vec<Vec<Read>>,
    pub(super) counts: Vec<u64>,
}

/// Reads what `wants` ask of `file` (process number `process`), with field values if `FIELDS`.
pub(super) fn replay<const FIELDS: bool>(
    file: &FileIndex,
    process: usize,
    wants: &[Want],
) -> Result<Found, Error> {
    let meta = std::fs::metadata(&file.path).map_err(|e| Error::io(&file.path, e))?;
    if (meta.len(), meta.modified().ok()) != file.stamp {
        let changed = io::Error::other("changed since it was first read");
        return Err(Error::io(&file.path, changed));
    }
    let mut r = Replayer::<FIELDS>::new(file, process, wants);
    while let Some(start) = r.next_start() {
        r.restart(start);
        let cp = &file.checkpoints[start as usize];
        let ended = resume(&file.path, cp, &mut r, |r, next| {
            r.advance(next);
            r.pause()
        })?;
        if ended && r.remaining > 0 {
            let lost = io::Error::other("changed since it was first read: an item is no longer where it was");
            return Err(Error::io(&file.path, lost));
        }
    }
    Ok(r.found)
}

/// An item read, and which wants it may meet once complete.
struct Capture {
    read: Read,
    wants: Vec<usize>,
}

/// The sink of a reading resumed (see the module docs).
struct Replayer<'f, const FIELDS: bool> {
    file: &'f FileIndex,
    process: usize,
    wants: &'f [Want],
    /// The window each want is read from.
    starts: Vec<u32>,
    done: Vec<bool>,
    remaining: usize,
    /// The window the next frame is in; the window reading started at.
    window: u32,
    start: u32,
    /// Per thread: (items with an id, spans, events) handed before, from the start's marks.
    counts: Vec<Option<(u64, u64, u64)>>,
    /// Spans of the order keys counted, handed before.
    key_counts: HashMap<u32, u64>,
    /// What to look for: wants by (thread, ordinal) and by (key, k); the (thread, name) of
    /// keys counted; correlation group keys.
    by_place: HashMap<(usize, u64), Vec<usize>>,
    by_kth: HashMap<(u32, u64), usize>,
    counted: HashSet<(u32, u32)>,
    groups: HashMap<u32, Vec<usize>>,
    /// Items read and not yet complete (at most one per thread), in slots reused once they
    /// are: a group's key may be every item's, most of them of other values.
    captures: Vec<Option<Capture>>,
    free: Vec<usize>,
    /// Per thread: its latest item with an id, if captured and not complete.
    open: Vec<Option<usize>>,
    /// Per group want: its captures not yet complete.
    group_open: HashMap<usize, usize>,
    found: Found,
}

impl<'f, const FIELDS: bool> Replayer<'f, FIELDS> {
    fn new(file: &'f FileIndex, process: usize, wants: &'f [Want]) -> Self {
        let mut r = Replayer {
            file,
            process,
            wants,
            starts: Vec::with_capacity(wants.len()),
            done: vec![false; wants.len()],
            remaining: wants.len(),
            window: 0,
            start: 0,
            counts: Vec::new(),
            key_counts: HashMap::new(),
            by_place: HashMap::new(),
            by_kth: HashMap::new(),
            counted: HashSet::new(),
            groups: HashMap::new(),
            captures: Vec::new(),
            free: Vec::new(),
            open: Vec::new(),
            group_open: HashMap::new(),
            found: Found { items: vec![Vec::new(); wants.len()], counts: vec![0; wants.len()] },
        };
        for (i, want) in wants.iter().enumerate() {
            let start = match *want {
                Want::Item { thread, ordinal, id } => {
                    let mut w = file.threads[thread].window_of(ordinal);
                    // Field values are kept only from the item's own record: start before it
                    // was read if it was held back for links at the checkpoint.
                    while FIELDS && w > 0 && file.checkpoints[w as usize].pending(thread) == Some(id) {
                        w -= 1;
                    }
                    r.by_place.entry((thread, ordinal)).or_default().push(i);
                    w
                }
                Want::CountAt { thread, ordinal, key } => {
                    let k = &file.keys[key as usize];
                    r.counted.insert((k.thread, k.name));
                    r.by_place.entry((thread, ordinal)).or_default().push(i);
                    file.threads[thread].window_of(ordinal)
                }
                Want::Kth { key, k } => {
                    let ok = &file.keys[key as usize];
                    r.counted.insert((ok.thread, ok.name));
                    r.by_kth.insert((key, k), i);
                    ok.window_of(k)
                }
                Want::Group { key, window, .. } => {
                    r.groups.entry(key).or_default().push(i);
                    window
                }
            };
            r.starts.push(start);
        }
        r
    }

    /// The window to start reading again at, if anything is still wanted.
    fn next_start(&self) -> Option<u32> {
        (0..self.wants.len()).filter(|&i| !self.done[i]).map(|i| self.starts[i]).min()
    }

    /// Reading starts (again) at window `start`.
    fn restart(&mut self, start: u32) {
        (self.window, self.start) = (start, start);
        self.counts.clear();
        self.key_counts.clear();
        self.open.clear();
    }

    /// The next frame begins at `offset`.
    fn advance(&mut self, offset: u64) {
        let cps = &self.file.checkpoints;
        while cps.get(self.window as usize + 1).is_some_and(|c| c.offset() <= offset) {
            self.window += 1;
        }
        for (i, want) in self.wants.iter().enumerate() {
            if let Want::Group { window, .. } = *want {
                if !self.done[i] && window < self.window && self.group_open.get(&i).copied().unwrap_or(0) == 0
                {
                    self.finish_want(i);
                }
            }
        }
    }

    /// Whether to stop here: nothing incomplete, nothing wanted from this window or before.
    fn pause(&self) -> bool {
        self.remaining == 0
            || (self.open.iter().all(Option::is_none)
                && (0..self.wants.len()).all(|i| self.done[i] || self.starts[i] > self.window))
    }

    fn finish_want(&mut self, i: usize) {
        if !std::mem::replace(&mut self.done[i], true) {
            self.remaining -= 1;
        }
    }

    /// The item `capture` is complete: it meets its wants.
    fn complete(&mut self, capture: usize) {
        let Capture { read, wants } = self.captures[capture].take().expect("an open capture");
        self.free.push(capture);
        for &i in &wants {
            match self.wants[i] {
                Want::Group { value, .. } => {
                    if read.correlation == Some(value) {
                        self.found.items[i].push(read.clone());
                    }
                    *self.group_open.get_mut(&i).expect("counted") -= 1;
                }
                _ => {
                    self.found.items[i].push(read.clone());
                    self.finish_want(i);
                }
            }
        }
    }

    fn item(&mut self, t: usize, item: &Item<'_>, span: bool) {
        if t >= self.file.normal {
            return; // a device track's slice: whole in the index
        }
        if self.counts.len() <= t {
            self.counts.resize(t + 1, None);
            self.open.resize(t + 1, None);
        }
        let (file, start) = (self.file, self.start);
        let c = self.counts[t].get_or_insert_with(|| {
            let m = file.threads[t].at_window(start);
            (m.items, m.spans, m.events)
        });
        let at = ItemRef {
            process: self.process,
            thread: t,
            item: if span { Kind::Span(c.1 as usize) } else { Kind::Event(c.2 as usize) },
        };
        if span {
            c.1 += 1;
        } else {
            c.2 += 1;
        }
        if item.id == 0 {
            return;
        }
        let ordinal = c.0;
        c.0 += 1;
        if let Some(prev) = self.open[t].take() {
            self.complete(prev);
        }
        let mut wants: Vec<usize> = Vec::new();
        let site = self.file.sites.get(item.callsite_index as usize).and_then(Option::as_ref);
        let rank = match site.and_then(|s| s.rank_at) {
            Some(k) => RankField::of(item.fields.iter().nth(k)),
            None => RankField::None,
        };
        let key = site
            .filter(|s| span && s.order && self.counted.contains(&(t as u32, s.name)))
            .and_then(|s| self.file.key_of.get(&(t as u32, s.name, rank.clone())).copied());
        if let Some(here) = self.by_place.get(&(t, ordinal)).cloned() {
            for i in here {
                match self.wants[i] {
                    Want::CountAt { key, .. } => {
                        self.found.counts[i] = self.key_count(key);
                        self.finish_want(i);
                    }
                    _ => wants.push(i),
                }
            }
        }
        if let Some(key) = key {
            let k = self.key_count(key);
            if let Some(&i) = self.by_kth.get(&(key, k)) {
                wants.push(i);
            }
            *self.key_counts.get_mut(&key).expect("counted") += 1;
        }
        if let Some(group) = site.and_then(|s| s.group) {
            for &i in self.groups.get(&group).into_iter().flatten() {
                if matches!(self.wants[i], Want::Group { window, .. } if window == self.window)
                    && !self.done[i]
                {
                    *self.group_open.entry(i).or_default() += 1;
                    wants.push(i);
                }
            }
        }
        if wants.is_empty() {
            return;
        }
        let read = Read {
            id: item.id,
            at,
            callsite: item.callsite.clone(),
            ticks: item.ticks,
            parent: item.parent,
            links: item.links.to_vec(),
            correlation: item.correlation,
            rank,
            fields: FIELDS.then(|| item.fields.to_values()),
        };
        let capture = Some(Capture { read, wants });
        let slot = match self.free.pop() {
            Some(slot) => {
                self.captures[slot] = capture;
                slot
            }
            None => {
                self.captures.push(capture);
                self.captures.len() - 1
            }
        };
        self.open[t] = Some(slot);
    }

    /// The thread's latest item with an id, if captured and not complete.
    fn latest(&mut self, thread: usize) -> Option<&mut Capture> {
        let c = self.open.get(thread).copied().flatten()?;
        self.captures[c].as_mut()
    }

    /// Spans of order key `key` handed before now.
    fn key_count(&mut self, key: u32) -> u64 {
        let (file, start) = (self.file, self.start);
        *self.key_counts.entry(key).or_insert_with(|| file.keys[key as usize].at_window(start))
    }
}

impl<const FIELDS: bool> Sink for Replayer<'_, FIELDS> {
    type Span = ();
    const FIELDS: bool = FIELDS;
    const TRACK_RECORDS: bool = true;

    fn hand(&mut self, index: u32, _callsite: &Arc<Callsite>) -> Hand {
        let site = self.file.sites.get(index as usize).and_then(Option::as_ref);
        if site.is_some_and(|s| s.rank_at.is_some()) {
            Hand::Every
        } else {
            Hand::Referring
        }
    }

    fn process(&mut self, _source: &str, _header: &crate::decode::Header) {}

    fn thread(&mut self, _thread: usize, _stream: u32) {}

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    fn span_begin(&mut self, thread: usize, span: &Item<'_>) {
        self.item(thread, span, true);
    }

    fn event(&mut self, thread: usize, event: &Item<'_>) {
        self.item(thread, event, false);
    }

    fn span_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn detach(&mut self, _thread: usize, _span: (), _id: u64) {}

    fn detached_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn late_link(&mut self, thread: usize, target: u64) {
        if let Some(c) = self.latest(thread) {
            c.read.links.push(target);
        }
    }

    fn late_correlation(&mut self, thread: usize, value: u64) {
        if let Some(c) = self.latest(thread) {
            c.read.correlation = Some(value);
        }
    }

    fn finish(&mut self, _end: &FileEnd) {
        for t in 0..self.open.len() {
            if let Some(c) = self.open[t].take() {
                self.complete(c);
            }
        }
        for i in 0..self.wants.len() {
            if matches!(self.wants[i], Want::Group { .. }) {
                self.finish_want(i);
            }
        }
    }
}
