//! What every fuzz target shares: a global allocator that refuses any single allocation over a
//! limit, so that the bound on allocation (`Allocation grows with the bytes actually present,
//! never with a length field`) is checked in every build, with or without a sanitizer.
//!
//! libFuzzer's `-malloc_limit_mb` needs a sanitizer's allocator to see each allocation; the
//! targets whose code under test has no `unsafe` run without one (scripts/fuzz.sh), so the
//! limit is kept here instead.

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, aborting the run on an allocation of more than `limit` bytes: the
/// fuzzer reports the abort as a crash and keeps the input.
pub struct Limited {
    limit: usize,
}

impl Limited {
    /// A limit of `mib` MiB a single allocation.
    pub const fn mib(mib: usize) -> Limited {
        Limited { limit: mib << 20 }
    }

    /// Aborts if one allocation of `size` bytes is over the limit.
    #[inline]
    fn check(&self, size: usize) {
        if size > self.limit {
            self.refuse();
        }
    }

    #[cold]
    fn refuse(&self) -> ! {
        use std::io::Write;
        // A static message to unbuffered stderr: nothing here allocates.
        let _ = std::io::stderr().write_all(b"waffle-fuzz: one allocation over the limit of fuzz/src/lib.rs\n");
        std::process::abort()
    }
}

// SAFETY: every call is passed to `System` unchanged, or aborts the process before it would be.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.check(layout.size());
        // SAFETY: the caller's contract for `layout` is `GlobalAlloc::alloc`'s, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.check(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`, as the caller promises.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.check(new_size);
        // SAFETY: as in `dealloc`, and `new_size` is the caller's, checked above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Puts [`Limited`] at 64 MiB in place as the target's global allocator.
#[macro_export]
macro_rules! limit_allocations {
    () => {
        #[global_allocator]
        static ALLOC: $crate::Limited = $crate::Limited::mib(64);
    };
}
