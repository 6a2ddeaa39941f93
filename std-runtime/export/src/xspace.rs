//! TensorBoard's profile format (`.xplane.pb`): an `XSpace` as the profile plugin (xprof) reads
//! it, written from `trace.bin` files or a [`Trace`]. The rules every format shares (ids, which
//! item a link resolves to, correlation groups, the order spans come in) are in
//! `spans`; every event is an item of its own here, none is a log of its span.
//!
//! The mapping:
//! - the host's threads are one plane named `/host:CPU`, the name xprof looks for. An XSpace
//!   is what one host wrote: written to a file, the XSpace holds every process given, all on
//!   that one plane (xprof reads only one host plane an XSpace), and lists every host in
//!   `hostnames`; written to a directory (see [`write_dir`]), processes are grouped by host,
//!   one file per host, `plugins/profile/<run>/<host>.xplane.pb`, which xprof shows as the
//!   hosts of one run;
//! - each thread is a line (`XLine`): its id the OS tid (a fresh one above every tid when two
//!   processes of one plane share a tid), its name the thread's, prefixed with the process's
//!   name and pid when the plane holds several processes. Its `timestamp_ns` is its process's
//!   earliest record, Unix ns, and every event's `offset_ps` counts from there, in picoseconds;
//! - a device track (`waffle::Track`, a GPU queue) is a line of a device plane,
//!   `/device:GPU:0` for a track named `GPU 0` (see `device.rs`): its slices are events there.
//!   xprof takes a GPU profile's steps from the device alone, each device event in the step
//!   of the host event with its `correlation_id`: a slice and its launcher, or the launched
//!   slice it runs in, or else the step it runs in, get one (see `ties.rs`);
//! - a detached span (an async span, which may end on another thread) goes to its process's
//!   lines of detached spans, `detached spans`, `detached spans 2`..., as many as overlapping
//!   detached spans need (each on the first one free at its start), so that every line nests;
//! - a span is an event with its duration in picoseconds; a waffle event is an event of
//!   duration 0. Names are event metadata, interned per plane;
//! - fields are stats: unsigned and signed integers, doubles, strings; booleans as `uint64`
//!   0 or 1. Causality is stats too, as Chrome's export names them: `waffle.id`,
//!   `waffle.parent`, `waffle.caused_by` (ids in hex), `waffle.correlate` (`key=value`),
//!   `waffle.unfinished`, `waffle.detached`, `waffle.stand_in`, and `waffle.event` (1) on a
//!   waffle event, which a span of no length would otherwise look like. A field named like one
//!   of these keeps its value; one named like a stat xprof groups steps by ([`XPROF_STATS`]:
//!   `correlation_id`, `group_id`, `_r`, `step_num`...) is written as `field.NAME`, so that
//!   it cannot undo the grouping;
//! - steps: a span named as one of the step spans given ([`Options::step_spans`], the CLI's
//!   `--step-span NAME`) or carrying a field named `step` is a step marker: it gets the stats
//!   xprof groups steps by, `_r` = 1 (a root event, one step) and `step_num` (the `step`
//!   field when it is an integer, else the marker's count on its process, from 0), so that the
//!   Overview page shows step times.
//!
//! Memory: an XSpace is one protobuf message whose planes and lines are length-prefixed, so
//! nothing can be written before the last span is known. The writer keeps each line's events
//! encoded (tens of bytes an event, and 24 to sort them by start), the names interned, and
//! writes each file straight from them at the end: memory grows with the output's size, not
//! with what the decoder holds. A plane whose events pass protobuf's 2 GiB message limit, which
//! xprof could not read, stops the export with an error there, which bounds the memory too.

use std::{
    borrow::Cow,
    collections::HashSet,
    io::{self, Write},
    path::{Path, PathBuf},
};

use super::spans::{LinkKind, OutSpan, Source, SpanWriter, TraceInfo};
use crate::{decode::FieldValue, model::Trace};

mod device;
pub mod proto;
mod space;
mod ties;
mod writer;

use proto::{StatValue, XEvent, XStat};
use space::{Line, Placed, Space};
use ties::{EventAt, Ties};
use writer::SpaceWriter;

/// How many events a span shows as logs: none, every event is an event of its own.
pub(crate) const LOGS: usize = 0;
/// The name xprof gives the host's plane.
pub(crate) const HOST_PLANE: &str = "/host:CPU";
/// The field that makes a span a step marker, and gives its number.
pub(crate) const STEP_FIELD: &str = waffle_wire::reserved::STEP;
/// The largest message protobuf parsers take.
const MAX_MESSAGE: usize = i32::MAX as usize;
/// The stats by which xprof groups events into steps (tsl's `group_events.cc`, xprof's
/// `xplane_to_step_events.cc`), and `flow`, which its trace viewer draws as arrows: the
/// export writes those it needs, and a field so named is written with [`FIELD_PREFIX`] in
/// front of its name. (`group_id` on any event tells xprof the profile is grouped already,
/// and it then groups nothing.)
pub const XPROF_STATS: [&str; 13] = [
    "_r",
    "_a",
    "_pt",
    "_ct",
    "_p",
    "_c",
    "_pid",
    "correlation_id",
    "group_id",
    "step_name",
    "step_num",
    "iter_num",
    "flow",
];
/// What a field named like one of [`XPROF_STATS`] is written with in front of its name.
pub(crate) const FIELD_PREFIX: &str = "field.";

/// What the XSpace export is told besides the trace.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Names of the spans that are steps (besides spans with a `step` field).
    pub step_spans: Vec<String>,
}

/// Writes `trace` as one XSpace.
pub fn write(trace: &Trace, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    write_from(Source::Trace(trace), options, out)
}

/// Writes the spans of `source` (files scanned with [`LOGS`]) to `out` as one XSpace.
pub(crate) fn write_from(source: Source<'_>, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let mut w = SpaceWriter::new(options, false);
    crate::spans::write_spans(source, &mut w)?;
    w.finish()?;
    let mut space = w.spaces.pop().unwrap_or_default();
    space.write(out)
}

/// Writes the spans of `source` under `dir` as TensorBoard's profile plugin lays a run out:
/// `dir/plugins/profile/<run>/<host>.xplane.pb`, one XSpace per host; the files written.
/// Each file is written whole or not at all ([`super::write_file`]).
pub(crate) fn write_dir_from(
    source: Source<'_>,
    options: &Options,
    dir: &Path,
    run: Option<&str>,
) -> io::Result<Vec<PathBuf>> {
    let mut w = SpaceWriter::new(options, true);
    crate::spans::write_spans(source, &mut w)?;
    w.finish()?;
    let run = run.map_or_else(|| run_name(w.origin), str::to_owned);
    let run_dir = dir.join("plugins").join("profile").join(run);
    std::fs::create_dir_all(&run_dir)?;
    let mut written = Vec::new();
    for space in &mut w.spaces {
        let path = run_dir.join(format!("{}.xplane.pb", file_name(&space.hosts[0])));
        super::write_file(&path, |out| space.write(out))?;
        written.push(path);
    }
    Ok(written)
}

/// Writes `trace` under `dir` as [`write_dir_from`] does.
pub fn write_dir(
    trace: &Trace,
    options: &Options,
    dir: &Path,
    run: Option<&str>,
) -> io::Result<Vec<PathBuf>> {
    write_dir_from(Source::Trace(trace), options, dir, run)
}

/// The run directory's name TensorBoard gives a profile taken at `unix_ns`:
/// `YYYY_MM_DD_HH_MM_SS`, UTC.
pub fn run_name(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    format!("{year:04}_{month:02}_{day:02}_{h:02}_{m:02}_{s:02}")
}

/// A host name as a file name: `localhost` when unknown, path separators replaced.
fn file_name(host: &str) -> String {
    match host {
        "" => "localhost".to_owned(),
        h => h.replace(['/', '\\'], "_"),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod ties_tests;
