//! A minimal tracer written by hand: what any span must cost at least (the raw baseline).

use std::cell::Cell;

/// Same size as waffle's default staging area.
const BUF: usize = 16 << 10;
/// Tag, callsite id (u32 varint) and timestamp delta (u64 varint).
const MAX_RECORD: usize = 1 + 5 + 10;
const TAG_BEGIN: u8 = 1;
const TAG_END: u8 = 2;

struct Buf {
    bytes: [Cell<u8>; BUF],
    len: Cell<usize>,
    last_ts: Cell<u64>,
}

std::thread_local! {
    // Const-initialised and without `Drop`, so an access is just the TLS address.
    static RAW: Buf = const {
        Buf { bytes: [const { Cell::new(0) }; BUF], len: Cell::new(0), last_ts: Cell::new(0) }
    };
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unused_unsafe)] // `_rdtsc` is a safe function in newer `core::arch`
pub fn now() -> u64 {
    // SAFETY: `rdtsc` exists on every x86_64 processor and has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Elsewhere, the counter waffle reads (the budget is set for x86_64).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn now() -> u64 {
    waffle::clock::now()
}

#[inline(always)]
fn varint(out: &[Cell<u8>; MAX_RECORD], mut n: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        out[n].set(v as u8 | 0x80);
        v >>= 7;
        n += 1;
    }
    out[n].set(v as u8);
    n + 1
}

/// Writes one record; the buffer wraps instead of growing, standing in for a drain.
#[inline(always)]
fn record(tag: u8, callsite: Option<u32>, ts: u64) {
    // Only the address comes out of `with`: with the encoding inside its closure, LLVM
    // keeps `LocalKey::with` out of line, a call no real tracer would pay.
    let b: *const Buf = RAW.with(|b| b as *const Buf);
    // SAFETY: `b` is this thread's own `RAW`, which lives as long as the thread (it has no
    // destructor), and the reference ends before this function returns, on this thread.
    let b = unsafe { &*b };
    let mut pos = b.len.get();
    if pos > BUF - MAX_RECORD {
        pos = 0;
    }
    let out: &[Cell<u8>; MAX_RECORD] =
        b.bytes[pos..pos + MAX_RECORD].try_into().expect("window has MAX_RECORD bytes");
    out[0].set(tag);
    let mut n = 1;
    if let Some(id) = callsite {
        n = varint(out, n, u64::from(id));
    }
    let delta = ts.wrapping_sub(b.last_ts.get()) as i64;
    n = varint(out, n, ((delta << 1) ^ (delta >> 63)) as u64);
    b.len.set(pos + n);
    b.last_ts.set(ts);
}

/// An open hand-written span; ends on drop.
pub struct Span(());

impl Span {
    #[inline(always)]
    pub fn begin(callsite: u32) -> Span {
        record(TAG_BEGIN, Some(callsite), now());
        Span(())
    }
}

impl Drop for Span {
    #[inline(always)]
    fn drop(&mut self) {
        record(TAG_END, None, now());
    }
}

/// Bytes written so far in this thread's buffer (to keep the stores observable).
pub fn len() -> usize {
    RAW.with(|b| b.len.get())
}
