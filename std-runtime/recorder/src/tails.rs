//! Records a blocked thread staged and never pushed, copied by the collector into TAIL frames.
//!
//! A thread's records wait in its staging area until it records again (the time-bounded flush)
//! or exits. A thread that blocks right after beginning a span (in `MPI_Recv`, on a lock, in a
//! sleep) does neither, so without help that span would reach the file only when the thread
//! wakes, or never if the process is killed. Each record publishes how far the area is filled
//! and each chunk its head (`waffle::queue::StreamSlot::mark` and `snapshot`); the collector
//! compares the fill from one pass to the next and, for a slot whose fill has not moved since
//! its previous pass and holds records not yet copied, copies them and writes a TAIL frame.
//! So a blocked thread's last records are in the file within about two drain intervals.
//!
//! Order within a pass: [`Tails::take`] runs before the queues are drained and
//! [`Tails::write`] after the DATA frames are written, keeping a copy only if the chunk's
//! sequence has not moved since. The owner moves it before it pushes the chunk, so a kept copy's
//! chunk was not in what the pass drained: in the file, every TAIL comes after the chunks pushed
//! before it and before the chunk that later holds its records, which supersedes it (the
//! decoder's rule, `docs/wire-format.md`). A thread that keeps recording is left alone: its fill
//! moves every pass, and its own flush pushes its records within a flush interval.
//!
//! A thread that recorded in an earlier session and has not recorded since still owns its
//! slot, its staging area holding that session's last records, which its last pass copied
//! into its own file (and which the thread never pushes: `waffle::runtime::closed`). Such
//! owners, known by their generation when the session starts ([`Tails::after`]), are left
//! alone until they record again and so take their slot anew.

use crate::frames::FrameWriter;
use std::{collections::HashMap, io};
use waffle::queue::{Mark, Snapshot, StreamSlot};

/// What the collector remembers of each slot between passes.
pub(crate) struct Tails {
    /// Owners of an earlier session, by slot: their generation.
    earlier: HashMap<u32, u32>,
    /// The fill seen by the previous pass, by slot.
    seen: HashMap<u32, Mark>,
    /// The chunk sequence and length of the last copy written, by slot.
    copied: HashMap<u32, (u32, usize)>,
    /// Copies taken this pass, waiting for the drain.
    taken: Vec<(&'static StreamSlot, Snapshot, Vec<u8>)>,
    /// TAIL frames written.
    pub(crate) frames: u64,
}

impl Tails {
    /// The tails of a session about to begin, `slots` the slots made so far.
    pub(crate) fn after(slots: &[&'static StreamSlot]) -> Tails {
        let earlier = slots.iter().filter(|s| s.is_owned()).map(|s| (s.index(), s.generation())).collect();
        Tails { earlier, seen: HashMap::new(), copied: HashMap::new(), taken: Vec::new(), frames: 0 }
    }

    /// Copies what idle owners have staged: slots whose fill is the one the previous pass saw,
    /// or, on the last pass (`all`), every owned slot with records not yet copied.
    pub(crate) fn take(&mut self, slots: &[&'static StreamSlot], all: bool) {
        for &slot in slots {
            let mark = slot.mark();
            let before = self.seen.insert(slot.index(), mark);
            let idle = all || before == Some(mark);
            let fresh = self.copied.get(&slot.index()) != Some(&(mark.seq, mark.len));
            let earlier = self.earlier.get(&slot.index()) == Some(&slot.generation());
            if mark.records == 0 || mark.seq & 1 == 1 || !idle || !fresh || !slot.is_owned() || earlier {
                continue;
            }
            let mut bytes = vec![0u8; slot.staging_capacity()];
            if let Some(snap) = slot.snapshot(&mut bytes) {
                bytes.truncate(snap.len);
                self.taken.push((slot, snap, bytes));
            }
        }
    }

    /// Writes the copies whose chunk was not pushed before the drain; returns whether any was.
    pub(crate) fn write<W: io::Write>(&mut self, out: &mut FrameWriter<W>) -> io::Result<bool> {
        let mut wrote = false;
        for (slot, snap, bytes) in std::mem::take(&mut self.taken) {
            if slot.mark().seq != snap.seq {
                continue; // pushed (and drained, or to be drained next pass) meanwhile
            }
            out.tail(slot.index(), &snap.head, &bytes)?;
            self.copied.insert(slot.index(), (snap.seq, snap.len));
            self.frames += 1;
            wrote = true;
        }
        Ok(wrote)
    }
}
