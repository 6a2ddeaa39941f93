//! A fixed-point low-pass filter on a Cortex-M4F, traced by waffle-metal: QEMU's `mps2-an386`
//! board runs it (`scripts/embedded-demo.sh`).
//!
//! SysTick fires at 1 kHz and plays an analog front end: each tick makes one sample (a square
//! wave with deterministic noise), records it as a `sample` event, and queues the sample with
//! the event's id for the main loop (a `heapless` SPSC queue). The main loop filters each
//! sample in a `filter` span caused by that event, with the FIR itself in a `fir` span and the
//! result as an `output` event, and drains the trace to `trace.bin` on the host through
//! semihosting. After `SAMPLES` samples it finishes the trace and exits QEMU with status 0.
//!
//! Built with `--no-default-features --features compile-out`, every span and event compiles
//! out and waffle-metal is not linked: the baseline for the sizes in `benches/README.md`.

#![no_std]
#![no_main]

mod board;
mod filter;
#[cfg(feature = "trace")]
mod trace;

use core::{
    cell::RefCell,
    sync::atomic::{AtomicU32, Ordering},
};
use cortex_m::interrupt::Mutex;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::debug::{self, EXIT_FAILURE, EXIT_SUCCESS};
use heapless::spsc::{Consumer, Producer, Queue};

/// Samples the run takes before it exits.
const SAMPLES: u32 = 48;
/// SysTick period: 1 kHz of the board's 25 MHz clock.
const TICK_CYCLES: u32 = board::CPU_HZ / 1000;
/// Samples in flight between SysTick and the main loop.
const QUEUE: usize = 16;

/// One sample from the interrupt, and the event that recorded it.
struct Sample {
    seq: u32,
    x: i16,
    cause: waffle::EventId,
}

/// The producer side, handed from `main` to the first SysTick.
static PRODUCER: Mutex<RefCell<Option<Producer<'static, Sample, QUEUE>>>> = Mutex::new(RefCell::new(None));
/// Samples made so far.
static MADE: AtomicU32 = AtomicU32::new(0);
/// Samples lost because the main loop fell behind.
static OVERRUNS: AtomicU32 = AtomicU32::new(0);

#[entry]
fn main() -> ! {
    let mut p = cortex_m::Peripherals::take().unwrap();
    board::start_timer();
    #[cfg(feature = "trace")]
    let mut output = trace::start();

    let queue: &'static mut Queue<Sample, QUEUE> =
        cortex_m::singleton!(: Queue<Sample, QUEUE> = Queue::new()).unwrap();
    let (producer, mut consumer) = queue.split();
    cortex_m::interrupt::free(|cs| *PRODUCER.borrow(cs).borrow_mut() = Some(producer));
    board::start_systick(&mut p.SYST, TICK_CYCLES);

    let mut fir = filter::Fir::new();
    let mut done = 0;
    while done < SAMPLES {
        done += filter_pending(&mut consumer, &mut fir);
        #[cfg(feature = "trace")]
        if done % 16 == 0 {
            trace::drain(&mut output);
        }
        cortex_m::asm::wfi();
    }
    p.SYST.disable_interrupt();
    p.SYST.disable_counter();
    #[cfg(feature = "trace")]
    trace::finish(&mut output);
    let ok = OVERRUNS.load(Ordering::Relaxed) == 0;
    debug::exit(if ok { EXIT_SUCCESS } else { EXIT_FAILURE });
    loop {
        cortex_m::asm::wfi();
    }
}

/// Filters the samples the interrupt queued; returns how many.
fn filter_pending(consumer: &mut Consumer<'static, Sample, QUEUE>, fir: &mut filter::Fir) -> u32 {
    let mut n = 0;
    while let Some(s) = consumer.dequeue() {
        let _filter = waffle::span!("filter", caused_by = s.cause, seq = s.seq);
        let y = {
            let _fir = waffle::span!("fir", taps = filter::TAPS as u32);
            fir.push(s.x)
        };
        waffle::event!("output", seq = s.seq, y = y as i64);
        n += 1;
    }
    n
}

#[exception]
fn SysTick() {
    static mut OUT: Option<Producer<'static, Sample, QUEUE>> = None;
    if OUT.is_none() {
        *OUT = cortex_m::interrupt::free(|cs| PRODUCER.borrow(cs).borrow_mut().take());
    }
    let Some(out) = OUT.as_mut() else { return };
    let seq = MADE.load(Ordering::Relaxed);
    if seq >= SAMPLES {
        return;
    }
    let x = filter::signal(seq);
    let cause = waffle::event!("sample", seq, x = x as i64);
    if out.enqueue(Sample { seq, x, cause }).is_err() {
        OVERRUNS.fetch_add(1, Ordering::Relaxed);
    }
    MADE.store(seq + 1, Ordering::Relaxed);
}

/// A panic prints its message on the host and ends QEMU with a failure status.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    cortex_m::interrupt::disable();
    cortex_m_semihosting::hprintln!("panic: {}", info);
    debug::exit(EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
