//! Thread churn: 10,000 short-lived threads, 50 at a time, each recording a few spans and
//! exiting. Every span is in the file, and the stream slots (one queue and staging area each)
//! are recycled: their number stays near the most threads alive at once, far below 10,000 (and
//! below the 4,096 streams a process can have at all).

const THREADS: u64 = 10_000;
const WAVE: u64 = 50;
/// Slots allowed: each wave's threads, plus the slots of the previous waves that the collector
/// has not drained yet (it frees them on its next pass, within a drain interval).
const MAX_SLOTS: u64 = 8 * WAVE;

#[test]
fn ten_thousand_short_lived_threads_reuse_their_buffers() {
    let path = std::env::temp_dir().join(format!("waffle-churn-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).queue_bytes(64 << 10).staging_bytes(1024).start().unwrap();
    let started = std::time::Instant::now();
    for wave in 0..THREADS / WAVE {
        let handles: Vec<_> = (0..WAVE)
            .map(|k| {
                let n = wave * WAVE + k;
                std::thread::spawn(move || {
                    let _outer = waffle::span!("thread", n);
                    let _inner = waffle::span!("work", n);
                    let _e = waffle::event!("did", n);
                    drop(waffle::span!("tail", n));
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
    }
    let took = started.elapsed();
    let stats = session.stop().unwrap();
    assert_eq!((stats.dropped, stats.refused_threads), (0, 0));
    assert!(stats.slots <= MAX_SLOTS, "{} slots for {THREADS} threads", stats.slots);
    assert_eq!(stats.streams, stats.slots, "every slot made here had an owner");

    let (p, warnings) = waffle_read::decode::decode_file(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(warnings.is_empty(), "{warnings:?}");
    // One decoded thread per owner: slot reuse keeps owners apart by generation.
    let workers: Vec<_> = p.threads.iter().filter(|t| !t.spans.is_empty()).collect();
    assert_eq!(workers.len() as u64, THREADS);
    let mut seen = vec![false; THREADS as usize];
    for th in workers {
        let names: Vec<&str> = th.spans.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["thread", "work", "tail"]);
        let n = match th.spans[0].fields[..] {
            [waffle_read::model::Value::U64(n)] => n,
            ref f => panic!("{f:?}"),
        };
        assert!(th.spans.iter().all(|s| s.ended && s.fields == th.spans[0].fields));
        assert_eq!((th.spans[1].parent, th.spans[2].parent), (Some(th.spans[0].id), Some(th.spans[1].id)));
        assert_eq!(th.events.len(), 1);
        assert!(!std::mem::replace(&mut seen[n as usize], true), "thread {n} once");
    }
    assert!(seen.iter().all(|&s| s));
    println!(
        "churn: {THREADS} threads ({WAVE} at a time) in {took:?}: {} slots made, {} streams in the file",
        stats.slots,
        p.threads.len()
    );
}
