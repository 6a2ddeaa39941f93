//! The one hand-built trace every golden file (`tests/golden/*.json`) is written from, and the
//! comparison with those files. Included by the golden tests (`#[path]`); the Python consumer
//! tests (`tests/consumers/`) read the golden files it produces.
//!
//! Two processes of one run (ranks 0 and 1 of `Trainer`, both pid 100, on two hosts), with:
//! - nesting, and an unfinished span (`checkpoint`);
//! - a detached span (`prefetch`, begun in `train_step`'s context) with a child on its thread;
//! - an event with a field of every value type (`sample`), and one with the values JSON and
//!   browsers cannot hold (the symptom: `u64::MAX`, `i64::MIN`, NaN);
//! - an event outside any span (`orphan`), and one read after its parent ended (`late_ack`);
//! - a correlation pair across processes (the `allreduce`s), links to spans and to events
//!   across processes, a repeated link and a link to an id not in the trace (`report`);
//! - a stand-in for a span whose begin was lost (id 0), unfinished, with a child span
//!   (`read_batch`) and an event inside it (`retry`);
//! - records dropped on rank 0, and rank 1's file cut short (not complete);
//! - a field named like an attribute of the mappings (`decode`'s `thread.name`).
//!
//! Ids are as the runtime makes them (a stream prefix in the upper bits, a counter below) and
//! times are a fixed Unix time plus whole µs, so the golden files never change by themselves. `WAFFLE_BLESS=1 cargo test -p waffle-decode --test golden_otlp_chrome --test
//! golden_zipkin_jaeger` rewrites them; review the diff before committing it.

use std::{path::Path, sync::Arc};

use serde_json::{Map, Value as Json};
use waffle::{
    callsite::Kind,
    wire::{FieldDesc, FieldType, Header},
};
use waffle_read::model::{Callsite, Event, Process, Span, Thread, Trace, Value};

/// The run's start, ns since the Unix epoch.
pub const T: u64 = 1_700_000_000_000_000_000;
/// Times are given in µs after [`T`], so that they are whole in every format's unit.
const US: u64 = 1_000;
pub const TRACE_ID: u128 = 0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c;

/// Each stream's id prefix.
pub const R0_MAIN: u64 = 0x1000_0000_0000_0000;
pub const R0_LOADER: u64 = 0x1000_0001_0000_0000;
pub const R1_MAIN: u64 = 0x2000_0000_0000_0000;
pub const R1_WORKER: u64 = 0x2000_0001_0000_0000;

/// Rank 0's spans and events.
pub const STEP0: u64 = R0_MAIN | 1;
pub const SAMPLE: u64 = R0_MAIN | 2;
pub const AR0: u64 = R0_MAIN | 3;
pub const SYMPTOM: u64 = R0_MAIN | 4;
pub const CHECKPOINT: u64 = R0_MAIN | 5;
pub const PREFETCH: u64 = R0_LOADER | 1;
pub const DECODE: u64 = R0_LOADER | 2;
pub const ORPHAN: u64 = R0_LOADER | 3;
/// Rank 1's.
pub const STEP1: u64 = R1_MAIN | 1;
pub const CAUSE: u64 = R1_MAIN | 2;
pub const AR1: u64 = R1_MAIN | 3;
pub const REPORT: u64 = R1_MAIN | 4;
pub const LATE_ACK: u64 = R1_MAIN | 5;
pub const READ_BATCH: u64 = R1_WORKER | 1;
pub const RETRY: u64 = R1_WORKER | 2;
/// An id that no item of the trace has.
pub const ABSENT: u64 = 0xdead;

fn callsite(name: &str, kind: Kind, fields: &[(&str, FieldType)], correlate: &str) -> Arc<Callsite> {
    Arc::new(Callsite {
        name: name.to_owned().into(),
        module: "train".into(),
        file: "src/train.rs".into(),
        line: 1,
        kind,
        fields: fields.iter().map(|&(n, t)| FieldDesc::new(n, t)).collect(),
        correlate: correlate.to_owned().into(),
    })
}

/// A span that ended, `times` µs after [`T`].
fn span(
    callsite: &Arc<Callsite>,
    id: u64,
    parent: Option<u64>,
    depth: u32,
    fields: Vec<Value>,
    times: (u64, u64),
) -> Span {
    Span {
        id,
        parent,
        links: Vec::new(),
        correlation: None,
        detached: false,
        depth,
        callsite: callsite.clone(),
        fields,
        start_ns: T + times.0 * US,
        end_ns: T + times.1 * US,
        ended: true,
    }
}

/// An event `at` µs after [`T`].
fn event(callsite: &Arc<Callsite>, id: u64, parent: Option<u64>, fields: Vec<Value>, at: u64) -> Event {
    Event {
        id,
        parent,
        links: Vec::new(),
        correlation: None,
        callsite: callsite.clone(),
        fields,
        ts_ns: T + at * US,
    }
}

fn thread(stream: u32, tid: u64, name: &str, spans: Vec<Span>, events: Vec<Event>) -> Thread {
    Thread { stream, tid, name: name.into(), spans, events, dropped: 0 }
}

fn process(rank: &str, host: &str, threads: Vec<Thread>) -> Process {
    Process {
        source: format!("rank{rank}.bin"),
        header: Header {
            pid: 100,
            name: "Trainer".into(),
            host: host.into(),
            labels: vec![("rank".into(), rank.into())],
            trace_id: TRACE_ID,
            ..Header::default()
        },
        threads,
        dropped: 0,
        complete: true,
        last_ns: 0,
        tracks: Vec::new(),
    }
}

/// The fixed trace the golden files show.
pub fn fixed_trace() -> Trace {
    use FieldType as F;
    let train_step = callsite("train_step", Kind::Span, &[("round", F::U64)], "");
    let allreduce = callsite("allreduce", Kind::Span, &[("rank", F::U64), ("bytes", F::U64)], "allreduce");
    let checkpoint = callsite("checkpoint", Kind::Span, &[], "");
    let prefetch = callsite("prefetch", Kind::Span, &[("batch", F::U64)], "");
    // A field named like an attribute of the mapping: the field's value wins.
    let decode = callsite("decode", Kind::Span, &[("thread.name", F::Str)], "");
    let report = callsite("report", Kind::Span, &[("rank", F::U64)], "");
    let read_batch = callsite("read_batch", Kind::Span, &[("batch", F::I64)], "");
    let lost = callsite("(begin lost: records dropped)", Kind::Span, &[], "");
    let symptom = callsite(
        "Output buffer is NaN after AllReduce",
        Kind::Event,
        &[
            ("count", F::U64),
            ("delta", F::I64),
            ("loss", F::F64),
            ("ok", F::Bool),
            ("note", F::Str),
            ("big", F::U64),
            ("low", F::I64),
            ("bad", F::F64),
        ],
        "",
    );
    let cause =
        callsite("Input buffer contains NaN", Kind::Event, &[("rank", F::U64), ("suggestion", F::Str)], "");
    let sample = callsite(
        "sample",
        Kind::Event,
        &[
            ("u", F::U64),
            ("big", F::U64),
            ("i", F::I64),
            ("f", F::F64),
            ("nan", F::F64),
            ("ok", F::Bool),
            ("s", F::Str),
        ],
        "",
    );
    let orphan = callsite("orphan", Kind::Event, &[], "");
    let retry = callsite("retry", Kind::Event, &[], "");
    let late_ack = callsite("late_ack", Kind::Event, &[], "");

    // Rank 0, main thread: train_step { sample; allreduce { symptom }; checkpoint (unfinished) };
    // the allreduce and the symptom both name rank 1's cause event as their cause.
    let mut ar0 =
        span(&allreduce, AR0, Some(STEP0), 1, vec![Value::U64(0), Value::U64(4096)], (2_000, 8_000));
    ar0.correlation = Some(2);
    ar0.links = vec![CAUSE];
    let mut ckpt = span(&checkpoint, CHECKPOINT, Some(STEP0), 1, vec![], (9_000, 9_500));
    ckpt.ended = false;
    let sample_fields = vec![
        Value::U64(42),
        Value::U64(u64::MAX),
        Value::I64(-5),
        Value::F64(0.25),
        Value::F64(f64::NAN),
        Value::Bool(true),
        Value::Str("héllo \"q\"".into()),
    ];
    let symptom_fields = vec![
        Value::U64(3),
        Value::I64(-7),
        Value::F64(0.25),
        Value::Bool(true),
        Value::Str("two words, \"quoted\"".into()),
        Value::U64(u64::MAX),
        Value::I64(i64::MIN),
        Value::F64(f64::NAN),
    ];
    let main0 = thread(
        0,
        100,
        "main",
        vec![span(&train_step, STEP0, None, 0, vec![Value::U64(2)], (0, 10_000)), ar0, ckpt],
        vec![
            event(&sample, SAMPLE, Some(STEP0), sample_fields, 1_000),
            Event { links: vec![CAUSE], ..event(&symptom, SYMPTOM, Some(AR0), symptom_fields, 7_000) },
        ],
    );
    // Rank 0, loader thread: a detached prefetch (begun in train_step's context, ending after
    // it) and its child decode on this thread; an event with no parent; records lost.
    let mut prefetch_span = span(&prefetch, PREFETCH, Some(STEP0), 0, vec![Value::U64(7)], (3_000, 12_000));
    prefetch_span.detached = true;
    let decode_span =
        span(&decode, DECODE, Some(PREFETCH), 0, vec![Value::Str("decoder".into())], (4_000, 5_000));
    let mut loader = thread(
        1,
        101,
        "loader",
        vec![prefetch_span, decode_span],
        vec![event(&orphan, ORPHAN, None, vec![], 11_000)],
    );
    loader.dropped = 2;
    let mut rank0 = process("0", "node-a", vec![main0, loader]);
    rank0.dropped = 2;

    // Rank 1, main thread: train_step { cause; allreduce (caused by cause) }; an
    // acknowledgement of the allreduce read after it ended; report, caused by rank 0's
    // symptom, rank 0's train_step, the orphan event, an id not in the trace, and the symptom
    // again.
    let mut ar1 =
        span(&allreduce, AR1, Some(STEP1), 1, vec![Value::U64(1), Value::U64(4096)], (2_500, 8_500));
    ar1.correlation = Some(2);
    ar1.links = vec![CAUSE];
    let mut report_span = span(&report, REPORT, None, 0, vec![Value::U64(1)], (11_000, 11_500));
    report_span.links = vec![SYMPTOM, STEP0, ORPHAN, ABSENT, SYMPTOM];
    let suggestion = Value::Str("Check data loading pipeline for this rank.".into());
    let main1 = thread(
        0,
        100,
        "main",
        vec![span(&train_step, STEP1, None, 0, vec![Value::U64(2)], (500, 10_500)), ar1, report_span],
        vec![
            event(&cause, CAUSE, Some(STEP1), vec![Value::U64(1), suggestion], 1_500),
            event(&late_ack, LATE_ACK, Some(AR1), vec![], 9_000),
        ],
    );
    // Rank 1, worker thread: a stand-in (its begin was lost, and so was its end) with a child
    // span and an event inside it, which the decoder leaves without a parent.
    let mut stand_in = span(&lost, 0, None, 0, vec![], (600, 3_000));
    stand_in.ended = false;
    let worker = thread(
        1,
        102,
        "worker",
        vec![stand_in, span(&read_batch, READ_BATCH, None, 1, vec![Value::I64(12)], (1_000, 2_000))],
        vec![event(&retry, RETRY, None, vec![], 2_500)],
    );
    let mut rank1 = process("1", "node-b", vec![main1, worker]);
    rank1.complete = false;

    Trace { processes: vec![rank0, rank1] }
}

/// The same value with every object's keys in sorted order, whatever order serde_json keeps.
fn sorted(v: &Json) -> Json {
    match v {
        Json::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            Json::Object(keys.into_iter().map(|k| (k.clone(), sorted(&o[k]))).collect::<Map<_, _>>())
        }
        Json::Array(a) => Json::Array(a.iter().map(sorted).collect()),
        v => v.clone(),
    }
}

/// Compares `json` (pretty, keys sorted) with `tests/golden/<name>`, or rewrites the file
/// under `WAFFLE_BLESS=1`.
pub fn golden(name: &str, json: &Json) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let text = serde_json::to_string_pretty(&sorted(json)).expect("render") + "\n";
    if std::env::var_os("WAFFLE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).expect("write golden file");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (WAFFLE_BLESS=1 creates it)", path.display()));
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0) + 1;
        panic!(
            "{} differs from the export, first at line {line}:\n  golden: {}\n  now:    {}\n\
             (WAFFLE_BLESS=1 cargo test rewrites it; review the diff)",
            path.display(),
            want.lines().nth(line - 1).unwrap_or("<end>"),
            text.lines().nth(line - 1).unwrap_or("<end>"),
        );
    }
}
