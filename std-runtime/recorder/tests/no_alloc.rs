//! The hot path never allocates: a counting global allocator sees no allocation on the
//! recording thread over a million spans and events once the thread has its buffer.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    sync::atomic::{AtomicU64, Ordering},
};

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
    let path = std::env::temp_dir().join(format!("waffle-noalloc-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).queue_bytes(8 << 20).start().unwrap();
    for i in 0..1000 {
        kernel(i, 0.5, "warm-up"); // the first record acquires this thread's buffer
    }
    WATCHED.with(|w| w.set(true));
    for i in 0..N {
        kernel(i, i as f64, "kernel");
    }
    WATCHED.with(|w| w.set(false));
    let allocs = ALLOCS.load(Ordering::Relaxed);
    let stats = session.stop().unwrap();
    assert_eq!(allocs, 0, "allocations on the hot path");

    // The records are really there: spans written + dropped account for every one made.
    let (p, _) = waffle_decode::decode::decode_file(&path).unwrap();
    let kernels: u64 =
        p.threads.iter().map(|t| t.spans.iter().filter(|s| s.name() == "kernel").count() as u64).sum();
    let records: u64 = p.threads.iter().map(|t| (t.spans.len() * 2 + t.events.len()) as u64).sum();
    assert_eq!(records + stats.dropped, (N + 1000) * 5, "begin+end for two spans and one event per call");
    assert!(kernels > 0);
    std::fs::remove_file(&path).ok();
}
