//! Chrome trace-event JSON (`.chrome.json`): `{"traceEvents": [...], "displayTimeUnit": "ns"}`,
//! for chrome://tracing, Perfetto UI's JSON import and other trace viewers.
//!
//! The mapping:
//! - each process is a pid, its own unless another input already used it (or it is 0): then a
//!   fresh one above Linux's largest pid. Tids get the same treatment over the whole
//!   trace, and a main thread (tid = pid) follows its process. `M` events name processes
//!   (`process_name`, with the rank when the header has one; `process_labels` with the host and
//!   labels; `process_sort_index`) and rows (`thread_name`, `thread_sort_index`);
//! - a span is a complete event (`X`) on its thread's row; `ts` and `dur` are microseconds,
//!   written with three decimals so that nanoseconds survive. A double cannot hold Unix time in
//!   nanoseconds, so `ts` counts from the trace's earliest record, whose Unix time in
//!   nanoseconds is `otherData.waffle_origin_unix_ns` (a string). Fields are
//!   `args`, with `waffle.id`, `waffle.parent`, `waffle.caused_by` (ids in hex),
//!   `waffle.correlate` (`key=value`), and `waffle.unfinished`, `waffle.detached`,
//!   `waffle.stand_in`, `waffle.cut` (its end cut to nest) where they apply. A field named
//!   like one of these keeps its value. Integers beyond ±(2^53 − 1) and non-finite floats are
//!   strings, which JavaScript viewers read without loss;
//! - a detached span (an async span, which may end on another thread) gets a row of its own,
//!   named after it, so that the thread rows still nest (see `rows`);
//! - an event is an instant, `"ph": "i"` with thread scope `"s": "t"`, on its thread's row;
//! - causality is flows, one id per arrow, matched on `(id, cat, name)` with `cat` `waffle`:
//!   `s` on the cause (it binds to the enclosing slice) and `f` with `"bp": "e"` on the effect
//!   (binding to its enclosing slice, not the next one). Names tell the relation: `caused_by`
//!   for each link, `correlated` between consecutive members of a correlation group, and
//!   `parent` from a parent that is not an enclosing slice on the child's row (a context
//!   entered on another thread or in another process, a detached span). An event takes part
//!   through the slice enclosing it; an event that has none and takes part in a flow is a
//!   zero-length `X` slice instead of an instant, so the flow has a slice to bind to.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use serde_json::{json, Map, Value as Json};

use crate::model::{Callsite, Item, ItemRef, Trace, Value};

mod rows;

use rows::{Entry, Rows};

/// Remapped pids and tids start above Linux's `PID_MAX_LIMIT`, so they never look real.
const FRESH_ID_BASE: i64 = 1 << 22;
/// The category of every flow.
const FLOW_CAT: &str = "waffle";
/// Integers a JavaScript number holds exactly.
const MAX_SAFE_INT: u64 = (1 << 53) - 1;

/// Writes `trace` as Chrome trace-event JSON.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &to_json(trace))?;
    out.write_all(b"\n")?;
    out.flush()
}

/// `trace` as a Chrome trace-event JSON object.
pub fn to_json(trace: &Trace) -> Json {
    let rows = Rows::of(trace);
    let ids = Ids::assign(trace, &rows);
    let flows = flows(trace, &rows);
    let endpoints: HashSet<ItemRef> = flows.iter().flat_map(|f| [f.from, f.to]).collect();
    let origin = origin(trace);
    let at = |ns: u64| us(ns.saturating_sub(origin));
    let mut events = metadata(trace, &rows, &ids);
    for (k, row) in rows.rows.iter().enumerate() {
        let (pid, tid) = (ids.pids[row.process], ids.rows[k]);
        let thread = &trace.processes[row.process].threads[row.thread];
        for &entry in &row.order {
            events.push(match entry {
                Entry::Slice(i) => {
                    let slice = &row.slices[i];
                    let s = &thread.spans[slice.span];
                    let mut args = fields(&s.callsite, &s.fields);
                    causal_args(&mut args, s.id, s.parent, &s.links, &s.callsite, s.correlation);
                    let flags = [
                        ("waffle.unfinished", !s.ended),
                        ("waffle.detached", s.detached),
                        ("waffle.stand_in", s.id == 0),
                        ("waffle.cut", slice.cut),
                    ];
                    for (key, _) in flags.iter().filter(|(_, on)| *on) {
                        args.entry(*key).or_insert(json!(true));
                    }
                    let mut e = record("X", &s.callsite, pid, tid, at(slice.start), args);
                    e["dur"] = us(slice.end - slice.start);
                    e
                }
                Entry::Event(i, enclosing) => {
                    let e = &thread.events[i];
                    let mut args = fields(&e.callsite, &e.fields);
                    causal_args(&mut args, e.id, e.parent, &e.links, &e.callsite, e.correlation);
                    let r = ItemRef { process: row.process, thread: row.thread, item: Item::Event(i) };
                    if enclosing.is_none() && endpoints.contains(&r) {
                        let mut x = record("X", &e.callsite, pid, tid, at(e.ts_ns), args);
                        x["dur"] = us(0);
                        x
                    } else {
                        let mut instant = record("i", &e.callsite, pid, tid, at(e.ts_ns), args);
                        instant["s"] = json!("t");
                        instant
                    }
                }
            });
        }
    }
    for (n, f) in flows.iter().enumerate() {
        for (ph, r) in [("s", f.from), ("f", f.to)] {
            let (row, _, ts) = rows.binding(trace, r);
            let mut e = json!({
                "ph": ph, "id": n + 1, "cat": FLOW_CAT, "name": f.name,
                "pid": ids.pids[rows.rows[row].process], "tid": ids.rows[row], "ts": at(ts),
            });
            if ph == "f" {
                e["bp"] = json!("e");
            }
            events.push(e);
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": { "waffle_origin_unix_ns": origin.to_string() },
    })
}

/// The time of the earliest record (0 for an empty trace), Unix ns.
fn origin(trace: &Trace) -> u64 {
    let threads = trace.processes.iter().flat_map(|p| &p.threads);
    let starts =
        threads.flat_map(|t| t.spans.iter().map(|s| s.start_ns).chain(t.events.iter().map(|e| e.ts_ns)));
    starts.min().unwrap_or(0)
}

/// The `M` events naming processes and rows.
fn metadata(trace: &Trace, rows: &Rows, ids: &Ids) -> Vec<Json> {
    let mut events = Vec::new();
    for (p, process) in trace.processes.iter().enumerate() {
        let pid = ids.pids[p];
        let meta = |name: &str, args: Json| json!({ "ph": "M", "name": name, "pid": pid, "args": args });
        let name = match process.label("rank") {
            Some(rank) => format!("{} (rank {rank})", process.name),
            None => process.name.clone(),
        };
        events.push(meta("process_name", json!({ "name": name })));
        let mut labels = Vec::with_capacity(process.labels.len() + 1);
        if !process.host.is_empty() {
            labels.push(format!("host={}", process.host));
        }
        labels.extend(process.labels.iter().map(|(k, v)| format!("{k}={v}")));
        if !labels.is_empty() {
            events.push(meta("process_labels", json!({ "labels": labels.join(", ") })));
        }
        events.push(meta("process_sort_index", json!({ "sort_index": p })));
    }
    let mut sort_index: HashMap<usize, usize> = HashMap::new();
    for (k, row) in rows.rows.iter().enumerate() {
        let thread = &trace.processes[row.process].threads[row.thread];
        let name = match row.detached {
            Some(i) => thread.spans[i].name().to_owned(),
            None if thread.name.is_empty() => format!("thread {}", thread.tid),
            None => thread.name.clone(),
        };
        let index = sort_index.entry(row.process).or_default();
        let (pid, tid) = (ids.pids[row.process], ids.rows[k]);
        events.push(
            json!({ "ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": { "name": name } }),
        );
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": { "sort_index": *index },
        }));
        *index += 1;
    }
    events
}

/// A span's or an event's record, before its phase-specific keys.
fn record(ph: &str, callsite: &Callsite, pid: i64, tid: i64, ts: Json, args: Map<String, Json>) -> Json {
    let cat = if callsite.module.is_empty() { "waffle" } else { &callsite.module };
    json!({ "ph": ph, "name": callsite.name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "args": args })
}

fn fields(callsite: &Callsite, values: &[Value]) -> Map<String, Json> {
    let mut args = Map::new();
    for ((name, _), v) in callsite.fields.iter().zip(values) {
        args.entry(name.as_str()).or_insert_with(|| value(v));
    }
    args
}

fn causal_args(
    args: &mut Map<String, Json>,
    id: u64,
    parent: Option<u64>,
    links: &[u64],
    callsite: &Callsite,
    correlation: Option<u64>,
) {
    if id != 0 {
        args.entry("waffle.id").or_insert_with(|| json!(format!("{id:016x}")));
    }
    if let Some(parent) = parent {
        args.entry("waffle.parent").or_insert_with(|| json!(format!("{parent:016x}")));
    }
    if !links.is_empty() {
        let ids: Vec<String> = links.iter().map(|id| format!("{id:016x}")).collect();
        args.entry("waffle.caused_by").or_insert_with(|| json!(ids.join(", ")));
    }
    if let (Some(value), false) = (correlation, callsite.correlate.is_empty()) {
        args.entry("waffle.correlate").or_insert_with(|| json!(format!("{}={value}", callsite.correlate)));
    }
}

fn value(v: &Value) -> Json {
    match v {
        Value::U64(v) if *v <= MAX_SAFE_INT => json!(v),
        Value::I64(v) if v.unsigned_abs() <= MAX_SAFE_INT => json!(v),
        Value::F64(v) => match serde_json::Number::from_f64(*v) {
            Some(n) => Json::Number(n),
            None if v.is_nan() => json!("NaN"),
            None if *v > 0.0 => json!("Infinity"),
            None => json!("-Infinity"),
        },
        Value::Bool(v) => json!(v),
        Value::Str(v) => json!(v),
        big => json!(big.to_string()),
    }
}

/// Nanoseconds as microseconds with three decimals: the decimal text parsed to the nearest
/// double, which prints back as that text, so no nanosecond is lost or invented (while `ns` is
/// below 2^53, about 104 days from the origin).
fn us(ns: u64) -> Json {
    let text = format!("{}.{:03}", ns / 1000, ns % 1000);
    let us: f64 = text.parse().unwrap_or(0.0);
    serde_json::Number::from_f64(us).map_or(Json::Null, Json::Number)
}

/// One arrow: `s` on `from`, `f` on `to`.
struct Flow {
    name: &'static str,
    from: ItemRef,
    to: ItemRef,
}

/// The arrows of `trace`: links, then correlation groups, then parents off the child's row,
/// each in the order of the trace, so the output does not depend on hashing.
fn flows(trace: &Trace, rows: &Rows) -> Vec<Flow> {
    let index = trace.index();
    let mut flows = Vec::new();
    let items = items(trace);
    for &r in &items {
        let links = trace.describe(r).links;
        for (k, cause) in links.iter().enumerate() {
            match index.get(cause) {
                Some(&c) if c != r && !links[..k].contains(cause) => {
                    flows.push(Flow { name: "caused_by", from: c, to: r })
                }
                _ => {}
            }
        }
    }
    for group in trace.correlations() {
        for pair in group.members.windows(2) {
            flows.push(Flow { name: "correlated", from: pair[0], to: pair[1] });
        }
    }
    for &r in &items {
        let Some(parent) = trace.describe(r).parent else { continue };
        match index.get(&parent) {
            Some(&p) if p != r && !rows.encloses(p, r) => flows.push(Flow { name: "parent", from: p, to: r }),
            _ => {}
        }
    }
    flows
}

/// Every span (stand-ins left out) and event of the trace, in order.
fn items(trace: &Trace) -> Vec<ItemRef> {
    let mut items = Vec::new();
    for (p, process) in trace.processes.iter().enumerate() {
        for (t, thread) in process.threads.iter().enumerate() {
            let spans =
                thread.spans.iter().enumerate().filter(|(_, s)| s.id != 0).map(|(i, _)| Item::Span(i));
            let events = (0..thread.events.len()).map(Item::Event);
            items.extend(spans.chain(events).map(|item| ItemRef { process: p, thread: t, item }));
        }
    }
    items
}

/// The pid of each process and the tid of each row as written: unique over the trace.
struct Ids {
    pids: Vec<i64>,
    rows: Vec<i64>,
}

impl Ids {
    fn assign(trace: &Trace, rows: &Rows) -> Ids {
        // Pids and tids share one space, as in the kernel: viewers that key threads by tid
        // alone (Perfetto's importer) must not confuse two processes' threads.
        let mut used = HashSet::new();
        let mut next_fresh = FRESH_ID_BASE;
        let mut claim = |wanted: Option<i64>| -> i64 {
            let id = match wanted {
                Some(id) if id > 0 && id <= i64::from(i32::MAX) && !used.contains(&id) => id,
                _ => loop {
                    next_fresh += 1;
                    if !used.contains(&next_fresh) {
                        break next_fresh;
                    }
                },
            };
            used.insert(id);
            id
        };
        let pids: Vec<i64> = trace.processes.iter().map(|p| claim(Some(p.pid.into()))).collect();
        let mut main_taken = vec![false; pids.len()];
        let rows = rows
            .rows
            .iter()
            .map(|row| {
                let process = &trace.processes[row.process];
                let tid = process.threads[row.thread].tid;
                match row.detached {
                    Some(_) => claim(None),
                    None if tid == u64::from(process.pid) && !main_taken[row.process] => {
                        main_taken[row.process] = true;
                        pids[row.process]
                    }
                    None => claim(i64::try_from(tid).ok()),
                }
            })
            .collect();
        Ids { pids, rows }
    }
}
