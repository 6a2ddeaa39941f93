//! `waffle.Track`: a device track (a named timeline in a clock of its own, such as a GPU
//! queue), its sync points and its slices, recorded as `waffle::Track` records them
//! (`docs/device-tracks.md`).
//!
//! A slice is an event of a run-time callsite whose schema starts with `track.id`,
//! `track.begin` and `track.end` and goes on with the keywords; those callsites have a cache
//! of their own ([`callsites::lookup_in`]), so that a slice and a `waffle.event` of one name
//! never share a callsite.

use crate::{
    callsites::{self, explicit},
    fields::encode_all,
    ids::{self, EventId},
    shadow,
};
use pyo3::{
    prelude::*,
    sync::PyOnceLock,
    types::{PyDict, PyList, PyString},
};
use waffle::{callsite::Kind, wire::reserved::track as names, FieldValue};

static SLICES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// A device track: `Track(name, ticks_per_second)`.
#[pyclass(module = "waffle._native", name = "Track", frozen)]
pub struct Track {
    id: u64,
}

#[pymethods]
impl Track {
    /// Defines a track named `name` whose clock counts `ticks_per_second`. Made while nothing
    /// records, it records nothing (its `id` is 0).
    #[new]
    fn new(name: &str, ticks_per_second: u64) -> Track {
        Track { id: waffle::Track::new(name, ticks_per_second).id() }
    }

    /// The track's id (its defining event's id); 0 when it records nothing.
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }

    /// Whether its syncs and slices are recorded.
    #[getter]
    fn is_recording(&self) -> bool {
        self.id != 0
    }

    /// Pairs the device clock's reading `ticks` with the host's now; returns the sync's id.
    fn sync(&self, ticks: u64) -> EventId {
        EventId(waffle::Track::from_id(self.id).sync(ticks).to_u64())
    }

    /// Records a slice `name` from `begin` to `end` (device ticks), launched by `launched_by`
    /// (a span or event id, drawn as an arrow from it), with further `caused_by` causes and
    /// `**fields`; returns its id.
    #[pyo3(signature = (name, begin, end, /, *, launched_by=None, caused_by=None, **fields))]
    fn slice(
        &self,
        name: &Bound<'_, PyString>,
        begin: u64,
        end: u64,
        launched_by: Option<&Bound<'_, PyAny>>,
        caused_by: Option<&Bound<'_, PyAny>>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<EventId> {
        let py = name.py();
        let ex = explicit(fields)?;
        let mut causes = crate::span::causes(launched_by)?;
        causes.extend(crate::span::causes(caused_by)?);
        let state = waffle::runtime::state();
        if state == 0 || self.id == 0 {
            return Ok(EventId(0));
        }
        let Some(callsite) = callsites::lookup_in(&SLICES, &names::SLICE, Kind::Event, name, fields, &ex)?
        else {
            return Ok(EventId(0));
        };
        let track = self.id;
        let values = |w: &mut waffle::encode::Writer<'_>| {
            track.encode_dynamic(w);
            begin.encode_dynamic(w);
            end.encode_dynamic(w);
            encode_all(&ex.vals, w);
        };
        let want = ids::current(py)?;
        Ok(EventId(shadow::event(state, want, callsite, &values, &causes)))
    }

    fn __repr__(&self) -> String {
        format!("Track(id={:#018x})", self.id)
    }
}

/// A decoded process's device tracks, for `waffle.decode`: per track its `id`, `name`,
/// `ticks_per_second`, `thread` (the index in the process's `threads` of the thread that holds
/// its slices) and `syncs`, `(device_ticks, host_ns)` pairs.
pub(crate) fn tracks_to_py<'py>(
    py: Python<'py>,
    tracks: &[waffle_read::model::Track],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for t in tracks {
        let d = PyDict::new(py);
        d.set_item("id", t.id)?;
        d.set_item("name", &t.name)?;
        d.set_item("ticks_per_second", t.ticks_per_second)?;
        d.set_item("thread", t.thread)?;
        d.set_item("syncs", t.syncs.iter().map(|s| (s.device_ticks, s.host)).collect::<Vec<_>>())?;
        list.append(d)?;
    }
    Ok(list)
}
