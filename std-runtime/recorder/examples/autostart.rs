//! A program that never starts a session: run with `WAFFLE_OUTPUT` set, it records anyway.
//!
//! ```sh
//! WAFFLE_OUTPUT=trace-%p.bin cargo run -p waffle-std --example autostart
//! waffle-decode trace-*.bin -o trace.pftrace
//! ```
//!
//! It prints the trace id its spans record under (null without `WAFFLE_OUTPUT`).

// The program records through `waffle`'s macros only. Naming the runtime once links it, and
// with it the start-up hook that reads `WAFFLE_OUTPUT` (rustc links no crate a program does not
// name); nothing else here refers to `waffle_std`.
use waffle_std as _;

fn main() {
    let _main = waffle::span!("main");
    let ready: waffle::EventId = waffle::event!("input ready", items = 2u64);
    std::thread::scope(|s| {
        for worker in 0..2u64 {
            s.spawn(move || {
                let _w = waffle::span!("worker", worker = worker, caused_by = [ready]);
                step(worker);
            });
        }
    });
    println!("trace {}", waffle::Context::current().trace_id());
}

#[waffle::instrument]
fn step(worker: u64) {
    std::hint::black_box(worker);
}
