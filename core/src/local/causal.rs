//! The causal records of a recording stream: links, correlation, entered contexts and
//! detached spans. All but `ASYNC_END` carry no timestamp: they describe the record before them
//! (links, correlation) or change what later records are nested in (enter, exit, detach).

use super::Local;
use crate::{
    clock,
    encode::Writer,
    wire::{tag, zigzag},
};

impl Local {
    /// Writes a record without a timestamp (`tag` then `body`), attached to what precedes it.
    /// `depth_change` is +1, 0 or -1. Returns whether it was written.
    fn timeless(
        &mut self,
        state: u32,
        record_tag: u8,
        depth_change: i8,
        body: &dyn Fn(&mut Writer<'_>),
    ) -> bool {
        if !self.ready(state) {
            return false;
        }
        let mut w = Writer::new(self.staging, self.len);
        w.byte(record_tag);
        body(&mut w);
        let (pos, overflowed) = (w.pos(), w.overflowed());
        match depth_change {
            1 => self.depth += 1,
            -1 => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        if !overflowed {
            self.staged(pos);
            return true;
        }
        // Start a new chunk whose header reflects the state before this record, then retry.
        let depth_after = self.depth;
        self.flush();
        self.chunk_depth = (depth_after as i64 - i64::from(depth_change)) as u64;
        // The head the collector copies staged records with must be the one this chunk will have.
        self.publish_head();
        let mut w = Writer::new(self.staging, 0);
        w.byte(record_tag);
        body(&mut w);
        if w.overflowed() {
            self.chunk_depth = depth_after;
            self.dropped += 1;
            if let Some(slot) = self.slot {
                slot.count_dropped(1);
            }
            self.publish_head();
            return false;
        }
        let pos = w.pos();
        self.staged(pos);
        true
    }

    /// Records that the latest span or event (the source) was caused by `target`.
    #[inline]
    pub fn link(&mut self, state: u32, target: u64) {
        if !self.ready(state) {
            return super::forward::link(target);
        }
        let source = self.next_id.wrapping_sub(1);
        // A link to a sampled-out id is never written: every cause in the file is recorded.
        if target == 0
            || target == source
            || self.sampling.latest_dropped
            || crate::ids::is_sampled_out(target)
        {
            return;
        }
        if target >> 32 == source >> 32 && target < source {
            self.timeless(state, tag::LINK_LOCAL, 0, &|w| w.varint(source - target));
        } else {
            self.timeless(state, tag::LINK_FULL, 0, &|w| w.bytes(&target.to_le_bytes()));
        }
    }

    /// The id of the latest span or event of this stream: what [`Local::link`] and
    /// [`Local::correlate`] attach to (0 before the first).
    #[inline]
    pub fn latest(&self) -> u64 {
        if self.slot.is_none() {
            if let Some(latest) = super::forward::latest() {
                return latest;
            }
        }
        self.next_id.saturating_sub(1)
    }

    /// Records the latest span or event's correlation value (its key is in its callsite).
    /// Inlined up to the write into the staging area: it follows a record of the same session,
    /// so the slot is there; the rest (no slot, the area full) is `timeless`'s.
    #[inline(always)]
    pub fn correlate(&mut self, state: u32, value: u64) {
        if self.sampling.latest_dropped {
            return;
        }
        if self.epoch == state && self.slot.is_some() {
            let mut w = Writer::new(self.staging, self.len);
            w.byte(tag::CORRELATE);
            w.varint(value);
            if !w.overflowed() {
                let pos = w.pos();
                self.staged(pos);
                return;
            }
        } else if !self.ready(state) {
            return super::forward::correlate(value);
        }
        self.timeless(state, tag::CORRELATE, 0, &|w| w.varint(value));
    }

    /// Adopts `span` (from anywhere) as the current parent; returns the id to restore with
    /// [`Local::exit`], or `None` if nothing was recorded.
    pub fn enter(&mut self, state: u32, span: u64) -> Option<u64> {
        // Ready first: a session's first record resets the sampling state.
        if span == 0 {
            return None;
        }
        if !self.ready(state) {
            return super::forward::enter(span);
        }
        if self.enter_dropped(span) {
            return Some(core::mem::replace(&mut self.current, span));
        }
        if !self.timeless(state, tag::ENTER, 1, &|w| w.bytes(&span.to_le_bytes())) {
            return None;
        }
        Some(core::mem::replace(&mut self.current, span))
    }

    /// Ends the innermost [`Local::enter`], making `prev` current again.
    pub fn exit(&mut self, state: u32, prev: u64) {
        let state = if state == 0 { self.epoch } else { state };
        self.current = prev;
        if self.leave_dropped() {
            return;
        }
        if !self.ready(state) {
            return super::forward::exit(prev);
        }
        self.timeless(state, tag::EXIT, -1, &|_| {});
    }

    /// Takes the open span `span` off this stream's stack so that it can end anywhere (see
    /// [`Local::async_end`]); makes `prev` current again.
    pub fn detach(&mut self, state: u32, span: u64, prev: u64) {
        let state = if state == 0 { self.epoch } else { state };
        self.current = prev;
        if self.leave_dropped() {
            return;
        }
        if !self.ready(state) {
            return super::forward::detach(span, prev);
        }
        self.timeless(state, tag::DETACH, -1, &|w| w.bytes(&span.to_le_bytes()));
    }

    /// Ends a detached span, from whichever stream runs this.
    pub fn async_end(&mut self, state: u32, span: u64) {
        if crate::ids::is_sampled_out(span) {
            return;
        }
        if !self.ready(state) {
            return super::forward::async_end(span);
        }
        let ts = clock::now();
        let mut w = Writer::new(self.staging, self.len);
        w.byte(tag::ASYNC_END);
        w.varint(zigzag(ts.wrapping_sub(self.last_ts) as i64));
        w.bytes(&span.to_le_bytes());
        let (pos, overflowed) = (w.pos(), w.overflowed());
        if overflowed {
            self.record_slow(ts, tag::ASYNC_END, 0, &|w: &mut Writer<'_>| w.bytes(&span.to_le_bytes()));
        } else {
            self.commit(pos, ts);
        }
    }
}
