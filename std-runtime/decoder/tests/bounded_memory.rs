//! Exporting a large trace keeps memory bounded, in every format: under a counting allocator,
//! the peak of live heap while a ~50 MB and a ~200 MB `trace.bin` are streamed into a
//! `.pftrace` stays under a fixed bound, and the larger file does not need more; the same holds
//! for `hang` on the same files, and the bound for `why` (the index it builds, with a root as
//! the symptom: an answer's memory grows with it; the index with threads times MiB read); and
//! for Jaeger, Zipkin, OTLP (both encodings) and
//! Chrome on ~8 MB and ~32 MB traces (JSON is slower to write, and their output is thrown away
//! as it is made).
//!
//! The traces have causality throughout (links, correlations, contexts entered on other
//! threads), but few references: what grows with references rather than records is, by design,
//! an entry per referenced id and per correlation group (about 50 bytes each), and the packet of
//! an item that many others link to (one flow id per link).
//!
//! Heavy (it records and exports 250 MB): runs in release builds only (`scripts/test.sh` runs
//! `cargo test --release -p waffle-std --test bounded_memory`); a debug `cargo test` skips it.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    io,
    path::Path,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};
use waffle_analyze::why::{self, Options, Selector};
use waffle_export::{Files, Format};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn add(n: usize) {
    let live = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only
// atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            add(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The bound: a frame's payload (the collector writes up to one queue per frame, and the
/// reader's buffer grows to about twice the largest frame), the reader's and the writer's
/// buffers, and the per-thread and per-reference state.
const BOUND: usize = 64 << 20;

/// Each thread's queue, so the largest frame. How full a queue is when the collector drains it
/// depends on the machine's scheduling, and the payload buffer keeps the capacity of the
/// largest frame read: a small queue keeps that difference between two traces within the
/// comparison's slack, where the default queue (4 MiB) would not.
const QUEUE: usize = 1 << 20;

/// Records about `mb` MB: 4 threads of steps (an outer span with 3 fields around an inner span
/// and an event); every 256th inner span links to an event recorded at the start, the outer
/// span is correlated by `i % 64`, every 4096th step enters a context on a helper thread;
/// the threads pause now and then so that the collector keeps up (nothing may be dropped).
fn record(path: &Path, mb: u64) -> u64 {
    // Lost records would add stand-ins and breaks in the runs of ids, which are references:
    // the comparison is between traces without them. On a busy machine the collector may fall
    // behind; the threads then pause more often and the trace is made again.
    for pause_every in [1024, 128, 16] {
        let (bytes, dropped) = record_pausing(path, mb, pause_every);
        if dropped == 0 {
            return bytes;
        }
        println!("bounded memory: {dropped} records dropped with a pause every {pause_every} steps; again");
    }
    panic!("records were dropped however often the threads paused")
}

fn record_pausing(path: &Path, mb: u64, pause_every: u64) -> (u64, u64) {
    let session = waffle_std::Config::new(path).queue_bytes(QUEUE).start().expect("start");
    let steps = mb * 1_000_000 / 40 / 4;
    let origin = waffle::event!("origin");
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                for i in 0..steps {
                    let _outer = waffle::span!("step", correlate = ("step", i % 64), t, i, dt = 0.01);
                    if i % 256 == 0 {
                        let _inner = waffle::span!("stencil", caused_by = [origin], cells = 4096u64);
                    } else {
                        let _inner = waffle::span!("stencil", cells = 4096u64);
                    }
                    waffle::event!("converged", residual = 1e-9, ok = true);
                    if i % 4096 == 0 {
                        let ctx = waffle::Context::current();
                        std::thread::spawn(move || {
                            let _in = ctx.enter();
                            let _helper = waffle::span!("helper");
                        })
                        .join()
                        .unwrap();
                    }
                    if i % pause_every == 0 {
                        // Let the collector keep up.
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            });
        }
    });
    let stats = session.stop().expect("stop");
    (std::fs::metadata(path).unwrap().len(), stats.dropped)
}

/// The largest frame payload in `path`, in bytes (printed: it explains a peak).
fn largest_frame(path: &Path) -> usize {
    let mut reader = waffle_read::reader::FrameReader::open(path).expect("open");
    let (mut warnings, mut payload, mut largest) = (Vec::new(), Vec::new(), 0);
    while reader.read_frame(&mut warnings, &mut payload).is_some() {
        largest = largest.max(payload.len());
    }
    assert!(warnings.is_empty(), "{warnings:?}");
    largest
}

/// What is measured on a trace: an export, or an analysis as `waffle-decode` runs it on files.
#[derive(Clone, Copy)]
enum Reading {
    Export(Format),
    /// `why` of the first event: the index built in one pass, then a walk.
    Why,
    /// `hang` (nothing is stuck: one reading).
    Hang,
}

impl Reading {
    fn name(self) -> &'static str {
        match self {
            Reading::Export(format) => format.name(),
            Reading::Why => "why",
            Reading::Hang => "hang",
        }
    }
}

/// Streams `path` in `format` into output thrown away, or answers `why` or `hang` on it; the
/// peak live heap meanwhile, above what was live before, and the spans exported (0 for an
/// analysis).
fn peak_of(path: &Path, reading: Reading) -> (usize, u64) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let mut spans = 0;
    match reading {
        Reading::Export(format) => {
            let files = Files::scan(&[path], format, &mut |_| {}).expect("scan");
            spans = files.processes().iter().map(|p| p.spans).sum();
            files.write(&mut io::sink(), &mut |_| {}).expect("write");
        }
        Reading::Why => {
            // The run's first event, a root: what is measured is the index (the walk and
            // its answer are as large as the causes found, here one item).
            let symptom = Selector::name("origin", 0);
            let (explanation, _) = why::why_files(&[path], &symptom, &Options::default()).expect("why");
            assert_eq!(explanation.symptom.name, "origin");
        }
        Reading::Hang => {
            let (report, _) = waffle_analyze::hang::hang_files(&[path]).expect("hang");
            assert!(!report.stuck());
        }
    }
    (PEAK.load(Ordering::Relaxed) - before, spans)
}

/// Records traces of `sizes` MB (the second 4 times the first) and reads each as `formats` say.
fn bounded(sizes: [u64; 2], formats: &[Reading]) {
    let dir = std::env::temp_dir().join(format!("waffle-bounded-{}-{}", std::process::id(), sizes[0]));
    std::fs::create_dir_all(&dir).unwrap();
    let mut peaks = vec![vec![]; formats.len()];
    for mb in sizes {
        let path = dir.join(format!("{mb}.bin"));
        let bytes = record(&path, mb);
        let frame = largest_frame(&path);
        // A DATA frame is one read of one queue, after the stream's number (a varint).
        assert!(frame <= QUEUE + 5, "a frame of {frame} bytes from queues of {QUEUE}");
        for (f, &reading) in formats.iter().enumerate() {
            let (peak, spans) = peak_of(&path, reading);
            println!(
                "bounded memory: {:.1} MB trace.bin ({spans} spans, largest frame {:.2} MiB) to {}: peak live heap {:.1} MiB",
                bytes as f64 / 1e6,
                frame as f64 / f64::from(1 << 20),
                reading.name(),
                peak as f64 / f64::from(1 << 20)
            );
            let exported = matches!(reading, Reading::Export(_));
            assert!(!exported || spans > mb * 1_000_000 / 40, "the trace was recorded");
            assert!(
                peak < BOUND,
                "{}: {peak} bytes live at the peak for {bytes} bytes of trace",
                reading.name()
            );
            peaks[f].push((bytes, peak));
        }
        std::fs::remove_file(&path).ok();
    }
    for (f, p) in formats.iter().zip(peaks) {
        let ((small_bytes, small), (big_bytes, big)) = (p[0], p[1]);
        assert!(big_bytes > 3 * small_bytes);
        if matches!(f, Reading::Why) {
            // The index keeps, per checkpoint (one per MiB), the state of every thread seen so
            // far: with a helper thread every 4096 steps, threads grow with the file too, so
            // that part grows as its square (4.4 MiB at 56 MB, 39.8 MiB at 224 MB). Only the
            // bound holds for it.
            continue;
        }
        // Four times the records, not more memory (a little slack for buffers that happened to
        // grow a step further).
        assert!(
            big < small + small / 2 + (1 << 20),
            "{}: peak {small} for {small_bytes} bytes, {big} for {big_bytes}",
            f.name()
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// One test: a process records one session at a time, and the allocator counts for the whole
/// process, so the exports must not overlap.
#[test]
#[cfg_attr(debug_assertions, ignore = "heavy: runs in release (scripts/test.sh)")]
fn exporting_keeps_memory_bounded() {
    bounded([50, 200], &[Reading::Export(Format::Perfetto), Reading::Why, Reading::Hang]);
    let json = [Format::Jaeger, Format::Zipkin, Format::Otlp, Format::OtlpJson, Format::Chrome];
    bounded([8, 32], &json.map(Reading::Export));
}
