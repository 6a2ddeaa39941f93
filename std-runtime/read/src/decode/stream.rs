//! Decoding a `trace.bin` as a stream of records, one frame at a time.
//!
//! What a decoding hands over, and to what: [`run::decode`](super::run::decode) reads frames in
//! file order and hands what they hold to a [`Sink`]: the process
//! header, threads as they appear, span begins and ends, events, and the causal facts, each
//! stream's records in that stream's order. It keeps, per stream, only the open-span stack and
//! a few counters, and per file the callsites and the detached spans not yet ended, so its
//! memory grows with open spans, not with records. The model ([`super::decode_file`]) is one
//! such sink; the Perfetto exporter's two passes are others.
//!
//! Timestamps are handed over as raw clock ticks with the process's [`Calibration`]: the
//! header's, then each valid CLOCK frame's as it is read. The last one applies to every tick of
//! the file, so a sink that must convert as it goes first asks
//! [`run::final_calibration`](super::run::final_calibration).

use super::fields::Fields;
use crate::model::{Callsite, Track};
use std::sync::Arc;
use waffle_wire::Calibration;

/// What a file's HEADER frame says about its process: the grammar's own type, which the model
/// keeps too ([`Process::header`](crate::model::Process::header)). The file it came from is
/// not in it (that is not on the wire); sinks are handed it beside the header.
pub use waffle_wire::Header;

/// A span at its begin, or an event, with the causal facts recorded right after it.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// Its id (0 for a stand-in whose begin was lost).
    pub id: u64,
    /// The innermost open span or entered context of its stream, else the header's parent span.
    pub parent: Option<u64>,
    /// Whether its parent is one of its stream's open spans, which then holds it on the
    /// thread's track (false for an entered context of another thread or process, the
    /// header's parent span, a detached span).
    pub held: bool,
    /// Its callsite.
    pub callsite: &'a Arc<Callsite>,
    /// The callsite's index among the process's callsites, counted from 1 in the order they
    /// were described (0 is the stand-ins'): a key for per-callsite tables without hashing.
    pub callsite_index: u32,
    /// Field values in the callsite's order.
    pub fields: &'a Fields,
    /// Begin (span) or time (event), in ticks.
    pub ticks: u64,
    /// Spans and entered contexts open on its stream before it.
    pub depth: u32,
    /// Ids of its causes, as recorded (possibly repeated).
    pub links: &'a [u64],
    /// Its correlation value (the key is the callsite's).
    pub correlation: Option<u64>,
}

impl Item<'_> {
    /// Whether it refers elsewhere: it has links or a correlation, or a parent that does not
    /// hold it. A sink not handed every item ([`Sink::EVERY_ITEM`]) is handed these.
    pub fn refers(&self) -> bool {
        !self.links.is_empty() || self.correlation.is_some() || (self.parent.is_some() && !self.held)
    }
}

/// Which items of a callsite a sink not handed every item ([`Sink::EVERY_ITEM`]) is handed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hand {
    /// Only those that refer elsewhere ([`Item::refers`]).
    #[default]
    Referring,
    /// Those that refer elsewhere, and how many spans of it each thread began
    /// ([`Sink::counted`], at the end of the file).
    Counted,
    /// Every span, with its field values.
    SpansWithFields,
    /// Every span and event, with its field values (device tracks' events, `decode/track.rs`).
    Every,
}

/// What a file says once it is read.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileEnd {
    /// The sum of the END frame's drop counts.
    pub dropped: u64,
    /// Whether the file had an END frame (a clean stop).
    pub complete: bool,
}

/// Receives a file's records from [`decode`](super::run::decode).
///
/// Threads are numbered from 0 in the order their streams appear (a stream slot's successive
/// owners are different threads). Records of one thread come in the thread's order; those of
/// different threads interleave as the file holds them. A span begin's [`Item`] arrives once the
/// links and correlation recorded after it are known, so a sink never patches an item.
pub trait Sink {
    /// What the sink keeps to know a span by when it ends.
    type Span: Copy + Default;

    /// Whether the sink reads field values; without, they are stepped over, not kept.
    const FIELDS: bool = true;

    /// Whether the sink is handed every span and event. A sink that only learns what refers
    /// to what sets it false, and is then handed only the items that refer elsewhere: those
    /// with links or a correlation, those whose parent does not hold them (see
    /// [`Item::held`]), and stand-ins, and every span of the callsites it asks for
    /// ([`hand`](Sink::hand)); besides, an item read last in its chunk (whose links could
    /// follow in the stream's next chunk) may be handed over without any. Span ends are not
    /// told. The other items are told in numbers, once per chunk
    /// ([`skipped`](Sink::skipped)), and a detached span says what it held
    /// ([`detached_from`](Sink::detached_from)).
    const EVERY_ITEM: bool = true;

    /// Whether the sink is handed device tracks' definitions and syncs (`decode/track.rs`) as
    /// the events they are. The model keeps them, to say what the file holds; an export does not
    /// (the default): they place a track's slices on the host's clock and are no span or event
    /// of the program's.
    const TRACK_RECORDS: bool = false;

    /// Whether a TAIL frame (what a thread that stopped recording had staged) is decoded as
    /// soon as it is read, and the chunk it copies, when it comes, only beyond the copy: for a
    /// sink reading a file while it is written (`follow`), which cannot wait for the thread to
    /// record again. Otherwise (the default) a TAIL is held until the file says whether its
    /// chunk supersedes it (see `decode/tail.rs`). The records handed over are the same.
    const EAGER_TAILS: bool = false;

    /// (Only without [`EVERY_ITEM`](Sink::EVERY_ITEM) or without [`FIELDS`](Sink::FIELDS).)
    /// Which items of the callsite numbered `index` (see [`Item::callsite_index`]) the sink is
    /// handed; asked once per callsite, as the file describes it. A sink handed every item
    /// may only ask for [`Hand::Every`], to have the values of that callsite's items.
    fn hand(&mut self, _index: u32, _callsite: &Arc<Callsite>) -> Hand {
        Hand::Referring
    }

    /// The file's header, and the file as given (`source`); first, once.
    fn process(&mut self, source: &str, header: &Header);

    /// A new thread and its stream slot.
    fn thread(&mut self, thread: usize, stream: u32);

    /// The thread's OS id and name, from its STREAM frame (which may come after its records).
    fn thread_named(&mut self, thread: usize, tid: u64, name: &str);

    /// A span begins; the sink's handle comes back with its end.
    fn span_begin(&mut self, thread: usize, span: &Item<'_>) -> Self::Span;

    /// An event.
    fn event(&mut self, thread: usize, event: &Item<'_>);

    /// The innermost open span of `thread` ends at `ticks`; `ended` is false when its end was
    /// not recorded (lost records, or still open at the end of the file).
    fn span_end(&mut self, thread: usize, span: Self::Span, ticks: u64, ended: bool);

    /// A span of `thread` leaves its stack to end elsewhere; its end comes by
    /// [`detached_end`](Sink::detached_end).
    fn detach(&mut self, thread: usize, span: Self::Span, id: u64);

    /// A detached span begun on `thread` ends (by ASYNC_END on any stream, or at the end of the
    /// file with `ended` false).
    fn detached_end(&mut self, thread: usize, span: Self::Span, ticks: u64, ended: bool);

    /// (Only without [`EVERY_ITEM`](Sink::EVERY_ITEM).) A chunk of `thread` is read: its spans
    /// and events took the ids `ids.0 .. ids.1` (those handed over included), and `spans`
    /// spans and `events` events of them were not handed over.
    fn skipped(&mut self, _thread: usize, _ids: (u64, u64), _spans: u64, _events: u64) {}

    /// (Only without [`EVERY_ITEM`](Sink::EVERY_ITEM).) Span `id` of `thread`, just detached,
    /// held `items` spans and events begun on the thread while it was open there, which no
    /// longer sit inside it; and `holder`, if any, is the open span of the thread that held it
    /// and no longer does.
    fn detached_from(&mut self, _thread: usize, _id: u64, _items: u32, _holder: Option<u64>) {}

    /// (Only without [`EVERY_ITEM`](Sink::EVERY_ITEM).) At the end of the file, before
    /// [`finish`](Sink::finish): `thread` began `spans` spans of the callsite numbered `index`,
    /// one the sink asked to have [`Hand::Counted`] (each thread and callsite once, never 0).
    fn counted(&mut self, _thread: usize, _index: u32, _spans: u64) {}

    /// A link recorded after other records of the thread: it belongs to the thread's latest
    /// span or event, already handed over.
    fn late_link(&mut self, _thread: usize, _target: u64) {}

    /// A correlation value recorded after other records of the thread (see `late_link`).
    fn late_correlation(&mut self, _thread: usize, _value: u64) {}

    /// Records the producer lost on `thread` before its next chunk.
    fn dropped(&mut self, _thread: usize, _records: u64) {}

    /// A valid CLOCK frame: it applies to every tick of the file, earlier ones included.
    fn calibration(&mut self, _calibration: Calibration) {}

    /// `thread` is no OS thread but a device track (`waffle::Track`, see `decode/track.rs`):
    /// told once, at the end of the file after its `thread` and `thread_named` (the track's
    /// name) and before its slices, which are its spans, their ticks mapped onto the file's
    /// clock (`track.syncs` pairs device ticks with those ticks).
    fn device_track(&mut self, _thread: usize, _track: &Track) {}

    /// The file is read; every span has ended.
    fn finish(&mut self, end: &FileEnd);
}
