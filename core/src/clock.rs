//! Timestamps for the hot path, in ticks of the platform's cheapest monotonic counter.
//!
//! - x86_64: the time-stamp counter (`rdtsc`), about a dozen nanoseconds to read.
//! - aarch64: the virtual counter `cntvct_el0`.
//! - other targets with `std`: nanoseconds since the first read, from `Instant`.
//! - other targets without `std`: a clock the user installs with [`set_clock`], such as a
//!   cycle counter; until then every timestamp is 0.
//!
//! Ticks are converted to nanoseconds by the runtime, which calibrates them against the system
//! clock and records the ratio in the trace file; the hot path never converts.

/// Which counter [`now`] reads, as recorded in the file header.
pub const SOURCE: &str = if cfg!(target_arch = "x86_64") {
    "tsc"
} else if cfg!(target_arch = "aarch64") {
    "cntvct"
} else if cfg!(feature = "std") {
    "instant"
} else {
    "user"
};

/// Reads the current tick count.
#[inline(always)]
pub fn now() -> u64 {
    imp::now()
}

#[cfg(target_arch = "x86_64")]
mod imp {
    #[inline(always)]
    pub fn now() -> u64 {
        // SAFETY: `rdtsc` exists on every x86_64 processor and has no preconditions.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

#[cfg(target_arch = "aarch64")]
mod imp {
    #[inline(always)]
    pub fn now() -> u64 {
        let ticks: u64;
        // SAFETY: reading the virtual counter is allowed at EL0 on every aarch64 OS we target
        // and touches no memory.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) ticks, options(nomem, nostack)) };
        ticks
    }
}

#[cfg(all(not(any(target_arch = "x86_64", target_arch = "aarch64")), feature = "std"))]
mod imp {
    extern crate std;
    use std::{sync::OnceLock, time::Instant};

    static START: OnceLock<Instant> = OnceLock::new();

    pub fn now() -> u64 {
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

#[cfg(all(not(any(target_arch = "x86_64", target_arch = "aarch64")), not(feature = "std")))]
mod imp {
    use core::sync::atomic::{AtomicUsize, Ordering};

    pub static CLOCK: AtomicUsize = AtomicUsize::new(0);

    fn zero() -> u64 {
        0
    }

    #[inline(always)]
    pub fn now() -> u64 {
        let raw = CLOCK.load(Ordering::Relaxed);
        let f: fn() -> u64 = if raw == 0 {
            zero
        } else {
            // SAFETY: the only non-zero value ever stored is a `fn() -> u64` cast to usize by
            // `set_clock`, and function pointers and usize have the same size here.
            unsafe { core::mem::transmute::<usize, fn() -> u64>(raw) }
        };
        f()
    }
}

/// Installs the clock read by [`now`] on targets without a built-in counter (bare metal without
/// `std`, say a Cortex-M `DWT::cycle_count`). Returns `false` where the platform counter is used
/// and the call changes nothing.
pub fn set_clock(clock: fn() -> u64) -> bool {
    #[cfg(all(not(any(target_arch = "x86_64", target_arch = "aarch64")), not(feature = "std")))]
    {
        imp::CLOCK.store(clock as usize, core::sync::atomic::Ordering::Relaxed);
        true
    }
    #[cfg(not(all(not(any(target_arch = "x86_64", target_arch = "aarch64")), not(feature = "std"))))]
    {
        let _ = clock;
        false
    }
}
