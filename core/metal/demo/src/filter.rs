//! The signal and the filter: an 8-tap low-pass FIR in Q15 fixed point, the kind of work a
//! microcontroller does between interrupts. `scripts/embedded-check.py` computes the same
//! numbers to check the trace's field values.

/// Taps of the filter.
pub const TAPS: usize = 8;

/// Q15 coefficients of a symmetric low-pass; they sum to 1.0 (32 768).
const COEFFS: [i32; TAPS] = [1024, 2048, 4096, 9216, 9216, 4096, 2048, 1024];

/// The input's sample `seq`: a square wave of amplitude 8 000 and period 16, plus noise in
/// -512..512 from a multiplicative hash of `seq` (deterministic, so the trace can be checked).
pub fn signal(seq: u32) -> i16 {
    let square = if (seq / 8).is_multiple_of(2) { 8000 } else { -8000 };
    let noise = (seq.wrapping_mul(2_654_435_761) >> 22) as i16 - 512;
    square + noise
}

/// The filter's state: the last `TAPS` inputs.
pub struct Fir {
    history: [i16; TAPS],
    next: usize,
}

impl Fir {
    /// A filter that has seen only zeros.
    pub const fn new() -> Fir {
        Fir { history: [0; TAPS], next: 0 }
    }

    /// Takes one input and returns one output: `sum(c[k] * x[n - k])`, rounded, in Q15.
    pub fn push(&mut self, x: i16) -> i16 {
        self.history[self.next] = x;
        let mut acc: i32 = 0;
        for (k, c) in COEFFS.iter().enumerate() {
            let i = (self.next + TAPS - k) % TAPS;
            acc += c * i32::from(self.history[i]);
        }
        self.next = (self.next + 1) % TAPS;
        ((acc + (1 << 14)) >> 15).clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
    }
}
