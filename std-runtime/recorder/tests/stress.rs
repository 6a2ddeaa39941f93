//! Many threads at full speed: every span is accounted for, exactly.
//!
//! The two heavy tests run in release builds only (`scripts/test.sh` runs
//! `cargo test --release -p waffle-std --test stress`); a debug `cargo test` skips them.

use std::sync::Mutex;

/// One session per process at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// What one run gave: the session totals, records decoded, and per thread the span indices
/// decoded, in file order.
struct Run {
    stats: waffle_std::Stats,
    records: u64,
    seen: Vec<Vec<u64>>,
    took: std::time::Duration,
}

/// Records `per_thread` spans on each of 16 threads: with their thread and index as fields, or
/// bare (5 bytes a span, so a whole thread's output fits its 8 MiB queue and nothing can be
/// dropped however far the collector falls behind).
fn sixteen_threads(per_thread: u64, name: &str, fields: bool) -> Run {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("waffle-stress-{name}-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).queue_bytes(8 << 20).start().unwrap();
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for t in 0..16u64 {
            s.spawn(move || {
                for i in 0..per_thread {
                    if fields {
                        let _s = waffle::span!("work", t, i);
                    } else {
                        let _s = waffle::span!("bare");
                    }
                }
            });
        }
    });
    let took = started.elapsed();
    let stats = session.stop().unwrap();
    let (p, warnings) = waffle_read::decode::decode_file(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(p.complete);
    assert_eq!(p.dropped, stats.dropped);
    let mut seen = vec![Vec::new(); 16];
    let mut records = 0;
    let busy = p.threads.iter().filter(|th| !th.spans.is_empty());
    for (k, th) in busy.enumerate() {
        for (n, s) in th.spans.iter().enumerate() {
            // A begin for every span with an id, an end for every ended one (a stand-in for
            // a span whose begin was dropped has id 0).
            records += u64::from(s.id != 0) + u64::from(s.ended);
            assert_eq!(s.depth, 0, "these spans do not nest");
            if s.id == 0 {
                continue;
            }
            if !fields {
                seen[k].push(n as u64);
                continue;
            }
            let (t, i) = match s.fields[..] {
                [waffle_read::model::Value::U64(t), waffle_read::model::Value::U64(i)] => (t, i),
                ref f => panic!("{f:?}"),
            };
            seen[t as usize].push(i);
        }
    }
    Run { stats, records, seen, took }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "heavy: runs in release (scripts/test.sh)")]
fn sixteen_threads_a_million_spans_each_are_all_accounted_for() {
    const N: u64 = 1_000_000;
    // With fields (13 bytes a span) the queues can overflow when 16 producers starve the
    // collector of the 2 cores: then every record is still accounted for, exactly.
    let run = sixteen_threads(N, "16m", true);
    let dropped = run.stats.dropped;
    assert_eq!(run.records + dropped, 16 * N * 2, "{} records written, {dropped} dropped", run.records);
    for (t, v) in run.seen.iter().enumerate() {
        assert!(v.windows(2).all(|w| w[0] < w[1]), "thread {t}: in order, each once");
    }
    println!(
        "16 x {N} spans with fields in {:?}: {} records written, {dropped} dropped ({:.3}% of {})",
        run.took,
        run.records,
        100.0 * dropped as f64 / (32 * N) as f64,
        32 * N
    );
    // With enough buffer (bare spans fit the queue whole): exact counts, nothing dropped.
    let run = sixteen_threads(N, "16m-bare", false);
    assert_eq!(run.stats.dropped, 0);
    assert_eq!(run.records, 16 * N * 2);
    for (t, v) in run.seen.iter().enumerate() {
        assert_eq!(v.len() as u64, N, "thread {t}: every span");
    }
    println!("16 x {N} bare spans in {:?}: all {} records written, 0 dropped", run.took, run.records);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "heavy: runs in release (scripts/test.sh)")]
fn sixteen_threads_two_hundred_thousand_spans_each_drop_nothing() {
    const N: u64 = 200_000;
    let run = sixteen_threads(N, "3m", true);
    assert_eq!(run.stats.dropped, 0);
    assert_eq!(run.records, 16 * N * 2);
    for (t, v) in run.seen.iter().enumerate() {
        assert!(v.iter().copied().eq(0..N), "thread {t}: every span, in order");
    }
    println!("16 x {N} spans in {:?}: all {} records written, 0 dropped", run.took, run.records);
}
