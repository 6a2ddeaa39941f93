//! Other tools' traces as `trace.bin` files: Chrome trace-event JSON, and the PyTorch
//! profiler's (Kineto's) dialect of it, plain or gzipped.
//!
//! [`convert`] reads one JSON file as a stream of events and writes each process it meets as
//! a `trace.bin` that every reader of waffle takes as if waffle had recorded it: `why`,
//! `diff`, and every export. Neither the document nor its events are held: each thread keeps
//! a window of its latest events (a stream's records must be in time order and nested, and
//! files are mostly in order per thread), and writes the earliest once the window is full. A
//! file whose events come out of order on a thread by more than the window is read again,
//! holding them all (with a warning). What is kept:
//!
//! - **processes and threads**, named by the `M` events met before them (a thread renamed by
//!   a later one; a process keeps the name it was met with);
//! - **slices** (`X`, and `B`/`E` pairs) as spans, nested per thread as their times nest (one
//!   that outlasts the slice holding it is cut at that slice's end, and counted in a warning);
//!   instants and counters as events; every argument as a field (numbers, booleans and strings
//!   as themselves; arrays and objects, such as `Input Dims`, as their JSON text; an `E`'s own
//!   arguments are not kept); the category as the callsite's module;
//! - **causes**, as directed correlations (`docs/wire-format.md`): a host item with a
//!   `correlation` argument (a CUDA runtime launch) is the cause, `launch>`, of the device
//!   work with the same one (the kernel or copy it launched), `launch<`; a flow's points (`s`,
//!   `t`, `f`) become events on their threads, inside the slices that hold them, each the
//!   cause (`flow>`) of the next (`flow<`). The profiler's `ac2g` flows repeat the
//!   `correlation` arguments and are not read twice. Values are salted with the file's path
//!   as given, so that two files' correlations do not meet, even two of one name in two
//!   directories (`run_a/trace.json`, `run_b/trace.json`);
//! - **device queues**: the threads of kernels, copies, sets and GPU annotations (a GPU
//!   stream) join the host process as threads of their own, with thread ids from
//!   [`DEVICE_TID_BASE`](waffle_wire::reserved::track::DEVICE_TID_BASE) up, named after the
//!   device and the stream (`GPU 0 / stream 7`), which the exports draw as they draw device
//!   tracks (Perfetto: a track under the process; XSpace: a line of the `/device:GPU:0`
//!   plane); a profile that lists its devices says how many in the
//!   `device.queues` label, which makes `diff` compare the device's work;
//! - **steps**: a slice named `ProfilerStep#N` becomes a span `ProfilerStep` whose first field
//!   `step` is N, which makes it a step marker for every reader (one callsite for all steps);
//! - **time**: microseconds become nanoseconds on a clock whose tick is one nanosecond, from
//!   `baseTimeNanoseconds` (a CLOCK frame at the end, wherever the file gives it); the rank
//!   from `distributedInfo` when it comes before the events.
//!
//! What has no counterpart is counted and said in [`Converted::warnings`]: async and object
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
//! let done = waffle_foreign::convert(&path, &mut |i, _process| {
//!     Ok(Box::new(std::fs::File::create(dir.join(format!("small.{i}.bin")))?) as Box<dyn Write>)
//! }).unwrap();
//! assert_eq!(done.processes.len(), 1);
//! assert_eq!((done.processes[0].threads, done.processes[0].device_threads), (1, 1));
//! assert_eq!(&std::fs::read(dir.join("small.0.bin")).unwrap()[..4], b"\x89WFL");
//! ```

mod chunk;
mod collect;
mod emit;
mod event;
mod json;
mod parse;
#[cfg(test)]
mod parse_tests;
mod place;
#[cfg(test)]
mod reference;
mod scan;
mod sites;
mod values;

use std::{
    fs::File,
    io::{self, Read, Write},
    path::{Path, PathBuf},
};

pub use place::Process;

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
    Ok(form_of(&head[..n]))
}

/// What bytes that begin with `head` are.
fn form_of(head: &[u8]) -> Option<Form> {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Some(Form::Gzip);
    }
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => Some(Form::Json),
        _ => None,
    }
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It could not be opened or read, or an output could not be written.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// It is not a Chrome trace: not JSON, or not shaped as one. The offset is 0-based.
    #[error("{path}: not a Chrome trace: {what} at byte {offset}{of}")]
    Syntax { path: PathBuf, what: String, offset: u64, of: &'static str },
    /// It holds nothing a `trace.bin` can.
    #[error("{path}: {what}")]
    Unfit { path: PathBuf, what: String },
}

/// Where [`convert`] writes each process's file: asked with the process's number, counted from
/// 0, and what is known of it when it is met.
pub type OpenOutput<'a> = dyn FnMut(usize, &Process) -> io::Result<Box<dyn Write>> + 'a;

/// What a conversion wrote and said.
#[derive(Clone, Debug, Default)]
pub struct Converted {
    /// The processes, one `trace.bin` each, in the order their outputs were asked for.
    pub processes: Vec<Process>,
    /// What was not kept, or kept changed.
    pub warnings: Vec<String>,
    /// Whether the file is the PyTorch profiler's.
    pub profiler: bool,
    /// Events read, of any kind.
    pub events: u64,
}

/// Converts the trace at `path` (JSON or gzipped JSON): each process met is written as a
/// `trace.bin` into what `open` gives for it (its number, counted from 0, and what is known of
/// it), as the file is read. When a thread's events come out of time order by more than a
/// window holds, the file is read again holding all of them, and `open` is asked again for
/// the same numbers.
pub fn convert(path: &Path, open: &mut OpenOutput<'_>) -> Result<Converted, Error> {
    convert_window(json::Input::Path(path), path, open, emit::WINDOW)
}

/// [`convert`] of a trace held in memory, plain or gzipped; `name` names it in messages (and
/// salts its correlation values as a file's path does).
pub fn convert_bytes(bytes: &[u8], name: &Path, open: &mut OpenOutput<'_>) -> Result<Converted, Error> {
    convert_window(json::Input::Bytes(bytes), name, open, emit::WINDOW)
}

/// [`convert`] with a window of `window` events per thread (the tests' small windows).
fn convert_window(
    input: json::Input<'_>,
    path: &Path,
    open: &mut OpenOutput<'_>,
    window: usize,
) -> Result<Converted, Error> {
    let salt = values::fnv(0xcbf2_9ce4_8422_2325, &[path.as_os_str().as_encoded_bytes()]);
    match attempt((input, path), &mut *open, salt, window)? {
        Ok(done) => Ok(done),
        Err(at) => {
            let mut done =
                attempt((input, path), open, salt, usize::MAX)?.expect("a window of the whole file");
            done.warnings.insert(0, format!(
                "{}: a thread's events are out of time order (by byte {at}); the file was read again holding every event, so memory grew with it",
                path.display()
            ));
            Ok(done)
        }
    }
}

/// One reading with a window of `window` events per thread; `Err(offset)` when the events
/// came out of order by more than it.
fn attempt(
    (input, path): (json::Input<'_>, &Path),
    open: &mut OpenOutput<'_>,
    salt: u64,
    window: usize,
) -> Result<Result<Converted, u64>, Error> {
    let io_err = |source| Error::Io { path: path.to_owned(), source };
    let form = match input {
        json::Input::Path(p) => sniff(p).map_err(io_err)?,
        json::Input::Bytes(b) => form_of(&b[..b.len().min(64)]),
    };
    let of = if form == Some(Form::Gzip) { " of the decompressed JSON" } else { "" };
    let source = input.open(form).map_err(io_err)?;
    let mut c = collect::Collector::new(open, salt, window);
    c.meta.salt = salt;
    let mut warnings = Vec::new();
    let result = json::read(source, &mut c);
    match (c.stop.take(), &result) {
        (Some(collect::Stop::Disorder(_)), Ok(at)) => return Ok(Err(*at)),
        (Some(collect::Stop::Io(e)), _) => return Err(io_err(e)),
        _ => {}
    }
    match result {
        Ok(_) => {}
        Err(scan::ScanError::Io(e)) => return Err(io_err(e)),
        Err(scan::ScanError::Bad { offset, what }) => {
            return Err(Error::Syntax { path: path.to_owned(), what, offset, of });
        }
        Err(scan::ScanError::Cut(offset)) if c.events > 0 => warnings.push(format!(
            "{}: the file ends inside its JSON at byte {offset}{of}: cut short; the {} events before the cut are kept",
            path.display(),
            c.events
        )),
        Err(scan::ScanError::Cut(offset)) => {
            let what = "the file ends before its first event".to_owned();
            return Err(Error::Syntax { path: path.to_owned(), what, offset, of });
        }
    }
    if c.places.processes.is_empty() {
        return Err(Error::Unfit { path: path.to_owned(), what: "no slice or instant in its events".into() });
    }
    if let Some(base) = c.meta.base_ns {
        for o in 0..c.places.processes.len() {
            c.emit.calibrate(
                o,
                waffle_wire::Calibration { anchor_ticks: 0, anchor_unix_ns: base, ticks: 1, ns: 1 },
            );
        }
    }
    c.emit.finish(&c.sites).map_err(io_err)?;
    warnings.extend(notes(path, &c));
    Ok(Ok(Converted { processes: c.places.processes, warnings, profiler: c.meta.kineto, events: c.events }))
}

fn notes(path: &Path, c: &collect::Collector<'_>) -> Vec<String> {
    let p = path.display();
    let mut out = Vec::new();
    let (s, changed) = (&c.skipped, &c.emit.changed);
    if s.no_time > 0 {
        out.push(format!("{p}: {} events without a time (`ts`) were skipped", s.no_time));
    }
    if changed.unmatched_end > 0 {
        out.push(format!("{p}: {} ends (`E`) without a begin were skipped", changed.unmatched_end));
    }
    if changed.unclosed > 0 {
        out.push(format!(
            "{p}: {} begins (`B`) without an end were ended at their thread's last time",
            changed.unclosed
        ));
    }
    let mut phases: Vec<_> = s.phases.iter().collect();
    phases.sort();
    for (ph, n) in phases {
        out.push(format!(
            "{p}: {n} events of phase {ph:?} have no counterpart in waffle's model and were skipped"
        ));
    }
    if changed.cut > 0 {
        out.push(format!(
            "{p}: {} slices outlasted the slice holding them and were cut at its end",
            changed.cut
        ));
    }
    out
}

#[cfg(test)]
mod tests;
