//! Calibrating the producer's clock ticks to nanoseconds on the wall clock.
//!
//! At start the runtime pairs a tick reading with `SystemTime` (the anchor) and measures the
//! tick rate over a few milliseconds; at a clean stop it measures again over the whole session,
//! which is far more precise, and writes that calibration last. The decoder uses the last one.
//!
//! Every pairing of the tick counter with a system clock is bracketed: ticks are read on either
//! side of the system clock, several times, and the try with the narrowest bracket wins, its
//! tick taken at the bracket's middle. An interrupt or a preemption between two reads would
//! otherwise shift the anchor by as long as it lasted (tens of microseconds are common on a busy
//! machine), and two processes' anchors would disagree by that much: on one host, a message
//! would then arrive before it was sent.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
pub use waffle::wire::{Calibration, Converter};

/// How many times a pairing is tried. Each try costs well under a microsecond; one of 16 being
/// free of interruption is all but certain.
const TRIES: usize = 16;

/// A start of calibration: the anchor and a monotonic reading to measure against later.
pub struct Start {
    instant: Instant,
    ticks: u64,
    unix_ns: u64,
}

impl Start {
    /// Takes the anchor now.
    pub fn now() -> Start {
        let (ticks, (instant, unix_ns)) = bracketed(waffle::clock::now, || {
            let instant = Instant::now();
            let unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            (instant, unix_ns)
        });
        Start { instant, ticks, unix_ns }
    }

    /// The calibration measured from the anchor until now.
    pub fn measure(&self) -> Calibration {
        let (now, instant) = bracketed(waffle::clock::now, Instant::now);
        let ns = instant.saturating_duration_since(self.instant).as_nanos() as u64;
        let ticks = now.wrapping_sub(self.ticks);
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

/// Reads `other` between two reads of `ticks`, [`TRIES`] times, and returns the reading whose
/// tick bracket was narrowest, with the tick at the bracket's middle.
fn bracketed<T>(mut ticks: impl FnMut() -> u64, mut other: impl FnMut() -> T) -> (u64, T) {
    let mut best: Option<(u64, u64, T)> = None;
    for _ in 0..TRIES {
        let before = ticks();
        let value = other();
        let after = ticks();
        let width = after.wrapping_sub(before);
        if best.as_ref().is_none_or(|&(w, _, _)| width < w) {
            best = Some((width, before.wrapping_add(width / 2), value));
        }
    }
    let (_, tick, value) = best.expect("TRIES is not zero");
    (tick, value)
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

    #[test]
    fn the_narrowest_bracket_wins_and_gives_its_middle() {
        // Tick reads come in pairs around each try; the third try's pair is the narrowest (an
        // interrupt stretched the others).
        let wide = [0, 1_000_000].into_iter().cycle();
        let mut reads = [100, 900, 1000, 1040, 2000, 2010, 3000, 3500].into_iter().chain(wide);
        let mut tries = 0;
        let (tick, which) = bracketed(
            || reads.next().unwrap(),
            || {
                tries += 1;
                tries
            },
        );
        assert_eq!((tick, which), (2005, 3));
    }

    #[test]
    fn two_anchors_taken_apart_agree_on_the_tick_epoch() {
        // Two starts (as two processes on one host would take them) must place the same tick
        // at the same Unix time, to within the clocks' own resolution plus a bracket.
        let a = Start::now().measure_over(Duration::from_millis(20));
        let b = Start::now().measure_over(Duration::from_millis(20));
        let t = waffle::clock::now();
        let (ua, ub) = (a.to_unix_ns(t), b.to_unix_ns(t));
        assert!(ua.abs_diff(ub) < 20_000, "{ua} vs {ub}: anchors disagree by {} ns", ua.abs_diff(ub));
    }
}
