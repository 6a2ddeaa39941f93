//! A program that never runs `waffle-decode` still gets its trace in the formats it asked for.

#[test]
fn a_session_writes_its_exports_when_it_stops() {
    let dir = std::env::temp_dir().join(format!("waffle-export-at-stop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    match waffle_export::at_stop([dir.join("run.pftrace"), dir.join("t.json")]) {
        Err(waffle_export::UnknownFormat { path }) => assert!(path.ends_with("t.json")),
        Ok(_) => panic!("expected UnknownFormat for t.json"),
    }

    let export = waffle_export::at_stop([
        dir.join("run.pftrace"),
        dir.join("run.jaeger.json"),
        dir.join("run.zipkin.json"),
    ])
    .unwrap();
    let session = waffle_std::Config::new(dir.join("run.bin")).at_stop(export).start().unwrap();
    let cause = waffle::event!("cause", n = 1u64);
    for i in 0..10u64 {
        let _s = waffle::span!("work", i, caused_by = [cause]);
        let _e = waffle::event!("tick");
    }
    session.stop().unwrap();

    let jaeger: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.jaeger.json")).unwrap()).unwrap();
    let spans = jaeger["data"][0]["spans"].as_array().unwrap();
    assert_eq!(spans.iter().filter(|s| s["operationName"] == "work").count(), 10);
    let zipkin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.zipkin.json")).unwrap()).unwrap();
    assert_eq!(zipkin.as_array().unwrap().iter().filter(|s| s["name"] == "work").count(), 10);
    let pftrace = std::fs::read(dir.join("run.pftrace")).unwrap();
    assert_eq!(pftrace.first(), Some(&0x0a), "a Trace message starts with packet (field 1, bytes)");
    assert!(!dir.join("run.pftrace.partial").exists());
    std::fs::remove_dir_all(&dir).ok();
    a_failing_hook_fails_the_stop_and_keeps_the_trace();
}

/// A hook that fails makes the stop fail, naming the trace, which is complete all the same. (Run
/// by the test above: one session records at a time in a process.)
fn a_failing_hook_fails_the_stop_and_keeps_the_trace() {
    let dir = std::env::temp_dir().join(format!("waffle-export-at-stop-fail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The export's directory is removed before the stop, so writing the export fails.
    let gone = dir.join("gone");
    std::fs::create_dir_all(&gone).unwrap();
    let export = waffle_export::at_stop([gone.join("run.pftrace")]).unwrap();
    let session = waffle_std::Config::new(dir.join("run.bin")).at_stop(export).start().unwrap();
    drop(waffle::span!("kept"));
    std::fs::remove_dir_all(&gone).unwrap();
    match session.stop() {
        Err(e @ waffle_std::Error::AtStop { .. }) => {
            let text = e.to_string();
            assert!(text.contains("run.bin") && text.contains("run.pftrace"), "{text}");
        }
        other => panic!("expected AtStop, got {other:?}"),
    }
    let decoded = waffle_read::decode::decode_files(&[dir.join("run.bin")]).unwrap();
    let p = &decoded.trace.processes[0];
    assert!(p.complete);
    assert!(p.threads.iter().flat_map(|t| &t.spans).any(|s| s.callsite.name == "kept"));
    std::fs::remove_dir_all(&dir).ok();
}
