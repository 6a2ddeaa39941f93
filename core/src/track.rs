//! Device tracks: a named timeline in a clock of its own, such as a GPU queue.
//!
//! A device runs work the host only learns about afterwards, timed by the device's own counter
//! (CUDA events, a queue's timestamps, CUPTI's activity records). A [`Track`] names such a
//! timeline and its clock's nominal rate; [`Track::sync`] pairs a reading of that clock with the
//! host's now; [`track_slice!`](crate::track_slice) records a piece of work by its begin and
//! end in device ticks, naming the host span or event that launched it. The decoder maps device
//! ticks onto the trace's time from the sync points, piecewise linearly between consecutive
//! syncs, so that a device clock drifting against the host's is corrected
//! (`docs/device-tracks.md`).
//!
//! All three are ordinary EVENT records through the thread's staging, like any `event!`: no
//! allocation, no lock, a few bytes each, so the thread that reads the device's timestamps
//! (a completion callback, a polling thread) pays what one event costs. They are recognised by
//! their names and schemas ([`wire::reserved::track`](crate::wire::reserved::track)); the
//! format does not change.
//!
//! ```
//! let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
//! gpu.sync(5_000);                                   // the device's counter read now
//! let launch = waffle::span!("launch");
//! let bytes = 4096u64;
//! waffle::track_slice!(gpu, "gemm", 6_000, 9_500, launched_by = launch.id(), bytes);
//! ```

use crate::callsite::{Callsite, Field, Kind, CALLSITES};
use crate::encode::FieldValue;
use crate::wire::reserved::track as names;
use crate::wire::FieldType;
use crate::{runtime, span, EventId};

#[linkme::distributed_slice(CALLSITES)]
#[linkme(crate = linkme)]
static DEFINE: Callsite = Callsite::new(
    Kind::Event,
    names::DEFINE,
    module_path!(),
    file!(),
    line!(),
    &[Field::new(names::NAME, FieldType::Str), Field::new(names::RATE, FieldType::U64)],
    "",
);

#[linkme::distributed_slice(CALLSITES)]
#[linkme(crate = linkme)]
static SYNC: Callsite = Callsite::new(
    Kind::Event,
    names::SYNC,
    module_path!(),
    file!(),
    line!(),
    &[Field::new(names::ID, FieldType::U64), Field::new(names::TICKS, FieldType::U64)],
    "",
);

/// A named timeline in a clock of its own (a GPU queue, an accelerator's stream).
///
/// Its id is the id of the event that defined it, so tracks are unique across the processes of
/// a trace. A track made while no session records has the null id, and its syncs and slices
/// record nothing: make tracks once recording has started (with `WAFFLE_OUTPUT`, before
/// `main`). `Track` is `Copy`, `Send` and `Sync`: any thread may sync it or record its slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Track {
    id: EventId,
}

impl Track {
    /// Defines a track named `name` whose clock counts `ticks_per_second` (its nominal rate,
    /// used while fewer than two syncs are known).
    pub fn new(name: &str, ticks_per_second: u64) -> Track {
        let state = runtime::state();
        if !crate::__private::COMPILED_IN || state == 0 {
            return Track { id: EventId::NULL };
        }
        let id = span::event(state, &DEFINE, &|w| {
            name.encode(w);
            ticks_per_second.encode(w);
        });
        Track { id }
    }

    /// The track of a known id (as [`Track::id`] gave it), for bindings that keep the number.
    pub const fn from_id(id: u64) -> Track {
        Track { id: EventId::from_u64(id) }
    }

    /// The track's id (its defining event's id); 0 when it records nothing.
    pub const fn id(&self) -> u64 {
        self.id.to_u64()
    }

    /// Whether its syncs and slices are recorded (it was made while a session recorded).
    pub const fn is_recording(&self) -> bool {
        !self.id.is_null()
    }

    /// Pairs the device clock's reading `device_ticks` with the host's now: call it right
    /// after reading the device's counter. Sync a few times over a run (at least twice, at its
    /// start and end) so that the decoder can correct the device clock's drift.
    pub fn sync(&self, device_ticks: u64) -> EventId {
        let state = runtime::state();
        if !crate::__private::COMPILED_IN || state == 0 || self.id.is_null() {
            return EventId::NULL;
        }
        let id = self.id.to_u64();
        span::event(state, &SYNC, &|w| {
            id.encode(w);
            device_ticks.encode(w);
        })
    }
}

/// Records a slice of a device [`Track`]: its name, its begin and end in device ticks, and
/// fields; returns the slice's [`EventId`].
///
/// `track_slice!(track, "name", begin, end, launched_by = id, key = value, ...)`: the name is a
/// string literal; `begin` and `end` are cast to `u64`; `launched_by` (optional, first after
/// the times) names the span or event that launched the work, drawn as an arrow from it (it
/// is the slice's first cause: `caused_by` works too, after it); the fields are as in
/// [`event!`](crate::event). It is an event whose schema starts with `track.id`,
/// `track.begin` and `track.end` (`wire::reserved::track::SLICE`), recorded through the
/// thread's staging like any event. A track that records nothing records no slice.
///
/// ```
/// let queue = waffle::Track::new("GPU 0 / stream 7", 1_000_000);
/// let launch = waffle::event!("launch");
/// let id: waffle::EventId = waffle::track_slice!(queue, "memcpy", 10u32, 42u32, launched_by = launch, bytes = 64u64);
/// # let _ = id;
/// ```
#[macro_export]
macro_rules! track_slice {
    ($track:expr, $name:tt, $begin:expr, $end:expr, launched_by = $by:expr $(, $($rest:tt)*)?) => {{
        let __waffle_track: $crate::Track = $track;
        if __waffle_track.is_recording() {
            $crate::event!(
                $name,
                "track.id" = __waffle_track.id() as u64,
                "track.begin" = ($begin) as u64,
                "track.end" = ($end) as u64,
                caused_by = $by
                $(, $($rest)*)?
            )
        } else {
            $crate::EventId::NULL
        }
    }};
    ($track:expr, $name:tt, $begin:expr, $end:expr $(, $($rest:tt)*)?) => {{
        let __waffle_track: $crate::Track = $track;
        if __waffle_track.is_recording() {
            $crate::event!(
                $name,
                "track.id" = __waffle_track.id() as u64,
                "track.begin" = ($begin) as u64,
                "track.end" = ($end) as u64
                $(, $($rest)*)?
            )
        } else {
            $crate::EventId::NULL
        }
    }};
}
