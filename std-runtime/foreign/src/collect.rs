//! What the events say, gathered per thread: each slice and instant as a compact [`Ev`] (times
//! in nanoseconds, its callsite, its field values already encoded as the format's dynamic
//! values in one shared arena), the names metadata gives, and the flow points to resolve once
//! every thread is sorted.

use crate::values::{encode, lenient_f64, lenient_u64, ns};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

/// Categories whose events ran on a device (a GPU stream), in the profiler's dialect and its
/// older spellings: their threads are device queues.
const DEVICE_CATS: [&str; 7] =
    ["kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset", "gpu_op"];

/// The flows the profiler draws from a runtime launch to what it launched: both ends carry the
/// `correlation` argument, which links them already (see `write.rs`).
const LAUNCH_FLOW_CAT: &str = "ac2g";

/// The argument that pairs a runtime launch with the device work it launched.
pub(crate) const CORRELATION: &str = "correlation";

/// One entry of `traceEvents`, every field as the file gives it: tools disagree on types
/// (`pid` and `tid` may be numbers or strings, `id` too), so they are taken as values and
/// read leniently by the collector.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawEvent {
    pub ph: Option<Value>,
    pub name: Option<Value>,
    pub cat: Option<Value>,
    pub pid: Option<Value>,
    pub tid: Option<Value>,
    pub ts: Option<Value>,
    pub dur: Option<Value>,
    pub id: Option<Value>,
    pub bp: Option<Value>,
    pub args: Option<Value>,
}

/// What the top-level object says besides its events.
#[derive(Debug, Default)]
pub(crate) struct Meta {
    pub base_ns: Option<u64>,
    pub rank: Option<u64>,
    pub kineto: bool,
    pub trace_name: Option<String>,
}

/// A process or thread id as the file gives it: a number, or a name (the profiler's own rows).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    Int(i64),
    Str(String),
}

impl Key {
    fn of(v: Option<&Value>) -> Key {
        match v {
            Some(Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or_else(|| Key::Str(n.to_string()), Key::Int),
            Some(Value::String(s)) => s.trim().parse().map_or_else(|_| Key::Str(s.clone()), Key::Int),
            Some(other) => Key::Str(other.to_string()),
            None => Key::Int(0),
        }
    }
}

/// A slice (begin and end) or an instant, on its thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ev {
    pub start: u64,
    pub end: u64,
    pub site: u32,
    /// Its field values' bytes in [`Collector::arena`].
    pub args: (u32, u32),
    /// Its `correlation` argument, else 0.
    pub correlation: u64,
    /// A span, or an instant.
    pub span: bool,
}

/// A `B` waiting for its `E`.
struct Open {
    start: u64,
    name: String,
    cat: String,
    args: Option<Value>,
}

/// One (pid, tid) of the file.
pub(crate) struct Thread {
    pub pid: Key,
    pub tid: Key,
    /// Whether device work ran on it (a GPU stream).
    pub device: bool,
    pub evs: Vec<Ev>,
    open: Vec<Open>,
}

/// A callsite: kind, name, category (kept as its module path) and its fields' keys.
#[derive(Debug)]
pub(crate) struct Site {
    pub span: bool,
    pub name: String,
    pub cat: String,
    pub keys: Vec<String>,
}

/// A flow point (`s`, `t` or `f`) on a thread, bound to a slice once the thread is sorted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Flow {
    pub thread: u32,
    pub at: u64,
    pub phase: u8,
    /// Bound to the slice enclosing it (`s`, `t`, or `f` with `"bp": "e"`), else to the next
    /// slice that begins on its thread.
    pub enclosing: bool,
    pub key: u32,
}

/// Events the conversion could not keep, by reason, for one warning each.
#[derive(Debug, Default)]
pub(crate) struct Skipped {
    pub no_time: u64,
    pub unmatched_end: u64,
    /// Phases with no counterpart in waffle's model (async and object events, samples...).
    pub phases: HashMap<String, u64>,
}

/// Everything gathered from one file.
#[derive(Default)]
pub(crate) struct Collector {
    pub meta: Meta,
    pub threads: Vec<Thread>,
    thread_ix: HashMap<(Key, Key), u32>,
    pub process_names: HashMap<Key, String>,
    pub thread_names: HashMap<(Key, Key), String>,
    pub sites: Vec<Site>,
    site_ix: HashMap<String, u32>,
    pub arena: Vec<u8>,
    pub flows: Vec<Flow>,
    flow_keys: HashMap<(String, String, String), u32>,
    pub skipped: Skipped,
    /// Events read, of any phase.
    pub events: u64,
    keys: Vec<(String, Value)>,
}

fn text(v: Option<Value>) -> String {
    match v {
        Some(Value::String(s)) => s,
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The step number of the profiler's step marker, `ProfilerStep#N`.
fn profiler_step(name: &str) -> Option<i64> {
    name.strip_prefix("ProfilerStep#")?.parse().ok()
}

impl Collector {
    pub(crate) fn event(&mut self, ev: RawEvent) {
        self.events += 1;
        let ph = text(ev.ph);
        match ph.as_str() {
            "M" => return self.metadata(ev.pid.as_ref(), ev.tid.as_ref(), &text(ev.name), ev.args),
            "X" | "B" | "E" | "i" | "I" | "n" | "C" | "s" | "t" | "f" => {}
            _ => {
                *self.skipped.phases.entry(ph).or_default() += 1;
                return;
            }
        }
        let Some(ts) = ev.ts.as_ref().and_then(lenient_f64) else {
            self.skipped.no_time += 1;
            return;
        };
        let at = ns(ts);
        let cat = text(ev.cat);
        let thread = self.thread(Key::of(ev.pid.as_ref()), Key::of(ev.tid.as_ref()));
        if ph != "E"
            && ph != "s"
            && ph != "t"
            && ph != "f"
            && DEVICE_CATS.iter().any(|c| cat.eq_ignore_ascii_case(c))
        {
            self.threads[thread as usize].device = true;
        }
        match ph.as_str() {
            "X" => {
                let dur = ev.dur.as_ref().and_then(lenient_f64).unwrap_or(0.0);
                let end = ns(ts + dur.max(0.0)).max(at);
                self.slice(thread, (at, end), true, (text(ev.name), cat), ev.args.as_ref());
            }
            "B" => {
                let open = Open { start: at, name: text(ev.name), cat, args: ev.args };
                self.threads[thread as usize].open.push(open);
            }
            "E" => match self.threads[thread as usize].open.pop() {
                Some(open) => {
                    let args = merge(open.args, ev.args);
                    self.slice(
                        thread,
                        (open.start, at.max(open.start)),
                        true,
                        (open.name, open.cat),
                        args.as_ref(),
                    );
                }
                None => self.skipped.unmatched_end += 1,
            },
            "s" | "t" | "f" => {
                if cat != LAUNCH_FLOW_CAT {
                    let enclosing = ph != "f" || matches!(ev.bp.as_ref(), Some(Value::String(s)) if s == "e");
                    let key = (cat, text(ev.name), text(ev.id));
                    let next = self.flow_keys.len() as u32;
                    let key = *self.flow_keys.entry(key).or_insert(next);
                    self.flows.push(Flow { thread, at, phase: ph.as_bytes()[0], enclosing, key });
                }
            }
            // Instants and counters: an event with the arguments as fields.
            _ => self.slice(thread, (at, at), false, (text(ev.name), cat), ev.args.as_ref()),
        }
    }

    /// Closes every `B` still open at the end of the file, at its thread's last time.
    pub(crate) fn close_open(&mut self) -> u64 {
        let mut closed = 0;
        for t in 0..self.threads.len() {
            let last = self.threads[t].evs.iter().map(|e| e.end).max().unwrap_or(0);
            while let Some(open) = self.threads[t].open.pop() {
                closed += 1;
                let end = last.max(open.start);
                self.slice(t as u32, (open.start, end), true, (open.name, open.cat), open.args.as_ref());
            }
        }
        closed
    }

    fn metadata(&mut self, pid: Option<&Value>, tid: Option<&Value>, what: &str, args: Option<Value>) {
        let Some(Value::String(name)) = args.and_then(|a| a.get("name").cloned()) else { return };
        match what {
            "process_name" => {
                self.process_names.insert(Key::of(pid), name);
            }
            "thread_name" => {
                self.thread_names.insert((Key::of(pid), Key::of(tid)), name);
            }
            _ => {}
        }
    }

    fn thread(&mut self, pid: Key, tid: Key) -> u32 {
        if let Some(&t) = self.thread_ix.get(&(pid.clone(), tid.clone())) {
            return t;
        }
        let t = self.threads.len() as u32;
        self.thread_ix.insert((pid.clone(), tid.clone()), t);
        self.threads.push(Thread { pid, tid, device: false, evs: Vec::new(), open: Vec::new() });
        t
    }

    /// Adds a slice (or an instant, `span` false) to `thread`; `step` is put first among its
    /// fields when its name is the profiler's step marker.
    fn slice(
        &mut self,
        thread: u32,
        (start, end): (u64, u64),
        span: bool,
        (name, cat): (String, String),
        args: Option<&Value>,
    ) {
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        if let Some(step) = profiler_step(&name) {
            keys.push((waffle_wire::reserved::STEP.to_owned(), Value::from(step)));
        }
        let mut correlation = 0;
        if let Some(Value::Object(map)) = args {
            let first = keys.len();
            for (k, v) in map {
                if k == CORRELATION {
                    correlation = lenient_u64(v).unwrap_or(0);
                }
                keys.push((k.clone(), v.clone()));
            }
            keys[first..].sort_by(|a, b| a.0.cmp(&b.0));
        }
        let site = self.site(span, &name, &cat, &keys);
        let from = self.arena.len() as u32;
        for (_, v) in &keys {
            encode(v, &mut self.arena);
        }
        let args = (from, self.arena.len() as u32);
        let t = &mut self.threads[thread as usize];
        t.evs.push(Ev { start, end, site, args, correlation, span });
        self.keys = keys;
    }

    fn site(&mut self, span: bool, name: &str, cat: &str, keys: &[(String, Value)]) -> u32 {
        let mut id = String::with_capacity(name.len() + cat.len() + 16 * keys.len() + 4);
        id.push(if span { 'S' } else { 'E' });
        for part in [name, cat].into_iter().chain(keys.iter().map(|(k, _)| k.as_str())) {
            id.push('\0');
            id.push_str(part);
        }
        if let Some(&s) = self.site_ix.get(&id) {
            return s;
        }
        let s = self.sites.len() as u32;
        let keys = keys.iter().map(|(k, _)| k.clone()).collect();
        self.sites.push(Site { span, name: name.to_owned(), cat: cat.to_owned(), keys });
        self.site_ix.insert(id, s);
        s
    }
}

/// `B`'s arguments with `E`'s added (the end's win where both give a key).
fn merge(begin: Option<Value>, end: Option<Value>) -> Option<Value> {
    match (begin, end) {
        (Some(Value::Object(mut b)), Some(Value::Object(e))) => {
            b.extend(e);
            Some(Value::Object(b))
        }
        (b, None) => b,
        (None, e) => e,
        (b, Some(_)) => b,
    }
}
