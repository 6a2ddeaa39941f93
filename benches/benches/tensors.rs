//! What `tensor!` costs: off (no session, and a session with fingerprints off) against a
//! disabled span, and on, the fingerprint's throughput for 1 MiB and 64 MiB of `f32` and
//! `bf16` against a plain read of the same memory (a wrapping sum of its 32-bit words) in the
//! same run, and the fingerprint in one pass of blocks against statistics and hash in two
//! passes (`Fingerprint::of` picks by size).
//!
//! `cargo bench -p waffle-benches --bench tensors`; figures in README.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::bf16;
use std::{hint::black_box, time::Duration};
use waffle::tensor::Fingerprint;

/// A plain read of `words`: what any pass over the data costs at least.
fn sum(words: &[u32]) -> u32 {
    words.iter().fold(0u32, |a, &w| a.wrapping_add(w))
}

fn off(c: &mut Criterion) {
    let data = vec![1.0f32; 1024];
    let mut g = c.benchmark_group("tensor_off");
    // Measured as `overhead`'s `waffle_disabled` is: the guard kept and looked at.
    g.bench_function("span! without a session", |b| {
        b.iter(|| {
            let s = waffle::span!("off");
            black_box(&s);
        })
    });
    g.bench_function("tensor! without a session", |b| {
        b.iter(|| black_box(waffle::tensor!("t", black_box(&data[..]))))
    });
    let path = std::env::temp_dir().join(format!("waffle-bench-tensors-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).tensors(false).start().expect("start");
    g.bench_function("tensor! with fingerprints off", |b| {
        b.iter(|| black_box(waffle::tensor!("t", black_box(&data[..]))))
    });
    waffle::set_enabled(false);
    g.bench_function("span! paused", |b| {
        b.iter(|| {
            let s = waffle::span!("off");
            black_box(&s);
        })
    });
    waffle::set_enabled(true);
    g.finish();
    session.stop().expect("stop");
    std::fs::remove_file(&path).ok();
}

fn on(c: &mut Criterion) {
    let path = std::env::temp_dir().join(format!("waffle-bench-tensors-on-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).tensors(true).start().expect("start");
    let mut g = c.benchmark_group("tensor_on");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for mib in [1usize, 64] {
        let bytes = mib << 20;
        let f32s: Vec<f32> = (0..bytes / 4).map(|i| ((i % 1000) as f32 - 500.0) * 0.01).collect();
        let bf16s: Vec<bf16> =
            f32s.iter().take(bytes / 2).cycle().take(bytes / 2).map(|&x| bf16::from_f32(x)).collect();
        let words: Vec<u32> = f32s.iter().map(|x| x.to_bits()).collect();
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_with_input(BenchmarkId::new("sum (plain read)", mib), &words, |b, w| {
            b.iter(|| sum(black_box(w)))
        });
        g.bench_with_input(BenchmarkId::new("tensor! f32", mib), &f32s, |b, d| {
            b.iter(|| waffle::tensor!("t", black_box(&d[..])))
        });
        g.bench_with_input(BenchmarkId::new("tensor! bf16", mib), &bf16s, |b, d| {
            b.iter(|| waffle::tensor!("t", black_box(&d[..])))
        });
        g.bench_with_input(BenchmarkId::new("blocks f32", mib), &f32s, |b, d| {
            b.iter(|| Fingerprint::of_blocks(black_box(&d[..])))
        });
        g.bench_with_input(BenchmarkId::new("two passes f32", mib), &f32s, |b, d| {
            b.iter(|| Fingerprint::of_two_passes(black_box(&d[..])))
        });
        g.bench_with_input(BenchmarkId::new("hash alone f32", mib), &f32s, |b, d| {
            b.iter(|| waffle::tensor::hash(black_box(&d[..])))
        });
    }
    g.finish();
    session.stop().expect("stop");
    std::fs::remove_file(&path).ok();
}

criterion_group!(benches, off, on);
criterion_main!(benches);
