//! Which step a span or tensor of a file lies in, decided while the file streams by.
//!
//! A step is a span with a `step` field (`waffle_wire::reserved::STEP`; `waffle::step!`
//! records one named `step`). What lies inside a step on its own thread is known at once: the
//! innermost step open on the thread's stack (the caller keeps that stack). What lies on
//! another thread of the process is in the step whose time range holds it, and the file may
//! hand it over before that step ends, or even before it begins (threads' chunks interleave
//! in the order the collector drained them). Such an item waits, and is placed as soon as it
//! can be told:
//!
//! - a step already ended whose range holds its time takes it;
//! - a step still open that began before it takes it once the step's thread has been seen
//!   past its time (so the step had not ended then);
//! - no step holds it once every thread that has carried steps has been seen past its time
//!   without one that holds it.
//!
//! What waits is bounded: past [`WAITING`] items, the earliest half is placed with what is
//! known (a step ended or open that began before it, else none), and the rest at the end of
//! the file. A file without steps therefore places everything in no step, in batches. So are
//! the ended steps: the latest [`KEPT`] to twice as many (an item older than those, which the
//! file would hand over thousands of steps late, is placed in none).

/// The step of what lies in none.
pub(crate) const NO_STEP: i64 = i64::MIN;

/// How many ended steps are kept to place items by time (between this and twice as many).
pub(crate) const KEPT: usize = 1024;

/// The most items waiting for their step before the earliest half is placed anyway.
pub(crate) const WAITING: usize = 1 << 16;

/// The steps of one file, and what waits to be placed in one.
#[derive(Debug)]
pub(crate) struct Steps<P> {
    /// Ended steps: (begin, end, step), ordered by begin.
    ended: Vec<(u64, u64, i64)>,
    /// Open steps: (thread, begin, step).
    open: Vec<(usize, u64, i64)>,
    /// Per thread, the latest time seen on it.
    seen: Vec<u64>,
    /// Per thread, whether it has carried a step.
    carries: Vec<bool>,
    waiting: Vec<(u64, P)>,
}

impl<P> Default for Steps<P> {
    fn default() -> Self {
        Steps {
            ended: Vec::new(),
            open: Vec::new(),
            seen: Vec::new(),
            carries: Vec::new(),
            waiting: Vec::new(),
        }
    }
}

impl<P: Copy> Steps<P> {
    /// A thread appears.
    pub(crate) fn thread(&mut self, thread: usize) {
        if self.seen.len() <= thread {
            self.seen.resize(thread + 1, 0);
            self.carries.resize(thread + 1, false);
        }
    }

    /// A record of `thread` at `at`.
    #[inline]
    pub(crate) fn progress(&mut self, thread: usize, at: u64) {
        let seen = &mut self.seen[thread];
        *seen = (*seen).max(at);
    }

    /// Step `step` begins on `thread` at `begin`.
    pub(crate) fn open(&mut self, thread: usize, begin: u64, step: i64) {
        self.carries[thread] = true;
        self.open.push((thread, begin, step));
    }

    /// Step `step` of `thread`, begun at `begin`, ends at `end`.
    pub(crate) fn close(&mut self, thread: usize, begin: u64, end: u64, step: i64) {
        if let Some(i) = self.open.iter().rposition(|&(t, b, s)| (t, b, s) == (thread, begin, step)) {
            self.open.remove(i);
        }
        let at = self.ended.partition_point(|&(b, ..)| b <= begin);
        self.ended.insert(at, (begin, end, step));
        if self.ended.len() > 2 * KEPT {
            // The oldest steps are forgotten: an item that old is placed as if none held it.
            self.ended.drain(..KEPT);
        }
    }

    /// `item` at time `at` needs its step; `settle` gets it with its step when known.
    pub(crate) fn place(&mut self, at: u64, item: P, settle: &mut impl FnMut(i64, u64, P)) {
        match self.decide(at, false) {
            Some(step) => settle(step, at, item),
            None => {
                self.waiting.push((at, item));
                if self.waiting.len() >= WAITING {
                    self.retry(settle);
                }
            }
        }
    }

    /// Places what waits and can now be told; if half the bound still waits, the earliest
    /// half with what is known.
    fn retry(&mut self, settle: &mut impl FnMut(i64, u64, P)) {
        let mut waiting = std::mem::take(&mut self.waiting);
        waiting.retain(|&(at, item)| match self.decide(at, false) {
            Some(step) => {
                settle(step, at, item);
                false
            }
            None => true,
        });
        if waiting.len() >= WAITING / 2 {
            waiting.sort_by_key(|&(at, _)| at);
            let rest = waiting.split_off(waiting.len() / 2);
            for (at, item) in waiting {
                let step = self.decide(at, true).unwrap_or(NO_STEP);
                settle(step, at, item);
            }
            waiting = rest;
        }
        self.waiting = waiting;
    }

    /// The file is read: everything still waiting is placed with what is known.
    pub(crate) fn finish(&mut self, settle: &mut impl FnMut(i64, u64, P)) {
        for (at, item) in std::mem::take(&mut self.waiting) {
            let step = self.decide(at, true).unwrap_or(NO_STEP);
            settle(step, at, item);
        }
    }

    /// The step holding time `at`, if it can be told (`forced`: with what is known now).
    fn decide(&self, at: u64, forced: bool) -> Option<i64> {
        // Ended steps that began at or before `at`: the latest-begun that holds it (nested or
        // overlapping steps are rare; a few are looked at).
        let upto = self.ended.partition_point(|&(b, ..)| b <= at);
        if let Some(&(.., step)) = self.ended[..upto].iter().rev().take(8).find(|&&(_, e, _)| e >= at) {
            return Some(step);
        }
        let open = self.open.iter().filter(|&&(_, b, _)| b <= at).max_by_key(|&&(_, b, _)| b);
        if let Some(&(thread, _, step)) = open {
            if forced || self.seen[thread] >= at {
                return Some(step);
            }
        }
        let carriers = self.carries.iter().zip(&self.seen).filter(|(c, _)| **c);
        let mut past = true;
        let mut any = false;
        for (_, &seen) in carriers {
            any = true;
            past &= seen >= at;
        }
        (forced || (any && past && open.is_none())).then_some(NO_STEP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(steps: &mut Steps<u32>, at: u64, item: u32, out: &mut Vec<(u32, i64)>) {
        steps.place(at, item, &mut |step, _, item| out.push((item, step)));
    }

    #[test]
    fn an_item_waits_for_the_step_that_holds_it() {
        let mut s = Steps::default();
        let mut out = Vec::new();
        (0..2).for_each(|t| s.thread(t));
        // Thread 1's item at 150 comes before thread 0 has shown step 7 (100..200).
        s.progress(1, 150);
        placed(&mut s, 150, 1, &mut out);
        assert!(out.is_empty());
        s.open(0, 100, 7);
        s.progress(0, 120);
        placed(&mut s, 110, 2, &mut out); // open, and its thread seen past 110
        assert_eq!(out, [(2, 7)]);
        s.close(0, 100, 200, 7);
        placed(&mut s, 190, 3, &mut out); // ended step holds it
        s.progress(0, 300);
        placed(&mut s, 250, 4, &mut out); // the step thread is past 250 with no step open
        assert_eq!(out, [(2, 7), (3, 7), (4, NO_STEP)]);
        s.finish(&mut |step, _, item| out.push((item, step)));
        assert_eq!(out[3], (1, 7));
    }

    #[test]
    fn without_steps_what_waits_is_bounded() {
        let mut s = Steps::default();
        s.thread(0);
        let mut n = 0usize;
        for i in 0..(3 * WAITING) as u64 {
            s.progress(0, i);
            s.place(i, (), &mut |step, _, ()| {
                assert_eq!(step, NO_STEP);
                n += 1;
            });
            assert!(s.waiting.len() < WAITING);
        }
        s.finish(&mut |_, _, ()| n += 1);
        assert_eq!(n, 3 * WAITING);
    }
}
