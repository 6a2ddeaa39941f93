//! Callsites registered at run time (as the C and Python bindings do) are recorded like Rust
//! ones and described in the file, also when registered after the session started.

use waffle::{callsite::Kind, wire::FieldType, FieldValue};
use waffle_read::model::Value;

#[test]
fn run_time_callsites_decode_with_their_names_and_fields() {
    let path = std::env::temp_dir().join(format!("waffle-dynamic-{}.bin", std::process::id()));
    let early = waffle_std::dynamic::register(
        Kind::Span,
        "c_span",
        "main.c",
        "main.c",
        10,
        &[("rank", FieldType::I64)],
        "allreduce",
    )
    .unwrap();
    let session = waffle_std::start(&path).unwrap();
    let late = waffle_std::dynamic::register(
        Kind::Event,
        "py_event",
        "model.py",
        "model.py",
        3,
        &[("loss", FieldType::Dynamic), ("tag", FieldType::Dynamic)],
        "",
    )
    .unwrap();
    let (sid, eid) = {
        let s = waffle::span_begin_raw(early, &|w| (-3i64).encode(w));
        waffle::link_raw(&[waffle::EventId::NULL], Some(5));
        let e = waffle::event_raw(late, &|w| {
            0.5f64.encode_dynamic(w);
            "warm".encode_dynamic(w);
        });
        (s.id(), e)
    };
    // A thread that starts after the registration uses it too.
    std::thread::spawn(move || {
        let _ = waffle::event_raw(late, &|w| {
            1.5f64.encode_dynamic(w);
            "hot".encode_dynamic(w);
        });
    })
    .join()
    .unwrap();
    session.stop().unwrap();

    let d = waffle_read::decode::decode_files(&[&path]).unwrap();
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    let t = &d.trace;
    let idx = t.index();
    let span = t.describe(idx[&sid.to_u64()]);
    assert_eq!((&*span.callsite.name, &*span.callsite.file, span.correlation), ("c_span", "main.c", Some(5)));
    let ev = t.describe(idx[&eid.to_u64()]);
    assert_eq!(ev.parent, Some(sid.to_u64()));
    let events: Vec<_> = t.processes[0].threads.iter().flat_map(|th| &th.events).collect();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].fields, vec![Value::F64(0.5), Value::Str("warm".into())]);
    assert_eq!(events[1].fields, vec![Value::F64(1.5), Value::Str("hot".into())]);
    std::fs::remove_file(&path).ok();
}
