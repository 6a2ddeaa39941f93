//! What the criterion benches of the hot path share: one measuring configuration, so that their
//! figures are taken alike and compare within a run.

use criterion::Criterion;
use std::time::Duration;

/// One second of warm-up, three of measurement, 50 samples: short enough to run every group in
/// one sitting on a shared machine, long enough for nanosecond spans to settle.
pub fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}
