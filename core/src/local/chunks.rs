//! A recording stream's slot and chunks: taking a slot of the current session, starting a
//! chunk and publishing its head for the collector's snapshots, pushing a chunk to the queue,
//! and giving the slot back. Everything here runs once per chunk or per session, off the
//! per-record path.

use super::*;

impl Local {
    #[cold]
    #[inline(never)]
    pub(super) fn activate(&mut self, state: u32) -> bool {
        if self.busy || state == 0 {
            return false;
        }
        if self.epoch == state {
            return self.slot.is_some(); // acquiring failed earlier in this session
        }
        self.release();
        self.epoch = state;
        if runtime::forward().is_some() {
            return false; // a joined session: records go to the copy of waffle that runs it
        }
        let Some(hooks) = runtime::hooks() else { return false };
        self.busy = true;
        let slot = (hooks.acquire)();
        self.busy = false;
        let Some(slot) = slot else { return false };
        // SAFETY: `acquire` hands out slots already claimed for this stream, and this
        // stream gives the reference up in `detach` before it unclaims the slot.
        self.staging = unsafe { slot.staging() };
        self.fill = slot.fill_word();
        self.slot = Some(slot);
        self.generation = slot.generation();
        self.len = 0;
        self.records = 0;
        self.dropped = 0;
        self.depth = 0;
        self.current = 0;
        self.sampling = sample::State::start();
        self.next_id = slot.next_id();
        self.flush_ticks = FLUSH_TICKS.load(core::sync::atomic::Ordering::Relaxed) as u64;
        self.last_ts = clock::now();
        self.start_chunk();
        true
    }

    /// Pushes what is staged and gives the slot back to the runtime.
    pub fn release(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        self.flush_to(slot);
        self.staging = no_staging();
        self.fill = &NO_FILL;
        slot.unclaim(self.next_id);
        if let Some(hooks) = runtime::hooks() {
            (hooks.release)(slot);
        }
    }

    pub(super) fn start_chunk(&mut self) {
        self.len = 0;
        self.records = 0;
        self.chunk_ts = self.last_ts;
        self.chunk_id = self.next_id;
        self.chunk_depth = self.depth;
        self.publish_head();
    }

    /// Publishes the staged chunk's head for the collector's snapshots (once per chunk).
    pub(super) fn publish_head(&self) {
        if let Some(slot) = self.slot {
            slot.chunk_started(&ChunkHead {
                generation: self.generation,
                base_ts: self.chunk_ts,
                first_id: self.chunk_id,
                depth: self.chunk_depth,
                dropped: self.dropped,
                records: 0,
            });
        }
    }

    /// Pushes the staged records as one chunk now (if any).
    pub fn flush(&mut self) {
        match self.slot {
            Some(slot) => self.flush_to(slot),
            None => forward::flush(),
        }
    }

    pub(super) fn flush_to(&mut self, slot: &StreamSlot) {
        if self.records == 0 || runtime::is_closed(self.epoch) {
            // Nothing staged, or the records of a session that is over: its last pass copied
            // them into its file, and pushed now they would reach the next session's too.
            self.start_chunk();
            return;
        }
        let head = ChunkHead {
            generation: self.generation,
            base_ts: self.chunk_ts,
            first_id: self.chunk_id,
            depth: self.chunk_depth,
            dropped: self.dropped,
            records: self.records,
        };
        let mut prefix = [0u8; MAX_CHUNK_PREFIX_LEN];
        let prefix = head.encode(self.len, &mut prefix);
        // Before the push: a snapshot that raced with it is then seen as torn.
        slot.chunk_changing();
        if slot.push(prefix, &self.staging[..self.len]) {
            self.dropped = 0;
        } else {
            slot.count_dropped(self.records);
            self.dropped += self.records;
        }
        self.start_chunk();
    }
}
