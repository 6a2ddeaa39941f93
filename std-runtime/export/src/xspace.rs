//! TensorBoard's profile format (`.xplane.pb`): an `XSpace` as the profile plugin (xprof) reads
//! it, written from `trace.bin` files or a [`Trace`]. The rules every format shares (ids, which
//! item a link resolves to, correlation groups, the order spans come in) are in
//! [`super::spans`]; every event is an item of its own here, none is a log of its span.
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

use super::spans::{Context, LinkKind, OutSpan, Source, SpanWriter};
use crate::{decode::FieldValue, model::Trace};

mod device;
pub mod proto;
mod space;
mod ties;
use proto::{StatValue, XEvent, XStat};
use space::{Line, Placed, Space};
use ties::{EventAt, Ties};

/// How many events a span shows as logs: none, every event is an event of its own.
pub(crate) const LOGS: usize = 0;
/// The name xprof gives the host's plane.
pub const HOST_PLANE: &str = "/host:CPU";
/// The field that makes a span a step marker, and gives its number.
pub const STEP_FIELD: &str = waffle_wire::reserved::STEP;
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
pub const FIELD_PREFIX: &str = "field.";

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
    let mut w = Writer::new(options, false);
    source.write(&mut w)?;
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
    let mut w = Writer::new(options, true);
    source.write(&mut w)?;
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

/// The writer: each process's threads on its space's plane.
struct Writer<'o> {
    options: &'o Options,
    /// One space per host, or one for everything.
    by_host: bool,
    spaces: Vec<Space>,
    /// Per process: where its lines are, its steps counted.
    at: Vec<At>,
    started: bool,
    /// The earliest record, Unix ns.
    origin: u64,
    /// Whether any line is a device track's: then device slices are tied to the host.
    devices: bool,
    ties: Ties,
}

/// Where a process's lines are: its space, its threads' lines from `first_line` on, then the
/// line of its detached spans; and its steps counted.
#[derive(Clone, Copy, Default)]
struct At {
    space: usize,
    first_line: usize,
    threads: usize,
    steps: i64,
}

impl<'o> Writer<'o> {
    fn new(options: &'o Options, by_host: bool) -> Self {
        Writer {
            options,
            by_host,
            spaces: Vec::new(),
            at: Vec::new(),
            started: false,
            origin: 0,
            devices: false,
            ties: Ties::default(),
        }
    }

    /// Every span is in: ties device slices to the host (`ties.rs`).
    fn finish(&mut self) -> io::Result<()> {
        std::mem::take(&mut self.ties).apply(&mut self.spaces)
    }

    /// Lays out every space and line, once the first pass has found them all.
    fn start(&mut self, ctx: &Context) {
        self.started = true;
        self.origin = ctx.first_ns.iter().flatten().min().copied().unwrap_or(0);
        for (p, process) in ctx.processes.iter().enumerate() {
            let host = &process.header.host;
            let s = match self.spaces.iter().position(|s| !self.by_host || s.hosts[0] == *host) {
                Some(s) => s,
                None => {
                    self.spaces.push(Space { hosts: vec![host.clone()], ..Space::default() });
                    self.spaces.len() - 1
                }
            };
            let space = &mut self.spaces[s];
            if !space.hosts.contains(host) {
                space.hosts.push(host.clone());
            }
            space.processes.push(p);
            self.at.push(At { space: s, ..At::default() });
        }
        for (s, space) in self.spaces.iter_mut().enumerate() {
            let several = space.processes.len() > 1;
            let mut tids = HashSet::new();
            let mut fresh = space
                .processes
                .iter()
                .flat_map(|p| ctx.processes[*p].threads.iter().map(|t| t.tid))
                .max()
                .unwrap_or(0);
            // Device tracks' (plane, line id) so far: line ids are unique on each plane.
            let mut device_lines: Vec<(String, i64)> = Vec::new();
            for &p in &space.processes {
                let process = &ctx.processes[p];
                let first_line = space.lines.len();
                self.at[p] = At { space: s, first_line, threads: process.threads.len(), steps: 0 };
                let timestamp_ns = ctx.first_ns[p].unwrap_or(0) as i64;
                let prefix = match several {
                    true => format!("{} (pid {}): ", process.header.name, process.header.pid),
                    false => String::new(),
                };
                for thread in &process.threads {
                    if thread.device {
                        // A device track: a line of its device's plane, numbered on it.
                        let plane = device::plane_name(&thread.name);
                        let n = device_lines.iter().filter(|(p, _)| *p == plane).count() as i64;
                        device_lines.push((plane.clone(), n));
                        let mut line = Line::new(n, format!("{prefix}{}", thread.name), timestamp_ns, false);
                        line.plane = Some(plane);
                        space.lines.push(line);
                        self.devices = true;
                        continue;
                    }
                    let id = if tids.insert(thread.tid) {
                        thread.tid
                    } else {
                        fresh += 1;
                        fresh
                    };
                    let name = match thread.name.as_str() {
                        "" => format!("{prefix}thread {}", thread.tid),
                        name => format!("{prefix}{name}"),
                    };
                    space.lines.push(Line::new(id as i64, name, timestamp_ns, false));
                }
                // Its id is given when it is written, if it has events.
                space.lines.push(Line::new(0, format!("{prefix}detached spans"), timestamp_ns, true));
            }
        }
    }
}

impl SpanWriter for Writer<'_> {
    const LOGS: usize = LOGS;

    fn begin_process(&mut self, ctx: &Context, _process: usize) -> io::Result<()> {
        if !self.started {
            self.start(ctx);
        }
        Ok(())
    }

    fn span(&mut self, _ctx: &Context, s: &OutSpan<'_>) -> io::Result<()> {
        let at = &mut self.at[s.process];
        let (space_index, first_line, threads, steps) = (at.space, at.first_line, at.threads, &mut at.steps);
        let space = &mut self.spaces[space_index];
        // A detached span may end on another thread, after spans that began later on its own:
        // it goes to the process's line of detached spans, so that thread lines nest.
        let line_index = match s.detached && !s.event {
            true => first_line + threads,
            false => first_line + s.thread,
        };
        let line = &mut space.lines[line_index];
        let mut stats = Vec::with_capacity(s.fields.len() + 4);
        let mut named = HashSet::new();
        let mut step = None;
        for (name, v) in s.fields() {
            // A field must not pass for a stat xprof's grouping reads.
            let name = match XPROF_STATS.contains(&name) {
                true => Cow::Owned(format!("{FIELD_PREFIX}{name}")),
                false => Cow::Borrowed(name),
            };
            if !named.insert(name.clone()) {
                continue;
            }
            if name == STEP_FIELD && !s.event {
                step = Some(match v {
                    FieldValue::U64(n) => i64::try_from(n).ok(),
                    FieldValue::I64(n) => Some(n),
                    _ => None,
                });
            }
            stats.push(XStat { metadata_id: space.stats.id(&name), value: Some(stat_value(v)) });
        }
        let mut put = |name: &'static str, value: StatValue, stats: &mut Vec<XStat>| {
            if named.insert(Cow::Borrowed(name)) {
                stats.push(XStat { metadata_id: space.stats.id(name), value: Some(value) });
            }
        };
        put("waffle.id", StatValue::Str(format!("{:016x}", s.id)), &mut stats);
        if let Some(parent) = s.parent.or(s.unresolved_parent) {
            put("waffle.parent", StatValue::Str(format!("{parent:016x}")), &mut stats);
        }
        if !s.caused_by.is_empty() {
            let ids: Vec<String> = s.caused_by.iter().map(|id| format!("{id:016x}")).collect();
            put("waffle.caused_by", StatValue::Str(ids.join(", ")), &mut stats);
        }
        if let (Some(value), false) = (s.correlation, s.callsite.correlate.is_empty()) {
            put("waffle.correlate", StatValue::Str(format!("{}={value}", s.callsite.correlate)), &mut stats);
        }
        for (name, on) in [
            ("waffle.unfinished", !s.ended),
            ("waffle.detached", s.detached),
            ("waffle.stand_in", s.stand_in),
            ("waffle.event", s.event),
        ] {
            if on {
                put(name, StatValue::Uint64(1), &mut stats);
            }
        }
        let is_step = !s.event && (step.is_some() || self.options.step_spans.contains(&s.callsite.name));
        if is_step {
            let num = step.flatten().unwrap_or(*steps);
            *steps += 1;
            put("_r", StatValue::Int64(1), &mut stats);
            put("step_num", StatValue::Int64(num), &mut stats);
        }
        let offset_ns = s.start_ns.saturating_sub(line.head.timestamp_ns as u64);
        let event = XEvent {
            metadata_id: space.events.id(&s.callsite.name),
            offset_ps: ps(offset_ns),
            duration_ps: ps(s.end_ns - s.start_ns),
            stats,
        };
        let end_ps = event.offset_ps.saturating_add(event.duration_ps);
        line.head.duration_ps = line.head.duration_ps.max(end_ps);
        let at = line.events.len();
        prost::encoding::message::encode(4, &event, &mut line.events);
        let len = line.events.len() - at;
        // The plane's events so far bound the writer's memory: past protobuf's limit, stop.
        space.bytes += len;
        if space.bytes > MAX_MESSAGE {
            return Err(space::too_large(&space.hosts[0]));
        }
        let (at, len) = (at as u32, len as u32);
        let index = line.order.len() as u32;
        line.order.push(Placed { offset_ps: event.offset_ps, duration_ps: event.duration_ps, at, len });
        if self.devices {
            let at = EventAt { space: space_index as u32, line: line_index as u32, index };
            let times = [s.start_ns, s.end_ns];
            if line.plane.is_some() {
                // Its launcher: its first cause (`launched_by`), when that is in the trace.
                let first = s.links.iter().find(|l| l.kind == LinkKind::Cause && l.from_event.is_none());
                self.ties.slice(at, s.process, times, first.filter(|l| l.resolved).map(|l| l.span));
            } else {
                if s.referred {
                    self.ties.host(s.id, at);
                }
                if is_step {
                    self.ties.step(s.id, at, s.process, times);
                }
            }
        }
        Ok(())
    }
}

/// Nanoseconds as picoseconds, saturating (an `i64` of picoseconds spans 106 days).
fn ps(ns: u64) -> i64 {
    i64::try_from(ns.saturating_mul(1000)).unwrap_or(i64::MAX)
}

fn stat_value(v: FieldValue<'_>) -> StatValue {
    match v {
        FieldValue::U64(v) => StatValue::Uint64(v),
        FieldValue::I64(v) => StatValue::Int64(v),
        FieldValue::F64(v) => StatValue::Double(v),
        FieldValue::Bool(v) => StatValue::Uint64(u64::from(v)),
        FieldValue::Str(v) => StatValue::Str(v.to_owned()),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod ties_tests;
