//! `waffle-decode --follow FILES -o OUT.json`: Chrome trace-event JSON in its array form,
//! appended to while the traced programs run.
//!
//! The array form (`[event, event, ...`) may lack its closing `]`: chrome://tracing and
//! Perfetto UI load a file cut there. So the file is opened with `[` at once, each span is
//! appended as a line soon after its end is read, and whatever has come is written out (and
//! flushed) every batch delay (250 ms by default). What is on disk after each write is whole
//! events, so the text with a `]` added parses; once every file is done, the `]` is written
//! and the file is a complete JSON document.
//!
//! The events are those `chrome` writes for the same spans, as far as one pass
//! allows: a complete event (`X`) per span with the same `args`, an instant per event,
//! `process_name` / `process_labels` / `process_sort_index` metadata when a file's header is
//! read and `thread_name` / `thread_sort_index` when a thread is (or at its first span, if its
//! name comes later), a detached span on a row of its own. Pids and tids are assigned as in
//! the file export (its own unless taken or 0, a main thread follows its process), in the
//! order files and threads are read. What differs:
//! - no flow events: a causal link's two ends are rarely both known in one pass (the cause of a
//!   span may still be open, or in another file), so causes stay in the `waffle.caused_by` and
//!   `waffle.parent` args, and an event is always an instant, never a zero-length slice;
//! - `ts` counts from the start of the first file read (its header's clock anchor), not from
//!   the trace's earliest record, which is not known until the end; a record of another file
//!   from before it has a negative `ts`. The origin in Unix ns is the `unix_ns` arg of a
//!   `waffle_origin` metadata event, a string;
//! - times use the header's clock calibration until a CLOCK frame refines it, as in
//!   [`super`];
//! - slices are not stretched where recorded times do not nest (`waffle.stretched`).

use std::{
    fs::File,
    io::Write,
    path::{Path, PathBuf},
    sync::{Condvar, Mutex, MutexGuard},
    time::Duration,
};

use serde_json::{json, Map, Value as Json};

use crate::{
    decode::stream::Header,
    model::{Callsite, Value},
    {
        chrome::{us, MAX_SAFE_INT},
        process::OsIds,
        spans::OutSpan,
    },
};

/// Bytes held before they are written even if the batch delay has not passed.
const HELD_BYTES: usize = 1 << 20;

/// One file's process in the output.
struct Process {
    pid: i64,
    header_pid: u64,
    main_taken: bool,
    /// Each thread's row, once it has one.
    tids: Vec<Option<i64>>,
    /// Rows so far (threads', then detached spans'), for sort indices.
    rows: usize,
}

struct Inner {
    file: Option<File>,
    held: Vec<u8>,
    events: u64,
    spans: u64,
    origin: Option<u64>,
    ids: OsIds,
    processes: Vec<Process>,
    error: Option<String>,
    closed: bool,
}

/// The growing output, shared by the followers of every file.
pub(crate) struct ChromeOut {
    path: PathBuf,
    inner: Mutex<Inner>,
    wake: Condvar,
    delay: Duration,
}

impl ChromeOut {
    /// Creates `path` holding `[`; spans held are written every `delay`.
    pub(crate) fn create(path: &Path, delay: Duration) -> Result<ChromeOut, String> {
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut file = File::create(path).map_err(fail)?;
        file.write_all(b"[").and_then(|()| file.flush()).map_err(fail)?;
        let inner = Inner {
            file: Some(file),
            held: Vec::new(),
            events: 0,
            spans: 0,
            origin: None,
            ids: OsIds::default(),
            processes: Vec::new(),
            error: None,
            closed: false,
        };
        Ok(ChromeOut { path: path.to_owned(), inner: Mutex::new(inner), wake: Condvar::new(), delay })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A file's header is read: its process, named; the index its spans give.
    pub(crate) fn process(&self, header: &Header) -> usize {
        let mut g = self.lock();
        let pid = g.ids.claim(Some(header.pid.into()));
        let origin = *g.origin.get_or_insert(header.calibration.anchor_unix_ns);
        let p = g.processes.len();
        g.processes.push(Process {
            pid,
            header_pid: header.pid.into(),
            main_taken: false,
            tids: Vec::new(),
            rows: 0,
        });
        if p == 0 {
            let args = json!({ "unix_ns": origin.to_string() });
            g.event(&json!({ "ph": "M", "name": "waffle_origin", "pid": pid, "args": args }));
        }
        let meta = |name: &str, args: Json| json!({ "ph": "M", "name": name, "pid": pid, "args": args });
        let name = match header.labels.iter().find(|(k, _)| k == "rank") {
            Some((_, rank)) => format!("{} (rank {rank})", header.name),
            None => header.name.clone(),
        };
        g.event(&meta("process_name", json!({ "name": name })));
        let mut labels = Vec::with_capacity(header.labels.len() + 1);
        if !header.host.is_empty() {
            labels.push(format!("host={}", header.host));
        }
        labels.extend(header.labels.iter().map(|(k, v)| format!("{k}={v}")));
        if !labels.is_empty() {
            g.event(&meta("process_labels", json!({ "labels": labels.join(", ") })));
        }
        g.event(&meta("process_sort_index", json!({ "sort_index": p })));
        p
    }

    /// A new thread of process `p`.
    pub(crate) fn thread(&self, p: usize) {
        let mut g = self.lock();
        let process = &mut g.processes[p];
        process.tids.push(None);
        process.rows += 1;
    }

    /// A thread's OS id and name: its row, unless a span gave it one already.
    pub(crate) fn thread_named(&self, p: usize, thread: usize, tid: u64, name: &str) {
        let mut g = self.lock();
        if g.processes[p].tids[thread].is_none() {
            g.row(p, thread, tid, name);
        }
    }

    /// Appends a span, or an event (an instant).
    pub(crate) fn span(&self, p: usize, s: &OutSpan<'_>) {
        let mut g = self.lock();
        let process = &g.processes[p];
        let pid = process.pid;
        let tid = match process.tids[s.thread] {
            Some(tid) => tid,
            None => g.row(p, s.thread, 0, ""),
        };
        let mut args = Map::new();
        for (name, v) in s.fields() {
            args.entry(name).or_insert_with(|| value(&v.to_value()));
        }
        causal_args(&mut args, s);
        let mut e = if s.event {
            let mut e = record("i", s.callsite, pid, tid, args);
            e["s"] = json!("t");
            e
        } else {
            let tid = if s.detached {
                let fresh = g.ids.fresh();
                let index = g.processes[p].rows;
                g.processes[p].rows += 1;
                g.name_row(pid, fresh, &s.callsite.name, index);
                fresh
            } else {
                tid
            };
            let flags = [
                ("waffle.unfinished", !s.ended),
                ("waffle.detached", s.detached),
                ("waffle.stand_in", s.stand_in),
            ];
            for (key, _) in flags.iter().filter(|(_, on)| *on) {
                args.entry(*key).or_insert(json!(true));
            }
            let mut e = record("X", s.callsite, pid, tid, args);
            e["dur"] = us(s.end_ns.saturating_sub(s.start_ns));
            e
        };
        e["ts"] = g.ts(s.start_ns);
        g.event(&e);
        g.spans += 1;
        if g.held.len() >= HELD_BYTES {
            g.write_held(&self.path);
        }
    }

    /// Writes what is held every batch delay until [`ChromeOut::close`].
    pub(crate) fn run(&self) {
        let mut g = self.lock();
        while !g.closed {
            g = self.wake.wait_timeout(g, self.delay).unwrap_or_else(|e| e.into_inner()).0;
            g.write_held(&self.path);
        }
    }

    /// Every file is done: the rest and the closing `]` are written; the spans and events
    /// written, or why the file could not be.
    pub(crate) fn close(&self) -> Result<u64, String> {
        let mut g = self.lock();
        g.closed = true;
        self.wake.notify_all();
        g.held.extend_from_slice(b"\n]\n");
        g.write_held(&self.path);
        if let Some(file) = g.file.take() {
            if let Err(e) = file.sync_all() {
                g.error.get_or_insert(format!("{}: {e}", self.path.display()));
            }
        }
        match g.error.take() {
            Some(e) => Err(e),
            None => Ok(g.spans),
        }
    }
}

impl Inner {
    fn event(&mut self, e: &Json) {
        self.held.extend_from_slice(if self.events == 0 { b"\n" } else { b",\n" });
        self.events += 1;
        serde_json::to_writer(&mut self.held, e).expect("JSON into a Vec");
    }

    /// `ns` as a `ts`: microseconds from the origin, negative before it.
    fn ts(&self, ns: u64) -> Json {
        let origin = self.origin.unwrap_or(0);
        if ns >= origin {
            us(ns - origin)
        } else {
            let before = us(origin - ns).as_f64().unwrap_or(0.0);
            serde_json::Number::from_f64(-before).map_or(Json::Null, Json::Number)
        }
    }

    /// Gives a thread its row (a main thread follows its process) and names it.
    fn row(&mut self, p: usize, thread: usize, tid: u64, name: &str) -> i64 {
        let process = &mut self.processes[p];
        let pid = process.pid;
        let row = if tid == process.header_pid && !process.main_taken {
            process.main_taken = true;
            pid
        } else {
            self.ids.claim(i64::try_from(tid).ok())
        };
        self.processes[p].tids[thread] = Some(row);
        let name = match name {
            "" => format!("thread {tid}"),
            name => name.to_owned(),
        };
        self.name_row(pid, row, &name, thread);
        row
    }

    fn name_row(&mut self, pid: i64, tid: i64, name: &str, sort_index: usize) {
        self.event(
            &json!({ "ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": { "name": name } }),
        );
        let index = json!({ "sort_index": sort_index });
        self.event(&json!({ "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": index }));
    }

    /// Writes and flushes the whole events held; the first failure is kept and ends writing.
    fn write_held(&mut self, path: &Path) {
        if self.held.is_empty() {
            return;
        }
        let Some(file) = self.file.as_mut() else {
            self.held.clear();
            return;
        };
        if let Err(e) = file.write_all(&self.held).and_then(|()| file.flush()) {
            self.error = Some(format!("{}: {e}", path.display()));
            self.file = None;
        }
        self.held.clear();
    }
}

/// A span's or an event's record, before its time and phase-specific keys.
fn record(ph: &str, callsite: &Callsite, pid: i64, tid: i64, args: Map<String, Json>) -> Json {
    let cat = if callsite.module.is_empty() { "waffle" } else { &callsite.module };
    json!({ "ph": ph, "name": callsite.name, "cat": cat, "pid": pid, "tid": tid, "args": args })
}

/// The causal `waffle.*` args of a span or event, after its fields.
fn causal_args(args: &mut Map<String, Json>, s: &OutSpan<'_>) {
    args.entry("waffle.id").or_insert_with(|| json!(format!("{:016x}", s.id)));
    if let Some(parent) = s.parent.or(s.unresolved_parent) {
        args.entry("waffle.parent").or_insert_with(|| json!(format!("{parent:016x}")));
    }
    if !s.caused_by.is_empty() {
        let ids: Vec<String> = s.caused_by.iter().map(|id| format!("{id:016x}")).collect();
        args.entry("waffle.caused_by").or_insert_with(|| json!(ids.join(", ")));
    }
    if let (Some(value), false) = (s.correlation, s.callsite.correlate.is_empty()) {
        args.entry("waffle.correlate").or_insert_with(|| json!(format!("{}={value}", s.callsite.correlate)));
    }
}

/// A field's value as JSON (see the module docs).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_write_leaves_whole_events_and_close_adds_the_bracket() {
        let path = std::env::temp_dir().join(format!("waffle-chrome-out-{}.json", std::process::id()));
        let out = ChromeOut::create(&path, Duration::from_millis(1)).unwrap();
        let parsed = |text: &str| serde_json::from_str::<Vec<Json>>(text).map(|v| v.len());
        assert_eq!(parsed(&(std::fs::read_to_string(&path).unwrap() + "]")).unwrap(), 0);
        for n in 1..=3 {
            let mut g = out.lock();
            g.event(&json!({ "ph": "i", "name": "x", "ts": n }));
            assert_eq!(parsed(&(std::fs::read_to_string(&path).unwrap() + "]")).unwrap(), n - 1);
            g.write_held(&path);
            drop(g);
            assert_eq!(parsed(&(std::fs::read_to_string(&path).unwrap() + "]")).unwrap(), n);
        }
        assert_eq!(out.close(), Ok(0), "spans and events counted, not metadata");
        assert_eq!(parsed(&std::fs::read_to_string(&path).unwrap()).unwrap(), 3);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_record_before_the_origin_has_a_negative_ts() {
        let path = std::env::temp_dir().join(format!("waffle-chrome-ts-{}.json", std::process::id()));
        let out = ChromeOut::create(&path, Duration::from_millis(1)).unwrap();
        let mut g = out.lock();
        g.origin = Some(10_000);
        assert_eq!((g.ts(12_345), g.ts(4_500), g.ts(10_000)), (json!(2.345), json!(-5.5), json!(0.0)));
        drop(g);
        std::fs::remove_file(&path).unwrap();
    }
}
