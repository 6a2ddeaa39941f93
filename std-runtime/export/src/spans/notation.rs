//! How the span formats (Jaeger, Zipkin) write what they share: ids as hex lists, times in
//! whole microseconds, a correlation as `key=value`, the service a process goes by, and which
//! links a span follows from.

use super::{Link, LinkKind, ProcessInfo};

/// The links of a span itself, not of the events it shows.
pub(crate) fn own_links(links: &[Link]) -> impl Iterator<Item = &Link> {
    links.iter().filter(|l| l.from_event.is_none())
}

/// The spans a span follows from: those showing its causes and its events' causes, those
/// showing the causes of the messages it or its events received (effects of directed
/// correlations), then the first member of its or its events' correlation groups; no repeats:
/// into `follows`, emptied first.
pub(crate) fn follows(links: &[Link], follows: &mut Vec<u64>) {
    follows.clear();
    for kind in [LinkKind::Cause, LinkKind::Message, LinkKind::Correlated] {
        for l in links.iter().filter(|l| l.resolved && l.kind == kind) {
            if !follows.contains(&l.span) {
                follows.push(l.span);
            }
        }
    }
}

/// The spans showing the causes of the messages a span or its events received, as 16 hex
/// digits each, comma-separated; `None` when there are none.
pub(crate) fn message_from(links: &[Link]) -> Option<String> {
    let mut from: Vec<u64> = Vec::new();
    for l in links.iter().filter(|l| l.resolved && l.kind == LinkKind::Message) {
        if !from.contains(&l.span) {
            from.push(l.span);
        }
    }
    (!from.is_empty()).then(|| hex_list(&from))
}

/// `key=value` of a correlation.
pub(crate) fn correlation(key: &str, value: Option<u64>) -> Option<String> {
    value.filter(|_| !key.is_empty()).map(|v| format!("{key}={v}"))
}

/// Nanoseconds to whole microseconds, floored.
pub(crate) fn us(ns: u64) -> u64 {
    ns / 1000
}

/// The name a process goes by in Jaeger and Zipkin: its own, or `waffle` when it has none.
pub(crate) fn service_name(process: &ProcessInfo) -> &str {
    if process.header.name.is_empty() {
        "waffle"
    } else {
        &process.header.name
    }
}

/// Ids as 16 hex digits each, comma-separated.
pub(crate) fn hex_list(ids: &[u64]) -> String {
    ids.iter().map(|id| format!("{id:016x}")).collect::<Vec<_>>().join(",")
}
