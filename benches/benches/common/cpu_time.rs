//! CPU time as criterion's measurement: the time the bench's own thread spent on a core, not
//! the time that passed. On a machine shared with other jobs an export of several seconds waits
//! for a core as long as it runs, and wall time says more about the other jobs than about the
//! export; the thread's CPU time is what "per core" means. The export runs on the calling
//! thread (nothing in `Files` spawns one), so its thread's time is all of it.

use criterion::{
    measurement::{Measurement, ValueFormatter},
    Throughput,
};

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), in ns.
pub struct CpuTime;

fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration, and the clock id is
    // one every Linux has; the call writes nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        now_ns()
    }
    fn end(&self, start: u64) -> u64 {
        now_ns() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, ns: &u64) -> f64 {
        *ns as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

/// Times as criterion prints wall times (with "cpu" after them), throughputs in MB/s.
struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical_ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = match typical_ns {
            t if t < 1e3 => (1.0, "ns cpu"),
            t if t < 1e6 => (1e-3, "µs cpu"),
            t if t < 1e9 => (1e-6, "ms cpu"),
            _ => (1e-9, "s cpu"),
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }

    fn scale_throughputs(&self, _typical: f64, throughput: &Throughput, values: &mut [f64]) -> &'static str {
        let (per_iteration, unit) = match *throughput {
            Throughput::Bytes(b) | Throughput::BytesDecimal(b) => (b as f64 / 1e6, "MB/s cpu"),
            Throughput::Elements(e) => (e as f64, "elem/s cpu"),
        };
        values.iter_mut().for_each(|ns| *ns = per_iteration * 1e9 / *ns);
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
