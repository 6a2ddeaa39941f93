//! An index of trace files for `why`: one reading of each file that keeps where things are,
//! not what they are, and reads again only what the walk reaches.
//!
//! The first reading ([`pass`]) keeps, per file:
//!
//! - **checkpoints** of the decoder's state every [`CHECKPOINT_EVERY`] bytes of frames
//!   (`decode::resume`); the items a file hands over between two checkpoints are a *window*;
//! - per thread, a **mark** for each window it handed items in: how many it had handed
//!   before; and the **runs** of consecutive ids it handed (ids are counters, so a thread's
//!   ids form one run unless records were lost): from an id, its thread and its place there,
//!   from that, its window;
//! - per correlation group key and value, the windows its members were handed in (one entry
//!   per group and window), so that a group's members are found by reading those windows;
//! - per name, rank and thread, how many spans take part in matching by order, with a mark
//!   for each window they began in: what [`crate::matching::Tally`] decides from, and how the
//!   k-th span of a name on a rank is found again;
//! - the symptom asked for (by name and occurrence, or the first tensor with a NaN), the
//!   names present, the earliest timestamp;
//! - device tracks' slices whole: the decoder holds them until the end of the file anyway.
//!
//! Memory thus grows with threads, windows (a fraction of a per mille of the input), groups
//! and the ranks' names, not with spans and events; a file is read again a window at a time,
//! from its checkpoint ([`replay`]), for the facts of the items a depth of the walk reaches,
//! their groups' members and the field values of what is shown. [`Indexed`] is the index as
//! the walk's [`Source`](super::source::Source).

use crate::{
    decode::resume::Checkpoint,
    matching::RankField,
    model::{Callsite, ItemRef},
};
use std::{collections::HashMap, hash::Hash, path::PathBuf, sync::Arc, time::SystemTime};
use waffle_wire::{Calibration, Header};

mod build;
mod pass;
mod replay;
mod source;

pub(super) use build::build;
pub(super) use source::Indexed;

/// Bytes of frames between two checkpoints: a window is read again in a few milliseconds, and
/// a checkpoint (a few KiB: the open stacks, the callsites) costs a few per mille of it.
pub(super) const CHECKPOINT_EVERY: u64 = 1 << 20;

/// Strings (or other keys) numbered in the order they were first met.
#[derive(Default)]
pub(super) struct Interner<K> {
    pub(super) all: Vec<K>,
    ids: HashMap<K, u32>,
}

impl<K: Hash + Eq + Clone> Interner<K> {
    pub(super) fn intern(&mut self, key: K) -> u32 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.all.len() as u32;
        self.ids.insert(key.clone(), id);
        self.all.push(key);
        id
    }

    pub(super) fn get<Q: std::hash::Hash + Eq + ?Sized>(&self, key: &Q) -> Option<u32>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.ids.get(key).copied()
    }
}

/// What the index knows of a callsite of a file, by its index there.
#[derive(Clone, Debug)]
pub(super) struct Site {
    /// Its name, interned.
    pub(super) name: u32,
    /// Its correlation group key (stem and whether directed), interned, if it has a key.
    pub(super) group: Option<u32>,
    /// Whether its spans take part in matching by order.
    pub(super) order: bool,
    /// Where its `rank` field is, for a span taking part.
    pub(super) rank_at: Option<usize>,
}

/// Where a thread was when a window began, as counts of what it had handed over before.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mark {
    pub(super) window: u32,
    /// Items with an id (what [`Run::ordinal`] counts).
    pub(super) items: u64,
    /// Spans, stand-ins for lost begins included (the model's span index).
    pub(super) spans: u64,
    /// Events.
    pub(super) events: u64,
}

/// A thread of a file.
#[derive(Default)]
pub(super) struct ThreadIndex {
    pub(super) tid: u64,
    pub(super) name: String,
    /// A device track's, handed over at the end of the file and kept whole.
    pub(super) track: bool,
    /// One per window it handed items in, in window order.
    pub(super) marks: Vec<Mark>,
    /// What it handed over in all: items with an id, spans, events.
    pub(super) items: u64,
    pub(super) spans: u64,
    pub(super) events: u64,
}

impl ThreadIndex {
    /// Its counts when window `w` began.
    pub(super) fn at_window(&self, w: u32) -> Mark {
        let i = self.marks.partition_point(|m| m.window < w);
        match self.marks.get(i) {
            Some(m) => Mark { window: w, ..*m },
            None => Mark { window: w, items: self.items, spans: self.spans, events: self.events },
        }
    }

    /// The window its item with an id number `ordinal` (from 0) was handed in.
    pub(super) fn window_of(&self, ordinal: u64) -> u32 {
        let i = self.marks.partition_point(|m| m.items <= ordinal);
        self.marks[i.saturating_sub(1)].window
    }
}

/// Spans of one name on one rank and thread that take part in matching by order.
pub(super) struct OrderKey {
    pub(super) thread: u32,
    pub(super) name: u32,
    pub(super) rank: RankField,
    pub(super) count: u64,
    /// (window, how many before it), one per window they began in.
    pub(super) marks: Vec<(u32, u64)>,
    /// On a device track: their places among the file's whole items, in order.
    pub(super) whole: Vec<u32>,
}

impl OrderKey {
    /// How many began before window `w`.
    pub(super) fn at_window(&self, w: u32) -> u64 {
        let i = self.marks.partition_point(|m| m.0 < w);
        self.marks.get(i).map_or(self.count, |m| m.1)
    }

    /// The window the `k`-th (from 0) began in.
    pub(super) fn window_of(&self, k: u64) -> u32 {
        let i = self.marks.partition_point(|m| m.1 <= k);
        self.marks[i.saturating_sub(1)].0
    }
}

/// A span or event as the walk reads it, with what the index reads besides.
#[derive(Clone, Debug)]
pub(super) struct Read {
    pub(super) id: u64,
    pub(super) at: ItemRef,
    pub(super) callsite: Arc<Callsite>,
    pub(super) ticks: u64,
    pub(super) parent: Option<u64>,
    pub(super) links: Vec<u64>,
    pub(super) correlation: Option<u64>,
    /// Its `rank` field, for a span taking part in matching by order.
    pub(super) rank: RankField,
    /// Field values, when asked for.
    pub(super) fields: Option<Vec<crate::model::Value>>,
}

/// One file as the first reading left it.
pub(super) struct FileIndex {
    pub(super) path: PathBuf,
    /// The file as given, as the model's `Process::source` says it.
    pub(super) source: String,
    pub(super) header: Header,
    /// The last valid calibration: the one every tick of the file is converted with.
    pub(super) cal: Calibration,
    /// Size and modification time, to tell that it changed before it is read again.
    pub(super) stamp: (u64, Option<SystemTime>),
    pub(super) threads: Vec<ThreadIndex>,
    /// Threads before the first device track (those are made at the end of the file).
    pub(super) normal: usize,
    pub(super) checkpoints: Vec<Checkpoint<()>>,
    /// Callsites by index.
    pub(super) sites: Vec<Option<Site>>,
    pub(super) keys: Vec<OrderKey>,
    pub(super) key_of: HashMap<(u32, u32, RankField), u32>,
    /// Device tracks' slices, whole.
    pub(super) whole: Vec<Read>,
}

/// A run of consecutive ids handed over by one thread.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    pub(super) first: u64,
    pub(super) len: u64,
    pub(super) file: u32,
    pub(super) thread: u32,
    /// The first one's number among the thread's items with an id.
    pub(super) ordinal: u64,
}

/// Members of the correlation group `key`/`value` were handed in window `window` (numbered
/// across files, see [`Index::window_base`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Corr {
    pub(super) key: u32,
    pub(super) value: u64,
    pub(super) window: u32,
}

/// Where an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// On thread `thread` of `file`, its `ordinal`-th item with an id: read again.
    Read { file: usize, thread: usize, ordinal: u64 },
    /// Kept whole, at `index` among its file's whole items.
    Whole { file: usize, index: usize },
}

/// Every file's index and what is known across them.
pub(super) struct Index {
    pub(super) files: Vec<FileIndex>,
    /// By first id.
    runs: Vec<Run>,
    /// Whether two runs share ids (a file given twice, damage): then a lookup looks at all.
    overlapping: bool,
    /// Whole items by id: (file, index).
    whole_ids: HashMap<u64, (u32, u32)>,
    pub(super) names: Interner<String>,
    /// Correlation group keys: (stem, directed).
    pub(super) groups: Interner<(String, bool)>,
    /// Sorted.
    corr: Vec<Corr>,
    /// The number of file `f`'s first window among all files' windows.
    window_base: Vec<u32>,
    /// The earliest tick reading of each file, if any.
    earliest: Vec<Option<u64>>,
}

impl Index {
    /// Where the item with id `id` is, if any file holds it. When several do (the same file
    /// given twice), the last one, as the model's index has it.
    pub(super) fn place(&self, id: u64) -> Option<Place> {
        if let Some(&(file, index)) = self.whole_ids.get(&id) {
            return Some(Place::Whole { file: file as usize, index: index as usize });
        }
        let to_place = |r: &Run| Place::Read {
            file: r.file as usize,
            thread: r.thread as usize,
            ordinal: r.ordinal + (id - r.first),
        };
        if self.overlapping {
            let holding = self.runs.iter().filter(|r| id.wrapping_sub(r.first) < r.len);
            return holding.max_by_key(|r| (r.file, r.thread, r.ordinal)).map(to_place);
        }
        let i = self.runs.partition_point(|r| r.first <= id);
        let r = self.runs.get(i.checked_sub(1)?)?;
        (id - r.first < r.len).then(|| to_place(r))
    }

    /// The files and windows holding members of group `key`/`value`.
    pub(super) fn group_windows(&self, key: u32, value: u64) -> Vec<(usize, u32)> {
        let from = self.corr.partition_point(|c| (c.key, c.value) < (key, value));
        let entries = self.corr[from..].iter().take_while(|c| (c.key, c.value) == (key, value));
        entries
            .map(|c| {
                let file = self.window_base.partition_point(|&b| b <= c.window) - 1;
                (file, c.window - self.window_base[file])
            })
            .collect()
    }

    /// The interned group key of correlation key `key` (its stem and whether directed), if
    /// some item had it; `None` for no key.
    pub(super) fn group_key(&self, key: &str) -> Option<u32> {
        if key.is_empty() {
            return None;
        }
        let (stem, role) = crate::correlation::role(key);
        self.groups.get(&(stem.to_owned(), role.directed()))
    }

    /// The earliest timestamp of every file, Unix ns.
    pub(super) fn earliest_ns(&self) -> u64 {
        let each = self.files.iter().zip(&self.earliest).filter_map(|(f, t)| t.map(|t| f.cal.to_unix_ns(t)));
        each.min().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
