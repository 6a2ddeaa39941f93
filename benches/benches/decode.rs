//! Decode and export throughput: bytes of `trace.bin` per second, per output format, on one
//! core (group `real_threads`: on every core too).
//!
//! Traces are recorded once into a temporary directory (4 threads of nested spans with fields,
//! events, links within and across threads, correlations), then each export is timed from the
//! file to bytes thrown away (`io::sink`), so disk writes are left out (the file is read from
//! the page cache after the first iteration):
//! - group `decode`, on a 64 MB trace: Perfetto through the streaming exporter
//!   (`export::Files` for Perfetto, two passes over the file), and its parts: the first pass alone
//!   (`perfetto_scan`), the second alone (`perfetto_write`), and the decoder into a sink that
//!   keeps nothing (`decode_only`, what one pass costs before any exporting);
//! - group `decode_small`, on a 2 MB trace of the same shape: every format, streamed as
//!   `waffle-decode -o` does (`export::Files`: two passes over the file). The JSON formats are
//!   too slow for ten runs of the big trace.
//!
//! - group `analyses`, on the 64 MB trace: `why` (the middle `converged` event) and `hang` on
//!   the file, as `waffle-decode why` and `hang` read it (an index built in one pass, then the
//!   windows the walk needs; one reading for `hang`, as nothing is stuck).
//!
//! - group `perfetto_encode`: the Perfetto exporter's own packet encoder against prost's, on
//!   the same packets (the track events of the small trace's `.pftrace`), in the same run;
//! - groups `real_decode` and `real_FORMAT` (Perfetto and every span format: `real_otlp`,
//!   `real_otlp-json`, `real_jaeger`, `real_zipkin`, `real_chrome`), in the bench thread's CPU
//!   time (`common/cpu_time.rs`), on the traces of real MPI programs that
//!   `benches/real-traces.sh` records (`waffle_benches::real_traces`; skipped, with a line
//!   saying so, when it has not been run), the small synthetic trace first (`.../synthetic`):
//!   the decoder alone over each set's files,
//!   and each set exported as `waffle-decode rank*.bin -o run.FORMAT` does, then, for a set of
//!   several files, each file exported alone, one after the other (the same bytes, so the two
//!   rows' ratio is what exporting the files together adds). [`real`] makes such a group for
//!   any format.
//! - group `real_threads`, on the same traces, in wall time: Perfetto with the files read on one
//!   thread and on every core (`Files::scan_threads`), the whole export and its first pass alone.
//!
//! `cargo bench -p waffle-benches --bench decode` (about 2 minutes). `WAFFLE_DECODE_BENCH_MB`
//! and `WAFFLE_DECODE_BENCH_SMALL_MB` set the traces' sizes; `WAFFLE_DECODE_BENCH_KEEP=DIR`
//! keeps them there (for `perf`) and uses them again on the next run if they are there. See
//! README.md, "Decode and export".

#![deny(clippy::undocumented_unsafe_blocks)]

use criterion::{
    criterion_group, criterion_main, measurement::Measurement, BatchSize, Criterion, Throughput,
};
use std::{
    hint::black_box,
    io,
    path::{Path, PathBuf},
    time::Duration,
};
use waffle::EventId;
use waffle_benches::real_traces::{self, TraceSet};

#[path = "common/cpu_time.rs"]
mod cpu_time;
use cpu_time::CpuTime;
use waffle_analyze::why::{self, Options, Selector};
use waffle_export::{self as export, perfetto::prost_comparison, Files, Format};
use waffle_read::decode::{self, stream::FileEnd, Header, Item, Sink};

/// Records about `mb` MB of trace into `path`: each of 4 threads runs steps of an outer span
/// (3 fields) around an inner span (1 field) and an event (2 fields); every 16th inner span
/// links to the thread's previous event and to an event of the main thread, and every 8th
/// outer span is correlated with the same step of the other threads.
fn record(path: &Path, mb: u64) -> u64 {
    let session = waffle_std::Config::new(path).queue_bytes(8 << 20).start().expect("start a session");
    // About 40 bytes a step (measured); each thread makes a quarter.
    let steps = mb * 1_000_000 / 40 / 4;
    let origin = waffle::event!("origin");
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let mut prev = EventId::NULL;
                for i in 0..steps {
                    let _outer = if i % 8 == 0 {
                        waffle::span!("step", correlate = ("step", i), t, i, dt = 0.01)
                    } else {
                        waffle::span!("step", t, i, dt = 0.01)
                    };
                    {
                        let _inner = if i % 16 == 0 {
                            waffle::span!("stencil", caused_by = [prev, origin], cells = 4096u64)
                        } else {
                            waffle::span!("stencil", cells = 4096u64)
                        };
                    }
                    prev = waffle::event!("converged", residual = 1e-9, ok = true);
                    if i % 4096 == 0 {
                        // Let the collector keep up, so that nothing is dropped.
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            });
        }
    });
    let stats = session.stop().expect("stop the session");
    if stats.dropped > 0 {
        eprintln!("decode bench: {} records dropped while recording {}", stats.dropped, path.display());
    }
    let bytes = std::fs::metadata(path).expect("the trace").len();
    let spans: u64 = Files::scan(&[path], Format::Perfetto, &mut |_| {})
        .expect("scan")
        .processes()
        .iter()
        .map(|p| p.spans)
        .sum();
    eprintln!("decode bench: {} ({bytes} bytes, {spans} spans)", path.display());
    bytes
}

/// A sink that keeps nothing: what decoding costs before any exporting.
struct Nothing;

impl Sink for Nothing {
    type Span = ();
    fn process(&mut self, _: &str, _: &Header) {}
    fn thread(&mut self, _: usize, _: u32) {}
    fn thread_named(&mut self, _: usize, _: u64, _: &str) {}
    fn span_begin(&mut self, _: usize, span: &Item<'_>) {
        black_box((span.id, span.fields.len()));
    }
    fn event(&mut self, _: usize, event: &Item<'_>) {
        black_box((event.id, event.fields.len()));
    }
    fn span_end(&mut self, _: usize, _: (), ticks: u64, _: bool) {
        black_box(ticks);
    }
    fn detach(&mut self, _: usize, _: (), _: u64) {}
    fn detached_end(&mut self, _: usize, _: (), _: u64, _: bool) {}
    fn finish(&mut self, _: &FileEnd) {}
}

/// Counts the `converged` events.
struct Count(usize);

impl Sink for Count {
    type Span = ();
    fn process(&mut self, _: &str, _: &Header) {}
    fn thread(&mut self, _: usize, _: u32) {}
    fn thread_named(&mut self, _: usize, _: u64, _: &str) {}
    fn span_begin(&mut self, _: usize, _: &Item<'_>) {}
    fn event(&mut self, _: usize, event: &Item<'_>) {
        self.0 += usize::from(event.callsite.name == "converged");
    }
    fn span_end(&mut self, _: usize, _: (), _: u64, _: bool) {}
    fn detach(&mut self, _: usize, _: (), _: u64) {}
    fn detached_end(&mut self, _: usize, _: (), _: u64, _: bool) {}
    fn finish(&mut self, _: &FileEnd) {}
}

fn perfetto(files: &[PathBuf]) {
    export(files, Format::Perfetto);
}

/// `files` streamed in `format` as `waffle-decode -o` streams them, the output thrown away.
fn export(files: &[PathBuf], format: Format) {
    let export = Files::scan(files, format, &mut |_| {}).expect("scan");
    black_box(export).write(&mut io::sink(), &mut |_| {}).expect("write");
}

/// Group `real_<format>`: each set of real traces exported in `format`, its files together,
/// then (a set of several files) each file alone, one after the other, in the same iteration.
fn real<M: Measurement>(c: &mut Criterion<M>, format: Format, sets: &[TraceSet]) {
    if sets.is_empty() {
        return;
    }
    let mut group = c.benchmark_group(format!("real_{}", format.name()));
    // An iteration takes seconds: ten of them, one a sample, after one to warm up.
    group
        .sample_size(10)
        .sampling_mode(criterion::SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(5));
    for set in sets {
        group.throughput(Throughput::Bytes(set.bytes));
        group.bench_function(&set.name, |b| b.iter(|| export(&set.files, format)));
        if set.files.len() > 1 {
            group.bench_function(format!("{}/alone", set.name), |b| {
                b.iter(|| set.files.iter().for_each(|file| export(std::slice::from_ref(file), format)))
            });
        }
    }
    group.finish();
}

/// Group `real_threads`: each set exported to Perfetto with its files read on 1 thread and on
/// every core (`Files::scan_threads`, `waffle-decode -j N`: both passes, each file on a thread
/// of its own), whole and the first pass alone (with the plan), rows of one run.
fn real_threads(c: &mut Criterion, sets: &[TraceSet]) {
    if sets.is_empty() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut group = c.benchmark_group("real_threads");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for set in sets {
        group.throughput(Throughput::Bytes(set.bytes));
        for threads in [1, cores] {
            group.bench_function(format!("{}/perfetto/{threads}", set.name), |b| {
                b.iter(|| {
                    let export = Files::scan_threads(&set.files, Format::Perfetto, threads, &mut |_| {});
                    black_box(export.expect("scan")).write(&mut io::sink(), &mut |_| {}).expect("write");
                })
            });
            group.bench_function(format!("{}/scan/{threads}", set.name), |b| {
                b.iter(|| {
                    Files::scan_threads(&set.files, Format::Perfetto, threads, &mut |_| {}).expect("scan")
                })
            });
        }
    }
    group.finish();
}

/// Group `real_decode`: each set's files through the decoder into a sink that keeps nothing,
/// what one pass over them costs before any exporting.
fn real_decode<M: Measurement>(c: &mut Criterion<M>, sets: &[TraceSet]) {
    if sets.is_empty() {
        return;
    }
    let mut group = c.benchmark_group("real_decode");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for set in sets {
        group.throughput(Throughput::Bytes(set.bytes));
        group.bench_function(&set.name, |b| {
            b.iter(|| {
                for file in &set.files {
                    decode::run::decode_path(file, &mut Nothing).expect("decode");
                }
            })
        });
    }
    group.finish();
}

fn env_mb(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn bench(c: &mut Criterion) {
    let (dir, keep) = match std::env::var_os("WAFFLE_DECODE_BENCH_KEEP") {
        Some(d) => (PathBuf::from(d), true),
        None => (std::env::temp_dir().join(format!("waffle-decode-bench-{}", std::process::id())), false),
    };
    std::fs::create_dir_all(&dir).expect("a directory for the traces");
    let (big, small) = ([dir.join("trace.bin")], [dir.join("small.bin")]);
    // `cargo test --benches` runs each bench once, unoptimised: small traces then.
    let testing = !std::env::args().any(|a| a == "--bench");
    let kept = |path: &Path| keep && !testing && std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    let traces = |path: &Path, mb| match std::fs::metadata(path) {
        Ok(m) if kept(path) => {
            eprintln!("decode bench: {} kept from a previous run ({} bytes)", path.display(), m.len());
            m.len()
        }
        _ => record(path, mb),
    };
    let big_bytes = traces(&big[0], env_mb("WAFFLE_DECODE_BENCH_MB", if testing { 1 } else { 64 }));
    let small_bytes = traces(&small[0], env_mb("WAFFLE_DECODE_BENCH_SMALL_MB", if testing { 1 } else { 2 }));

    let mut group = c.benchmark_group("decode");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(big_bytes));
    group.bench_function("perfetto", |b| b.iter(|| perfetto(&big)));
    group.bench_function("perfetto_scan", |b| {
        b.iter(|| Files::scan(&big, Format::Perfetto, &mut |_| {}).expect("scan"))
    });
    group.bench_function("perfetto_write", |b| {
        b.iter_batched(
            || Files::scan(&big, Format::Perfetto, &mut |_| {}).expect("scan"),
            |export| export.write(&mut io::sink(), &mut |_| {}).expect("write"),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("decode_only", |b| {
        b.iter(|| decode::run::decode_path(&big[0], &mut Nothing).expect("decode"))
    });
    group.finish();

    // `why` of the middle `converged` event and `hang` (nothing stuck: one reading), on the
    // files as `waffle-decode why` and `hang` read them, beside `decode/perfetto` above.
    let mut count = Count(0);
    decode::run::decode_path(&big[0], &mut count).expect("decode");
    let middle = Selector::name("converged", count.0 / 2);
    let mut group = c.benchmark_group("analyses");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(big_bytes));
    group.bench_function("why", |b| {
        b.iter(|| why::why_files(&big, &middle, &Options::default()).expect("why"))
    });
    group.bench_function("hang", |b| b.iter(|| waffle_analyze::hang::hang_files(&big).expect("hang")));
    group.finish();

    let mut group = c.benchmark_group("decode_small");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    group.throughput(Throughput::Bytes(small_bytes));
    group.bench_function("perfetto", |b| b.iter(|| perfetto(&small)));
    for &format in Format::ALL.iter().filter(|&&f| f != Format::Perfetto) {
        group.bench_function(format.name(), |b| {
            b.iter(|| {
                let files = export::Files::scan(&small, format, &mut |_| {}).expect("scan");
                black_box(files).write(&mut io::sink(), &mut |_| {}).expect("write");
            })
        });
    }
    group.finish();

    // The same packets through both encoders: what the exporter does against what prost does.
    let mut pftrace = Vec::new();
    Files::scan(&small, Format::Perfetto, &mut |_| {})
        .expect("scan")
        .write(&mut pftrace, &mut |_| {})
        .expect("write");
    let sample = prost_comparison::Sample::new(&pftrace).expect("the .pftrace reads back");
    let mut group = c.benchmark_group("perfetto_encode");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(sample.len() as u64));
    let mut out = Vec::with_capacity(pftrace.len());
    group.bench_function("prost", |b| b.iter(|| sample.prost(black_box(&mut out))));
    let mut buffer = prost_comparison::Buffer::new();
    group.bench_function("hand", |b| b.iter(|| sample.hand(black_box(&mut buffer))));
    group.finish();

    // Real programs' traces, when recorded; not in a smoke test (they are hundreds of MB).
    // Measured in CPU time (an export of seconds on a shared machine waits for a core as long
    // as it runs), with the small synthetic trace as the first row of each group, measured
    // alike.
    let mut sets = if testing {
        eprintln!("decode bench: real traces are benched by `cargo bench` only");
        Vec::new()
    } else {
        real_traces::sets("decode bench")
    };
    if !sets.is_empty() {
        let synthetic = TraceSet { name: "synthetic".into(), files: small.to_vec(), bytes: small_bytes };
        sets.insert(0, synthetic);
    }
    let mut cpu = Criterion::default().with_measurement(CpuTime).configure_from_args();
    real_decode(&mut cpu, &sets);
    for format in
        [Format::Perfetto, Format::Otlp, Format::OtlpJson, Format::Jaeger, Format::Zipkin, Format::Chrome]
    {
        real(&mut cpu, format, &sets);
    }
    real_threads(c, &sets);
    if !keep {
        std::fs::remove_dir_all(&dir).ok();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
