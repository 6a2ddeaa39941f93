//! One thread's packet sequence: its tracks, its clock, and its interning tables.
//!
//! Interned names are indexed by callsite (the decoder numbers a process's callsites), so no
//! record hashes a string: an event name and its field names are defined in the first packet
//! of the sequence that uses them, and their iids are kept encoded, ready to copy.

use std::{cmp::Reverse, collections::BinaryHeap};

use super::{
    groups::Queue,
    packet::Packets,
    put::{key, Tag},
    CAUSED_BY, CORRELATE, ID, MATCHED, UNFINISHED, UNRESOLVED,
};
use crate::decode::Item;
use crate::matching::RankField;

/// Annotation names every sequence may use, besides field names.
#[derive(Clone, Copy)]
pub(super) enum Special {
    Unfinished,
    Id,
    CausedBy,
    Unresolved,
    Correlate,
    Matched,
}

impl Special {
    fn name(self) -> &'static str {
        match self {
            Special::Unfinished => UNFINISHED,
            Special::Id => ID,
            Special::CausedBy => CAUSED_BY,
            Special::Unresolved => UNRESOLVED,
            Special::Correlate => CORRELATE,
            Special::Matched => MATCHED,
        }
    }
}

/// A callsite's names on a sequence.
#[derive(Clone, Copy)]
struct Site {
    /// Its event name's iid as `TrackEvent.name_iid` (none until defined).
    name: Tag,
    /// Where its field names' iids start in `Seq::field_names` (`u32::MAX`: not yet).
    fields: u32,
}

/// One thread's packet sequence.
pub(super) struct Seq {
    pub(super) id: u32,
    /// The sequence id as every packet carries it.
    pub(super) key: Tag,
    /// The time of the sequence's last packet, where its incremental clock stands: packets
    /// never go back in time.
    pub(super) last_ts: u64,
    /// Ids of the slices open on the thread track, innermost last.
    pub(super) open: Vec<u64>,
    /// Where the thread's ids are in the plan's targets: a thread's ids grow, so this only
    /// moves forward (it is searched again if they do not).
    pub(super) cursor: usize,
    /// The last id looked for among the targets, and the first target at or after it: ids
    /// between the two are not targets.
    pub(super) looked: u64,
    pub(super) next_target: u64,
    /// The flows of the thread's correlated items, in record order.
    pub(super) correlated: Queue,
    /// By callsite index.
    sites: Vec<Site>,
    /// Field-name iids as `DebugAnnotation.name_iid`, each callsite's in a run.
    field_names: Vec<Tag>,
    specials: [Tag; 6],
    next_iid: u64,
    /// Ends of detached spans begun here, waiting for the sequence's time: (ns, track, ended).
    pub(super) ends: BinaryHeap<Reverse<(u64, u64, bool)>>,
    /// Spans matched by order so far on this thread, per matched name and rank field.
    occurrences: Vec<(u32, RankField, u64)>,
}

impl Seq {
    pub(super) fn new(id: u32, correlated: Queue) -> Seq {
        Seq {
            id,
            key: Tag::new(key::SEQUENCE_ID, id.into()),
            last_ts: 0,
            open: Vec::new(),
            cursor: 0,
            looked: 0,
            next_target: 0,
            correlated,
            sites: Vec::new(),
            field_names: Vec::new(),
            specials: [Tag::NONE; 6],
            occurrences: Vec::new(),
            next_iid: 0,
            ends: BinaryHeap::new(),
        }
    }

    fn fresh(&mut self) -> u64 {
        self.next_iid += 1;
        self.next_iid
    }

    /// The iid of `r`'s name (as `TrackEvent.name_iid`) and those of its field names (as
    /// `DebugAnnotation.name_iid`), one per value; the names are defined in `ev`'s packet if
    /// this is their first use on the sequence.
    #[inline(always)]
    pub(super) fn names(&mut self, r: &Item<'_>, ev: &mut Packets) -> (Tag, &[Tag]) {
        let c = r.callsite_index as usize;
        if c >= self.sites.len() || !self.sites[c].name.is_some() {
            self.define_name(r, ev);
        }
        let site = self.sites[c];
        if r.fields.is_empty() {
            return (site.name, &[]);
        }
        if site.fields == u32::MAX {
            self.define_fields(r, ev);
        }
        let at = self.sites[c].fields as usize;
        let n = r.fields.len().min(r.callsite.fields.len());
        (site.name, &self.field_names[at..at + n])
    }

    #[cold]
    fn define_name(&mut self, r: &Item<'_>, ev: &mut Packets) {
        let c = r.callsite_index as usize;
        if self.sites.len() <= c {
            self.sites.resize(c + 1, Site { name: Tag::NONE, fields: u32::MAX });
        }
        let iid = self.fresh();
        self.sites[c].name = Tag::new(key::NAME_IID, iid);
        ev.intern_name(iid, &r.callsite.name);
    }

    #[cold]
    fn define_fields(&mut self, r: &Item<'_>, ev: &mut Packets) {
        self.sites[r.callsite_index as usize].fields = self.field_names.len() as u32;
        for name in r.callsite.field_names() {
            let iid = self.fresh();
            self.field_names.push(Tag::new(key::ANNOTATION_NAME_IID, iid));
            ev.intern_annotation(iid, name);
        }
    }

    /// The occurrence (from 0) of a span of matched name `name` with rank field `rank` on this
    /// thread, which holds every span of its name and rank.
    pub(super) fn occurrence(&mut self, name: u32, rank: Option<crate::decode::FieldValue<'_>>) -> u64 {
        match self.occurrences.iter_mut().find(|(n, r, _)| *n == name && r.is(rank)) {
            Some((_, _, k)) => {
                *k += 1;
                *k - 1
            }
            None => {
                self.occurrences.push((name, RankField::of(rank), 1));
                0
            }
        }
    }

    /// The iid of a special annotation name (as `DebugAnnotation.name_iid`), defined in `ev`
    /// if this is its first use.
    pub(super) fn special(&mut self, which: Special, ev: &mut Packets) -> Tag {
        if !self.specials[which as usize].is_some() {
            let iid = self.fresh();
            self.specials[which as usize] = Tag::new(key::ANNOTATION_NAME_IID, iid);
            ev.intern_annotation(iid, which.name());
        }
        self.specials[which as usize]
    }

    /// Moves the sequence's clock to `ts` (never back): by how much.
    #[inline]
    pub(super) fn advance(&mut self, ts: u64) -> u64 {
        let ts = ts.max(self.last_ts);
        let delta = ts - self.last_ts;
        self.last_ts = ts;
        delta
    }
}
