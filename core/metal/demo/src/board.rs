//! The board: QEMU's `mps2-an386` (Cortex-M4F at 25 MHz) with its CMSDK APB timer 0, and
//! SysTick.

use cortex_m::peripheral::{syst::SystClkSource, SYST};

/// The core and peripheral clock of the MPS2 boards.
pub const CPU_HZ: u32 = 25_000_000;

/// CMSDK APB timer 0: control, current value (counting down), reload.
const TIMER0_CTRL: *mut u32 = 0x4000_0000 as *mut u32;
#[cfg_attr(not(feature = "trace"), allow(dead_code))] // the clock of the trace only
const TIMER0_VALUE: *const u32 = 0x4000_0004 as *const u32;
const TIMER0_RELOAD: *mut u32 = 0x4000_0008 as *mut u32;

/// Starts timer 0 free-running over the whole 32-bit range at `CPU_HZ`.
pub fn start_timer() {
    // SAFETY: the timer's registers on this board; nothing else uses timer 0.
    unsafe {
        TIMER0_RELOAD.write_volatile(u32::MAX);
        TIMER0_CTRL.write_volatile(1);
    }
}

/// Timer 0 as an up-counter of `CPU_HZ` ticks (it counts down from `u32::MAX` and reloads).
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
#[inline(always)]
pub fn timer_ticks() -> u32 {
    // SAFETY: a read of the timer's value register.
    !unsafe { TIMER0_VALUE.read_volatile() }
}

/// SysTick every `cycles` processor cycles, with its interrupt.
#[allow(dead_code)] // not by every binary that shares this file
pub fn start_systick(syst: &mut SYST, cycles: u32) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(cycles - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}
