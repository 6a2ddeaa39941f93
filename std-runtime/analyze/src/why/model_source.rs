//! A decoded model as the walk's [`Source`]: everything is in memory, so loading only looks
//! up.

use super::{
    groups,
    source::{Facts, Group, Source},
    Options,
};
use crate::{
    matching::Matching,
    model::{Item, ItemRef, Trace, Value},
};
use std::{collections::HashMap, convert::Infallible, rc::Rc};
use waffle_wire::Header;

/// A decoded model as a [`Source`]: everything is at hand, so loading only looks up.
pub(super) struct ModelSource<'t> {
    trace: &'t Trace,
    index: HashMap<u64, ItemRef>,
    facts: HashMap<u64, Facts>,
    groups: HashMap<u64, Rc<Group>>,
    matching: Matching,
}

impl<'t> ModelSource<'t> {
    pub(super) fn new(trace: &'t Trace, index: HashMap<u64, ItemRef>, options: &Options) -> Self {
        let (groups, matching) = groups::groups(trace, options);
        ModelSource { trace, index, facts: HashMap::new(), groups, matching }
    }
}

impl Source for ModelSource<'_> {
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
