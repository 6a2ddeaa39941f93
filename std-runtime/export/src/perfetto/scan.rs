//! Perfetto's first pass: what the writer must know about the whole trace before it writes a
//! record.
//!
//! Flows are pairs of ids on two packets, and either packet may come first in the output, so
//! both ends must be numbered before anything is written. A first pass over the records
//! ([`Scan`], a [`Sink`]) keeps only what cross-references need, so its memory grows with
//! references, not with records. It is handed only the items that refer elsewhere (links,
//! correlations, parents that do not hold them on their track); the decoder tells the rest in
//! numbers (`Sink::EVERY_ITEM`), and counts what each open span holds, for spans that are
//! detached. It learns:
//! - per id that something refers to: how many items link to it, how many children sit off its
//!   track (a context entered on another thread or process, a detached span's children, a
//!   detached span itself), and whether it is detached (then it gets a track of its own from
//!   its begin);
//! - the runs of ids that exist, so that links to ids outside the trace are told apart;
//! - per correlation group: its members (for a directed group, see [`crate::correlation`], its
//!   causes and effects) and, undirected, its last member in time; per thread, its correlated
//!   items in record order (`groups.rs`);
//! - per span name and rank, how many spans and on which thread, for matching by order
//!   (`order.rs`);
//! - per process its header and threads, for the track descriptors written first.
//!
//! Each file is read by a pass of its own (on as many threads as the export is given), and
//! the passes are merged in file order ([`Scan::merge_file`]): processes, streams and
//! correlation keys are numbered on, counts added up. What the merged pass leaves is turned
//! into the plan (`plan.rs`, where `Scan` is made a first pass, so that this file needs
//! nothing of the plan).

use super::{
    groups::Groups,
    order::OrderCount,
    tally::{Add, Tally},
};
use crate::{
    decode::stream::{FileEnd, Hand, Header, Item, Sink},
    model::{Callsite, Track},
    reader::Warning,
    Error,
};
use crate::{
    index::Keys,
    passes::{Pass, Records},
    process::ProcessInfo,
};
use std::sync::Arc;
use waffle_wire::{Calibration, Converter};

/// How an id is referred to.
#[derive(Clone, Copy, Default)]
pub(super) struct Refs {
    /// Items whose links name it (each once, however often it names it).
    pub(super) links: u32,
    /// Items whose parent it is and that do not sit inside it on their track.
    pub(super) children: u32,
    pub(super) detached: bool,
}

#[derive(Default)]
struct ThreadScan {
    /// The run of consecutive ids being extended (first, last).
    run: Option<(u64, u64)>,
}

/// The first pass over the records.
#[derive(Default)]
pub(crate) struct Scan {
    /// What matching by order counts.
    pub(super) order: OrderCount,
    pub(super) processes: Vec<ProcessInfo>,
    /// The calibration of the next file (its last CLOCK frame's), when known in advance.
    next_calibration: Option<Calibration>,
    cal: Option<Converter>,
    threads: Vec<ThreadScan>,
    pub(super) runs: Vec<(u64, u64)>,
    pub(super) refs: Tally<u64, Refs>,
    pub(super) keys: Keys,
    pub(super) groups: Groups,
    /// Links counted and not yet in `refs`: (id, links), the latest first.
    pub(super) hot: [(u64, u32); 2],
    /// Once passes over single files are merged, each file's references, summed: the plan
    /// adds them up, and tells each file what the files before it referred to, so that files
    /// can be written apart (`plan.rs`). Empty for a pass that read every file.
    pub(super) file_refs: Vec<Vec<(u64, Refs)>>,
    /// Likewise, where each file's runs of ids begin in `runs`.
    pub(super) file_runs: Vec<usize>,
    /// The current process's spans and events so far.
    spans: u64,
    events: u64,
}

impl Scan {
    /// A first pass over `files` files.
    pub(crate) fn new(files: usize) -> Scan {
        Scan { order: OrderCount::new(files), ..Scan::default() }
    }

    /// An item that refers elsewhere (the decoder hands over no other).
    fn item(&mut self, r: &Item<'_>, t: usize) {
        if let (Some(parent), false) = (r.parent, r.held) {
            self.refs.add(parent, Refs { children: 1, ..Refs::default() });
        }
        if !r.links.is_empty() || r.correlation.is_some() {
            self.causes(t, r);
        }
    }

    /// `r`'s links and correlation.
    fn causes(&mut self, t: usize, r: &Item<'_>) {
        for (k, &cause) in r.links.iter().enumerate() {
            if cause != r.id && !r.links[..k].contains(&cause) {
                self.link(cause);
            }
        }
        if let (Some(value), key) = (r.correlation, &r.callsite.correlate) {
            if !key.is_empty() {
                let (key, role) = self.keys.group(r.callsite_index, key, true).expect("added");
                let cal = self.cal.expect("the header comes first");
                self.groups.add(t, (key, value), role, r.id, || cal.to_unix_ns(r.ticks));
            }
        }
    }

    /// One more item links to `cause`. The two causes linked last keep their counts here
    /// until others push them out: a cause that many items name (a run's origin, say) then
    /// adds an entry to the references' tally once in a while, not once per link.
    fn link(&mut self, cause: u64) {
        match &mut self.hot {
            [(id, n), _] if *id == cause => *n = n.saturating_add(1),
            [a, b] if b.0 == cause => {
                b.1 = b.1.saturating_add(1);
                std::mem::swap(a, b);
            }
            [a, b] => {
                let (id, n) = std::mem::replace(b, std::mem::replace(a, (cause, 1)));
                self.count_links(id, n);
            }
        }
    }

    pub(super) fn count_links(&mut self, id: u64, n: u32) {
        if n > 0 {
            self.refs.add(id, Refs { links: n, ..Refs::default() });
        }
    }

    /// The references of the file this pass read, summed (the links kept back counted in).
    fn own_refs(&mut self) -> Vec<(u64, Refs)> {
        for (id, n) in std::mem::take(&mut self.hot) {
            self.count_links(id, n);
        }
        std::mem::take(&mut self.refs).into_sorted()
    }

    /// `later`, a pass over the file after those this one read, joins it: each file's
    /// references and runs are kept apart, and summed by the plan (`Split`, in `plan.rs`).
    pub(super) fn merge_file(&mut self, mut later: Scan) {
        if self.file_runs.is_empty() {
            // The first file's pass, merged into for the first time.
            let refs = self.own_refs();
            self.file_refs.push(refs);
            self.file_runs.push(0);
        }
        self.file_refs.push(later.own_refs());
        self.file_runs.push(self.runs.len());
        let keys = self.keys.merge(later.keys);
        self.groups.merge(later.groups, &keys);
        self.order.merge(later.order, self.processes.len());
        self.processes.extend(later.processes);
        self.runs.extend(later.runs);
    }

    fn process(&mut self) -> &mut ProcessInfo {
        self.processes.last_mut().expect("the header comes first")
    }
}

impl Pass for Scan {
    fn read(&mut self, records: &mut Records<'_>) -> Result<Vec<Warning>, Error> {
        self.next_calibration = records.calibration();
        records.decode(self)
    }
}

impl Sink for Scan {
    type Span = ();
    const FIELDS: bool = false;
    const EVERY_ITEM: bool = false;

    fn process(&mut self, source: &str, header: &Header) {
        self.cal = Some(self.next_calibration.take().unwrap_or(header.calibration).converter());
        self.threads.clear();
        self.keys.next_process();
        self.groups.process();
        self.processes.push(ProcessInfo::new(source, header));
    }

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.threads.push(ThreadScan::default());
        self.groups.thread();
        self.process().thread();
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        self.process().thread_named(thread, tid, name);
    }

    fn device_track(&mut self, thread: usize, _track: &Track) {
        self.process().device_track(thread);
    }

    fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        self.order.hand(index, callsite)
    }

    fn counted(&mut self, thread: usize, index: u32, spans: u64) {
        self.order.counted(thread, index, spans);
    }

    fn span_begin(&mut self, thread: usize, span: &Item<'_>) {
        self.item(span, thread);
        self.spans += 1;
        self.order.span(thread, span);
    }

    fn event(&mut self, thread: usize, event: &Item<'_>) {
        self.item(event, thread);
        self.events += 1;
    }

    fn skipped(&mut self, thread: usize, (first, end): (u64, u64), spans: u64, events: u64) {
        self.spans += spans;
        self.events += events;
        // The chunk's ids extend the thread's run if they follow it (0 is no id).
        let first = first.max(1);
        if end <= first {
            return;
        }
        match &mut self.threads[thread].run {
            Some((_, last)) if last.wrapping_add(1) == first => *last = end - 1,
            run => {
                self.runs.extend(run.take());
                *run = Some((first, end - 1));
            }
        }
    }

    fn span_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn detach(&mut self, _thread: usize, _span: (), _id: u64) {}

    /// The span goes to a track of its own: what it held on the thread's track no longer sits
    /// inside it, nor does it sit inside its holder.
    fn detached_from(&mut self, _thread: usize, id: u64, items: u32, holder: Option<u64>) {
        self.refs.add(id, Refs { children: items, links: 0, detached: true });
        if let Some(holder) = holder {
            self.refs.add(holder, Refs { children: 1, ..Refs::default() });
        }
    }

    fn detached_end(&mut self, _thread: usize, _span: (), _ticks: u64, _ended: bool) {}

    fn dropped(&mut self, thread: usize, records: u64) {
        self.process().dropped(thread, records);
    }

    fn finish(&mut self, end: &FileEnd) {
        let runs = self.threads.iter_mut().filter_map(|t| t.run.take());
        self.runs.extend(runs);
        self.order.finish_process(self.processes.len() - 1);
        let (spans, events) = (std::mem::take(&mut self.spans), std::mem::take(&mut self.events));
        let p = self.processes.last_mut().expect("the header comes first");
        (p.spans, p.events) = (spans, events);
        p.finish(end);
    }
}

impl Add for Refs {
    fn add(&mut self, other: Refs) {
        self.links = self.links.saturating_add(other.links);
        self.children = self.children.saturating_add(other.children);
        self.detached |= other.detached;
    }
}
