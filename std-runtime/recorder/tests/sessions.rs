//! Sessions one after the other in one process: a thread's records reach the file of the
//! session they were made in, and no other. Threads here outlive a session: one blocked with
//! a span open across the stop and recording again in the next session (its staged records
//! are copied into the first file at the stop, and must be neither pushed into the next one
//! when it records again nor copied again by the next session's collector), and one that
//! exits between the two sessions (its last records, made in the first, are pushed by its
//! exit after that session is over).

use std::{collections::BTreeMap, path::Path, sync::mpsc, thread, time::Duration};

/// How many spans and events of each name the file holds.
fn names(path: &Path) -> BTreeMap<String, usize> {
    let (p, warnings) = waffle_read::decode::decode_file(path).unwrap();
    assert!(warnings.is_empty(), "{}: {warnings:?}", path.display());
    let mut names = BTreeMap::new();
    for t in &p.threads {
        let spans = t.spans.iter().map(|s| &s.callsite.name);
        for name in spans.chain(t.events.iter().map(|e| &e.callsite.name)) {
            *names.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    names
}

#[test]
fn a_thread_s_records_reach_only_the_session_they_were_made_in() {
    let dir = std::env::temp_dir().join(format!("waffle-sessions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.bin"), dir.join("b.bin"));
    let first = waffle_std::Config::new(&a).drain_interval(Duration::from_millis(10)).start().unwrap();
    let (go, wait) = mpsc::channel::<()>();
    let (said, heard) = mpsc::channel::<()>();
    let blocked = thread::spawn(move || {
        let open = waffle::span!("blocked_a");
        waffle::event!("staged_a");
        said.send(()).unwrap();
        // Blocked across the stop and the next start; then it records in the next session.
        wait.recv().unwrap();
        waffle::event!("woken_b");
        drop(open);
        drop(waffle::span!("after_b"));
        said.send(()).unwrap();
        wait.recv().unwrap();
    });
    heard.recv().unwrap();
    let (leave, left) = mpsc::channel::<()>();
    let exiting = thread::spawn(move || {
        let open = waffle::span!("exiting_a");
        waffle::event!("staged_exiting_a");
        left.recv().unwrap();
        drop(open);
    });
    drop(waffle::span!("main_a"));
    // Long enough for the collector to see both threads idle, and copy what they staged.
    thread::sleep(Duration::from_millis(60));
    first.stop().unwrap();
    // The exiting thread ends its span and exits between the sessions.
    leave.send(()).unwrap();
    exiting.join().unwrap();

    let second = waffle_std::Config::new(&b).drain_interval(Duration::from_millis(10)).start().unwrap();
    drop(waffle::span!("main_b"));
    go.send(()).unwrap();
    heard.recv().unwrap();
    thread::sleep(Duration::from_millis(60));
    second.stop().unwrap();
    go.send(()).unwrap();
    blocked.join().unwrap();

    let one = |names: &[&str]| names.iter().map(|n| (n.to_string(), 1)).collect::<BTreeMap<_, _>>();
    assert_eq!(
        names(&a),
        one(&["blocked_a", "exiting_a", "main_a", "staged_a", "staged_exiting_a"]),
        "the first session: its own records, once"
    );
    assert_eq!(names(&b), one(&["after_b", "main_b", "woken_b"]), "the second session: its own records only");
    std::fs::remove_dir_all(&dir).ok();
}
