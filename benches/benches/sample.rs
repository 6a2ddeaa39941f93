//! What head sampling costs: a root span with two fields recorded with sampling off (the
//! default), the same root dropped by sampling (`Config::sample(0.0)`), and kept by it
//! (`sample(0.999_999)`: decided, and kept all but once in a million), in one criterion group
//! of one run, each under its own session recording to `/dev/null`.
//!
//! `cargo bench -p waffle-benches --bench sample`; see README.md for the figures.
//!
//! On a machine too busy for timings, instructions count instead: with `SAMPLE_LOOP=n` set,
//! the binary skips criterion and records `n` such roots under a session configured from the
//! environment (`WAFFLE_SAMPLE`), each in [`one_root`], which callgrind can count alone:
//! `SAMPLE_LOOP=200000 WAFFLE_SAMPLE=0 valgrind --tool=callgrind --toggle-collect='sample::one_root'
//! target/release/deps/sample-<hash>`.

mod common;

use criterion::{criterion_group, Criterion};
use std::hint::black_box;

/// Runs the root span with two fields under a session keeping `rate` of roots.
fn root_2_fields(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    rate: f64,
) {
    let session = waffle_std::Config::new("/dev/null")
        .queue_bytes(8 << 20)
        .sample(rate)
        .start()
        .expect("start a session");
    group.bench_function(name, |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            let s = waffle::span!("bench2", n = i, x = 1.5f64);
            black_box(&s);
        })
    });
    let stats = session.stop().expect("stop the session");
    println!(
        "{name}: {} data bytes, {} records dropped{}",
        stats.data_bytes,
        stats.dropped,
        if stats.dropped == 0 { "" } else { " -- a full queue makes spans look cheaper than they are" },
    );
}

/// One root span with two fields, not inlined so that callgrind can count it alone.
#[inline(never)]
fn one_root(i: u64) {
    let s = waffle::span!("bench2", n = i, x = 1.5f64);
    black_box(&s);
}

/// `SAMPLE_LOOP=n`: `n` roots under a session from the environment, then exit.
fn instruction_loop(n: u64) {
    let session = waffle_std::Config::new("/dev/null").queue_bytes(8 << 20).start().expect("start a session");
    for i in 0..n {
        one_root(black_box(i));
    }
    let stats = session.stop().expect("stop the session");
    println!("{n} roots, {} data bytes, {} records dropped", stats.data_bytes, stats.dropped);
}

fn sample(c: &mut Criterion) {
    let mut group = c.benchmark_group("sample");
    root_2_fields(&mut group, "sampling_off_2_fields", 1.0);
    root_2_fields(&mut group, "dropped_root_2_fields", 0.0);
    root_2_fields(&mut group, "kept_root_2_fields", 0.999_999);
    // Sampling off again, last, so that drift over the run shows between the two.
    root_2_fields(&mut group, "sampling_off_again_2_fields", 1.0);
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = sample
}
fn main() {
    if let Some(n) = std::env::var("SAMPLE_LOOP").ok().and_then(|n| n.parse().ok()) {
        return instruction_loop(n);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
