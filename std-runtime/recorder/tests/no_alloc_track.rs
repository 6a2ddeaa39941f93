//! Device tracks record without allocating: a counting global allocator sees no allocation on
//! the recording thread over 100 000 slices (each with its launcher and a field) and syncs, as
//! `no_alloc.rs` sees none for spans and events.

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

#[test]
fn slices_and_syncs_allocate_nothing() {
    const N: u64 = 100_000;
    let path = std::env::temp_dir().join(format!("waffle-noalloc-track-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).queue_bytes(8 << 20).start().unwrap();
    let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
    let launch = waffle::event!("launch"); // the first record acquires this thread's buffer
    WATCHED.with(|w| w.set(true));
    for i in 0..N {
        let b = 1_000 * i;
        waffle::track_slice!(gpu, "kernel", b, b + 700, launched_by = launch, i);
        if i % 1_000 == 0 {
            gpu.sync(b);
        }
    }
    WATCHED.with(|w| w.set(false));
    let allocs = ALLOCS.load(Ordering::Relaxed);
    let stats = session.stop().unwrap();
    assert_eq!(allocs, 0, "allocations while recording slices and syncs");

    // The slices are really there: on their track, or counted as dropped.
    let (p, _) = waffle_decode::decode::decode_file(&path).unwrap();
    let track = &p.tracks[0];
    let slices = p.threads[track.thread].spans.len() as u64;
    assert!(slices > 0 && slices + stats.dropped >= N, "{slices} slices, {} dropped", stats.dropped);
    std::fs::remove_file(&path).ok();
}
