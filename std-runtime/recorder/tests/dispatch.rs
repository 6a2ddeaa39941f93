//! The thread-pool example in process: a context sent through a channel makes each worker's
//! span the child of the dispatcher's span that sent the task, across threads.

#[path = "../examples/dispatch.rs"]
mod dispatch;

use std::collections::HashMap;
use waffle_read::model::Value;

#[test]
fn worker_spans_are_children_of_the_dispatching_span() {
    let dir = std::env::temp_dir().join(format!("waffle-dispatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dispatch.bin");
    let session = waffle_std::start(&path).expect("start");
    let results = dispatch::run_pool(24, 3);
    let stats = session.stop().expect("stop");
    assert_eq!(stats.dropped, 0);
    assert_eq!(results, (0..24u64).map(|n| n * (n + 1) / 2).collect::<Vec<_>>());

    let (p, warnings) = waffle_read::decode::decode_file(&path).expect("decode");
    assert!(warnings.is_empty(), "{warnings:?}");
    let task_of = |fields: &[Value]| match fields {
        [Value::U64(t)] => *t,
        other => panic!("task field is {other:?}"),
    };
    // dispatch_task spans by task, with their thread.
    let mut sent: HashMap<u64, (u64, usize)> = HashMap::new();
    for (t, th) in p.threads.iter().enumerate() {
        for s in th.spans.iter().filter(|s| s.name() == "dispatch_task") {
            assert!(sent.insert(task_of(&s.fields), (s.id, t)).is_none());
        }
    }
    assert_eq!(sent.len(), 24);

    let mut processed = 0;
    for (t, th) in p.threads.iter().enumerate() {
        for s in th.spans.iter().filter(|s| s.name() == "process_task") {
            let task = task_of(&s.fields);
            let (dispatcher, dispatch_thread) = sent[&task];
            assert_eq!(s.parent, Some(dispatcher), "task {task}: parent is the span that sent it");
            assert_ne!(t, dispatch_thread, "task {task} ran on a worker, not the dispatcher");
            assert!(th.name.starts_with("worker-"), "{}", th.name);
            assert!(s.depth > 0, "task {task}: a process_task span is never top level");
            assert!(s.ended);
            processed += 1;
        }
    }
    assert_eq!(processed, 24);
}
