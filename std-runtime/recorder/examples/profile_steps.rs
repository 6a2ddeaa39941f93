//! A training loop's steps, as TensorBoard's profile plugin shows them from an XSpace export.
//!
//! ```text
//! cargo run --example profile_steps -- out/
//! waffle-decode out/loop.bin --step-span iteration -o out/loop.xplane.pb
//! waffle-decode out/batches.bin -o logdir/              # logdir/plugins/profile/<run>/<host>.xplane.pb
//! ```
//!
//! - `loop.bin`: five `iteration` spans, each with a `compute` span (about 3 ms) inside and a
//!   `checkpoint` event; `iteration` is a step only when the export is told so
//!   (`--step-span iteration`).
//! - `batches.bin`: four `batch` spans carrying a `step` field (numbered from 10), each with
//!   a `forward` span (about 2 ms) inside, and a `loader` thread's `prefetch` spans beside
//!   them: a span with a `step` field is a step whatever its name.

use std::{path::PathBuf, thread::sleep, time::Duration};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args_os().nth(1).unwrap_or_else(|| ".".into()));
    std::fs::create_dir_all(&dir)?;

    let session = waffle_std::Config::new(dir.join("loop.bin")).start()?;
    for i in 0..5u64 {
        let _iteration = waffle::span!("iteration", i);
        {
            let _compute = waffle::span!("compute", i);
            sleep(Duration::from_millis(3));
        }
        waffle::event!("checkpoint", i);
    }
    session.stop()?;

    let session = waffle_std::Config::new(dir.join("batches.bin")).start()?;
    let loader = std::thread::Builder::new().name("loader".into()).spawn(|| {
        for k in 0..4u64 {
            let _prefetch = waffle::span!("prefetch", k);
            sleep(Duration::from_millis(1));
        }
    })?;
    for step in 10..14u64 {
        let _batch = waffle::span!("batch", step);
        let _forward = waffle::span!("forward", rows = 64u64);
        sleep(Duration::from_millis(2));
    }
    loader.join().expect("loader thread");
    session.stop()?;
    Ok(())
}
