//! The hot path never allocates: a counting global allocator sees no allocation on the
//! recording thread over a million spans and events once the thread has its buffer, nor over
//! device-track slices and syncs and tensor fingerprints. The tests take turns (one session at
//! a time, one count).

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex,
    },
};

/// One test records at a time: a session is process-wide and the count is shared.
static TURN: Mutex<()> = Mutex::new(());

/// Counts the allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.load(Ordering::Relaxed);
    WATCHED.with(|w| w.set(true));
    f();
    WATCHED.with(|w| w.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // Const-initialised and without a destructor, so reading it never allocates.
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only an
// atomic and a const thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if WATCHED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[waffle::instrument]
fn kernel(i: u64, x: f64, tag: &str) -> u64 {
    let _inner = waffle::span!("inner", flag = i % 2 == 0);
    let _e = waffle::event!("tick", i);
    std::hint::black_box(i ^ x.to_bits() ^ tag.len() as u64)
}

#[test]
fn a_million_spans_allocate_nothing() {
    const N: u64 = 1_000_000;
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("waffle-noalloc-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).queue_bytes(8 << 20).start().unwrap();
    for i in 0..1000 {
        kernel(i, 0.5, "warm-up"); // the first record acquires this thread's buffer
    }
    let allocs = allocations(|| {
        for i in 0..N {
            kernel(i, i as f64, "kernel");
        }
    });
    let stats = session.stop().unwrap();
    assert_eq!(allocs, 0, "allocations on the hot path");

    // The records are really there: spans written + dropped account for every one made.
    let (p, _) = waffle_read::decode::decode_file(&path).unwrap();
    let kernels: u64 =
        p.threads.iter().map(|t| t.spans.iter().filter(|s| s.name() == "kernel").count() as u64).sum();
    let records: u64 = p.threads.iter().map(|t| (t.spans.len() * 2 + t.events.len()) as u64).sum();
    assert_eq!(records + stats.dropped, (N + 1000) * 5, "begin+end for two spans and one event per call");
    assert!(kernels > 0);
    std::fs::remove_file(&path).ok();
}

#[test]
fn slices_syncs_and_tensors_allocate_nothing() {
    const N: u64 = 100_000;
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("waffle-noalloc-track-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).queue_bytes(8 << 20).tensors(true).start().unwrap();
    let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
    let launch = waffle::event!("launch"); // the first record acquires this thread's buffer
    let data: Vec<f32> = (0..4096).map(|i| i as f32 * 0.25).collect();
    let allocs = allocations(|| {
        for i in 0..N {
            let b = 1_000 * i;
            waffle::track_slice!(gpu, "kernel", b, b + 700, launched_by = launch, i);
            if i % 1_000 == 0 {
                gpu.sync(b);
                waffle::tensor!("activations", &data, shape = [64, 64], i);
            }
        }
    });
    let stats = session.stop().unwrap();
    assert_eq!(allocs, 0, "allocations while recording slices, syncs and tensors");

    // The slices are really there: on their track, or counted as dropped; and the tensors.
    let (p, _) = waffle_read::decode::decode_file(&path).unwrap();
    let track = &p.tracks[0];
    let slices = p.threads[track.thread].spans.len() as u64;
    assert!(slices > 0 && slices + stats.dropped >= N, "{slices} slices, {} dropped", stats.dropped);
    let tensors =
        p.threads.iter().flat_map(|t| &t.events).filter(|e| e.name() == "activations").count() as u64;
    assert!(
        tensors > 0 && tensors + stats.dropped >= N / 1_000,
        "{tensors} tensors, {} dropped",
        stats.dropped
    );
    std::fs::remove_file(&path).ok();
}
