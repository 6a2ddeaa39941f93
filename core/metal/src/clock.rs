//! Timestamps from 32-bit hardware counters, made 64-bit.
//!
//! waffle's records carry 64-bit tick deltas; a Cortex-M's cycle counter (DWT `CYCCNT`) and
//! most timers are 32 bits wide and wrap (at 64 MHz, every 67 s). [`Extend32`] counts the
//! wraps, which it sees as long as the counter is read at least once per wrap period (any
//! record, or a periodic interrupt that records, does that).

use core::sync::atomic::{AtomicU32, Ordering};

/// A 32-bit up-counter extended to 64 bits by counting its wraps.
#[derive(Debug, Default)]
pub struct Extend32 {
    last: AtomicU32,
    high: AtomicU32,
}

impl Extend32 {
    /// No reading seen yet.
    pub const fn new() -> Extend32 {
        Extend32 { last: AtomicU32::new(0), high: AtomicU32::new(0) }
    }

    /// Reads the counter with `read` and returns it extended. The read and the update happen
    /// with interrupts masked, so that the main loop and interrupts can share one clock: a
    /// reading never goes back in time, and a wrap is never counted twice.
    #[inline]
    pub fn extend(&self, read: impl FnOnce() -> u32) -> u64 {
        crate::masked(|| {
            let low = read();
            let mut high = self.high.load(Ordering::Relaxed);
            if low < self.last.load(Ordering::Relaxed) {
                high = high.wrapping_add(1);
                self.high.store(high, Ordering::Relaxed);
            }
            self.last.store(low, Ordering::Relaxed);
            u64::from(high) << 32 | u64::from(low)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Extend32;

    #[test]
    fn wraps_are_counted_and_readings_grow() {
        let clock = Extend32::new();
        assert_eq!(clock.extend(|| 5), 5);
        assert_eq!(clock.extend(|| u32::MAX - 1), u64::from(u32::MAX) - 1);
        assert_eq!(clock.extend(|| 3), (1 << 32) + 3);
        assert_eq!(clock.extend(|| 3), (1 << 32) + 3, "no time passed: no wrap");
        assert_eq!(clock.extend(|| 2), (2 << 32) + 2, "a smaller reading is a wrap");
    }
}
