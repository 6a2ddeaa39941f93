//! Arrows (`s`/`f` flow pairs) from a cause's slice to an effect's, written once both slices
//! are, so that a viewer reading events of one time in file order finds the slices first.
//!
//! An arrow is known at its effect (its links, its parent elsewhere), by the id of the item at
//! its other end. If that item has been written, where it binds was kept, since another item
//! names it (`OutSpan::referred`); if not, the arrow waits for it. Both grow with
//! cross-references, not with records. An arrow whose cause never turns up (which the span
//! stream does not let happen) binds where the link's anchor recorded the cause, at the end of
//! the document.

use super::rows::Point;
use crate::index::IdMap;

/// An arrow to write.
#[derive(Clone, Copy, Debug)]
pub(super) struct Flow {
    pub(super) name: &'static str,
    pub(super) from: Point,
    pub(super) to: Point,
}

/// An arrow waiting for its cause.
struct Waiting {
    /// Its place among the arrows waiting, for a stable order at the end.
    seq: u64,
    name: &'static str,
    to: Point,
    /// Where the cause was recorded, on a thread's row.
    recorded: Option<Point>,
}

/// Where written items bind, and the arrows waiting for items not written yet.
#[derive(Default)]
pub(super) struct Flows {
    /// Items that another item names, once written, by id.
    placed: IdMap<u64, Point>,
    /// Arrows by the id of the cause they wait for.
    waiting: IdMap<u64, Vec<Waiting>>,
    seq: u64,
}

impl Flows {
    /// Item `id` is written and binds at `at`: the arrows that waited for it go to `ready`.
    pub(super) fn written(&mut self, id: u64, at: Point, referred: bool, ready: &mut Vec<Flow>) {
        if let Some(waiting) = self.waiting.remove(&id) {
            ready.extend(waiting.into_iter().map(|w| Flow { name: w.name, from: at, to: w.to }));
        }
        if referred {
            self.placed.insert(id, at);
        }
    }

    /// An arrow named `name` from item `from` (recorded at `recorded`) to `to`: to `ready` if
    /// `from` is written, else kept until it is.
    pub(super) fn add(
        &mut self,
        name: &'static str,
        from: u64,
        recorded: Option<Point>,
        to: Point,
        ready: &mut Vec<Flow>,
    ) {
        match self.placed.get(&from) {
            Some(&at) => ready.push(Flow { name, from: at, to }),
            None => {
                self.seq += 1;
                self.waiting.entry(from).or_default().push(Waiting { seq: self.seq, name, to, recorded });
            }
        }
    }

    /// The arrows still waiting, from where their causes were recorded, in the order they
    /// came; those recorded on a detached span's row are left out.
    pub(super) fn rest(self) -> Vec<Flow> {
        let mut rest: Vec<Waiting> = self.waiting.into_values().flatten().collect();
        rest.sort_unstable_by_key(|w| w.seq);
        rest.into_iter().filter_map(|w| Some(Flow { name: w.name, from: w.recorded?, to: w.to })).collect()
    }

    /// Items kept and arrows waiting, for tests of the memory held.
    #[cfg(test)]
    pub(super) fn held(&self) -> (usize, usize) {
        (self.placed.len(), self.waiting.values().map(Vec::len).sum())
    }
}
