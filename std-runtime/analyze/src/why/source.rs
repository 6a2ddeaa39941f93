//! What the walk of `why` reads, and from where: the items it reaches, by id, and the groups
//! they are in. A [`Source`] is either a decoded model ([`Model`], everything in memory) or
//! an index of the files that reads again the parts it is asked for (`index/`); the walk asks
//! for what it needs a step of the walk at a time, so that the index can read it in one go.

use super::groups::{self, Group};
use super::Options;
use crate::{
    matching::Matching,
    model::{Callsite, Item, ItemRef, Trace, Value},
};
use std::{collections::HashMap, convert::Infallible, rc::Rc, sync::Arc};
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

/// A decoded model as a [`Source`]: everything is at hand, so loading only looks up.
pub(super) struct Model<'t> {
    trace: &'t Trace,
    index: HashMap<u64, ItemRef>,
    facts: HashMap<u64, Facts>,
    groups: HashMap<u64, Rc<Group>>,
    matching: Matching,
}

impl<'t> Model<'t> {
    pub(super) fn new(trace: &'t Trace, index: HashMap<u64, ItemRef>, options: &Options) -> Self {
        let (groups, matching) = groups::groups(trace, options);
        Model { trace, index, facts: HashMap::new(), groups, matching }
    }
}

impl Source for Model<'_> {
    type Error = Infallible;

    fn contains(&self, id: u64) -> bool {
        self.index.contains_key(&id)
    }

    fn load(&mut self, ids: &[u64]) -> Result<(), Infallible> {
        for &id in ids {
            let at = self.index[&id];
            self.facts.entry(id).or_insert_with(|| {
                let v = self.trace.describe(at);
                Facts {
                    id: v.id,
                    at,
                    callsite: v.callsite.clone(),
                    ts_ns: v.ts_ns,
                    parent: v.parent,
                    links: v.links.to_vec(),
                    correlation: v.correlation,
                }
            });
        }
        Ok(())
    }

    fn facts(&self, id: u64) -> &Facts {
        &self.facts[&id]
    }

    fn load_groups(&mut self, _ids: &[u64]) -> Result<(), Infallible> {
        Ok(())
    }

    fn group(&self, id: u64) -> Option<&Rc<Group>> {
        self.groups.get(&id)
    }

    fn load_fields(&mut self, _ids: &[u64]) -> Result<(), Infallible> {
        Ok(())
    }

    fn fields(&self, id: u64) -> Vec<(String, Value)> {
        let at = self.index[&id];
        let th = self.trace.thread(at);
        let fields: Box<dyn Iterator<Item = (&str, &Value)>> = match at.item {
            Item::Span(i) => Box::new(th.spans[i].fields()),
            Item::Event(i) => Box::new(th.events[i].fields()),
        };
        fields.map(|(k, v)| (k.to_owned(), v.clone())).collect()
    }

    fn process(&self, p: usize) -> (&str, &Header) {
        let p = &self.trace.processes[p];
        (&p.source, &p.header)
    }

    fn processes(&self) -> usize {
        self.trace.processes.len()
    }

    fn thread(&self, p: usize, t: usize) -> (&str, u64) {
        let th = &self.trace.processes[p].threads[t];
        (&th.name, th.tid)
    }

    fn earliest_ns(&self) -> u64 {
        let threads = self.trace.processes.iter().flat_map(|p| &p.threads);
        threads
            .flat_map(|t| t.spans.iter().map(|s| s.start_ns).chain(t.events.iter().map(|e| e.ts_ns)))
            .min()
            .unwrap_or(0)
    }

    fn matching(&self) -> &Matching {
        &self.matching
    }
}
