//! Head sampling: keeping a fraction of the roots of a run, each with everything it encloses.
//!
//! A *root* is a span begun, or an event recorded, while its recording stream has no open
//! span and no entered context. With sampling on ([`set_sample_rate`]), each root is kept or
//! dropped when it starts, and everything recorded inside a dropped root span (child spans,
//! events, links, correlation values, its end, what a detached span of it does on other
//! threads) is dropped with it, by a per-stream count of open dropped spans and entered
//! dropped contexts. Spans and events that are not roots are never decided: they follow their
//! root. So a root is kept or dropped whole.
//!
//! The decision is, in this order:
//! 1. inside a dropped root, or an entered sampled-out context: dropped;
//! 2. a root that names causes (`caused_by`, from `span!`/`event!`/`#[instrument]`): kept if
//!    one of its causes was kept, dropped if every one was dropped;
//! 3. otherwise a hash of the session seed, the stream's index and owner generation, and the
//!    stream's count of roots so far, compared with `rate * 2^32`: the n-th root of the same
//!    stream index in two processes sharing a seed (the recorder derives it from the trace
//!    id) is decided alike.
//!
//! A dropped span or event takes no id from its stream (the file's ids stay consecutive and
//! the format is unchanged): it gets a *sampled-out* id, non-null with its lower 32 bits zero,
//! which no recorded id has (a stream's counter starts at 1). [`crate::ids::is_sampled_out`]
//! recognises one; a link to one is never written, so every cause a recorded span or event
//! names is recorded too; a [`Context`](crate::Context) holding one writes `traceparent` with
//! the sampled flag clear, and entering it drops what is recorded inside.
//!
//! What a program that does not sample pays: each span begin and event compares its stream's
//! depth with a per-stream word (`State::watch`, 0 then), each span end tests one count. A
//! stream reads whether sampling is on once per session, at its first record.

use super::Local;
use crate::{
    ids::{is_sampled_out, sampled_out},
    wire::tag,
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Whether roots are decided at all (off: every root is kept).
static ON: AtomicBool = AtomicBool::new(false);
/// A root is kept if its hash's upper 32 bits are below this.
static THRESHOLD: AtomicU32 = AtomicU32::new(u32::MAX);
/// Mixed into every decision's key; the same in processes that should decide alike.
static SEED: AtomicU32 = AtomicU32::new(0);

/// What the causes a root names say about it, set just before its record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hint {
    /// No cause named (or none that is non-null): the hash decides.
    None,
    /// One cause was recorded.
    Keep,
    /// Every cause was sampled out.
    Drop,
}

/// Keeps a fraction `rate` of roots from now on (1 or more, or NaN: all of them, and sampling
/// is off; 0 or less: none), with `seed` mixed into each decision. Threads read it at each
/// root, so it is meant to be set before a session's first record (the recorder does).
pub fn set_sample_rate(rate: f64, seed: u32) {
    let on = rate < 1.0; // false for NaN
                         // `as` saturates: a negative rate keeps nothing.
    let threshold = if on { (rate * 4_294_967_296.0) as u32 } else { u32::MAX };
    SEED.store(seed, Ordering::Relaxed);
    THRESHOLD.store(threshold, Ordering::Relaxed);
    ON.store(on, Ordering::Release);
}

/// The threshold roots are compared with, `rate * 2^32`, or `None` while sampling is off.
pub fn sample_threshold() -> Option<u32> {
    ON.load(Ordering::Acquire).then(|| THRESHOLD.load(Ordering::Relaxed))
}

/// Whether roots are being decided (read by every root's record).
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// SplitMix64's finaliser: every input bit moves every output bit.
const fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Whether the `n`-th root (from 0) of stream `stream`'s owner `owner` (the slot's owner
/// generation: a thread that takes over a slot another left does not repeat its decisions) is
/// kept under `seed` and `threshold`.
pub const fn keeps_root(seed: u32, stream: u32, owner: u32, n: u64, threshold: u32) -> bool {
    let key = (seed as u64) << 32 | ((owner & 0xF_FFFF) as u64) << 12 | (stream & 0xFFF) as u64;
    ((mix(mix(key) ^ n) >> 32) as u32) < threshold
}

/// A recording stream's sampling state (a session's start resets it).
pub(crate) struct State {
    /// The hot path's one test: a record whose stream's depth (open spans and entered
    /// contexts) is below this is decided here. 0 while sampling is off and nothing dropped
    /// is open (never below), 1 while it is on (roots, at depth 0), `u64::MAX` inside a
    /// dropped root (everything).
    pub(super) watch: u64,
    /// Whether sampling was on when the session's first record of this stream was made.
    on: bool,
    /// Dropped spans open and dropped contexts entered: while non-zero, nothing is written.
    pub(super) suppressed: u64,
    /// Whether the latest span or event was dropped.
    pub(super) latest_dropped: bool,
    /// What the causes of the record being made say about keeping it.
    hint: Hint,
    /// Roots decided by hash in this session.
    roots: u64,
}

impl State {
    /// Nothing open, nothing decided, sampling off.
    pub(crate) const EMPTY: State =
        State { watch: 0, on: false, suppressed: 0, latest_dropped: false, hint: Hint::None, roots: 0 };

    /// The state a stream starts a session with: sampling as it is set now.
    pub(super) fn start() -> State {
        let on = on();
        State { watch: u64::from(on), on, ..State::EMPTY }
    }

    fn open_dropped(&mut self) {
        self.suppressed += 1;
        self.watch = u64::MAX;
    }
}

impl Local {
    /// Decides a record below [`State::watch`]: a root while sampling is on, or anything
    /// inside a dropped root. `None` to record it, `Some(id)` if it is dropped, with the
    /// sampled-out id to hand back (nothing is written, no id is taken; a dropped span begin
    /// opens a dropped span). The stream is ready (it has its slot for this session).
    #[cold]
    #[inline(never)]
    pub(super) fn sample(&mut self, record_tag: u8) -> Option<u64> {
        let hint = core::mem::replace(&mut self.sampling.hint, Hint::None);
        if self.sampling.suppressed == 0 {
            let keep = match hint {
                Hint::Keep => true,
                Hint::Drop => false,
                Hint::None => {
                    let n = self.sampling.roots;
                    self.sampling.roots += 1;
                    let stream = (self.next_id >> 32) as u32;
                    let (seed, threshold) = (SEED.load(Ordering::Relaxed), THRESHOLD.load(Ordering::Relaxed));
                    keeps_root(seed, stream, self.generation, n, threshold)
                }
            };
            if keep {
                self.sampling.latest_dropped = false;
                return None;
            }
        }
        self.sampling.latest_dropped = true;
        if record_tag == tag::SPAN_BEGIN {
            self.sampling.open_dropped();
        }
        Some(sampled_out(self.next_id))
    }

    /// Sets what the causes of the record about to be made say, if it will be a root decided
    /// by sampling: `any` if a non-null cause was named, `kept` if one was not sampled out.
    pub fn follow_causes(&mut self, state: u32, any: bool, kept: bool) {
        // Ready first: a session's first record resets the state.
        if !self.ready(state) {
            return super::forward::follow(any, kept);
        }
        if self.depth == 0 && self.sampling.suppressed == 0 {
            self.sampling.hint = match (any, kept) {
                (_, true) => Hint::Keep,
                (true, false) => Hint::Drop,
                (false, false) => Hint::None,
            };
        }
    }

    /// Called where a span ends, is detached, or a context is exited: if the innermost open
    /// item is a dropped one, closes it and returns `true` (nothing is to be written).
    #[inline(always)]
    pub(super) fn leave_dropped(&mut self) -> bool {
        if self.sampling.suppressed != 0 {
            self.sampling.suppressed -= 1;
            if self.sampling.suppressed == 0 {
                self.sampling.watch = u64::from(self.sampling.on);
            }
            return true;
        }
        false
    }

    /// Called where a context is entered (the stream ready): if `span` is sampled out, or
    /// this stream is inside a dropped root, opens a dropped region and returns `true`
    /// (nothing is to be written).
    pub(super) fn enter_dropped(&mut self, span: u64) -> bool {
        if is_sampled_out(span) || self.sampling.suppressed != 0 {
            self.sampling.open_dropped();
            return true;
        }
        self.sampling.latest_dropped = false;
        false
    }

    /// Whether the latest span or event of this stream was dropped by sampling (links and
    /// correlation values made for it are then dropped too).
    #[inline(always)]
    pub fn latest_dropped(&self) -> bool {
        self.sampling.latest_dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed seed: the kept fraction lies within five standard deviations of the rate.
    #[test]
    fn roots_are_kept_in_proportion_to_the_rate() {
        for (rate, stream) in [(0.1, 0), (0.25, 1), (0.5, 7), (0.01, 4095)] {
            let threshold = (rate * 4_294_967_296.0) as u32;
            let n = 100_000u64;
            let kept = (0..n).filter(|&i| keeps_root(0x5eed, stream, 1, i, threshold)).count() as f64;
            let (mean, sd) = (n as f64 * rate, (n as f64 * rate * (1.0 - rate)).sqrt());
            assert!((kept - mean).abs() < 5.0 * sd, "rate {rate}: kept {kept} of {n}");
        }
        assert!((0..1000).all(|i| !keeps_root(1, 0, 1, i, 0)));
    }

    #[test]
    fn the_same_seed_decides_alike_and_another_differently() {
        let t = 1 << 30;
        let a: u64 = (0..64).fold(0, |acc, i| acc << 1 | keeps_root(9, 2, 1, i, t) as u64);
        let b: u64 = (0..64).fold(0, |acc, i| acc << 1 | keeps_root(9, 2, 1, i, t) as u64);
        let c: u64 = (0..64).fold(0, |acc, i| acc << 1 | keeps_root(10, 2, 1, i, t) as u64);
        let d: u64 = (0..64).fold(0, |acc, i| acc << 1 | keeps_root(9, 2, 2, i, t) as u64);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d, "the next owner of a slot decides afresh");
    }
}
