//! The mapping of the module docs, one message at a time: a process's resource, and each
//! finished span as an OTLP `Span` with its attributes, events and links.

use super::{
    attributes::Attributes,
    proto::{self, ResourceSpans, ScopeSpans, Span},
    SCOPE, SPAN_KIND_INTERNAL,
};
use crate::{
    model::Value,
    spans::{Link, LinkKind, Log, OutSpan, ProcessInfo, TraceInfo},
};

/// Builds the messages: a process's resource, and its spans one at a time.
#[derive(Default)]
pub(super) struct Builder {
    trace_id: Vec<u8>,
    resource: proto::Resource,
}

impl Builder {
    pub(super) fn begin_process(&mut self, ctx: &TraceInfo, process: usize) {
        self.trace_id = ctx.trace_id.to_be_bytes().to_vec();
        let (attributes, dropped_attributes_count) = resource_attributes(&ctx.processes[process], ctx).done();
        self.resource = proto::Resource { attributes, dropped_attributes_count };
    }

    pub(super) fn resource_spans(&self, spans: Vec<Span>) -> ResourceSpans {
        ResourceSpans {
            resource: Some(self.resource.clone()),
            scope_spans: vec![ScopeSpans {
                scope: Some(proto::InstrumentationScope { name: SCOPE.into() }),
                spans,
            }],
        }
    }

    pub(super) fn span(&self, ctx: &TraceInfo, s: &OutSpan<'_>) -> Span {
        let mut attrs = Attributes::default();
        attrs.fields(s.fields());
        thread_attributes(&mut attrs, &ctx.processes[s.process], s.thread);
        if s.event {
            attrs.flag("waffle.event");
        }
        if s.detached {
            attrs.flag("waffle.detached");
        }
        if !s.ended {
            attrs.flag("waffle.unfinished");
        }
        if s.stand_in {
            attrs.flag("waffle.stand_in");
        }
        attrs.correlate(&s.callsite.correlate, s.correlation);
        let (attributes, dropped_attributes_count) = attrs.done();
        let mut logs: Vec<&Log> = s.logs.iter().collect();
        logs.sort_by_key(|l| (l.ts_ns, l.id));
        let name = &s.callsite.name;
        Span {
            trace_id: self.trace_id.clone(),
            span_id: s.id.to_be_bytes().to_vec(),
            parent_span_id: s
                .parent
                .or(s.unresolved_parent)
                .map(|p| p.to_be_bytes().to_vec())
                .unwrap_or_default(),
            name: if name.is_empty() { "(unnamed)".into() } else { name.to_string() },
            kind: SPAN_KIND_INTERNAL,
            start_time_unix_nano: s.start_ns,
            end_time_unix_nano: s.end_ns,
            attributes,
            dropped_attributes_count,
            events: logs.into_iter().map(|l| event(ctx, s, l)).collect(),
            links: s.links.iter().map(|l| self.link(s, l)).collect(),
        }
    }

    fn link(&self, s: &OutSpan<'_>, l: &Link) -> proto::Link {
        let mut attrs = Attributes::default();
        match l.kind {
            LinkKind::Cause => attrs.str("waffle.link", "caused_by"),
            LinkKind::Correlated | LinkKind::Message => {
                let message = l.kind == LinkKind::Message;
                attrs.str("waffle.link", if message { "message" } else { "correlated" });
                // The key and value are those of the item the link is from.
                let from = l.from_event.and_then(|e| s.logs.iter().find(|log| log.id == e));
                let (key, value) = match from {
                    Some(log) => (&log.callsite.correlate, log.correlation),
                    None => (&s.callsite.correlate, s.correlation),
                };
                attrs.correlate(key, value);
            }
        }
        if !l.resolved {
            attrs.flag("waffle.unresolved");
        }
        if let Some(target) = l.target_event {
            attrs.id(
                if l.kind == LinkKind::Correlated { "waffle.peer_event" } else { "waffle.cause_event" },
                target,
            );
        }
        if let Some(from) = l.from_event {
            attrs.id("waffle.from_event", from);
        }
        let (attributes, dropped_attributes_count) = attrs.done();
        proto::Link {
            trace_id: self.trace_id.clone(),
            span_id: l.span.to_be_bytes().to_vec(),
            attributes,
            dropped_attributes_count,
        }
    }
}

/// A span event.
fn event(ctx: &TraceInfo, s: &OutSpan<'_>, l: &Log) -> proto::Event {
    let mut attrs = Attributes::default();
    attrs.fields(l.fields());
    attrs.id("waffle.id", l.id);
    if !l.caused_by.is_empty() {
        let ids: Vec<String> = l.caused_by.iter().map(|id| format!("{id:016x}")).collect();
        attrs.str("waffle.caused_by", &ids.join(", "));
    }
    attrs.correlate(&l.callsite.correlate, l.correlation);
    if l.thread != s.thread {
        attrs.value("thread.id", &Value::U64(ctx.processes[s.process].threads[l.thread].tid));
    }
    let (attributes, dropped_attributes_count) = attrs.done();
    proto::Event {
        time_unix_nano: l.ts_ns,
        name: l.callsite.name.to_string(),
        attributes,
        dropped_attributes_count,
    }
}

fn resource_attributes(process: &ProcessInfo, ctx: &TraceInfo) -> Attributes {
    let h = &process.header;
    let mut attrs = Attributes::default();
    let name = if h.name.is_empty() { "unknown_service" } else { &h.name };
    attrs.str("service.name", name);
    attrs.value("process.pid", &Value::U64(h.pid.into()));
    if !h.host.is_empty() {
        attrs.str("host.name", &h.host);
    }
    for (key, value) in &h.labels {
        attrs.str(&format!("waffle.{key}"), value);
    }
    if process.dropped > 0 {
        attrs.value("waffle.dropped_records", &Value::U64(process.dropped));
    }
    if !process.complete {
        attrs.flag("waffle.incomplete");
    }
    if h.trace_id != 0 && h.trace_id != ctx.trace_id {
        attrs.str("waffle.trace_id", &format!("{:032x}", h.trace_id));
    }
    attrs
}

fn thread_attributes(attrs: &mut Attributes, process: &ProcessInfo, thread: usize) {
    let thread = &process.threads[thread];
    attrs.value("thread.id", &Value::U64(thread.tid));
    if !thread.name.is_empty() {
        attrs.str("thread.name", &thread.name);
    }
}
