//! What one span costs: waffle against a hand-written minimal span, fastrace and tracing, in one
//! criterion group of one run, so that the ratios between them are comparable (DESIGN.md,
//! "Performance budget"). Also prints the trace bytes a begin+end pair takes.
//!
//! Order matters because each tracer is global state: the bytes measurement runs first (its own
//! file sessions), then the group runs the raw baseline, the waffle benches under one session
//! recording to `/dev/null` (stopped, and its totals printed, before the peers run), fastrace
//! with a reporter that discards, and tracing with scoped subscribers (`with_default`): a no-op
//! layer, waffle's layer (`waffle-tracing`, with its own session) and a Chrome file layer.
//!
//! `cargo bench -p waffle-benches --bench overhead`; see README.md for how to read the output.

#![deny(clippy::undocumented_unsafe_blocks)]

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use std::{hint::black_box, path::PathBuf, time::Instant};

#[path = "overhead/paired.rs"]
mod paired;
#[path = "overhead/raw.rs"]
mod raw;

/// A fastrace reporter that drops what it gets.
struct Discard;

impl fastrace::collector::Reporter for Discard {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        black_box(spans);
    }
}

/// A tracing layer that does nothing: the cost of the registry and the dispatch alone.
struct NoopLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("waffle-benches-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// Busy-waits about `ticks` clock ticks, standing in for work inside a span.
fn spin_ticks(ticks: u64) {
    let start = raw::now();
    while raw::now().wrapping_sub(start) < ticks {
        std::hint::spin_loop();
    }
}

/// Records `pairs` spans with `f` into a file session and prints the data bytes per pair.
fn bytes_of(label: &str, pairs: u64, f: impl Fn(u64)) {
    let path = scratch_dir().join(format!("{label}.bin"));
    let session = waffle_std::Config::new(&path).queue_bytes(8 << 20).start().expect("start a session");
    for i in 0..pairs {
        f(i);
    }
    let stats = session.stop().expect("stop the session");
    let file = std::fs::metadata(&path).map_or(0, |m| m.len());
    let _ = std::fs::remove_file(&path);
    let per_pair = stats.data_bytes as f64 / pairs as f64;
    let note = if stats.dropped == 0 {
        String::new()
    } else {
        format!("  (INVALID: {} records dropped)", stats.dropped)
    };
    println!(
        "bytes/{label:<24} {per_pair:6.3} data bytes per begin+end pair ({pairs} pairs, {} data bytes in {} frames, file {file} bytes){note}",
        stats.data_bytes, stats.data_frames,
    );
}

/// An id from another stream and process: links to it take the 8-byte form.
const FAR_CAUSE: waffle::SpanId = waffle::SpanId::from_u64(0x0abc_de00_0000_0042);

/// Not a criterion benchmark: trace bytes per begin+end pair, measured from session totals.
fn bytes_per_pair(_: &mut Criterion) {
    const PAIRS: u64 = 1_000_000;
    bytes_of("pair", PAIRS, |_| {
        let s = waffle::span!("pair");
        black_box(&s);
    });
    bytes_of("pair_2_fields", PAIRS, |i| {
        let s = waffle::span!("pair2", n = i, x = 1.5f64);
        black_box(&s);
    });
    // A causal link to an event of the same thread (local form) and of another thread (full
    // form): the bytes beyond a plain pair are the link record.
    bytes_of("pair_link_same_thread", PAIRS / 10, |_| {
        let cause = waffle::event!("cause");
        let s = waffle::span!("linked", caused_by = [cause]);
        black_box(&s);
    });
    bytes_of("pair_link_other_thread", PAIRS / 10, |_| {
        let s = waffle::span!("linked_far", caused_by = [FAR_CAUSE]);
        black_box(&s);
    });
    // A `tracing` span through `waffle-tracing`: begin, detach, enter, exit, end by id.
    {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(waffle_tracing::layer());
        tracing::subscriber::with_default(subscriber, || {
            bytes_of("tracing_span", PAIRS / 10, |_| {
                let s = tracing::info_span!("pair").entered();
                black_box(&s);
            });
        });
    }
    // Back-to-back spans have deltas of a few dozen ticks; real spans are further apart.
    bytes_of("pair_1000_ticks_inside", PAIRS / 10, |_| {
        let s = waffle::span!("pair_gap");
        spin_ticks(1000);
        black_box(&s);
    });
}

fn overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("overhead");

    // What the harness itself costs per iteration: the loop and an 8-byte guard made visible.
    group.bench_function("loop_floor", |b| {
        b.iter(|| {
            let s = 0u64;
            black_box(&s);
        })
    });
    // The clock alone: the two reads every span makes, which dominate all of the spans here.
    group.bench_function("clock_pair", |b| {
        b.iter(|| {
            black_box(raw::now());
            black_box(raw::now());
        })
    });

    group.bench_function("raw_baseline", |b| {
        b.iter(|| {
            let s = raw::Span::begin(black_box(1));
            black_box(&s);
        })
    });
    black_box(raw::len());

    let session = waffle_std::Config::new("/dev/null").queue_bytes(8 << 20).start().expect("start a session");
    group.bench_function("waffle_span", |b| {
        b.iter(|| {
            let s = waffle::span!("bench");
            black_box(&s);
        })
    });
    group.bench_function("waffle_span_2_fields", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            let s = waffle::span!("bench2", n = i, x = 1.5f64);
            black_box(&s);
        })
    });
    group.bench_function("waffle_span_1_link", |b| {
        b.iter(|| {
            let s = waffle::span!("bench_link", caused_by = [FAR_CAUSE]);
            black_box(&s);
        })
    });
    waffle::set_enabled(false);
    group.bench_function("waffle_disabled", |b| {
        b.iter(|| {
            let s = waffle::span!("bench");
            black_box(&s);
        })
    });
    waffle::set_enabled(true);
    let stats = session.stop().expect("stop the session");
    println!(
        "waffle session totals: {} data bytes, {} frames, {} records dropped{}",
        stats.data_bytes,
        stats.data_frames,
        stats.dropped,
        if stats.dropped == 0 { "" } else { " -- a full queue makes spans look cheaper than they are" },
    );

    fastrace::set_reporter(Discard, fastrace::collector::Config::default());
    group.bench_function("fastrace_with_reporter", |b| {
        b.iter_custom(|iters| {
            // Local spans collect under a root until it ends, and fastrace keeps at most 10,240
            // of them per thread: end the root every 1,000 so that none is dropped. Its cost is
            // part of the measurement, spread over those spans.
            let start = Instant::now();
            let mut left = iters;
            while left > 0 {
                let n = left.min(1000);
                left -= n;
                let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
                let _parent = root.set_local_parent();
                for _ in 0..n {
                    let s = fastrace::local::LocalSpan::enter_with_local_parent("bench");
                    black_box(&s);
                }
            }
            start.elapsed()
        })
    });
    fastrace::flush();

    {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(NoopLayer);
        tracing::subscriber::with_default(subscriber, || {
            group.bench_function("tracing_noop_layer", |b| {
                b.iter(|| {
                    let s = tracing::info_span!("bench").entered();
                    black_box(&s);
                })
            });
            group.bench_function("tracing_noop_layer_2_fields", |b| {
                let mut i = 0u64;
                b.iter(|| {
                    i += 1;
                    let s = tracing::info_span!("bench2", n = i, x = 1.5f64).entered();
                    black_box(&s);
                })
            });
        });

        // The same spans recorded by waffle through `waffle-tracing` (one session to
        // /dev/null, as for the waffle benches above, with room for the ~35 bytes such a span
        // takes), then with the layer and no session.
        let subscriber = tracing_subscriber::registry().with(waffle_tracing::layer());
        tracing::subscriber::with_default(subscriber, || {
            let session =
                waffle_std::Config::new("/dev/null").queue_bytes(64 << 20).start().expect("start a session");
            group.bench_function("tracing_waffle_layer", |b| {
                b.iter(|| {
                    let s = tracing::info_span!("bench").entered();
                    black_box(&s);
                })
            });
            group.bench_function("tracing_waffle_layer_2_fields", |b| {
                let mut i = 0u64;
                b.iter(|| {
                    i += 1;
                    let s = tracing::info_span!("bench2", n = i, x = 1.5f64).entered();
                    black_box(&s);
                })
            });
            let stats = session.stop().expect("stop the session");
            println!(
                "waffle-tracing session totals: {} data bytes, {} records dropped",
                stats.data_bytes, stats.dropped
            );
            group.bench_function("tracing_waffle_layer_no_session", |b| {
                b.iter(|| {
                    let s = tracing::info_span!("bench").entered();
                    black_box(&s);
                })
            });
        });

        let dir = scratch_dir();
        let (chrome, flush) = tracing_chrome::ChromeLayerBuilder::new().file(dir.join("trace.json")).build();
        let subscriber = tracing_subscriber::registry().with(chrome);
        tracing::subscriber::with_default(subscriber, || {
            group.bench_function("tracing_chrome_file", |b| {
                b.iter(|| {
                    let s = tracing::info_span!("bench").entered();
                    black_box(&s);
                })
            });
        });
        drop(flush);
        let _ = std::fs::remove_dir_all(&dir);
    }

    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bytes_per_pair, overhead, paired::ratios
}
criterion_main!(benches);
