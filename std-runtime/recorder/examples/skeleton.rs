//! Four threads, a thousand instrumented steps each: the smallest whole waffle program.
//!
//! `cargo run --example skeleton -- trace.bin && waffle-decode trace.bin -o trace.pftrace`

fn main() -> Result<(), waffle_std::Error> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "trace.bin".into());
    let _session = waffle_std::start(&path)?; // collector thread + file; flushes and closes on drop
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                for i in 0..1000 {
                    step(t * 1000 + i, 0.01)
                }
            });
        }
    });
    Ok(())
}

#[waffle::instrument] // a span named "step" with fields i and dt
fn step(i: u64, dt: f64) {
    let _s = waffle::span!("stencil", cells = 4096u64);
    let _id: waffle::EventId = waffle::event!("converged", residual = 1e-9, ok = true);
    std::hint::black_box((i, dt));
}
