//! Other tools' traces as `trace.bin` files: Chrome trace-event JSON, and the PyTorch
//! profiler's (Kineto's) dialect of it, plain or gzipped.
//!
//! A [`Conversion`] reads one JSON file as a stream of events (the document is never held) and
//! gathers them per thread; each process then becomes one `trace.bin` that every reader of
//! waffle takes as if waffle had recorded it: `why`, `diff`, and every export. What is kept:
//!
//! - **processes and threads**, with the names the `M` events give them;
//! - **slices** (`X`, and `B`/`E` pairs) as spans, nested per thread as their times nest (one
//!   that outlasts the slice holding it is cut at that slice's end, and counted in a warning);
//!   instants and counters as events; every argument as a field (numbers, booleans and strings
//!   as themselves; arrays and objects, such as `Input Dims`, as their JSON text); the category
//!   as the callsite's module;
//! - **causes**: device work whose `correlation` argument matches a host item's (a CUDA
//!   runtime launch and the kernel or copy it launched) is caused by it; each flow (`s`, `t`,
//!   `f`) links its slices in order, bound as the format binds them (the enclosing slice, or
//!   the next one for an `f` without `"bp": "e"`). The profiler's `ac2g` flows repeat the
//!   `correlation` arguments and are not read twice;
//! - **device queues**: the threads of kernels, copies, sets and GPU annotations (a GPU
//!   stream) join the host process as threads of their own, with thread ids from
//!   [`DEVICE_TID_BASE`](waffle_wire::reserved::track::DEVICE_TID_BASE) up, named after the
//!   device and the stream;
//! - **steps**: a slice named `ProfilerStep#N` gets a first field `step` = N, which makes it a
//!   step marker for every reader;
//! - **time**: microseconds become nanoseconds on a clock whose tick is one nanosecond, from
//!   `baseTimeNanoseconds` where the file gives it; the rank from `distributedInfo`.
//!
//! What has no counterpart is counted and said in [`Conversion::warnings`]: async and object
//! events, samples, ends without a begin. A file cut short keeps every event before the cut,
//! with a warning; a file that is not JSON, or not a trace, is an error naming the byte.
//!
//! ```
//! use std::io::Write;
//! let dir = std::env::temp_dir().join(format!("waffle-foreign-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("small.json");
//! std::fs::write(&path, r#"{"traceEvents": [
//!     {"ph": "X", "name": "matmul", "pid": 7, "tid": 7, "ts": 10.0, "dur": 5.5},
//!     {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 3, "ts": 12.0, "dur": 2.0}
//! ]}"#).unwrap();
//! let mut conv = waffle_foreign::Conversion::read(&path).unwrap();
//! assert_eq!(conv.processes().len(), 1);
//! assert_eq!(conv.processes()[0].device_threads, 1);
//! let mut bytes = Vec::new();
//! conv.write(0, &mut bytes).unwrap();
//! assert_eq!(&bytes[..4], b"\x89WFL");
//! ```

mod collect;
mod json;
mod values;
mod write;

use serde::de::Deserializer as _;
use std::{
    fs::File,
    io::{self, BufReader, Read},
    path::{Path, PathBuf},
};

pub use write::Process;

/// What a file is, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// JSON text.
    Json,
    /// gzip (its content is taken as JSON).
    Gzip,
}

/// Whether `path` is a JSON trace (plain or gzipped) rather than a `trace.bin`: `None` for
/// anything else, which the reader then judges.
pub fn sniff(path: &Path) -> io::Result<Option<Form>> {
    let mut head = [0u8; 64];
    let mut f = File::open(path)?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    let head = &head[..n];
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(Some(Form::Gzip));
    }
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    Ok(match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => Some(Form::Json),
        _ => None,
    })
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It could not be opened or read.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// It is not a Chrome trace: not JSON, or not shaped as one. The offset is 0-based.
    #[error("{path}: not a Chrome trace: {what} at byte {offset}{of} (line {line}, column {column})")]
    Syntax { path: PathBuf, what: String, offset: u64, of: &'static str, line: usize, column: usize },
    /// It holds what no `trace.bin` can.
    #[error("{path}: {what}")]
    Unfit { path: PathBuf, what: String },
}

/// One JSON trace, read and planned as `trace.bin` files (one per [`Process`]).
pub struct Conversion {
    collector: collect::Collector,
    plan: write::Plan,
    warnings: Vec<String>,
    trace_id: u128,
}

impl Conversion {
    /// Reads the trace at `path` (JSON or gzipped JSON).
    pub fn read(path: &Path) -> Result<Conversion, Error> {
        let io_err = |source| Error::Io { path: path.to_owned(), source };
        let form = sniff(path).map_err(io_err)?;
        let of = if form == Some(Form::Gzip) { " of the decompressed JSON" } else { "" };
        let (counted, read) = json::Counted::new(json::Source::open(path, form).map_err(io_err)?);
        let mut c = collect::Collector::default();
        let mut warnings = Vec::new();
        let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 16, counted));
        let result = de.deserialize_any(json::Top(&mut c)).and_then(|()| de.end());
        if let Err(e) = result {
            let cut = e.is_eof() || (e.is_io() && e.io_error_kind() == Some(io::ErrorKind::UnexpectedEof));
            let offset = match cut {
                true => read.get(),
                false => json::Source::open(path, form)
                    .and_then(|s| json::offset_of(s, e.line(), e.column()))
                    .unwrap_or_else(|_| read.get()),
            };
            if !cut || c.events == 0 {
                let what = if e.is_io() { format!("{e}") } else { strip_position(&e.to_string()) };
                return Err(Error::Syntax {
                    path: path.to_owned(),
                    what,
                    offset,
                    of,
                    line: e.line(),
                    column: e.column(),
                });
            }
            warnings.push(format!(
                "{}: the file ends inside its JSON at byte {offset}{of}: cut short; the {} events before the cut are kept",
                path.display(),
                c.events
            ));
        }
        let closed = c.close_open();
        let plan = write::Plan::new(&mut c).map_err(|what| Error::Unfit { path: path.to_owned(), what })?;
        if plan.processes.is_empty() {
            return Err(Error::Unfit {
                path: path.to_owned(),
                what: "no slice or instant in its events".into(),
            });
        }
        warnings.extend(notes(path, &c, &plan, closed));
        let trace_id = trace_id(&c, path);
        Ok(Conversion { collector: c, plan, warnings, trace_id })
    }

    /// The processes, one `trace.bin` each.
    pub fn processes(&self) -> &[Process] {
        &self.plan.processes
    }

    /// Whether the file is the PyTorch profiler's.
    pub fn is_profiler(&self) -> bool {
        self.collector.meta.kineto
    }

    /// Events read, of any kind.
    pub fn events(&self) -> u64 {
        self.collector.events
    }

    /// What was not kept, or kept changed.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Writes process `i` as a `trace.bin`.
    pub fn write(&mut self, i: usize, out: &mut dyn io::Write) -> io::Result<()> {
        let meta = (self.collector.meta.base_ns.unwrap_or(0), self.trace_id, self.collector.meta.rank);
        self.plan.write(&self.collector, i, meta, out)
    }
}

/// serde_json's message without its " at line L column C" (the error names the byte instead).
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

fn notes(path: &Path, c: &collect::Collector, plan: &write::Plan, closed: u64) -> Vec<String> {
    let p = path.display();
    let mut out = Vec::new();
    let s = &c.skipped;
    if s.no_time > 0 {
        out.push(format!("{p}: {} events without a time (`ts`) were skipped", s.no_time));
    }
    if s.unmatched_end > 0 {
        out.push(format!("{p}: {} ends (`E`) without a begin were skipped", s.unmatched_end));
    }
    if closed > 0 {
        out.push(format!("{p}: {closed} begins (`B`) without an end were ended at their thread's last time"));
    }
    let mut phases: Vec<_> = s.phases.iter().collect();
    phases.sort();
    for (ph, n) in phases {
        out.push(format!(
            "{p}: {n} events of phase {ph:?} have no counterpart in waffle's model and were skipped"
        ));
    }
    if plan.cut > 0 {
        out.push(format!(
            "{p}: {} slices outlasted the slice holding them and were cut at its end",
            plan.cut
        ));
    }
    out
}

/// The trace id the file's processes share: from its own id or name, else its base time,
/// else its file name, so that converting the same file twice gives the same id.
fn trace_id(c: &collect::Collector, path: &Path) -> u128 {
    let seed = match (&c.meta.trace_name, c.meta.base_ns) {
        (Some(name), _) => name.clone(),
        (None, Some(base)) => base.to_string(),
        (None, None) => path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
    };
    let fnv = |basis: u64| seed.bytes().fold(basis, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (u128::from(fnv(0xcbf2_9ce4_8422_2325)) << 64 | u128::from(fnv(0x6c62_272e_07bb_0142))).max(1)
}

#[cfg(test)]
mod tests;
