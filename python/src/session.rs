//! The recording session, and turning its file into other formats.
//!
//! One session per process, as in Rust: [`start`] opens `trace.bin` and starts the collector
//! thread; [`stop`] drains every buffer and closes the file. With `WAFFLE_OUTPUT` set, a session
//! already runs when this module is loaded (`waffle_std::autostart`, a constructor of this
//! library): [`recording_path`] reports it, [`stop`] stops it, and [`start`] replaces it. [`export`] and [`send`] stream
//! files through `waffle_export::Files` in two passes, as `waffle-decode` does, so memory
//! stays bounded however large the trace; [`decode`] hands the decoded model
//! (`waffle_read::decode`) to Python as plain dicts (for tests and tools). The GIL is released
//! while files are read and written.

use pyo3::{
    exceptions::{PyOSError, PyRuntimeError, PyValueError},
    prelude::*,
    types::{PyDict, PyList},
};
use std::{path::PathBuf, sync::Mutex};
use waffle_export::{Files, Format};
use waffle_read::model::{Callsite, Value};
use waffle_std::{Config, Session};

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

fn session() -> std::sync::MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(|e| e.into_inner())
}

fn err(e: waffle_std::Error) -> PyErr {
    match e {
        waffle_std::Error::Io { .. } => PyOSError::new_err(e.to_string()),
        waffle_std::Error::AlreadyStarted(_) => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

fn decode_err(e: waffle_read::Error) -> PyErr {
    match e {
        waffle_read::Error::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// Starts recording to `path`. `process_name` names the process (the Jaeger/Zipkin service);
/// `labels` go into the file header; `parent` (a `traceparent` header) makes this process part
/// of another's trace. A session `WAFFLE_OUTPUT` started is stopped first (its file kept if it
/// holds records).
#[pyfunction]
#[pyo3(signature = (path, *, process_name=None, labels=None, parent=None))]
pub(crate) fn start(
    path: PathBuf,
    process_name: Option<String>,
    labels: Option<Vec<(String, String)>>,
    parent: Option<&str>,
) -> PyResult<()> {
    let mut g = session();
    if let Some(s) = &*g {
        return Err(PyRuntimeError::new_err(format!(
            "waffle is already recording to {}; call waffle.shutdown() first",
            s.path().display()
        )));
    }
    let mut cfg = Config::new(&path);
    if let Some(n) = process_name {
        cfg = cfg.process_name(n);
    }
    for (k, v) in labels.unwrap_or_default() {
        cfg = cfg.label(k, v);
    }
    if let Some(p) = parent {
        let ctx = waffle::Context::from_traceparent(p)
            .map_err(|e| PyValueError::new_err(format!("parent: {e}: {p:?}")))?;
        cfg = cfg.parent(ctx);
    }
    *g = Some(cfg.start().map_err(err)?);
    Ok(())
}

/// Stops recording (the session [`start`] began, or else the one `WAFFLE_OUTPUT` began when the
/// module was loaded); returns the file written and the session's totals, or `None` if no
/// session was recording.
#[pyfunction]
pub(crate) fn stop(py: Python<'_>) -> PyResult<Option<(PathBuf, Py<PyDict>)>> {
    let Some(s) = session().take().or_else(waffle_std::autostart::take) else { return Ok(None) };
    let path = s.path().to_owned();
    let stats = py.detach(|| s.stop()).map_err(err)?;
    let d = PyDict::new(py);
    d.set_item("data_bytes", stats.data_bytes)?;
    d.set_item("dropped", stats.dropped)?;
    d.set_item("streams", stats.streams)?;
    d.set_item("refused_threads", stats.refused_threads)?;
    Ok(Some((path, d.unbind())))
}

/// In a child process made by `fork()`: the session belongs to the parent (its collector
/// thread does not exist here), so recording stops and the session is forgotten without being
/// stopped, which would wait for that thread. Registered with `os.register_at_fork`.
#[pyfunction]
pub(crate) fn _after_fork_in_child() {
    waffle::set_enabled(false);
    if let Ok(mut g) = SESSION.try_lock() {
        if let Some(s) = g.take() {
            std::mem::forget(s);
        }
    }
}

/// The file being recorded, if a session is running (also one that `WAFFLE_OUTPUT` began, or
/// one that another copy of waffle in the process runs, such as a preloaded `libwaffle_mpi.so`,
/// which this module's spans then record into).
#[pyfunction]
pub(crate) fn recording_path() -> Option<PathBuf> {
    session().as_ref().map(|s| s.path().to_owned()).or_else(waffle_std::current_path)
}

/// Whether the session this module records into is run by another copy of waffle in the
/// process (which then stops it at its own exit).
#[pyfunction]
pub(crate) fn recording_elsewhere() -> bool {
    waffle_std::recording_elsewhere()
}

/// Pauses (`False`) or resumes (`True`) recording in the process's session, whichever copy of
/// waffle runs it; spans already open still end. Paused, `waffle.span` and `waffle.event` cost
/// about what a bare `with` statement does.
#[pyfunction]
pub(crate) fn set_enabled(on: bool) {
    waffle_std::set_enabled(on);
}

/// Whether records are being kept now: a session is running and it is not paused.
#[pyfunction]
pub(crate) fn is_enabled() -> bool {
    waffle::runtime::state() != 0
}

/// Pushes this thread's staged records to the collector now.
#[pyfunction]
pub(crate) fn flush() {
    waffle::flush();
}

/// The names of the output formats this build writes.
#[pyfunction]
pub(crate) fn formats() -> Vec<&'static str> {
    Format::ALL.iter().map(|f| f.name()).collect()
}

/// The name of the format an output file's suffix asks for, if this build writes it.
#[pyfunction]
pub(crate) fn format_for_path(path: PathBuf) -> Option<&'static str> {
    Format::from_path(&path).map(Format::name)
}

/// Writes `inputs` (trace.bin files, one per process) to `output` in `format` (a name from
/// [`formats`]; by default the one `output`'s suffix names), streaming: the files are read
/// twice and never held, so memory stays bounded however large they are. `service_name`, if
/// given, names every process (Jaeger's and Zipkin's service, OTLP's `service.name`,
/// Perfetto's and Chrome's process name). Returns the decoder's warnings.
#[pyfunction]
#[pyo3(signature = (inputs, output, format=None, *, service_name=None))]
pub(crate) fn export(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    output: PathBuf,
    format: Option<&str>,
    service_name: Option<String>,
) -> PyResult<Vec<String>> {
    let format = match format {
        Some(name) => Format::from_name(name).ok_or_else(|| {
            PyValueError::new_err(format!("unknown format {name:?}; this build writes {:?}", formats()))
        })?,
        None => Format::from_path(&output).ok_or_else(|| {
            PyValueError::new_err(format!(
                "cannot tell the format from {}; this build writes {:?}",
                output.display(),
                formats()
            ))
        })?,
    };
    py.detach(|| {
        let files = scan(&inputs, format, service_name.as_deref())?;
        let warnings = files.warnings().iter().map(|w| w.to_string()).collect();
        waffle_export::write_file(&output, |out| files.write(out, &mut |_| {}))
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", output.display())))?;
        Ok(warnings)
    })
}

/// The first of the two reads of `inputs`, for `format`, with every process named
/// `service_name` if one is given.
fn scan(inputs: &[PathBuf], format: Format, service_name: Option<&str>) -> PyResult<Files> {
    let mut files = Files::scan(inputs, format, &mut |_| {}).map_err(decode_err)?;
    if let Some(name) = service_name {
        files.rename_processes(name);
    }
    Ok(files)
}

/// Sends the spans of `inputs` to a running backend, streaming them in batches as the files are
/// read: `target` is `zipkin=URL` or `otlp=URL` (an OpenTelemetry collector, Jaeger or Tempo),
/// as `waffle-decode --send` takes it. `service_name` names every process, as for [`export`].
/// Retries as `waffle_export::send::Policy` says; `timeout_s` bounds the time one request may take
/// over all its attempts (30 s by default). Returns what was sent.
#[pyfunction]
#[pyo3(signature = (inputs, target, *, service_name=None, timeout_s=None))]
pub(crate) fn send(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    target: &str,
    service_name: Option<String>,
    timeout_s: Option<f64>,
) -> PyResult<Py<PyDict>> {
    let target: waffle_export::send::Endpoint = target.parse().map_err(PyValueError::new_err)?;
    let mut options = waffle_export::send::Options::default();
    if let Some(t) = timeout_s {
        let budget = std::time::Duration::try_from_secs_f64(t.max(0.001))
            .map_err(|e| PyValueError::new_err(format!("timeout_s: {e}")))?;
        options.policy.budget = budget;
        options.policy.timeout = options.policy.timeout.min(budget);
    }
    let report = py.detach(|| {
        let files = scan(&inputs, target.format(), service_name.as_deref())?;
        waffle_export::send::send_files(files, &target, &options, &mut |_| {})
            .map_err(|e| PyOSError::new_err(e.to_string()))
    })?;
    let d = PyDict::new(py);
    d.set_item("spans", report.spans)?;
    d.set_item("requests", report.requests)?;
    d.set_item("retries", report.retries)?;
    d.set_item("rejected", report.rejected)?;
    d.set_item("warnings", report.warnings)?;
    Ok(d.unbind())
}

/// Decodes trace.bin files into plain Python values:
/// `{"processes": [{"pid", "name", "host", "labels", "trace_id", "parent_span", "dropped",
/// "complete", "threads": [{"tid", "name", "stream", "dropped", "spans": [...], "events":
/// [...]}]}], "warnings": [str]}`. A span is `{"id", "parent", "name", "module", "file", "line",
/// "fields", "links", "start_ns", "end_ns", "ended", "detached", "depth"}`; an event is
/// `{"id", "parent", "name", "module", "file", "line", "fields", "links", "ts_ns"}`. Ids are
/// ints; `parent` is `None` at the top level.
#[pyfunction]
pub(crate) fn decode(py: Python<'_>, inputs: Vec<PathBuf>) -> PyResult<Py<PyDict>> {
    let decoded = py.detach(|| waffle_read::decode::decode_files(&inputs)).map_err(decode_err)?;
    let out = PyDict::new(py);
    let procs = PyList::empty(py);
    for p in &decoded.trace.processes {
        let d = PyDict::new(py);
        d.set_item("pid", p.header.pid)?;
        d.set_item("name", &p.header.name)?;
        d.set_item("host", &p.header.host)?;
        d.set_item("labels", p.header.labels.iter().cloned().collect::<std::collections::HashMap<_, _>>())?;
        d.set_item("trace_id", format!("{:032x}", p.header.trace_id))?;
        d.set_item("parent_span", p.header.parent_span())?;
        d.set_item("dropped", p.dropped)?;
        d.set_item("complete", p.complete)?;
        let threads = PyList::empty(py);
        for t in &p.threads {
            let td = PyDict::new(py);
            td.set_item("tid", t.tid)?;
            td.set_item("name", &t.name)?;
            td.set_item("stream", t.stream)?;
            td.set_item("dropped", t.dropped)?;
            let spans = PyList::empty(py);
            for s in &t.spans {
                let sd = item(py, s.id, s.parent, &s.callsite, &s.fields, &s.links)?;
                sd.set_item("start_ns", s.start_ns)?;
                sd.set_item("end_ns", s.end_ns)?;
                sd.set_item("ended", s.ended)?;
                sd.set_item("detached", s.detached)?;
                sd.set_item("depth", s.depth)?;
                spans.append(sd)?;
            }
            let events = PyList::empty(py);
            for e in &t.events {
                let ed = item(py, e.id, e.parent, &e.callsite, &e.fields, &e.links)?;
                ed.set_item("ts_ns", e.ts_ns)?;
                events.append(ed)?;
            }
            td.set_item("spans", spans)?;
            td.set_item("events", events)?;
            threads.append(td)?;
        }
        d.set_item("threads", threads)?;
        d.set_item("tracks", crate::track::tracks_to_py(py, &p.tracks)?)?;
        procs.append(d)?;
    }
    out.set_item("processes", procs)?;
    out.set_item("warnings", decoded.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>())?;
    Ok(out.unbind())
}

fn item<'py>(
    py: Python<'py>,
    id: u64,
    parent: Option<u64>,
    cs: &Callsite,
    values: &[Value],
    links: &[u64],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", id)?;
    d.set_item("parent", parent)?;
    d.set_item("name", &*cs.name)?;
    d.set_item("module", &*cs.module)?;
    d.set_item("file", &*cs.file)?;
    d.set_item("line", cs.line)?;
    let fields = PyDict::new(py);
    for (name, v) in cs.field_names().zip(values) {
        match v {
            Value::U64(x) => fields.set_item(name, x)?,
            Value::I64(x) => fields.set_item(name, x)?,
            Value::F64(x) => fields.set_item(name, x)?,
            Value::Bool(x) => fields.set_item(name, x)?,
            Value::Str(x) => fields.set_item(name, x)?,
        }
    }
    d.set_item("fields", fields)?;
    d.set_item("links", links)?;
    Ok(d)
}
