//! The XSpace writer: each finished span placed on its process's plane, as an event of its
//! thread's line with its fields and causes as stats; steps numbered as they come.

use super::*;

/// The writer: each process's threads on its space's plane.
pub(super) struct SpaceWriter<'o> {
    options: &'o Options,
    /// One space per host, or one for everything.
    by_host: bool,
    pub(super) spaces: Vec<Space>,
    /// Per process: where its lines are, its steps counted.
    at: Vec<At>,
    started: bool,
    /// The earliest record, Unix ns.
    pub(super) origin: u64,
    /// Whether any line is a device track's: then device slices are tied to the host.
    devices: bool,
    ties: Ties,
}

/// Where a process's lines are: its space, its threads' lines from `first_line` on, then the
/// line of its detached spans; and its steps counted.
#[derive(Clone, Copy, Default)]
pub(super) struct At {
    space: usize,
    first_line: usize,
    threads: usize,
    steps: i64,
}

impl<'o> SpaceWriter<'o> {
    pub(super) fn new(options: &'o Options, by_host: bool) -> Self {
        SpaceWriter {
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
    pub(super) fn finish(&mut self) -> io::Result<()> {
        std::mem::take(&mut self.ties).apply(&mut self.spaces)
    }

    /// Lays out every space and line, once the first pass has found them all.
    fn start(&mut self, ctx: &TraceInfo) {
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

impl SpanWriter for SpaceWriter<'_> {
    const LOGS: usize = LOGS;

    fn begin_process(&mut self, ctx: &TraceInfo, _process: usize) -> io::Result<()> {
        if !self.started {
            self.start(ctx);
        }
        Ok(())
    }

    fn span(&mut self, _ctx: &TraceInfo, s: &OutSpan<'_>) -> io::Result<()> {
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
        let is_step =
            !s.event && (step.is_some() || self.options.step_spans.iter().any(|n| *n == s.callsite.name));
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
pub(super) fn ps(ns: u64) -> i64 {
    i64::try_from(ns.saturating_mul(1000)).unwrap_or(i64::MAX)
}

pub(super) fn stat_value(v: FieldValue<'_>) -> StatValue {
    match v {
        FieldValue::U64(v) => StatValue::Uint64(v),
        FieldValue::I64(v) => StatValue::Int64(v),
        FieldValue::F64(v) => StatValue::Double(v),
        FieldValue::Bool(v) => StatValue::Uint64(u64::from(v)),
        FieldValue::Str(v) => StatValue::Str(v.to_owned()),
    }
}
