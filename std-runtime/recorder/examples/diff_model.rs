//! A small model's training-like loop, for `waffle-decode diff`: run it twice, the second time
//! with one layer's weights nudged and one kernel made slower, and the diff names both.
//!
//! ```text
//! cargo run --example diff_model -- base.bin
//! cargo run --example diff_model -- new.bin --perturb 2 --slow gelu
//! waffle-decode diff base.bin new.bin --html diff.html
//! ```
//!
//! Each `step` (a span with a `step` field) runs the layers `blk0` .. `blkN` over a vector of
//! 64 values; a layer is four kernels (spans `layernorm`, `matmul`, `gelu`, `residual`) and
//! records three tensors (`blkL/norm`, `blkL/mlp`, `blkL/out`). A `loader` thread prepares the
//! next input inside each step (its `load` spans lie in the step by time, not by nesting).
//!
//! Options: `--steps N` (default 4), `--layers N` (default 4), `--perturb L` (add 1e-3 to one
//! weight of layer L: its `mlp` tensor and everything after it change), `--slow KERNEL` (the
//! kernel sleeps 500 µs more each time; `--slow-us N` sets how long), `--fuse` (`gelu` and `residual` run as one
//! `gelu_residual` kernel), `--tensor-every N` (tensors on every N-th step only, for large
//! traces), `--work N` (repeat each kernel's arithmetic N times).

use std::{sync::mpsc, time::Duration};

const WIDTH: usize = 64;

struct Options {
    steps: u64,
    layers: usize,
    perturb: Option<usize>,
    slow: Option<String>,
    /// How much longer the slowed kernel takes each time, in µs.
    slow_us: u64,
    fuse: bool,
    tensor_every: u64,
    work: usize,
}

/// Records one tensor fingerprint (`waffle::tensor!`: count, XXH3-64, RMS, min, max, NaN and
/// Inf counts; the session has fingerprints on).
fn tensor(name: &str, data: &[f32]) {
    waffle::tensor!(name, data, shape = [1, data.len()]);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (out, o) = options()?;
    let session = waffle_std::Config::new(out).tensors(true).start()?;
    let weights: Vec<Vec<f32>> = (0..o.layers)
        .map(|l| {
            let mut w: Vec<f32> =
                (0..WIDTH * WIDTH).map(|i| ((i * 7 + l * 13) % 17) as f32 / 170.0 - 0.05).collect();
            if o.perturb == Some(l) {
                w[0] += 1e-3;
            }
            w
        })
        .collect();
    let (to_loader, requests) = mpsc::channel::<u64>();
    let (to_main, batches) = mpsc::channel::<Vec<f32>>();
    let loader = std::thread::Builder::new().name("loader".into()).spawn(move || {
        for step in requests {
            // Not `step`: a span with a `step` field is a step marker.
            let _load = waffle::span!("load", batch = step);
            let x: Vec<f32> = (0..WIDTH).map(|i| ((i as u64 + step) % 11) as f32 / 11.0).collect();
            if to_main.send(x).is_err() {
                break;
            }
        }
    })?;
    let slow = |kernel: &str| {
        if o.slow.as_deref() == Some(kernel) {
            std::thread::sleep(Duration::from_micros(o.slow_us));
        }
    };
    for n in 0..o.steps {
        let _step = waffle::step!(n);
        to_loader.send(n)?;
        let mut x = batches.recv()?;
        let record = n % o.tensor_every == 0;
        for (l, w) in weights.iter().enumerate() {
            let h = {
                let _k = waffle::span!("layernorm", layer = l as u64);
                slow("layernorm");
                repeat(o.work, || layernorm(&x))
            };
            let y = {
                let _k = waffle::span!("matmul", layer = l as u64);
                slow("matmul");
                repeat(o.work, || matmul(w, &h))
            };
            if o.fuse {
                let _k = waffle::span!("gelu_residual", layer = l as u64);
                slow("gelu_residual");
                x = repeat(o.work, || x.iter().zip(&y).map(|(a, b)| a + gelu(*b)).collect());
            } else {
                let g: Vec<f32> = {
                    let _k = waffle::span!("gelu", layer = l as u64);
                    slow("gelu");
                    repeat(o.work, || y.iter().map(|&v| gelu(v)).collect())
                };
                let _k = waffle::span!("residual", layer = l as u64);
                slow("residual");
                x = repeat(o.work, || x.iter().zip(&g).map(|(a, b)| a + b).collect());
            }
            if record {
                tensor(&format!("blk{l}/norm"), &h);
                tensor(&format!("blk{l}/mlp"), &y);
                tensor(&format!("blk{l}/out"), &x);
            }
        }
    }
    drop(to_loader);
    loader.join().map_err(|_| "the loader thread panicked")?;
    session.stop()?;
    Ok(())
}

fn repeat<T>(times: usize, mut f: impl FnMut() -> T) -> T {
    for _ in 1..times {
        std::hint::black_box(f());
    }
    f()
}

fn layernorm(x: &[f32]) -> Vec<f32> {
    let mean = x.iter().sum::<f32>() / x.len() as f32;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / x.len() as f32;
    x.iter().map(|v| (v - mean) / (var + 1e-5).sqrt()).collect()
}

fn matmul(w: &[f32], x: &[f32]) -> Vec<f32> {
    w.chunks(WIDTH).map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
}

fn gelu(v: f32) -> f32 {
    0.5 * v * (1.0 + (0.797_884_6 * (v + 0.044_715 * v * v * v)).tanh())
}

fn options() -> Result<(std::path::PathBuf, Options), String> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or("usage: diff_model OUT.bin [--steps N] [--layers N] [--perturb L] [--slow KERNEL] [--slow-us N] [--fuse] [--tensor-every N] [--work N]")?;
    let mut o = Options {
        steps: 4,
        layers: 4,
        perturb: None,
        slow: None,
        slow_us: 500,
        fuse: false,
        tensor_every: 1,
        work: 1,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} takes a value"));
        let number = |v: String| v.parse::<u64>().map_err(|_| format!("{arg}: {v:?} is not a number"));
        match arg.as_str() {
            "--steps" => o.steps = number(value()?)?,
            "--layers" => o.layers = number(value()?)? as usize,
            "--perturb" => o.perturb = Some(number(value()?)? as usize),
            "--slow" => o.slow = Some(value()?),
            "--slow-us" => o.slow_us = number(value()?)?,
            "--fuse" => o.fuse = true,
            "--tensor-every" => o.tensor_every = number(value()?)?.max(1),
            "--work" => o.work = number(value()?)?.max(1) as usize,
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    Ok((out.into(), o))
}
