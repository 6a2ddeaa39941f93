//! The Cortex-M pieces: which stream the running code records into, the cycle counter as a clock,
//! and masking interrupts. Only on bare-metal ARM targets.

use crate::clock::Extend32;
use cortex_m::peripheral::{DCB, DWT};

/// The running exception's number from the IPSR register: 0 in thread mode (the main loop),
/// 15 in SysTick, 16 + n in external interrupt n. A `Config::stream_of` maps it to a stream,
/// one per priority level:
///
/// ```ignore
/// fn stream_of() -> usize {
///     match waffle_metal::cortex_m::exception_number() {
///         0 => 0,  // main loop
///         15 => 1, // SysTick
///         _ => 2,  // every other exception: one more stream, or one past the last to record nothing
///     }
/// }
/// ```
#[inline(always)]
pub fn exception_number() -> usize {
    let ipsr: u32;
    // SAFETY: reading IPSR is allowed at every privilege level and touches no memory.
    unsafe { core::arch::asm!("mrs {}, IPSR", out(reg) ipsr, options(nomem, nostack, preserves_flags)) };
    (ipsr & 0x1ff) as usize
}

static CYCLES: Extend32 = Extend32::new();

/// Turns the cycle counter (DWT `CYCCNT`) on, for [`cycles`]. Cortex-M3 and up; some parts
/// (and QEMU) do not implement it, and then it reads 0: check [`cycles`] moves.
pub fn enable_cycle_counter(dcb: &mut DCB, dwt: &mut DWT) {
    dcb.enable_trace();
    DWT::unlock();
    dwt.enable_cycle_counter();
}

/// The cycle counter extended to 64 bits: a `Config::clock` whose `ticks_per_second` is the
/// core clock frequency.
#[inline]
pub fn cycles() -> u64 {
    CYCLES.extend(DWT::cycle_count)
}

/// Runs `f` with interrupts masked.
#[inline(always)]
pub(crate) fn masked<R>(f: impl FnOnce() -> R) -> R {
    cortex_m::interrupt::free(|_| f())
}
