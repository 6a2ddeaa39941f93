//! The decoded trace: what every exporter and analysis reads. No exporter sees raw bytes.
//!
//! Times are nanoseconds since the Unix epoch, already converted from each process's clock
//! ticks with its calibration and wall-clock anchor, so processes of one run share a time base.

use std::sync::Arc;
use waffle::{callsite::Kind, wire::FieldType};

/// A whole decoded trace: one or many processes (one per input file).
#[derive(Debug, Default)]
pub struct Trace {
    /// Processes, in the order their files were given.
    pub processes: Vec<Process>,
}

/// One traced process (one `trace.bin`).
#[derive(Debug)]
pub struct Process {
    /// The file it was read from, as given.
    pub source: String,
    /// OS process id.
    pub pid: u32,
    /// Process name (executable name unless set).
    pub name: String,
    /// Host name.
    pub host: String,
    /// Free-form labels from the header, such as `rank`.
    pub labels: Vec<(String, String)>,
    /// Threads (streams), in the order they appeared.
    pub threads: Vec<Thread>,
    /// Records the producer dropped because a buffer was full, over all threads.
    pub dropped: u64,
    /// Whether the file ended with a clean-shutdown frame.
    pub complete: bool,
}

impl Process {
    /// The value of a header label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// One thread's recorded spans and events.
#[derive(Debug)]
pub struct Thread {
    /// Stream number within the process.
    pub stream: u32,
    /// OS thread id.
    pub tid: u64,
    /// Thread name ("" if unnamed).
    pub name: String,
    /// Spans in begin order.
    pub spans: Vec<Span>,
    /// Events in time order.
    pub events: Vec<Event>,
    /// Records dropped on this thread.
    pub dropped: u64,
}

/// The static description of a span or event, shared by all its records.
#[derive(Debug, PartialEq)]
pub struct Callsite {
    /// Span or event name.
    pub name: String,
    /// Rust module path (or the foreign language's equivalent).
    pub module: String,
    /// Source file.
    pub file: String,
    /// Source line.
    pub line: u32,
    /// Span or event.
    pub kind: Kind,
    /// Field names and declared types, in record order.
    pub fields: Vec<(String, FieldType)>,
}

/// A field value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Unsigned integer.
    U64(u64),
    /// Signed integer.
    I64(i64),
    /// Float.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// String.
    Str(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => f.write_str(v),
        }
    }
}

/// One span.
#[derive(Debug)]
pub struct Span {
    /// Its id, unique within the trace (0 for a placeholder whose begin was dropped).
    pub id: u64,
    /// The enclosing span on the same thread, if any.
    pub parent: Option<u64>,
    /// Nesting depth on its thread (0 = top level).
    pub depth: u32,
    /// Name, module, file, line and field names.
    pub callsite: Arc<Callsite>,
    /// Field values, in the callsite's field order.
    pub fields: Vec<Value>,
    /// Begin, ns since the Unix epoch.
    pub start_ns: u64,
    /// End, ns since the Unix epoch. For a span that never ended (crash, truncation), the
    /// last time seen on its thread, with `ended` false.
    pub end_ns: u64,
    /// Whether its end record was seen.
    pub ended: bool,
}

impl Span {
    /// The span's name.
    pub fn name(&self) -> &str {
        &self.callsite.name
    }

    /// Field `(name, value)` pairs.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.callsite.fields.iter().map(|(n, _)| n.as_str()).zip(&self.fields)
    }
}

/// One instant event.
#[derive(Debug)]
pub struct Event {
    /// Its id, unique within the trace.
    pub id: u64,
    /// The span open on its thread when it happened, if any.
    pub parent: Option<u64>,
    /// Name, module, file, line and field names.
    pub callsite: Arc<Callsite>,
    /// Field values, in the callsite's field order.
    pub fields: Vec<Value>,
    /// When, ns since the Unix epoch.
    pub ts_ns: u64,
}

impl Event {
    /// The event's name.
    pub fn name(&self) -> &str {
        &self.callsite.name
    }

    /// Field `(name, value)` pairs.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.callsite.fields.iter().map(|(n, _)| n.as_str()).zip(&self.fields)
    }
}
