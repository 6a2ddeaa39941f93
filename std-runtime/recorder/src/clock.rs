//! Calibrating the producer's clock ticks to nanoseconds on the wall clock.
//!
//! At start the runtime pairs a tick reading with `SystemTime` (the anchor) and measures the
//! tick rate over a few milliseconds; at a clean stop it measures again over the whole session,
//! which is far more precise, and writes that calibration last. The decoder uses the last one.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
pub use waffle::wire::{Calibration, Converter};

/// A start of calibration: the anchor and a monotonic reading to measure against later.
pub struct Start {
    instant: Instant,
    ticks: u64,
    unix_ns: u64,
}

impl Start {
    /// Takes the anchor now.
    pub fn now() -> Start {
        let instant = Instant::now();
        let ticks = waffle::clock::now();
        let unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Start { instant, ticks, unix_ns }
    }

    /// The calibration measured from the anchor until now.
    pub fn measure(&self) -> Calibration {
        let ns = self.instant.elapsed().as_nanos() as u64;
        let ticks = waffle::clock::now().wrapping_sub(self.ticks);
        let (ticks, ns) = if ticks == 0 || ns == 0 { (1, 1) } else { (ticks, ns) };
        Calibration { anchor_ticks: self.ticks, anchor_unix_ns: self.unix_ns, ticks, ns }
    }

    /// Measures over about `d` by spinning (used once at start).
    pub fn measure_over(&self, d: Duration) -> Calibration {
        while self.instant.elapsed() < d {
            std::hint::spin_loop();
        }
        self.measure()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_rate_is_positive() {
        let s = Start::now();
        let c = s.measure_over(Duration::from_millis(2));
        assert!(c.ticks > 0 && c.ns >= 2_000_000);
    }
}
