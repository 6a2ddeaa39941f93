//! A program that never runs `waffle-decode` still gets its trace in the formats it asked for.

#[test]
fn a_session_writes_its_exports_when_it_stops() {
    let dir = std::env::temp_dir().join(format!("waffle-export-at-stop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = waffle_std::Config::new(dir.join("t.bin")).export(dir.join("t.json")).start();
    match bad {
        Err(waffle_std::Error::UnknownFormat { path }) => assert!(path.ends_with("t.json")),
        other => panic!("expected UnknownFormat, got {:?}", other.map(|s| s.path().to_owned())),
    }

    let session = waffle_std::Config::new(dir.join("run.bin"))
        .export(dir.join("run.pftrace"))
        .export(dir.join("run.jaeger.json"))
        .export(dir.join("run.zipkin.json"))
        .start()
        .unwrap();
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
}
