//! The firmware's trace: two streams (the main loop and SysTick), timer 0 as the clock, and
//! `trace.bin` on the host through semihosting.

use waffle_metal::{cortex_m::exception_number, Config, Extend32, SemihostingFile, Trace};

/// The main loop and SysTick, each with a 2 KiB queue and 256 B of staging.
static TRACE: Trace<2, 2048, 256> = Trace::new();

static CLOCK: Extend32 = Extend32::new();

fn clock() -> u64 {
    CLOCK.extend(crate::board::timer_ticks)
}

/// Thread mode is the main loop (0), SysTick (exception 15) is stream 1; nothing else records.
fn stream_of() -> usize {
    match exception_number() {
        0 => 0,
        15 => 1,
        _ => 2,
    }
}

/// Starts recording and opens `trace.bin` on the host.
pub fn start() -> SemihostingFile {
    let mut config =
        Config::new("filter-demo", &["main", "SysTick"], stream_of, clock, crate::board::CPU_HZ as u64);
    config.host = "qemu-mps2-an386";
    TRACE.start(config).unwrap();
    SemihostingFile::create("trace.bin\0").unwrap()
}

/// Writes what the queues hold.
pub fn drain(output: &mut SemihostingFile) {
    TRACE.drain(output).unwrap();
}

/// Ends the trace.
pub fn finish(output: &mut SemihostingFile) {
    TRACE.finish(output).unwrap();
}
