//! One collector thread serves every session of a process, one after another: a stop leaves it
//! waiting for the next session instead of ending it, so that starting and stopping a session
//! spawns and joins no thread. Each session's file is still whole.

use std::path::Path;

/// Threads of this process named as the collector (Linux keeps 15 bytes of a thread's name).
#[cfg(target_os = "linux")]
fn collectors() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| "waffle-collector".starts_with(name.trim_end()))
        .count()
}

fn span_names(path: &Path) -> Vec<String> {
    let (p, warnings) = waffle_read::decode::decode_file(path).unwrap();
    assert!(warnings.is_empty() && p.complete, "{}: {warnings:?}", path.display());
    p.threads.iter().flat_map(|t| &t.spans).map(|s| s.callsite.name.to_string()).collect()
}

#[test]
fn one_collector_thread_serves_every_session() {
    let dir = std::env::temp_dir().join(format!("waffle-collector-thread-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    #[cfg(target_os = "linux")]
    assert_eq!(collectors(), 0, "no session yet");
    for i in 0..4u64 {
        let path = dir.join(format!("{i}.bin"));
        let session = waffle_std::Config::new(&path).start().unwrap();
        drop(waffle::span!("work", i = i));
        let stats = session.stop().unwrap();
        assert_eq!(stats.dropped, 0);
        assert_eq!(span_names(&path), ["work"], "session {i}");
        #[cfg(target_os = "linux")]
        assert_eq!(collectors(), 1, "after session {i}: the one thread, waiting");
    }
    std::fs::remove_dir_all(&dir).ok();
}
