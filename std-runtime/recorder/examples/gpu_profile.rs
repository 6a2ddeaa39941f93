//! A training loop on a simulated GPU, recorded the way a JAX program's trace holds one:
//! `waffle.jax.step` markers, `waffle.jax.timed` dispatches with their compiled calls' slices
//! on the device's track, and a `jax.profiler` profile merged as slices
//! (`waffle.jax.merge_profile`): each XLA op's kernel on a stream's track, with the profile's
//! stats as its fields and no launcher, since the trace lacks the profiler's launch events.
//!
//! ```text
//! cargo run --example gpu_profile -- out/ [STEPS]
//! waffle-decode out/timed.bin -o out/timed.xplane.pb
//! ```
//!
//! A worker thread stands for the GPU. For each call it waits 1 ms (loading the executable),
//! runs three kernels named like XLA's, spinning for their durations and reading its own clock
//! around each: `gemm_fusion_dot` and `loop_add_fusion` on `gpu:0 / Stream #14`,
//! `input_reduce_fusion` on `gpu:0 / Stream #15`, each with `hlo_op`, `hlo_module`,
//! `program_id`, `kernel_details` and the profiler's own `correlation_id` as fields; then it
//! takes 1 ms more to hand the outputs back, and reports the call ready.
//!
//! - `timed.bin`: STEPS (default 8) `step` spans (a `step` field), each dispatching one call
//!   in a `train_step` span. Dispatch is asynchronous and the GPU starts once the host has
//!   dispatched every step (as when the first call waits for its compilation), so every
//!   kernel runs after the step that launched it has ended. Each call's slice on the `gpu:0`
//!   track spans its device time, from its dispatch (or the moment the call it queued behind
//!   was ready) to the moment it was ready, launched by its `train_step` span.
//! - `merged.bin`: the same loop, but the host waits for each call inside its step (as
//!   `block_until_ready` does), and nothing is timed: only the steps and the kernels.
//!
//! The GPU's clock is the host's monotonic clock, shifted: it never drifts, so each track is
//! synced once, at the start (a second sync would add nothing but its own pairing error to the
//! slope). The millisecond before and after each call's kernels keep a kernel well inside its
//! call and its step whatever the few microseconds by which one track's sync may be off
//! another's.

use std::{
    path::PathBuf,
    sync::mpsc,
    time::{Duration, Instant},
};

/// The GPU's clock: nanoseconds since it was made, from 30 s.
#[derive(Clone, Copy)]
struct GpuClock(Instant);

impl GpuClock {
    fn now(self) -> u64 {
        self.0.elapsed().as_nanos() as u64 + 30_000_000_000
    }
}

/// One kernel of a call: its name (an XLA fusion's), stream, HLO op and run time.
struct Kernel {
    name: &'static str,
    stream: usize,
    hlo_op: &'static str,
    runs: Duration,
}

const CALL: [Kernel; 3] = [
    Kernel { name: "gemm_fusion_dot", stream: 0, hlo_op: "dot.3", runs: Duration::from_micros(500) },
    Kernel { name: "loop_add_fusion", stream: 0, hlo_op: "add.7", runs: Duration::from_micros(300) },
    Kernel { name: "input_reduce_fusion", stream: 1, hlo_op: "reduce.2", runs: Duration::from_micros(200) },
];

/// How long the GPU takes before a call's first kernel, and after its last until it is ready.
const CALL_MARGIN: Duration = Duration::from_millis(1);

/// A call as the GPU ran it: each kernel's begin and end, and when it was ready, on the GPU's
/// clock.
struct Ran {
    kernels: Vec<(u64, u64)>,
    ready: u64,
}

fn spin(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// The GPU: runs each call it is sent once `start` says so, and reports it.
fn gpu(clock: GpuClock, start: mpsc::Receiver<()>, calls: mpsc::Receiver<()>, report: mpsc::Sender<Ran>) {
    if start.recv().is_err() {
        return;
    }
    for () in calls {
        spin(CALL_MARGIN);
        let kernels = CALL
            .iter()
            .map(|k| {
                let begin = clock.now();
                spin(k.runs);
                (begin, clock.now())
            })
            .collect();
        spin(CALL_MARGIN);
        if report.send(Ran { kernels, ready: clock.now() }).is_err() {
            return;
        }
    }
}

/// Runs `steps` steps; `timed`: the host runs ahead and times each call on the `gpu:0` track,
/// else it waits for each call inside its step.
fn train(steps: u64, timed: bool) {
    let clock = GpuClock(Instant::now());
    let gpu_track = waffle::Track::new("gpu:0", 1_000_000_000);
    let streams = [
        waffle::Track::new("gpu:0 / Stream #14", 1_000_000_000),
        waffle::Track::new("gpu:0 / Stream #15", 1_000_000_000),
    ];
    for track in [gpu_track, streams[0], streams[1]] {
        track.sync(clock.now());
    }
    let (queue, calls) = mpsc::channel();
    let (report, done) = mpsc::channel();
    let (start, started) = mpsc::channel();
    let device = std::thread::Builder::new()
        .name("gpu".into())
        .spawn(move || gpu(clock, started, calls, report))
        .expect("spawn the GPU thread");

    if !timed {
        start.send(()).expect("the GPU waits");
    }
    let mut dispatched = Vec::new();
    let mut ran = Vec::new();
    for step in 0..steps {
        let _step = waffle::span!("step", step);
        let dispatch = waffle::span!("train_step", fun_name = "train_step");
        dispatched.push((dispatch.id(), clock.now()));
        queue.send(()).expect("the GPU runs");
        spin(Duration::from_micros(50)); // the dispatch's own cost
        drop(dispatch);
        if !timed {
            ran.push(done.recv().expect("the GPU reports"));
        }
    }
    drop(queue);
    if timed {
        start.send(()).expect("the GPU waits");
    }
    ran.extend(done.iter());
    device.join().expect("the GPU thread");

    if timed {
        // What `timed` records: each call's slice, from its dispatch (or the moment the call
        // it queued behind was ready) to the moment it was ready.
        let mut free_at = 0;
        for ((by, dispatched_at), call) in dispatched.iter().zip(&ran) {
            let begin = (*dispatched_at).max(free_at);
            free_at = call.ready;
            waffle::track_slice!(
                gpu_track,
                "train_step",
                begin,
                call.ready,
                launched_by = *by,
                fun_name = "train_step"
            );
        }
    }
    // What `merge_profile` records: every kernel of the profile, with its stats, no launcher.
    let details = "regs:32 static_shared:0 dynamic_shared:0 grid:128,1,1 block:256,1,1 occ_pct:100";
    let mut cupti = 7_000u64; // the profiler's own correlation ids, meaningless in this trace
    for (k, &(begin, end)) in ran.iter().flat_map(|call| CALL.iter().zip(&call.kernels)) {
        let (track, hlo_op) = (streams[k.stream], k.hlo_op);
        cupti += 1;
        // A slice's name is a literal (its callsite is static): one per kernel.
        macro_rules! kernel {
            ($name:literal) => {
                waffle::track_slice!(
                    track,
                    $name,
                    begin,
                    end,
                    hlo_op,
                    hlo_module = "jit_train_step",
                    program_id = 42u64,
                    correlation_id = cupti,
                    kernel_details = details
                )
            };
        }
        match k.name {
            "gemm_fusion_dot" => kernel!("gemm_fusion_dot"),
            "loop_add_fusion" => kernel!("loop_add_fusion"),
            _ => kernel!("input_reduce_fusion"),
        };
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args_os().nth(1).unwrap_or_else(|| ".".into()));
    let steps = match std::env::args().nth(2) {
        Some(n) => n.parse().map_err(|e| format!("STEPS {n:?}: {e}"))?,
        None => 8,
    };
    std::fs::create_dir_all(&dir)?;
    for (file, timed) in [("timed.bin", true), ("merged.bin", false)] {
        let session = waffle_std::start(dir.join(file))?;
        train(steps, timed);
        session.stop()?;
    }
    println!("{steps} steps on a simulated GPU; wrote timed.bin and merged.bin in {}", dir.display());
    Ok(())
}
