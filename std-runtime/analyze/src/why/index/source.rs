//! The index as the walk's [`Source`]: the facts of the items a depth of the walk reaches,
//! their correlation groups and the operations they are matched by order in, and at the end
//! the field values of what is shown, each read from the files in one go per file.

use super::{
    build::Built,
    replay::{replay, Found, Want},
    Index, Place, Read,
};
use crate::{
    correlation::{self, Role},
    matching::{self, Matching, RankField},
    model::{Item, Value},
    why::{
        source::{Facts, Group, Source},
        Relation,
    },
    Error,
};
use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};
use waffle_wire::Header;

/// The index of some files, as a [`Source`] for the walk.
pub(in crate::why) struct Indexed {
    index: Index,
    matching: Matching,
    /// Each matched name's order keys: (file, key).
    matched_keys: HashMap<String, Vec<(usize, u32)>>,
    facts: HashMap<u64, Facts>,
    ranks: HashMap<u64, RankField>,
    fields: HashMap<u64, Vec<(String, Value)>>,
    groups: HashMap<u64, Rc<Group>>,
    /// Correlation groups (key, value) and operations (name, k) looked for already.
    correlations_done: HashSet<(u32, u64)>,
    operations_done: HashSet<(String, u64)>,
}

impl Indexed {
    pub(in crate::why) fn new(built: Built) -> Self {
        Indexed {
            index: built.index,
            matching: built.matching,
            matched_keys: built.matched_keys,
            facts: HashMap::new(),
            ranks: HashMap::new(),
            fields: HashMap::new(),
            groups: HashMap::new(),
            correlations_done: HashSet::new(),
            operations_done: HashSet::new(),
        }
    }

    /// Keeps what was read of an item; returns its id.
    fn keep(&mut self, file: usize, read: Read) -> u64 {
        let id = read.id;
        let cal = &self.index.files[file].cal;
        self.facts.entry(id).or_insert_with(|| Facts {
            id,
            at: read.at,
            callsite: read.callsite.clone(),
            ts_ns: cal.to_unix_ns(read.ticks),
            parent: read.parent,
            links: read.links.clone(),
            correlation: read.correlation,
        });
        self.ranks.entry(id).or_insert(read.rank);
        if let Some(values) = read.fields {
            let names = read.callsite.field_names().map(str::to_owned);
            self.fields.entry(id).or_insert_with(|| names.zip(values).collect());
        }
        id
    }

    /// Reads `wants` of each file (by file), with values if `fields`; keeps every item read.
    /// Returns what each file's wants found.
    fn read(&mut self, wants: Vec<Vec<Want>>, fields: bool) -> Result<Vec<Found>, Error> {
        let mut found = Vec::with_capacity(wants.len());
        for (f, w) in wants.iter().enumerate() {
            let file = &self.index.files[f];
            let got = match (w.is_empty(), fields) {
                (true, _) => Found { items: Vec::new(), counts: Vec::new() },
                (false, false) => replay::<false>(file, f, w)?,
                (false, true) => replay::<true>(file, f, w)?,
            };
            for read in got.items.iter().flatten() {
                self.keep(f, read.clone());
            }
            found.push(got);
        }
        Ok(found)
    }

    /// Items by place: those read again are asked of their files (one want each); those kept
    /// whole are kept now.
    fn read_items(&mut self, ids: impl Iterator<Item = u64>, fields: bool) -> Result<(), Error> {
        let mut wants = vec![Vec::new(); self.index.files.len()];
        for id in ids {
            match self.index.place(id) {
                Some(Place::Read { file, thread, ordinal }) => {
                    wants[file].push(Want::Item { thread, ordinal, id })
                }
                Some(Place::Whole { file, index }) => {
                    let read = self.index.files[file].whole[index].clone();
                    self.keep(file, read);
                }
                None => unreachable!("the walk loads ids the index holds"),
            }
        }
        self.read(wants, fields).map(drop)
    }

    /// The correlation groups of `ids` not looked for yet: every member, from the windows
    /// their group's entries name and from the items kept whole.
    fn correlations(&mut self, ids: &[u64]) -> Result<(), Error> {
        let mut asked: HashSet<(u32, u64)> = HashSet::new();
        for &id in ids {
            let f = &self.facts[&id];
            let (Some(value), false) = (f.correlation, f.callsite.correlate.is_empty()) else { continue };
            let key = self.index.group_key(&f.callsite.correlate).expect("interned when read");
            if self.correlations_done.insert((key, value)) {
                asked.insert((key, value));
            }
        }
        if asked.is_empty() {
            return Ok(());
        }
        let mut wants = vec![Vec::new(); self.index.files.len()];
        let mut sorted: Vec<(u32, u64)> = asked.iter().copied().collect();
        sorted.sort_unstable();
        for &(key, value) in &sorted {
            for (file, window) in self.index.group_windows(key, value) {
                wants[file].push(Want::Group { key, value, window });
            }
        }
        let mut members: HashMap<(u32, u64), Vec<u64>> = HashMap::new();
        let mut whole: Vec<(usize, Read)> = Vec::new();
        for (f, file) in self.index.files.iter().enumerate() {
            for w in file.whole.iter().filter(|w| w.id != 0) {
                let (Some(value), Some(key)) = (w.correlation, self.index.group_key(&w.callsite.correlate))
                else {
                    continue;
                };
                if asked.contains(&(key, value)) {
                    members.entry((key, value)).or_default().push(w.id);
                    whole.push((f, w.clone()));
                }
            }
        }
        for (f, read) in whole {
            self.keep(f, read);
        }
        let found = self.read(wants.clone(), false)?;
        for (f, got) in found.iter().enumerate() {
            for (i, items) in got.items.iter().enumerate() {
                let Want::Group { key, value, .. } = wants[f][i] else { continue };
                members.entry((key, value)).or_default().extend(items.iter().map(|r| r.id));
            }
        }
        for (_, ids) in members {
            self.correlation_group(ids);
        }
        Ok(())
    }

    /// Makes the correlation group of items `ids` (read already), if it is one: two or more
    /// members, or for a directed group a cause and an effect.
    fn correlation_group(&mut self, ids: Vec<u64>) {
        let role = |id: &u64| correlation::role(&self.facts[id].callsite.correlate).1;
        let mut m: Vec<(u64, Role)> = ids.iter().map(|id| (*id, role(id))).collect();
        m.sort_by_key(|&(id, _)| self.order(id));
        m.dedup_by_key(|x| x.0);
        let directed = m.first().is_some_and(|x| x.1.directed());
        let pick = |role: Role| m.iter().filter(|x| x.1 == role).map(|x| x.0).collect::<Vec<_>>();
        let (causes, effects) =
            if directed { (pick(Role::Cause), pick(Role::Effect)) } else { Default::default() };
        if (directed && (causes.is_empty() || effects.is_empty())) || (!directed && m.len() < 2) {
            return;
        }
        let relation = if directed { Relation::Message } else { Relation::CorrelatedWith };
        let members = m.iter().map(|x| x.0).collect();
        let group = Rc::new(Group { relation, occurrence: None, members, causes });
        for &(id, _) in &m {
            self.groups.insert(id, group.clone());
        }
    }

    /// Time order within a group: time, process, thread, spans before events, index.
    fn order(&self, id: u64) -> (u64, usize, usize, u8, usize) {
        let f = &self.facts[&id];
        let (kind, i) = match f.at.item {
            Item::Span(i) => (0, i),
            Item::Event(i) => (1, i),
        };
        (f.ts_ns, f.at.process, f.at.thread, kind, i)
    }

    /// The operations matched by order that the spans among `ids` are in: each one's
    /// occurrence k (counted again in its file), then the k-th span of its name on every rank.
    fn operations(&mut self, ids: &[u64]) -> Result<(), Error> {
        let files = self.index.files.len();
        let mut counts = vec![Vec::new(); files];
        let mut ops: Vec<(String, u64)> = Vec::new();
        let mut counted: Vec<(String, usize, usize)> = Vec::new(); // name, file, want
        for &id in ids {
            let f = &self.facts[&id];
            let span = matches!(f.at.item, Item::Span(_));
            if !span || self.groups.contains_key(&id) || !matching::takes_part(&f.callsite) {
                continue;
            }
            if !self.matching.matched.contains_key(&*f.callsite.name) {
                continue;
            }
            let file = &self.index.files[f.at.process];
            let Some(name) = self.index.names.get(&*f.callsite.name) else { continue };
            let rank = self.ranks[&id].clone();
            let Some(&key) = file.key_of.get(&(f.at.thread as u32, name, rank)) else { continue };
            match self.index.place(id) {
                Some(Place::Read { file: fi, thread, ordinal }) => {
                    counted.push((f.callsite.name.to_string(), fi, counts[fi].len()));
                    counts[fi].push(Want::CountAt { thread, ordinal, key });
                }
                Some(Place::Whole { index, .. }) => {
                    let k = file.keys[key as usize].whole.iter().position(|&w| w as usize == index);
                    ops.extend(k.map(|k| (f.callsite.name.to_string(), k as u64)));
                }
                None => {}
            }
        }
        let found = self.read(counts, false)?;
        ops.extend(counted.into_iter().map(|(name, f, i)| (name, found[f].counts[i])));
        ops.retain(|op| self.operations_done.insert(op.clone()));
        if ops.is_empty() {
            return Ok(());
        }
        // Each operation's members: read again (file, want), or kept whole.
        let mut wants = vec![Vec::new(); files];
        let mut at: Vec<Vec<(usize, usize)>> = vec![Vec::new(); ops.len()];
        let mut members: Vec<Vec<u64>> = vec![Vec::new(); ops.len()];
        let mut whole: Vec<(usize, Read)> = Vec::new();
        for (op, (name, k)) in ops.iter().enumerate() {
            for &(f, key) in self.matched_keys.get(name).into_iter().flatten() {
                let file = &self.index.files[f];
                let ok = &file.keys[key as usize];
                if file.threads[ok.thread as usize].track {
                    if let Some(&w) = ok.whole.get(*k as usize) {
                        members[op].push(file.whole[w as usize].id);
                        whole.push((f, file.whole[w as usize].clone()));
                    }
                } else {
                    at[op].push((f, wants[f].len()));
                    wants[f].push(Want::Kth { key, k: *k });
                }
            }
        }
        for (f, read) in whole {
            self.keep(f, read);
        }
        let found = self.read(wants, false)?;
        for (op, (_, k)) in ops.into_iter().enumerate() {
            let mut m = std::mem::take(&mut members[op]);
            m.extend(at[op].iter().flat_map(|&(f, i)| found[f].items[i].iter().map(|r| r.id)));
            m.sort_by_key(|&id| self.order(id));
            if m.len() < 2 {
                continue;
            }
            let group = Rc::new(Group {
                relation: Relation::MatchedByOrder,
                occurrence: Some(k),
                members: m,
                causes: Vec::new(),
            });
            for &id in &group.members {
                self.groups.insert(id, group.clone());
            }
        }
        Ok(())
    }
}

impl Source for Indexed {
    type Error = Error;

    fn contains(&self, id: u64) -> bool {
        self.index.place(id).is_some()
    }

    fn load(&mut self, ids: &[u64]) -> Result<(), Error> {
        let missing: Vec<u64> = ids.iter().copied().filter(|id| !self.facts.contains_key(id)).collect();
        self.read_items(missing.into_iter(), false)
    }

    fn facts(&self, id: u64) -> &Facts {
        &self.facts[&id]
    }

    fn load_groups(&mut self, ids: &[u64]) -> Result<(), Error> {
        self.correlations(ids)?;
        if !self.matched_keys.is_empty() {
            self.operations(ids)?;
        }
        Ok(())
    }

    fn group(&self, id: u64) -> Option<&Rc<Group>> {
        self.groups.get(&id)
    }

    fn load_fields(&mut self, ids: &[u64]) -> Result<(), Error> {
        let missing: Vec<u64> = ids.iter().copied().filter(|id| !self.fields.contains_key(id)).collect();
        self.read_items(missing.into_iter(), true)
    }

    fn fields(&self, id: u64) -> Vec<(String, Value)> {
        self.fields[&id].clone()
    }

    fn process(&self, p: usize) -> (&str, &Header) {
        let f = &self.index.files[p];
        (&f.source, &f.header)
    }

    fn processes(&self) -> usize {
        self.index.files.len()
    }

    fn thread(&self, p: usize, t: usize) -> (&str, u64) {
        let th = &self.index.files[p].threads[t];
        (&th.name, th.tid)
    }

    fn earliest_ns(&self) -> u64 {
        self.index.earliest_ns()
    }

    fn matching(&self) -> &Matching {
        &self.matching
    }
}
