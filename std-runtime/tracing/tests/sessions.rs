//! Many threads, no session, a span outliving its session, and `WAFFLE_OUTPUT`.

mod common;

use common::{decode, path, record, serial, span, tree};

#[test]
fn many_threads_record_every_span_exactly_once() {
    const THREADS: u64 = 8;
    const SPANS: u64 = 500;
    let (t, _) = record("many", || {
        std::thread::scope(|s| {
            for n in 0..THREADS {
                s.spawn(move || {
                    let _t = tracing::info_span!("thread", n).entered();
                    for i in 0..SPANS {
                        tracing::info_span!("work", i).in_scope(|| tracing::info!(name: "tick", i));
                    }
                });
            }
        });
    });
    let p = &t.processes[0];
    assert_eq!(p.dropped, 0);
    let index = t.index();
    let mut works = 0;
    for th in p.threads.iter().filter(|th| !th.spans.is_empty()) {
        let top: Vec<_> = th.spans.iter().filter(|s| s.name() == "thread").collect();
        assert_eq!(top.len(), 1, "one thread span per thread");
        let mine: Vec<_> = th.spans.iter().filter(|s| s.name() == "work").collect();
        assert_eq!(mine.len() as u64, SPANS);
        assert!(mine.iter().all(|w| w.parent == Some(top[0].id) && w.ended));
        let ticks: Vec<_> = th.events.iter().collect();
        assert_eq!(ticks.len() as u64, SPANS);
        for (w, e) in mine.iter().zip(&ticks) {
            assert_eq!(e.parent, Some(w.id), "each tick inside its own work span");
            assert_eq!(w.fields, e.fields[1..], "same i");
        }
        works += mine.len() as u64;
    }
    assert_eq!(works, THREADS * SPANS);
    assert_eq!(index.len() as u64, THREADS * (1 + 2 * SPANS));
}

#[test]
fn without_a_session_nothing_is_recorded_and_nothing_breaks() {
    let _serial = serial();
    assert!(!waffle::is_enabled());
    let before = tracing::info_span!("before_session", x = 1u64);
    before.in_scope(|| {
        let b = tracing::info_span!("off");
        b.follows_from(&before);
        b.record("x", 2u64);
        tracing::info!(name: "off_event", y = ?vec![1, 2]);
    });
    // Recorded nowhere: a span made before the session and entered in it parents nothing.
    let file = path("disabled");
    let session = waffle_std::start(&file).unwrap();
    std::thread::scope(|s| {
        let before = &before;
        let t = std::thread::Builder::new().name("main".into());
        t.spawn_scoped(s, move || before.in_scope(|| tracing::info_span!("during").in_scope(|| {})))
            .unwrap()
            .join()
            .unwrap();
    });
    drop(session);
    drop(before);
    assert_eq!(tree(&decode(&file)), "span during @main\n");
}

#[test]
fn a_span_that_outlives_its_session_stays_open_in_its_file() {
    let _serial = serial();
    let (first, second) = (path("outlives_1"), path("outlives_2"));
    let t = std::thread::Builder::new().name("main".into());
    t.spawn(move || {
        let session = waffle_std::start(&first).unwrap();
        let long = tracing::info_span!("long");
        long.in_scope(|| tracing::info_span!("in_first").in_scope(|| {}));
        drop(session);
        long.in_scope(|| tracing::info_span!("between_sessions").in_scope(|| {}));
        let session = waffle_std::start(&second).unwrap();
        long.in_scope(|| tracing::info_span!("in_second").in_scope(|| {}));
        drop(long);
        drop(session);
    })
    .unwrap()
    .join()
    .unwrap();
    let t1 = decode(&path("outlives_1"));
    assert_eq!(tree(&t1), "span long @main (open)\n  span in_first @main\n");
    assert!(!span(&t1, "long").ended);
    assert_eq!(tree(&decode(&path("outlives_2"))), "span in_second @main\n");
}

/// The example run with `WAFFLE_OUTPUT` alone: it never starts a session.
#[test]
fn the_example_records_with_waffle_output() {
    let exe = common::example("tracing_demo");
    let file = path("demo");
    let out = std::process::Command::new(exe).env("WAFFLE_OUTPUT", &file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = common::without_lines(&tree(&decode(&file)), "tracing_demo.rs");
    assert_eq!(tree, common::DEMO_TREE, "\n{tree}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("score 0.5"));
}
