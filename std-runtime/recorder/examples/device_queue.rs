//! Host spans launching "kernels" on a simulated device queue whose clock is not the host's.
//!
//! ```text
//! cargo run --example device_queue -- device_queue.bin
//! waffle-decode device_queue.bin -o device_queue.pftrace     # open in ui.perfetto.dev
//! ```
//!
//! A worker thread stands for the device: it takes kernels from an in-order queue, runs each
//! (spins for its duration) and reads the device's own clock at its begin and end, the way a
//! GPU stamps a kernel with its timer. That clock counts 1 GHz nominal but runs 200 ppm fast
//! and reads 40 s ahead of the host's (`DeviceClock`), so its ticks mean nothing on the host's
//! time base until the trace maps them. The host thread launches kernels from a `step` span
//! (a `launch` span per kernel), syncs the track every few steps (a device clock reading
//! paired with the host's now), and records each finished kernel as a slice of the `GPU 0`
//! track with `waffle::track_slice!`, naming its launch. In Perfetto the process then shows a
//! `GPU 0` track under it, each kernel a slice there, later than and after its launch span,
//! with an arrow from the launch.

use std::{
    sync::mpsc,
    time::{Duration, Instant},
};

/// The simulated device's timer: host time × (1 + drift) + offset, in device ticks (ns),
/// counting from when it was made.
#[derive(Clone, Copy)]
pub struct DeviceClock {
    start: Instant,
}

impl Default for DeviceClock {
    fn default() -> DeviceClock {
        DeviceClock { start: Instant::now() }
    }
}

impl DeviceClock {
    /// How much faster than the host's clock the device's runs.
    pub const DRIFT: f64 = 200e-6;
    /// The device's reading when the host's `start` was taken, in ticks.
    pub const OFFSET: u64 = 40_000_000_000;
    /// Nominal ticks per second.
    pub const RATE: u64 = 1_000_000_000;

    /// The device's reading now.
    pub fn now(&self) -> u64 {
        (self.start.elapsed().as_nanos() as f64 * (1.0 + Self::DRIFT)) as u64 + Self::OFFSET
    }
}

/// A kernel launched on the device: its name, how long it runs, its launch span.
struct Kernel {
    name: &'static str,
    runs: Duration,
    launched_by: waffle::SpanId,
}

/// A finished kernel, as the device reports it: its begin and end in device ticks.
struct Done {
    kernel: Kernel,
    begin: u64,
    end: u64,
}

fn spin(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Runs `steps` steps of three kernels each on the simulated device, syncing its track every
/// `sync_every` steps (and at the start and end); returns the number of kernels run.
pub fn run(steps: u64, sync_every: u64) -> u64 {
    let clock = DeviceClock::default();
    let gpu = waffle::Track::new("GPU 0", DeviceClock::RATE);
    gpu.sync(clock.now());
    let (launch, queue) = mpsc::channel::<Kernel>();
    let (report, done) = mpsc::channel::<Done>();
    let device = std::thread::Builder::new()
        .name("device".into())
        .spawn(move || {
            for kernel in queue {
                let begin = clock.now();
                spin(kernel.runs);
                let end = clock.now();
                if report.send(Done { kernel, begin, end }).is_err() {
                    break;
                }
            }
        })
        .expect("spawn the device thread");
    let mut kernels = 0;
    for step in 0..steps {
        let _step = waffle::span!("step", step);
        for (name, us) in [("gemm", 400), ("softmax", 150), ("allreduce", 300)] {
            let launched = waffle::span!("launch", kernel = name);
            let kernel = Kernel { name, runs: Duration::from_micros(us), launched_by: launched.id() };
            launch.send(kernel).expect("the device is running");
            spin(Duration::from_micros(20)); // the launch call's own cost
        }
        // The host waits for the step's kernels, then records them from the device's reports.
        for _ in 0..3 {
            let d = done.recv().expect("the device reports");
            let (by, us) = (d.kernel.launched_by, d.kernel.runs.as_micros() as u64);
            // A slice's name is a literal (its callsite is static): one per kernel.
            match d.kernel.name {
                "gemm" => waffle::track_slice!(gpu, "gemm", d.begin, d.end, launched_by = by, us),
                "softmax" => waffle::track_slice!(gpu, "softmax", d.begin, d.end, launched_by = by, us),
                _ => waffle::track_slice!(gpu, "allreduce", d.begin, d.end, launched_by = by, us),
            };
            kernels += 1;
        }
        if (step + 1) % sync_every == 0 {
            gpu.sync(clock.now());
        }
    }
    gpu.sync(clock.now());
    drop(launch);
    device.join().expect("the device thread");
    kernels
}

#[allow(dead_code)] // a test includes this file as a module and calls `run`
fn main() -> Result<(), waffle_std::Error> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "device_queue.bin".into());
    let session = waffle_std::start(&path)?;
    let kernels = run(20, 5);
    session.stop()?;
    println!("{kernels} kernels on a device clock drifting +200 ppm; wrote {path}");
    Ok(())
}
