//! What a span costs on a Cortex-M4F, in instructions of QEMU's `-icount` mode, against a
//! minimal span written by hand in the same firmware: two clock reads and two varint records
//! into a buffer (the baseline DESIGN.md measures on hosts). Both read the same clock (the
//! board's timer made 64-bit), so the ratio is what waffle adds around the clock.
//!
//! Run by `scripts/embedded-bench.sh`, which gives QEMU `-icount shift=0` (one instruction per
//! virtual nanosecond, so a tick of the 25 MHz timer is 40 instructions) and prints the figures
//! this firmware reports through semihosting.

#![no_std]
#![no_main]

#[path = "../board.rs"]
mod board;

use core::hint::black_box;
use cortex_m_rt::entry;
use cortex_m_semihosting::{
    debug::{self, EXIT_FAILURE, EXIT_SUCCESS},
    hprintln,
};
use waffle_metal::{Config, Extend32, Trace};

/// Spans per batch; the trace is drained between batches, outside the timed part.
const BATCH: u32 = 32;
/// Batches measured.
const BATCHES: u32 = 128;

static TRACE: Trace<1, 4096, 256> = Trace::new();
static CLOCK: Extend32 = Extend32::new();

fn clock() -> u64 {
    CLOCK.extend(board::timer_ticks)
}

/// The hand-written span's buffer: records as waffle writes them, tag, callsite, delta.
struct Raw {
    buf: [u8; 512],
    len: usize,
    last: u64,
}

impl Raw {
    #[inline(always)]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf[self.len] = v as u8 | 0x80;
            self.len += 1;
            v >>= 7;
        }
        self.buf[self.len] = v as u8;
        self.len += 1;
    }

    #[inline(always)]
    fn record(&mut self, tag: u8, callsite: Option<u8>) {
        let t = clock();
        if self.len + 24 > self.buf.len() {
            self.len = 0;
        }
        self.buf[self.len] = tag;
        self.len += 1;
        if let Some(c) = callsite {
            self.buf[self.len] = c;
            self.len += 1;
        }
        let delta = t.wrapping_sub(self.last) as i64;
        self.varint(((delta << 1) ^ (delta >> 63)) as u64);
        self.last = t;
    }
}

#[inline(never)]
fn raw_span(raw: &mut Raw) {
    raw.record(1, Some(0));
    black_box(&mut *raw);
    raw.record(2, None);
}

#[inline(never)]
fn waffle_span() {
    let s = waffle::span!("bench");
    black_box(&s);
}

#[inline(never)]
fn empty(raw: &mut Raw) {
    black_box(raw);
}

/// Timer ticks spent in `BATCHES` batches of `BATCH` calls of `f`, with `between` run
/// untimed after each batch.
fn measure(mut f: impl FnMut(), mut between: impl FnMut()) -> u64 {
    let mut total = 0;
    for _ in 0..BATCHES {
        let t0 = clock();
        for _ in 0..BATCH {
            f();
        }
        total += clock() - t0;
        between();
    }
    total
}

#[entry]
fn main() -> ! {
    board::start_timer();
    let config = Config::new("span-cost", &["main"], || 0, clock, board::CPU_HZ as u64);
    if TRACE.start(config).is_err() {
        debug::exit(EXIT_FAILURE);
    }
    let bytes = core::cell::Cell::new(0usize);
    let mut count = |b: &[u8]| bytes.set(bytes.get() + b.len());
    waffle_span(); // the callsite's id is computed once, on its first record
    TRACE.drain(&mut count).ok(); // file head, HEADER, CALLSITES: not per span
    let head = bytes.get();

    let mut raw = Raw { buf: [0; 512], len: 0, last: 0 };
    let loop_only = measure(|| empty(&mut raw), || {});
    let hand = measure(|| raw_span(&mut raw), || {});
    let spans = measure(waffle_span, || {
        waffle::flush();
        TRACE.drain(&mut count).ok();
    });
    TRACE.finish(&mut count).ok();
    let n = u64::from(BATCH * BATCHES);
    hprintln!("spans {} loop_ticks {} hand_ticks {} waffle_ticks {}", n, loop_only, hand, spans);
    hprintln!("trace_bytes {} head_bytes {} dropped {}", bytes.get(), head, TRACE.dropped(0));
    debug::exit(EXIT_SUCCESS);
    loop {
        cortex_m::asm::wfi();
    }
}

/// A panic ends QEMU with a failure status.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
