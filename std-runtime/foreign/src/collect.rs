//! Each event as the items it makes: a slice a span, an instant or counter an event, a `B` a
//! span that its `E` ends, a flow's points events whose correlation ties them in order. Every
//! argument becomes a field, encoded at once; the items go to their thread in [`Emit`], which
//! writes them as they come.

use crate::{
    emit::{Disorder, Emit, Ev, What},
    event::{Arg, Args, Event},
    place::{Key, Meta, Places},
    sites::{Sites, FLOW, LAUNCH},
    values::{encode, fnv, ns, FastMap},
    OpenOutput,
};
use std::{borrow::Cow, collections::HashMap, io};
use waffle_wire::reserved::{track::DEVICE_TID_BASE, LAUNCH_OP};

/// Categories whose events ran on a device (a GPU stream), in the profiler's dialect and its
/// older spellings: their threads are device queues.
const DEVICE_CATS: [&str; 7] =
    ["kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset", "gpu_op"];

/// The flows the profiler draws from a runtime launch to what it launched: both ends carry the
/// `correlation` argument, which ties them already.
const LAUNCH_FLOW_CAT: &str = "ac2g";

/// The argument that pairs a runtime launch with the device work it launched.
pub(crate) const CORRELATION: &str = "correlation";

/// The argument the profiler gives an operation and the device work launched inside it.
const EXTERNAL_ID: &str = "External id";

/// The category of the profiler's host operations (`aten::mm`...).
const CPU_OP: &str = "cpu_op";

/// Operations remembered by their `External id` for the device work they launch, which comes
/// within a few thousand events of them: a table of this many slots, each holding the latest
/// operation whose id falls in it (the profiler numbers them in order, so the last 65,536 are
/// all held).
const OPS_KEPT: usize = 1 << 16;

/// Events the conversion could not keep, by reason, for one warning each.
#[derive(Debug, Default)]
pub(crate) struct Skipped {
    pub no_time: u64,
    /// Phases with no counterpart in waffle's model (async and object events, samples...).
    pub phases: HashMap<String, u64>,
}

/// Why the conversion stopped before the end of the file.
#[derive(Debug)]
pub(crate) enum Stop {
    Disorder(Disorder),
    Io(io::Error),
}

/// One file's conversion in progress.
pub(crate) struct Collector<'a> {
    pub meta: Meta,
    pub sites: Sites,
    pub emit: Emit,
    /// Where each thread went.
    pub places: Places<'a>,
    /// What correlation values are salted with, so that two files' do not meet.
    pub salt: u64,
    pub skipped: Skipped,
    /// Events read, of any phase.
    pub events: u64,
    /// Set when the conversion must stop; later events are not read.
    pub stop: Option<Stop>,
    /// Recent host operations by `External id`: the id and the operation's number (its name
    /// in `op_names`) in the slot of the id, `OPS_KEPT` slots.
    ops: Vec<Option<(u64, u32)>>,
    op_names: FastMap<String, u32>,
    op_list: Vec<String>,
    fields: Vec<u8>,
}

/// The slot of `External id` `ext` in the table of recent operations.
fn slot_of(ext: u64) -> usize {
    (ext % OPS_KEPT as u64) as usize
}

/// The name the profiler's step markers, `ProfilerStep#N`, are given: one callsite for every
/// step (a name per step would make a callsite per step), the number in its `step` field.
pub(crate) const STEP_NAME: &str = "ProfilerStep";

/// The step number of the profiler's step marker, `ProfilerStep#N`.
fn profiler_step(name: &str) -> Option<i64> {
    name.strip_prefix(STEP_NAME)?.strip_prefix('#')?.parse().ok()
}

impl<'a> Collector<'a> {
    pub(crate) fn new(open: &'a mut OpenOutput<'_>, salt: u64, window: usize) -> Collector<'a> {
        Collector {
            meta: Meta::default(),
            sites: Sites::default(),
            emit: Emit::new(window),
            places: Places::new(open),
            salt,
            skipped: Skipped::default(),
            events: 0,
            stop: None,
            ops: Vec::new(),
            op_names: FastMap::default(),
            op_list: Vec::new(),
            fields: Vec::new(),
        }
    }

    pub(crate) fn event(&mut self, ev: &mut Event<'_>) {
        if self.stop.is_some() {
            return;
        }
        self.events += 1;
        let ph = ev.ph.text();
        match &*ph {
            "M" => {
                let args = std::mem::take(&mut ev.args);
                return self.metadata((Key::of(&ev.pid), Key::of(&ev.tid)), &ev.name.text(), args);
            }
            "X" | "B" | "E" | "i" | "I" | "n" | "C" | "s" | "t" | "f" => {}
            _ => {
                *self.skipped.phases.entry(ph.into_owned()).or_default() += 1;
                return;
            }
        }
        let Some(ts) = ev.ts.as_f64() else {
            self.skipped.no_time += 1;
            return;
        };
        let at = ns(ts);
        let cat = ev.cat.text();
        let flow = matches!(&*ph, "s" | "t" | "f");
        if flow && cat == LAUNCH_FLOW_CAT {
            return;
        }
        let device = !flow && ph != "E" && DEVICE_CATS.iter().any(|c| cat.eq_ignore_ascii_case(c));
        let thread = match self.places.thread(
            &mut self.emit,
            &self.meta,
            (Key::of(&ev.pid), Key::of(&ev.tid)),
            device,
        ) {
            Ok(t) => t,
            Err(e) => return self.stop = Some(Stop::Io(e)),
        };
        let name = ev.name.text();
        let mut args = std::mem::take(&mut ev.args.0);
        if !flow {
            self.launching_op(&name, &cat, device, &mut args);
        }
        match &*ph {
            "X" => {
                let dur = ev.dur.as_f64().unwrap_or(0.0);
                let end = ns(ts + dur.max(0.0)).max(at);
                self.item(thread, (What::Span, at, end), (&name, &cat), args, None);
            }
            "B" => self.item(thread, (What::Span, at, u64::MAX), (&name, &cat), args, None),
            "E" => self.put(thread, Ev::new(What::End, (at, at), 0, None)),
            "s" | "t" | "f" => {
                let id = ev.id.text();
                let value = fnv(self.salt, &[cat.as_bytes(), name.as_bytes(), id.as_bytes()]);
                let id = || vec![(Cow::Borrowed("id"), Arg::Str(id.clone()))];
                // A step is the effect of the point before and the cause of the next.
                if ph != "s" {
                    self.item(thread, (What::Instant, at, at), (&name, &cat), id(), Some((FLOW[1], value)));
                }
                if ph != "f" {
                    self.item(thread, (What::Instant, at, at), (&name, &cat), id(), Some((FLOW[0], value)));
                }
            }
            // Instants and counters: an event with the arguments as fields.
            _ => self.item(thread, (What::Instant, at, at), (&name, &cat), args, None),
        }
    }

    /// Notes a host operation by its `External id`, or gives device work the name of the
    /// operation with its `External id` (the one that launched it) as its `launch.op` field.
    fn launching_op<'e>(
        &mut self,
        name: &str,
        cat: &str,
        device: bool,
        args: &mut Vec<(Cow<'e, str>, Arg<'e>)>,
    ) {
        let Some(ext) = args.iter().find(|(k, _)| k == EXTERNAL_ID).and_then(|(_, v)| v.as_u64()) else {
            return;
        };
        if device {
            let slot = self.ops.get(slot_of(ext)).copied().flatten();
            if let Some((_, op)) = slot.filter(|&(id, _)| id == ext) {
                let key = Cow::Borrowed(LAUNCH_OP);
                let at = args.partition_point(|(k, _)| *k < key);
                args.insert(at, (key, Arg::Str(Cow::Owned(self.op_list[op as usize].clone()))));
            }
        } else if cat == CPU_OP {
            let op = match self.op_names.get(name) {
                Some(&op) => op,
                None => {
                    self.op_list.push(name.to_owned());
                    self.op_names.insert(name.to_owned(), self.op_list.len() as u32 - 1);
                    self.op_list.len() as u32 - 1
                }
            };
            if self.ops.is_empty() {
                self.ops = vec![None; OPS_KEPT];
            }
            self.ops[slot_of(ext)] = Some((ext, op));
        }
    }

    fn metadata(&mut self, (pid, tid): (Key, Key), what: &str, args: Args<'_>) {
        let Some((_, Arg::Str(name))) = args.0.into_iter().find(|(k, _)| k == "name") else { return };
        match what {
            "process_name" => self.places.name_process(pid, name.into_owned()),
            "thread_name" => self.places.name_thread(&mut self.emit, (pid, tid), name.into_owned()),
            _ => {}
        }
    }

    /// Adds an item made from an event: its fields (`step` first for the profiler's step
    /// marker, then the arguments by key), its callsite, and its correlation: `flow` for a
    /// flow's point, else a launch's or launched work's `correlation` argument.
    fn item(
        &mut self,
        thread: usize,
        (what, start, end): (What, u64, u64),
        (name, cat): (&str, &str),
        mut args: Vec<(Cow<'_, str>, Arg<'_>)>,
        flow: Option<(&'static str, u64)>,
    ) {
        let step = profiler_step(name);
        if let Some(step) = step {
            let value = u64::try_from(step).map_or(Arg::I64(step), Arg::U64);
            args.insert(0, (Cow::Borrowed(waffle_wire::reserved::STEP), value));
        }
        let name = if step.is_some() { STEP_NAME } else { name };
        let mut correlation = flow;
        if flow.is_none() {
            if let Some((_, v)) = args.iter().find(|(k, _)| k == CORRELATION) {
                let key = LAUNCH[usize::from(self.emit.threads[thread].tid >= DEVICE_TID_BASE)];
                correlation = v.as_u64().map(|c| (key, fnv(self.salt, &[&c.to_le_bytes()])));
            }
        }
        let keys = args.iter().map(|(k, _)| &**k);
        let site = self.sites.get(what == What::Span, (name, cat), keys, correlation.map_or("", |c| c.0));
        let mut fields = std::mem::take(&mut self.fields);
        fields.clear();
        for (_, v) in &args {
            encode(v, &mut fields);
        }
        let ev = Ev::new(what, (start, end), site, correlation.map(|c| c.1));
        self.put_fields(thread, ev, &fields);
        self.fields = fields;
    }

    fn put(&mut self, thread: usize, ev: Ev) {
        self.put_fields(thread, ev, &[]);
    }

    fn put_fields(&mut self, thread: usize, ev: Ev, fields: &[u8]) {
        let output = self.emit.threads[thread].output;
        self.places.processes[output].events += u64::from(ev.what != What::End);
        match self.emit.push(thread, ev, fields, &self.sites) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.stop = Some(Stop::Io(e)),
            Err(d) => self.stop = Some(Stop::Disorder(d)),
        }
    }
}
