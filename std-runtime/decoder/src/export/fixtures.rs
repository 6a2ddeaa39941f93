//! Pieces of hand-built traces for the exporters' unit tests.

use std::sync::Arc;

use waffle::{
    callsite::Kind,
    wire::{FieldType, Header},
};

use crate::model::{Callsite, Event, Process, Span, Thread};

/// A callsite with these field names (any value type).
pub(crate) fn callsite(name: &str, kind: Kind, fields: &[&str]) -> Arc<Callsite> {
    let fields = fields.iter().map(|n| (n.to_string(), FieldType::Dynamic)).collect();
    let (module, file) = ("m".into(), "m.rs".into());
    Arc::new(Callsite { name: name.into(), module, file, line: 1, kind, fields, correlate: String::new() })
}

/// Thread `tid`, named `t<tid>`, on stream `tid`.
pub(crate) fn thread(tid: u64, spans: Vec<Span>, events: Vec<Event>) -> Thread {
    Thread { stream: tid as u32, tid, name: format!("t{tid}"), spans, events, dropped: 0 }
}

/// Process `name` with pid `pid`, read from `<name><pid>.bin`, trace id 7, with these threads,
/// complete and without drops.
pub(crate) fn process(pid: u32, name: &str, threads: Vec<Thread>) -> Process {
    Process {
        source: format!("{name}{pid}.bin"),
        header: Header {
            pid,
            name: name.into(),
            host: String::new(),
            labels: vec![],
            trace_id: 7,
            ..Header::default()
        },
        threads,
        dropped: 0,
        complete: true,
        last_ns: 0,
    }
}
