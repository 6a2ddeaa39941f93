//! What the walk of `why` reads, and from where: the items it reaches, by id, and the groups
//! they are in. A [`Source`] is either a decoded model (`ModelSource`, everything in memory) or
//! an index of the files that reads again the parts it is asked for (`index/`); the walk asks
//! for what it needs a step of the walk at a time, so that the index can read it in one go.

use super::Relation;
use crate::{
    matching::Matching,
    model::{Callsite, ItemRef, Value},
};
use std::{rc::Rc, sync::Arc};
use waffle_wire::Header;

/// What the walk reads of a span or event.
#[derive(Clone, Debug)]
pub(super) struct Facts {
    pub(super) id: u64,
    pub(super) at: ItemRef,
    pub(super) callsite: Arc<Callsite>,
    /// Begin (span) or time (event), Unix ns.
    pub(super) ts_ns: u64,
    pub(super) parent: Option<u64>,
    pub(super) links: Vec<u64>,
    pub(super) correlation: Option<u64>,
}

/// Items and groups, by id (see the module docs). `load*` make what the other methods return
/// available for the ids given; the walk calls them before it reads.
pub(super) trait Source {
    /// What can go wrong while reading.
    type Error;

    /// Whether an item has the id.
    fn contains(&self, id: u64) -> bool;

    /// Reads the facts of items (ids it [`contains`](Source::contains)).
    fn load(&mut self, ids: &[u64]) -> Result<(), Self::Error>;

    /// The facts of a loaded item.
    fn facts(&self, id: u64) -> &Facts;

    /// Finds the groups of loaded items, and loads their members.
    fn load_groups(&mut self, ids: &[u64]) -> Result<(), Self::Error>;

    /// The group of an item whose groups were loaded, if it is in one.
    fn group(&self, id: u64) -> Option<&Rc<Group>>;

    /// Reads the field values of loaded items.
    fn load_fields(&mut self, ids: &[u64]) -> Result<(), Self::Error>;

    /// The field `(name, value)` pairs of an item whose fields were loaded.
    fn fields(&self, id: u64) -> Vec<(String, Value)>;

    /// The file process `p` was read from, as given, and its header.
    fn process(&self, p: usize) -> (&str, &Header);

    /// How many processes.
    fn processes(&self) -> usize;

    /// The name and OS id of thread `t` of process `p`.
    fn thread(&self, p: usize, t: usize) -> (&str, u64);

    /// The earliest timestamp of the trace, Unix ns.
    fn earliest_ns(&self) -> u64;

    /// What matching by order decided (nothing when it is off).
    fn matching(&self) -> &Matching;
}

/// Items that are one thing on several processes or threads: a correlation group, or an
/// operation matched by order; or a directed correlation group (relation
/// [`Relation::Message`]), whose effects are caused by its causes. Members by id.
#[derive(Debug, PartialEq)]
pub(super) struct Group {
    pub(super) relation: Relation,
    pub(super) occurrence: Option<u64>,
    /// In time order.
    pub(super) members: Vec<u64>,
    /// A directed group's causes, in time order (empty when undirected).
    pub(super) causes: Vec<u64>,
}

impl Group {
    /// The causes `at` has through this group: a directed group's causes if `at` is one of
    /// its effects; none for a cause, nor in an undirected group.
    pub(super) fn causes_of(&self, at: u64) -> &[u64] {
        if self.relation == Relation::Message && !self.causes.contains(&at) {
            &self.causes
        } else {
            &[]
        }
    }
}
