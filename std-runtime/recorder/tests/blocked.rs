//! A thread that begins a span and blocks — on a channel, a lock, in a sleep — never records
//! again, yet its span is in the file within a few drain intervals, read while the session
//! still runs (the collector's TAIL copies). When the threads wake and end their spans, the
//! chunks they push supersede the copies: each span is decoded once. A session stopped while a
//! thread is still blocked keeps its span too (the stop's last pass copies it).

use std::{
    path::{Path, PathBuf},
    sync::{mpsc, Mutex},
    time::{Duration, Instant},
};
use waffle_read::model::{Process, Span};

/// Sessions are per process: the tests of this file take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn file(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-blocked-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn spans<'p>(p: &'p Process, name: &str) -> Vec<&'p Span> {
    p.threads.iter().flat_map(|t| &t.spans).filter(|s| s.name() == name).collect()
}

/// Decodes what is on disk now (the file is still being written).
fn on_disk(path: &Path) -> Process {
    let (p, warnings) = waffle_read::decode::decode_file(path).expect("the file decodes");
    assert!(warnings.is_empty(), "{warnings:?}");
    p
}

#[test]
fn blocked_threads_spans_reach_the_file_while_recording() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let path = file("running.bin");
    let session = waffle_std::Config::new(&path).drain_interval(Duration::from_millis(1)).start().unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let lock = Mutex::new(());
    let held = lock.lock().unwrap();
    let running = std::thread::scope(|s| {
        s.spawn(move || {
            // The span's last records are timeless ones (a link, a correlation): the copy has
            // them too.
            let cause = waffle::event!("before_channel");
            let _span = waffle::span!("on_channel", caused_by = [cause], correlate = ("channel", 42u64));
            rx.recv().unwrap();
        });
        s.spawn(|| {
            let _span = waffle::span!("on_lock");
            drop(lock.lock().unwrap());
        });
        s.spawn(|| {
            let _span = waffle::span!("in_sleep");
            std::thread::sleep(Duration::from_millis(300));
        });
        // About ten drain intervals; more only if the machine is too loaded to keep up.
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(10));
        let mut p = on_disk(&path);
        while ["on_channel", "on_lock", "in_sleep"].iter().any(|n| spans(&p, n).is_empty())
            && start.elapsed() < Duration::from_millis(200)
        {
            std::thread::sleep(Duration::from_millis(1));
            p = on_disk(&path);
        }
        eprintln!("blocked spans on disk after {:?}", start.elapsed());
        // Wake the threads before checking, so that a failure does not leave them blocked.
        tx.send(()).unwrap();
        drop(held);
        p
    });
    assert!(!running.complete, "the session still ran");
    for name in ["on_channel", "on_lock", "in_sleep"] {
        let found = spans(&running, name);
        assert_eq!(found.len(), 1, "{name} on disk while its thread was blocked");
        assert!(!found[0].ended, "{name} was still open");
    }
    let on_channel = spans(&running, "on_channel")[0];
    assert_eq!(on_channel.links.len(), 1, "the blocked span's link was copied: {:?}", on_channel.links);
    assert_eq!(on_channel.correlation, Some(42), "the blocked span's correlation was copied");
    session.stop().unwrap();
    let p = on_disk(&path);
    assert!(p.complete);
    for name in ["on_channel", "on_lock", "in_sleep"] {
        let found = spans(&p, name);
        assert_eq!(found.len(), 1, "{name} once: the pushed chunk superseded the copy");
        assert!(found[0].ended, "{name} ended once its thread woke");
    }
}

#[test]
fn a_stop_keeps_what_a_blocked_thread_staged() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let path = file("stopped.bin");
    // A long interval: no pass copies the staged span before the stop does.
    let session = waffle_std::Config::new(&path).drain_interval(Duration::from_secs(30)).start().unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let (ready_tx, ready) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let _span = waffle::span!("blocked_at_stop", k = 7u64);
        ready_tx.send(()).unwrap();
        rx.recv().unwrap();
    });
    ready.recv().unwrap();
    let stats = session.stop();
    tx.send(()).unwrap();
    worker.join().unwrap();
    let stats = stats.unwrap();
    assert_eq!(stats.tail_frames, 1, "{stats:?}");
    let p = on_disk(&path);
    assert!(p.complete);
    let found = spans(&p, "blocked_at_stop");
    assert_eq!(found.len(), 1);
    assert!(!found[0].ended, "its end came after the stop");
}
