//! One thread's packet sequence: its tracks, its clock, and its interning tables.
//!
//! Interned names are indexed by callsite (the decoder numbers a process's callsites), so no
//! record hashes a string: an event name and its field names are defined in the first packet
//! of the sequence that uses them.

use std::{cmp::Reverse, collections::BinaryHeap};

use super::{packet::Packets, CAUSED_BY, CORRELATE, ID, UNFINISHED, UNRESOLVED};
use crate::decode::Item;

/// Annotation names every sequence may use, besides field names.
#[derive(Clone, Copy)]
pub(super) enum Special {
    Unfinished,
    Id,
    CausedBy,
    Unresolved,
    Correlate,
}

impl Special {
    fn name(self) -> &'static str {
        match self {
            Special::Unfinished => UNFINISHED,
            Special::Id => ID,
            Special::CausedBy => CAUSED_BY,
            Special::Unresolved => UNRESOLVED,
            Special::Correlate => CORRELATE,
        }
    }
}

/// One thread's packet sequence.
pub(super) struct Seq {
    pub(super) id: u32,
    /// The thread track.
    pub(super) track: u64,
    /// The time of the sequence's last packet: packets never go back in time.
    pub(super) last_ts: u64,
    /// Ids of the slices open on the thread track, innermost last.
    pub(super) open: Vec<u64>,
    /// Where the thread's ids are in the plan's targets: a thread's ids grow, so this only
    /// moves forward (it is searched again if they do not).
    pub(super) cursor: usize,
    /// Event-name iid by callsite index (0: not defined yet).
    names: Vec<u64>,
    /// Where each callsite's field-name iids start in `field_iids` (`u32::MAX`: not yet).
    fields_at: Vec<u32>,
    field_iids: Vec<u64>,
    specials: [u64; 5],
    next_iid: u64,
    /// Ends of detached spans begun here, waiting for the sequence's time: (ns, track, ended).
    pub(super) ends: BinaryHeap<Reverse<(u64, u64, bool)>>,
}

impl Seq {
    pub(super) fn new(id: u32, track: u64) -> Seq {
        Seq {
            id,
            track,
            last_ts: 0,
            open: Vec::new(),
            cursor: 0,
            names: Vec::new(),
            fields_at: Vec::new(),
            field_iids: Vec::new(),
            specials: [0; 5],
            next_iid: 0,
            ends: BinaryHeap::new(),
        }
    }

    fn fresh(&mut self) -> u64 {
        self.next_iid += 1;
        self.next_iid
    }

    /// Writes `r`'s field values as annotations into `ev`; returns the iid of its name. The
    /// names are defined in `ev` if this is their first use on the sequence.
    #[inline]
    pub(super) fn callsite(&mut self, r: &Item<'_>, ev: &mut Packets) -> u64 {
        let c = r.callsite_index as usize;
        if self.names.len() <= c {
            self.names.resize(c + 1, 0);
            self.fields_at.resize(c + 1, u32::MAX);
        }
        if self.names[c] == 0 {
            self.names[c] = self.fresh();
            ev.intern_name(self.names[c], &r.callsite.name);
        }
        if self.fields_at[c] == u32::MAX && !r.fields.is_empty() {
            self.fields_at[c] = self.field_iids.len() as u32;
            for (name, _) in &r.callsite.fields {
                let iid = self.fresh();
                self.field_iids.push(iid);
                ev.intern_annotation(iid, name);
            }
        }
        let at = self.fields_at[c] as usize;
        let n = r.fields.len().min(r.callsite.fields.len());
        for (k, value) in r.fields.iter().take(n).enumerate() {
            ev.annotation(self.field_iids[at + k], value);
        }
        self.names[c]
    }

    /// The iid of a special annotation name, defined in `ev` if this is its first use.
    pub(super) fn special(&mut self, which: Special, ev: &mut Packets) -> u64 {
        let iid = &mut self.specials[which as usize];
        if *iid == 0 {
            self.next_iid += 1;
            *iid = self.next_iid;
            ev.intern_annotation(*iid, which.name());
        }
        *iid
    }
}
