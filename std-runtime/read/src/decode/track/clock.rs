//! A device clock mapped onto the host's: piecewise linear between consecutive sync points.
//!
//! Each sync pairs a device clock reading with the host's tick reading taken right after it.
//! Between two consecutive syncs a device time is interpolated linearly, so that a device
//! clock running fast or slow against the host's (drift, commonly tens to hundreds of ppm) is
//! corrected to within what the clock's rate changes between those two syncs; this is how
//! Tracy calibrates GPU timestamps against the CPU's. Before the first sync and after the last,
//! the nearest segment's slope continues. With a single sync, the slope is the nominal one
//! (the track's ticks per second against the host's).

use crate::model::SyncPoint;

/// The mapping of one track's device ticks onto host ticks.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceClock {
    /// Sync points by increasing device ticks, each device reading once, host ticks not
    /// decreasing.
    syncs: Vec<SyncPoint>,
    /// Host ticks per device tick, for a single sync.
    nominal: f64,
}

impl DeviceClock {
    /// The mapping from `syncs` (any order) of a clock of `ticks_per_second`, on a host clock
    /// of `host_ticks_per_second`. `None` without a usable sync (or a rate of 0). Syncs that
    /// repeat a device reading, or whose host time goes back against an earlier device
    /// reading's (a reset device counter), are left out.
    pub fn new(
        syncs: &[SyncPoint],
        ticks_per_second: u64,
        host_ticks_per_second: f64,
    ) -> Option<DeviceClock> {
        if ticks_per_second == 0 || !host_ticks_per_second.is_finite() || host_ticks_per_second <= 0.0 {
            return None;
        }
        let mut sorted = syncs.to_vec();
        sorted.sort_by_key(|s| (s.device_ticks, s.host));
        let mut kept: Vec<SyncPoint> = Vec::with_capacity(sorted.len());
        for s in sorted {
            match kept.last() {
                Some(last) if last.device_ticks == s.device_ticks || last.host > s.host => {}
                _ => kept.push(s),
            }
        }
        if kept.is_empty() {
            return None;
        }
        Some(DeviceClock { syncs: kept, nominal: host_ticks_per_second / ticks_per_second as f64 })
    }

    /// The sync points the mapping uses, by device time.
    pub fn syncs(&self) -> &[SyncPoint] {
        &self.syncs
    }

    /// The host tick reading that device reading `device` corresponds to.
    pub fn host(&self, device: u64) -> u64 {
        let s = &self.syncs;
        if s.len() == 1 {
            return along(s[0], device, self.nominal);
        }
        // The segment that holds `device`: from the last sync at or before it (the first
        // segment before the first sync, the last after the last).
        let i = s.partition_point(|p| p.device_ticks <= device).clamp(1, s.len() - 1) - 1;
        let (a, b) = (s[i], s[i + 1]);
        let slope = (b.host - a.host) as f64 / (b.device_ticks - a.device_ticks) as f64;
        along(a, device, slope)
    }
}

/// `from`'s host time moved by `device - from.device_ticks` device ticks at `slope` host
/// ticks each, clamped to the u64 range.
fn along(from: SyncPoint, device: u64, slope: f64) -> u64 {
    let dt = i128::from(device) - i128::from(from.device_ticks);
    // The float's cast saturates (a hostile file's extremes stay finite), and so does the sum.
    let host = i128::from(from.host).saturating_add((dt as f64 * slope).round() as i128);
    host.clamp(0, i128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(device_ticks: u64, host: u64) -> SyncPoint {
        SyncPoint { device_ticks, host }
    }

    /// A device clock at 1 GHz nominal that runs 200 ppm fast and started 7 s before the
    /// host's; the host counts ns. Its reading at host time `h`.
    fn drifting(h: u64) -> u64 {
        (h as f64 * (1.0 + 200e-6)) as u64 + 7_000_000_000
    }

    #[test]
    fn a_drifting_clock_is_corrected_between_syncs() {
        // Syncs every 100 ms over 1 s of host time, starting at host 1 s.
        let syncs: Vec<_> =
            (0..=10).map(|k| 1_000_000_000 + k * 100_000_000).map(|h| sync(drifting(h), h)).collect();
        let clock = DeviceClock::new(&syncs, 1_000_000_000, 1e9).unwrap();
        let nominal = DeviceClock::new(&syncs[..1], 1_000_000_000, 1e9).unwrap();
        let mut worst_nominal = 0;
        for h in (1_000_000_000..=2_000_000_000u64).step_by(7_777_777) {
            let got = clock.host(drifting(h));
            assert!(got.abs_diff(h) <= 2, "host {h}: mapped to {got}");
            worst_nominal = worst_nominal.max(nominal.host(drifting(h)).abs_diff(h));
        }
        // Without the correction, the drift shows: 200 µs after one second.
        assert!(worst_nominal > 190_000, "{worst_nominal}");
    }

    #[test]
    fn outside_the_syncs_the_nearest_segment_continues() {
        // Two segments of different slopes: 1 host tick per device tick, then 2.
        let clock =
            DeviceClock::new(&[sync(100, 1_000), sync(200, 1_100), sync(300, 1_300)], 1, 1.0).unwrap();
        assert_eq!(clock.host(150), 1_050);
        assert_eq!(clock.host(250), 1_200);
        assert_eq!(clock.host(50), 950, "before the first sync: the first segment's slope");
        assert_eq!(clock.host(400), 1_500, "after the last: the last segment's slope");
        assert_eq!(clock.host(0), 900);
    }

    #[test]
    fn a_single_sync_uses_the_nominal_rate() {
        // A 1 MHz device clock on a 3 GHz host clock: 3 000 host ticks per device tick.
        let clock = DeviceClock::new(&[sync(5_000, 9_000_000)], 1_000_000, 3e9).unwrap();
        assert_eq!(clock.host(5_000), 9_000_000);
        assert_eq!(clock.host(5_010), 9_030_000);
        assert_eq!(clock.host(4_000), 6_000_000);
        assert_eq!(clock.host(0), 0, "clamped at the start of the host's clock");
    }

    #[test]
    fn extreme_readings_are_clamped_not_overflowed() {
        let clock = DeviceClock::new(&[sync(0, 10), sync(1, u64::MAX)], 1, 1.0).unwrap();
        assert_eq!(clock.host(u64::MAX), u64::MAX);
        let clock = DeviceClock::new(&[sync(u64::MAX, 0)], 1, f64::MAX).unwrap();
        assert_eq!(clock.host(0), 0);
        assert_eq!(clock.host(u64::MAX), 0);
    }

    #[test]
    fn repeated_and_backward_syncs_are_left_out() {
        let clock =
            DeviceClock::new(&[sync(300, 3_000), sync(100, 1_000), sync(100, 1_500), sync(200, 500)], 1, 1.0)
                .unwrap();
        assert_eq!(clock.syncs(), [sync(100, 1_000), sync(300, 3_000)]);
        assert_eq!(DeviceClock::new(&[], 1, 1.0), None);
        assert_eq!(DeviceClock::new(&[sync(1, 1)], 0, 1.0), None);
    }
}
