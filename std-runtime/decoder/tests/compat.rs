//! Old files keep decoding: `data/v1.bin` was written by `waffle-std`'s `v1_trace` example
//! before the frame grammar moved into `waffle::wire` (format version 1, commit 2f33be9), and
//! must decode to exactly what it held then. A file of a newer version is refused with a
//! message naming both versions.

use std::path::Path;
use waffle_read::decode::decode_file;
use waffle_read::model::Value;
use waffle_read::Error;

fn v1() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.bin"))
}

#[test]
fn a_version_1_file_decodes_to_what_it_held() {
    let (p, warnings) = decode_file(v1()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((p.header.pid, p.header.name.as_str(), p.header.host.as_str()), (10004, "v1-sample", "vm"));
    let labels: Vec<(&str, &str)> = p.header.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(labels, [("rank", "0"), ("job", "compat")]);
    assert_eq!(p.header.trace_id, 0x0af7651916cd43dd8448eb211c80319c);
    assert_eq!(p.header.parent_span(), Some(0xb7ad6b7169203331));
    assert_eq!((p.dropped, p.complete, p.threads.len()), (0, true, 2));

    // The main thread: outer { inner { ready } }.
    let main = &p.threads[0];
    assert_eq!((main.stream, main.tid, main.name.as_str()), (0, 10004, "main"));
    let names: Vec<&str> = main.spans.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["outer", "inner"]);
    let (outer, inner) = (&main.spans[0], &main.spans[1]);
    assert_eq!((outer.id, outer.parent, outer.depth), (0x4863_0000_0000_0001, Some(0xb7ad6b7169203331), 0));
    assert_eq!((inner.id, inner.parent, inner.depth), (0x4863_0000_0000_0002, Some(outer.id), 1));
    let fields = |s: &waffle_read::model::Span| -> Vec<(String, Value)> {
        s.fields().map(|(k, v)| (k.to_owned(), v.clone())).collect()
    };
    assert_eq!(fields(outer), [("step".into(), Value::U64(7)), ("dt".into(), Value::F64(0.5))]);
    assert_eq!(fields(inner), [("delta".into(), Value::I64(-3)), ("ok".into(), Value::Bool(true))]);
    assert!(outer.ended && inner.ended);
    assert_eq!((outer.end_ns - outer.start_ns, inner.end_ns - inner.start_ns), (5949, 3235));
    assert!(outer.start_ns < inner.start_ns && inner.end_ns < outer.end_ns);
    let cs = &outer.callsite;
    assert_eq!(
        (&*cs.module, &*cs.file, cs.line),
        ("v1_trace", "std-runtime/recorder/examples/v1_trace.rs", 32)
    );
    assert_eq!(main.events.len(), 1);
    let ready = &main.events[0];
    assert_eq!((ready.id, ready.parent, ready.name()), (0x4863_0000_0000_0003, Some(inner.id), "ready"));
    assert_eq!(ready.fields, [Value::Str("halo".into())]);

    // The worker: a run-time callsite with dynamic fields, and an event caused by `ready`.
    let worker = &p.threads[1];
    assert_eq!((worker.stream, worker.tid, worker.name.as_str()), (1, 14261, "worker"));
    assert_eq!(worker.spans.len(), 1);
    let k = &worker.spans[0];
    assert_eq!((k.id, k.parent, k.name()), (0x4863_0001_0000_0001, Some(0xb7ad6b7169203331), "c_kernel"));
    assert_eq!((&*k.callsite.module, &*k.callsite.file, k.callsite.line), ("kernels.c", "kernels.c", 42));
    assert_eq!(k.fields, [Value::U64(12), Value::Str("tile".into())]);
    assert_eq!(k.end_ns - k.start_ns, 2554);
    assert_eq!(worker.events.len(), 1);
    let consumed = &worker.events[0];
    assert_eq!(
        (consumed.id, consumed.parent, consumed.name()),
        (0x4863_0001_0000_0002, Some(k.id), "consumed")
    );
    assert_eq!((consumed.links.as_slice(), consumed.correlation), (&[ready.id][..], Some(9)));
    assert_eq!(consumed.callsite.correlate, "exchange");
    assert!(consumed.fields.is_empty());
}

#[test]
fn a_newer_version_is_refused_naming_both_versions() {
    let mut bytes = std::fs::read(v1()).unwrap();
    bytes[8..10].copy_from_slice(&2u16.to_le_bytes());
    let err = waffle_read::decode::decode_reader(&bytes[..], Path::new("new.bin")).unwrap_err();
    assert!(matches!(err, Error::UnknownVersion { found: 2, supported: 1, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("version 2 is newer than this decoder reads (up to 1)"), "{message}");
}
