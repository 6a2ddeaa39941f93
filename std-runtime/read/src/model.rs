//! The decoded trace: what every exporter and analysis reads. No exporter sees raw bytes.
//!
//! Times are nanoseconds since the Unix epoch, already converted from each process's clock
//! ticks with its calibration and wall-clock anchor, so processes of one run share a time base.

use crate::correlation::{self, Role};
use std::sync::Arc;
use waffle_wire::Header;

/// A whole decoded trace: one or many processes (one per input file).
#[derive(Debug, Default)]
pub struct Trace {
    /// Processes, in the order their files were given.
    pub processes: Vec<Process>,
}

/// Where a span or event sits in a [`Trace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ItemRef {
    /// Index into [`Trace::processes`].
    pub process: usize,
    /// Index into [`Process::threads`].
    pub thread: usize,
    /// Span or event, and its index in the thread's list.
    pub item: Item,
}

/// A span or an event, by index within its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    /// Index into [`Thread::spans`].
    Span(usize),
    /// Index into [`Thread::events`].
    Event(usize),
}

/// Spans and events tied by one correlation key and value, possibly across processes.
///
/// An undirected group has members only; a directed one (keys ending in `>` and `<`, see
/// [`crate::correlation`]) also says which members are its causes and which its effects.
#[derive(Debug)]
pub struct Correlation {
    /// The key, as in `correlate = ("allreduce", seq)`; for a directed group, its stem (the
    /// key without the marker).
    pub key: String,
    /// The value.
    pub value: u64,
    /// Whether the group is directed.
    pub directed: bool,
    /// Members in time order (for a directed group, its causes and effects together).
    pub members: Vec<ItemRef>,
    /// A directed group's causes, in time order (empty when undirected).
    pub causes: Vec<ItemRef>,
    /// A directed group's effects, in time order (empty when undirected).
    pub effects: Vec<ItemRef>,
}

impl Trace {
    /// The thread an item is on.
    pub fn thread(&self, r: ItemRef) -> &Thread {
        &self.processes[r.process].threads[r.thread]
    }

    /// Every span and event by id (placeholders, id 0, left out).
    pub fn index(&self) -> std::collections::HashMap<u64, ItemRef> {
        let mut map = std::collections::HashMap::new();
        for (p, proc_) in self.processes.iter().enumerate() {
            for (t, th) in proc_.threads.iter().enumerate() {
                for (i, s) in th.spans.iter().enumerate().filter(|(_, s)| s.id != 0) {
                    map.insert(s.id, ItemRef { process: p, thread: t, item: Item::Span(i) });
                }
                for (i, e) in th.events.iter().enumerate() {
                    map.insert(e.id, ItemRef { process: p, thread: t, item: Item::Event(i) });
                }
            }
        }
        map
    }

    /// The name, start time, links and correlation of an item.
    pub fn describe(&self, r: ItemRef) -> ItemView<'_> {
        let th = self.thread(r);
        match r.item {
            Item::Span(i) => {
                let s = &th.spans[i];
                ItemView {
                    id: s.id,
                    callsite: &s.callsite,
                    ts_ns: s.start_ns,
                    parent: s.parent,
                    links: &s.links,
                    correlation: s.correlation,
                }
            }
            Item::Event(i) => {
                let e = &th.events[i];
                ItemView {
                    id: e.id,
                    callsite: &e.callsite,
                    ts_ns: e.ts_ns,
                    parent: e.parent,
                    links: &e.links,
                    correlation: e.correlation,
                }
            }
        }
    }

    /// Groups of correlated items, ordered by key and value: undirected groups of two or more
    /// members, and directed groups with at least one cause and one effect.
    pub fn correlations(&self) -> Vec<Correlation> {
        type Members = Vec<(u64, ItemRef, Role)>;
        let mut groups: std::collections::BTreeMap<(String, bool, u64), Members> = Default::default();
        for r in self.index().into_values() {
            let v = self.describe(r);
            if let (Some(value), false) = (v.correlation, v.callsite.correlate.is_empty()) {
                let (stem, role) = correlation::role(&v.callsite.correlate);
                groups.entry((stem.to_owned(), role.directed(), value)).or_default().push((v.ts_ns, r, role));
            }
        }
        let in_order =
            |m: &mut Members| m.sort_by_key(|&(ts, r, _)| (ts, r.process, r.thread, r.item_order()));
        let pick =
            |m: &Members, role: Role| m.iter().filter(|x| x.2 == role).map(|x| x.1).collect::<Vec<_>>();
        groups
            .into_iter()
            .filter_map(|((key, directed, value), mut m)| {
                in_order(&mut m);
                let (causes, effects) = if directed {
                    (pick(&m, Role::Cause), pick(&m, Role::Effect))
                } else {
                    Default::default()
                };
                let keep = if directed { !causes.is_empty() && !effects.is_empty() } else { m.len() > 1 };
                keep.then(|| Correlation {
                    key,
                    value,
                    directed,
                    members: m.into_iter().map(|(_, r, _)| r).collect(),
                    causes,
                    effects,
                })
            })
            .collect()
    }

    /// The latest time a process shows: its file's [`Process::last_ns`] or any of its spans'
    /// and events' times, whichever is later (hand-built processes may leave `last_ns` 0).
    pub fn last_ns(&self, process: usize) -> u64 {
        let p = &self.processes[process];
        let threads = p.threads.iter();
        let items = threads.flat_map(|t| {
            let spans = t.spans.iter().map(|s| s.end_ns.max(s.start_ns));
            spans.chain(t.events.iter().map(|e| e.ts_ns))
        });
        items.fold(p.last_ns, u64::max)
    }
}

impl ItemRef {
    /// Orders items of one thread that share a time: spans before events, then by index.
    fn item_order(&self) -> (u8, usize) {
        match self.item {
            Item::Span(i) => (0, i),
            Item::Event(i) => (1, i),
        }
    }
}

/// The parts of a span or event that causal analysis needs.
#[derive(Clone, Copy, Debug)]
pub struct ItemView<'a> {
    /// Its id.
    pub id: u64,
    /// Its callsite.
    pub callsite: &'a Arc<Callsite>,
    /// Begin (span) or time (event), Unix ns.
    pub ts_ns: u64,
    /// Its parent span.
    pub parent: Option<u64>,
    /// Ids of its causes.
    pub links: &'a [u64],
    /// Its correlation value.
    pub correlation: Option<u64>,
}

/// One traced process (one `trace.bin`).
///
/// What its file's HEADER frame says (pid, names, labels, trace id, parent span, calibration)
/// is [`header`](Process::header), the frame grammar's own type; the rest is what the decoder
/// read after it.
#[derive(Debug)]
pub struct Process {
    /// The file it was read from, as given.
    pub source: String,
    /// The file's HEADER: pid, process and host names, labels (such as `rank`), trace id,
    /// parent span ([`Header::parent_span`]) and the header's clock calibration.
    pub header: Header,
    /// Threads (streams), in the order they appeared.
    pub threads: Vec<Thread>,
    /// Records the producer dropped because a buffer was full, over all threads.
    pub dropped: u64,
    /// Whether the file ended with a clean-shutdown frame.
    pub complete: bool,
    /// The latest time the file shows, Unix ns: its last record, or the end of the
    /// calibration interval of its last CLOCK frame (written at stop) if later. For a file cut
    /// short or a process killed, as far as it got. 0 when unknown (a model built by hand);
    /// [`Trace::last_ns`] falls back on the items.
    pub last_ns: u64,
    /// Its device tracks (`waffle::Track`), each drawn from one of its threads.
    pub tracks: Vec<Track>,
}

/// A device track: a named timeline in a clock of its own (a GPU queue), recorded by this
/// process. Its slices are the spans of the thread at [`thread`](Track::thread), whose name is
/// the track's, on the trace's time base (mapped from device ticks through the sync points,
/// see `docs/device-tracks.md`); their first link is the span or event that launched them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Track {
    /// The track's id (the id of the event that defined it).
    pub id: u64,
    /// Its name (`"GPU 0"`).
    pub name: String,
    /// The device clock's nominal ticks per second.
    pub ticks_per_second: u64,
    /// Index into [`Process::threads`] of the thread that holds its slices.
    pub thread: usize,
    /// The sync points the mapping used, by device time. `host` is Unix ns in the model (tick
    /// readings while the records stream, see `decode::Sink::device_track`).
    pub syncs: Vec<SyncPoint>,
}

/// A device clock reading and the host's, taken together (`Track::sync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPoint {
    /// The device clock's reading.
    pub device_ticks: u64,
    /// The host's time then.
    pub host: u64,
}

impl Process {
    /// The device track drawn from thread `thread`, if it is one.
    pub fn track_of(&self, thread: usize) -> Option<&Track> {
        self.tracks.iter().find(|t| t.thread == thread)
    }
}

/// One thread's recorded spans and events.
#[derive(Debug)]
pub struct Thread {
    /// Stream number within the process.
    pub stream: u32,
    /// OS thread id.
    pub tid: u64,
    /// Thread name ("" if unnamed).
    pub name: String,
    /// Spans in begin order.
    pub spans: Vec<Span>,
    /// Events in time order.
    pub events: Vec<Event>,
    /// Records dropped on this thread.
    pub dropped: u64,
}

/// The static description of a span or event, shared by all its records: the format's own
/// description of a callsite, owned.
pub type Callsite = waffle_wire::CallsiteDesc<'static>;

/// A field value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Unsigned integer.
    U64(u64),
    /// Signed integer.
    I64(i64),
    /// Float.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// String.
    Str(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => f.write_str(v),
        }
    }
}

/// One span.
#[derive(Debug)]
pub struct Span {
    /// Its id, unique within the trace (0 for a placeholder whose begin was dropped).
    pub id: u64,
    /// The parent span: the enclosing span on its thread, or the span of a context entered
    /// on the thread (which may be on another thread or process).
    pub parent: Option<u64>,
    /// Ids of the spans and events named in `caused_by`.
    pub links: Vec<u64>,
    /// Correlation value (the key is the callsite's).
    pub correlation: Option<u64>,
    /// Whether it was detached to follow a future (it may end on another thread).
    pub detached: bool,
    /// Nesting depth on its thread (0 = top level).
    pub depth: u32,
    /// Name, module, file, line and field names.
    pub callsite: Arc<Callsite>,
    /// Field values, in the callsite's field order.
    pub fields: Vec<Value>,
    /// Begin, ns since the Unix epoch.
    pub start_ns: u64,
    /// End, ns since the Unix epoch. For a span that never ended (crash, truncation), the
    /// last time seen on its thread, with `ended` false.
    pub end_ns: u64,
    /// Whether its end record was seen.
    pub ended: bool,
}

impl Span {
    /// The span's name.
    pub fn name(&self) -> &str {
        &self.callsite.name
    }

    /// Field `(name, value)` pairs.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.callsite.field_names().zip(&self.fields)
    }
}

/// One instant event.
#[derive(Debug)]
pub struct Event {
    /// Its id, unique within the trace.
    pub id: u64,
    /// The span open (or context entered) on its thread when it happened, if any.
    pub parent: Option<u64>,
    /// Ids of the spans and events named in `caused_by`.
    pub links: Vec<u64>,
    /// Correlation value (the key is the callsite's).
    pub correlation: Option<u64>,
    /// Name, module, file, line and field names.
    pub callsite: Arc<Callsite>,
    /// Field values, in the callsite's field order.
    pub fields: Vec<Value>,
    /// When, ns since the Unix epoch.
    pub ts_ns: u64,
}

impl Event {
    /// The event's name.
    pub fn name(&self) -> &str {
        &self.callsite.name
    }

    /// Field `(name, value)` pairs.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.callsite.field_names().zip(&self.fields)
    }
}
