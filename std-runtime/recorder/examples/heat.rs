//! A 2D heat-diffusion stencil on several threads, traced with waffle.
//!
//! Each worker owns a band of rows. Every time step it waits for the others at a barrier (the
//! "halo exchange"), then applies the five-point Jacobi update to its band; every 50 steps the
//! workers report their band's residual as an event. The trace shows load balance, barrier
//! waits and convergence at a glance.
//!
//! ```text
//! cargo run --release --example heat -- heat.bin
//! waffle-decode heat.bin -o heat.pftrace     # open in ui.perfetto.dev
//! ```

use std::sync::{Barrier, RwLock};

const N: usize = 512; // grid is N x N
const STEPS: u64 = 400;
const ALPHA: f64 = 0.24; // diffusion number; stable below 0.25

fn main() -> Result<(), waffle_std::Error> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "heat.bin".into());
    let workers = std::thread::available_parallelism().map_or(4, |n| n.get()).clamp(2, 8);
    let session = waffle_std::Config::new(&path).process_name("heat-diffusion").start()?;

    let grids = [RwLock::new(initial_grid()), RwLock::new(vec![0.0; N * N])];
    let barrier = Barrier::new(workers);
    let rows_per = N.div_ceil(workers);
    {
        let _run = waffle::span!("simulate", workers = workers as u64, n = N as u64, steps = STEPS);
        std::thread::scope(|s| {
            for w in 0..workers {
                let (grids, barrier) = (&grids, &barrier);
                let rows = (w * rows_per).max(1)..((w + 1) * rows_per).min(N - 1);
                std::thread::Builder::new()
                    .name(format!("worker-{w}"))
                    .spawn_scoped(s, move || worker(w as u64, rows, grids, barrier))
                    .expect("spawn worker");
            }
        });
    }
    let total: f64 = grids[(STEPS % 2) as usize].read().unwrap().iter().sum();
    waffle::event!("finished", total_heat = total);
    let stats = session.stop()?;
    println!("{workers} workers, {STEPS} steps on a {N}x{N} grid; total heat {total:.3}");
    println!("wrote {path}: {} bytes of records, {} dropped", stats.data_bytes, stats.dropped);
    Ok(())
}

fn initial_grid() -> Vec<f64> {
    let mut g = vec![0.0; N * N];
    for y in N / 2 - 16..N / 2 + 16 {
        for x in N / 4 - 16..N / 4 + 16 {
            g[y * N + x] = 100.0; // a hot square off centre
        }
    }
    g
}

fn worker(w: u64, rows: std::ops::Range<usize>, grids: &[RwLock<Vec<f64>>; 2], barrier: &Barrier) {
    for step in 0..STEPS {
        {
            let _wait = waffle::span!("halo_exchange", step);
            barrier.wait();
        }
        let (src, dst) = ((step % 2) as usize, ((step + 1) % 2) as usize);
        let residual = {
            let src = grids[src].read().unwrap();
            let mut band = vec![0.0; rows.len() * N];
            let residual = sweep_band(step, w, rows.start as u64, &src, &mut band);
            drop(src);
            let mut dst = grids[dst].write().unwrap();
            dst[rows.start * N..rows.end * N].copy_from_slice(&band);
            residual
        };
        if step % 50 == 49 {
            waffle::event!("checkpoint", step, worker = w, residual);
        }
        barrier.wait();
    }
}

/// One Jacobi update of a band of rows; returns the band's largest change.
#[waffle::instrument(skip(src, band), fields(rows = (band.len() / N) as u64))]
fn sweep_band(step: u64, worker: u64, first_row: u64, src: &[f64], band: &mut [f64]) -> f64 {
    let mut residual: f64 = 0.0;
    let first = first_row as usize;
    for (r, out) in band.chunks_mut(N).enumerate() {
        let y = first + r;
        for x in 1..N - 1 {
            let c = src[y * N + x];
            let lap = src[(y - 1) * N + x] + src[(y + 1) * N + x] + src[y * N + x - 1] + src[y * N + x + 1]
                - 4.0 * c;
            let v = c + ALPHA * lap;
            residual = residual.max((v - c).abs());
            out[x] = v;
        }
    }
    residual
}
