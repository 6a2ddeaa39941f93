//! Device tracks in the record stream: the slices of each `waffle::Track` taken off the
//! thread that recorded them and handed to the sink as the spans of a thread of their own,
//! on the host's clock.
//!
//! A track is three kinds of event (`wire::reserved::track`): its definition (name, rate; the
//! track's id is the event's), sync points (a device reading; the host's is the event's own
//! time) and slices (the track's id, begin and end in device ticks, the user's fields; the
//! first link is the launcher). `Tracks` sits between the decoder and every sink. It hands
//! definitions and syncs on as the events they are only to a sink that keeps them
//! ([`Sink::TRACK_RECORDS`]: the model, which says what the file holds); to the others, every
//! export, they place the slices and are no span or event of the program's. It holds slices
//! back, since the syncs that place them can come later in the file (a sync at the end of a
//! run, or a thread whose chunk is written late). When the file is read it maps each slice's
//! times through its track's [`DeviceClock`] and hands each track over as one more thread:
//! `thread`, `thread_named` (the track's name), [`Sink::device_track`], then its slices as
//! spans in begin order, nested where one lies inside another, each with a `track` field (the
//! track's name) before the user's. Held slices cost memory until the end of the file (about 100
//! bytes and the fields' text each); nothing else does.

use super::{
    fields::{FieldValue, Fields},
    stream::{FileEnd, Hand, Header, Item, Sink},
};
use crate::model::{Callsite, SyncPoint, Track};
use std::{collections::HashMap, sync::Arc};
use waffle_wire::{reserved::track as names, Calibration, FieldDesc, FieldType, Kind};

mod clock;
mod sink;
pub use clock::DeviceClock;

/// The OS thread id a device track is given, plus the track's number (the grammar's).
pub use waffle_wire::reserved::track::DEVICE_TID_BASE;

/// The stream number a device track is given: counted down from `u32::MAX` (slots are
/// numbered below 4 096).
const DEVICE_STREAM_TOP: u32 = u32::MAX;

/// What an event is to device tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Plain,
    Define,
    Sync,
    Slice,
}

fn role_of(cs: &Callsite) -> Role {
    let keys = |n: usize| cs.field_names().take(n);
    if cs.kind != Kind::Event {
        Role::Plain
    } else if cs.name == names::DEFINE && keys(2).eq([names::NAME, names::RATE]) {
        Role::Define
    } else if cs.name == names::SYNC && keys(2).eq([names::ID, names::TICKS]) {
        Role::Sync
    } else if keys(3).eq(names::SLICE) {
        Role::Slice
    } else {
        Role::Plain
    }
}

/// An integer field as `u64` (bindings write dynamic fields, so a `u64` may come as `i64`).
fn unsigned(v: Option<FieldValue<'_>>) -> Option<u64> {
    match v? {
        FieldValue::U64(v) => Some(v),
        FieldValue::I64(v) => u64::try_from(v).ok(),
        _ => None,
    }
}

/// A thread's latest item, as far as this sink is concerned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Latest {
    /// Handed on (or none yet).
    Inner,
    /// A slice held, by index.
    Held(usize),
    /// A definition or sync kept from the sink.
    Kept,
}

/// Whether `cs` is a device track's definition or sync (not a slice): what only a sink with
/// [`Sink::TRACK_RECORDS`] is handed.
pub fn defines_or_syncs(cs: &Callsite) -> bool {
    matches!(role_of(cs), Role::Define | Role::Sync)
}

/// A slice held until the file is read.
struct Held {
    track: u64,
    begin: u64,
    end: u64,
    id: u64,
    /// The slice's own callsite (an event's).
    site: Arc<Callsite>,
    /// The user's fields (those after the track's three).
    fields: Fields,
    links: Vec<u64>,
    correlation: Option<u64>,
}

/// The sink between the decoder and another: see the module docs.
pub(super) struct Tracks<'s, S> {
    inner: &'s mut S,
    /// By callsite index.
    roles: Vec<Option<Role>>,
    /// The highest callsite index the file used: slices' span callsites number after it.
    top_index: u32,
    /// Tracks by definition order.
    defined: Vec<(u64, String, u64)>,
    syncs: HashMap<u64, Vec<SyncPoint>>,
    held: Vec<Held>,
    /// Per thread: what its latest item was (late links and correlations belong to it).
    last: Vec<Latest>,
    cal: Option<Calibration>,
    /// What went wrong, as messages for the file's warnings.
    pub(super) warnings: Vec<String>,
}

impl<'s, S: Sink> Tracks<'s, S> {
    pub(super) fn new(inner: &'s mut S) -> Self {
        Tracks {
            inner,
            roles: Vec::new(),
            top_index: 0,
            defined: Vec::new(),
            syncs: HashMap::new(),
            held: Vec::new(),
            last: Vec::new(),
            cal: None,
            warnings: Vec::new(),
        }
    }

    /// For decoding resumed in the middle of a file whose first `threads` threads are known
    /// (`resume.rs`): slices read from there on are held (and handed over at its end, on
    /// threads after those the file's first reading made, which the resuming sink tells apart);
    /// a late link or correlation for an item before the resumption goes nowhere.
    pub(super) fn resume(inner: &'s mut S, threads: usize) -> Self {
        let mut tracks = Tracks::new(inner);
        tracks.last = vec![Latest::Kept; threads];
        tracks
    }

    /// The sink it hands on to.
    pub(super) fn inner(&mut self) -> &mut S {
        self.inner
    }

    fn role(&mut self, index: u32, cs: &Callsite) -> Role {
        self.top_index = self.top_index.max(index);
        let i = index as usize;
        if self.roles.len() <= i {
            self.roles.resize(i + 1, None);
        }
        *self.roles[i].get_or_insert_with(|| role_of(cs))
    }

    /// Holds a slice; `false` if its fields do not say which track and when.
    fn hold(&mut self, thread: usize, e: &Item<'_>) -> bool {
        let mut values = e.fields.iter();
        let (Some(track), Some(begin), Some(end)) =
            (unsigned(values.next()), unsigned(values.next()), unsigned(values.next()))
        else {
            return false;
        };
        let mut fields = Fields::new();
        values.for_each(|v| fields.push(v));
        self.held.push(Held {
            track,
            begin,
            end,
            id: e.id,
            site: e.callsite.clone(),
            fields,
            links: e.links.to_vec(),
            correlation: e.correlation,
        });
        self.last[thread] = Latest::Held(self.held.len() - 1);
        true
    }

    /// Hands every track over as a thread of its own, its slices as spans.
    fn emit(&mut self) {
        let Some(cal) = self.cal else { return };
        let host_rate = cal.ticks as f64 * 1e9 / cal.ns.max(1) as f64;
        let mut by_track: HashMap<u64, Vec<Held>> = HashMap::new();
        for h in self.held.drain(..) {
            by_track.entry(h.track).or_default().push(h);
        }
        let first_thread = self.last.len();
        let mut sites: HashMap<*const Callsite, (Arc<Callsite>, u32)> = HashMap::new();
        let mut next_index = self.top_index;
        let mut k = 0;
        for (id, name, rate) in std::mem::take(&mut self.defined) {
            let slices = by_track.remove(&id).unwrap_or_default();
            let syncs = self.syncs.remove(&id).unwrap_or_default();
            let Some(clock) = DeviceClock::new(&syncs, rate, host_rate) else {
                if !slices.is_empty() {
                    self.warnings.push(format!(
                        "device track {name:?} ({id:016x}) has no usable sync point (or a rate of 0): its {} \
                         slices are left out",
                        slices.len()
                    ));
                }
                continue;
            };
            let thread = first_thread + k;
            self.inner.thread(thread, DEVICE_STREAM_TOP.wrapping_sub(k as u32));
            self.inner.thread_named(thread, DEVICE_TID_BASE + k as u64, &name);
            let track = Track {
                id,
                name: name.clone(),
                ticks_per_second: rate,
                thread,
                syncs: clock.syncs().to_vec(),
            };
            self.inner.device_track(thread, &track);
            k += 1;
            let mut placed: Vec<(u64, u64, Held)> = slices
                .into_iter()
                .map(|h| {
                    let begin = clock.host(h.begin);
                    (begin, clock.host(h.end).max(begin), h)
                })
                .collect();
            placed.sort_by_key(|&(b, e, ref h)| (b, std::cmp::Reverse(e), h.id));
            // Open slices (end, handle, id), innermost last.
            let mut open: Vec<(u64, S::Span, u64)> = Vec::new();
            let mut fields = Fields::new();
            for (begin, end, h) in placed {
                while let Some(&(e, span, _)) = open.last().filter(|o| o.0 <= begin) {
                    self.inner.span_end(thread, span, e, true);
                    open.pop();
                }
                // A slice that outlasts the one it begins in is cut at that one's end, so
                // that the track nests.
                let end = open.last().map_or(end, |o| end.min(o.0));
                let (site, callsite_index) = sites
                    .entry(Arc::as_ptr(&h.site))
                    .or_insert_with(|| {
                        next_index = next_index.saturating_add(1);
                        (slice_site(&h.site), next_index)
                    })
                    .clone();
                fields.clear();
                fields.push(FieldValue::Str(&name));
                h.fields.iter().for_each(|v| fields.push(v));
                let item = Item {
                    id: h.id,
                    parent: open.last().map(|o| o.2),
                    held: !open.is_empty(),
                    callsite: &site,
                    callsite_index,
                    fields: &fields,
                    ticks: begin,
                    depth: open.len() as u32,
                    links: &h.links,
                    correlation: h.correlation,
                };
                let span = self.inner.span_begin(thread, &item);
                open.push((end, span, h.id));
            }
            while let Some((e, span, _)) = open.pop() {
                self.inner.span_end(thread, span, e, true);
            }
        }
        let mut strays: Vec<(u64, Vec<Held>)> = by_track.into_iter().collect();
        strays.sort_by_key(|(id, _)| *id);
        for (id, slices) in strays {
            self.warnings.push(format!(
                "{} slices name device track {id:016x}, which this file does not define: left out",
                slices.len()
            ));
        }
    }
}

/// The span callsite a slice's event callsite becomes on its track: same name and place, the
/// `track` field in place of the track's three.
fn slice_site(event: &Callsite) -> Arc<Callsite> {
    let mut fields = vec![FieldDesc::new("track", FieldType::Str)];
    fields.extend(event.fields.iter().skip(3).cloned());
    Arc::new(Callsite {
        name: event.name.clone(),
        module: event.module.clone(),
        file: event.file.clone(),
        line: event.line,
        kind: Kind::Span,
        fields,
        correlate: event.correlate.clone(),
    })
}
