//! The hand-written encodings against prost's messages (`builder`) and their rendering
//! (`json`), span by span, on traces with every kind of value, clashing keys, events, links
//! that resolve and links that do not, and messages between ranks.

use std::{io, sync::Arc};

use waffle_wire::Kind;

use super::{json_span, protobuf_span, Parts, Spare};
use crate::{
    model::{Event, Span, Trace, Value},
    {
        json_buf::JsonBuf,
        otlp::{builder::Builder, json},
        spans::{write_trace, OutSpan, SpanWriter, TraceInfo},
    },
};
use waffle_read::fixtures::{self, thread};

const T0: u64 = 1_700_000_000_000_000_000;

/// Every span encoded both ways.
#[derive(Default)]
struct Both {
    build: Builder,
    spare: Spare,
    spans: usize,
}

impl SpanWriter for Both {
    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> io::Result<()> {
        self.build.begin_process(ctx, process);
        Ok(())
    }

    fn span(&mut self, ctx: &TraceInfo, s: &OutSpan<'_>) -> io::Result<()> {
        let message = self.build.span(ctx, s);
        let ids = (s.id, s.parent.or(s.unresolved_parent));
        let parts = Parts::of(&mut self.spare, ctx, s);
        let mut hand = Vec::new();
        protobuf_span(
            &parts,
            &mut Vec::new(),
            &ctx.trace_id.to_be_bytes(),
            ids,
            (s.start_ns, s.end_ns),
            &mut hand,
        );
        let mut prost = Vec::new();
        prost::encoding::message::encode(2, &message, &mut prost);
        assert_eq!(hand, prost, "protobuf of {:x}: {message:?}", s.id);
        let mut text = JsonBuf::default();
        json_span(&parts, ctx.trace_id, ids, (s.start_ns, s.end_ns), &mut text);
        let rendered = serde_json::to_string(&json::span(&message)).unwrap();
        assert_eq!(String::from_utf8(text.bytes).unwrap(), rendered, "JSON of {:x}", s.id);
        parts.recycle(&mut self.spare);
        self.spans += 1;
        Ok(())
    }
}

fn check(trace: &Trace) -> usize {
    let mut both = Both::default();
    write_trace(trace, &mut both).unwrap();
    both.spans
}

/// Fields of every type and edge, a field named like one of the mapping's keys, an unnamed
/// span, an unfinished one, events with fields and causes (one in the trace, one not), a span
/// caused by an event and by an id not in the trace.
fn values() -> Trace {
    let fields = ["s", "u", "big", "i", "min", "f", "nan", "inf", "ninf", "b", "thread.id", "s"];
    let cs = fixtures::callsite("work \"quoted\"\n", Kind::Span, &fields);
    let unnamed = fixtures::callsite("", Kind::Span, &[]);
    let ev = fixtures::callsite("tick", Kind::Event, &["n", "waffle.id", "x"]);
    let values = vec![
        Value::Str("a \"b\"\\ c\u{1}\t é".into()),
        Value::U64(42),
        Value::U64(u64::MAX),
        Value::I64(-7),
        Value::I64(i64::MIN),
        Value::F64(0.1),
        Value::F64(f64::NAN),
        Value::F64(f64::INFINITY),
        Value::F64(f64::NEG_INFINITY),
        Value::Bool(false),
        Value::U64(9),
        Value::Str("again".into()),
    ];
    let span = |id, parent, cs: &Arc<_>, fields: Vec<Value>, links: Vec<u64>, [a, b]: [u64; 2], ended| Span {
        id,
        parent,
        links,
        correlation: None,
        detached: false,
        depth: u32::from(parent.is_some()),
        callsite: Arc::clone(cs),
        fields,
        start_ns: T0 + a,
        end_ns: T0 + b,
        ended,
    };
    let event = |id, parent, fields: Vec<Value>, links: Vec<u64>, ts| Event {
        id,
        parent: Some(parent),
        links,
        correlation: None,
        callsite: Arc::clone(&ev),
        fields,
        ts_ns: T0 + ts,
    };
    let t1 = thread(
        1,
        vec![
            span(0x10, None, &cs, values.clone(), vec![], [0, 1000], true),
            span(0x11, Some(0x10), &unnamed, vec![], vec![0x13, 0xdead], [100, 200], true),
            span(0x12, Some(0x10), &cs, values, vec![], [300, 400], false),
        ],
        vec![
            event(
                0x13,
                0x10,
                vec![Value::F64(1e-9), Value::Str("x".into()), Value::I64(3)],
                vec![0x11, 0xbeef],
                50,
            ),
            event(0x14, 0x10, vec![Value::U64(u64::MAX)], vec![], 50),
            event(0x15, 0x10, vec![], vec![], 20),
        ],
    );
    let t2 = thread(2, vec![span(0x20, Some(0x10), &unnamed, vec![], vec![], [10, 20], true)], vec![]);
    Trace { processes: vec![fixtures::process(1, "values", vec![t1, t2])] }
}

#[test]
fn parts_encode_as_prost_and_its_rendering() {
    assert_eq!(check(&values()), 4);
    assert!(check(&fixtures::messages()) >= 8);
}
