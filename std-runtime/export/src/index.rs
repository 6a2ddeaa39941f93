//! Lookups the two passes make per reference, without hashing a string or trusting ids: maps
//! keyed by ids (`waffle_read::id_hash`), and correlation keys by number.

use crate::correlation::{self, group_key, Role};
use std::{borrow::Cow, collections::HashMap};

pub(crate) use waffle_read::id_hash::{IdHash, IdMap};

/// Correlation keys by number, so that a group is found by `(key, value)` without hashing a
/// string per item: each callsite's key is looked up once per process. Groups are numbered by
/// their [`group_key`], so a directed group's causes and effects share a number.
#[derive(Clone, Default)]
pub(crate) struct Keys {
    pub(crate) numbers: HashMap<String, u32>,
    /// Per callsite index of the current process: its key's number + 1 (0: not looked up).
    by_callsite: Vec<u32>,
}

impl Keys {
    /// The number of the group a callsite's correlation key puts its items in (its
    /// [`group_key`]: an effect's key is numbered as its causes' is), and the role the key
    /// marks; with `add`, new keys are numbered, else they are `None`.
    #[inline]
    pub(crate) fn group(&mut self, callsite: u32, key: &str, add: bool) -> Option<(u32, Role)> {
        let role = correlation::role(key).1;
        self.number_with(callsite, add, || group_key(key)).map(|n| (n, role))
    }

    /// The number of a callsite's key, made by `key` only when the callsite was not looked up
    /// yet (an effect's key is then rewritten once per callsite and process, not per item).
    #[inline]
    fn number_with<'k>(
        &mut self,
        callsite: u32,
        add: bool,
        key: impl FnOnce() -> Cow<'k, str>,
    ) -> Option<u32> {
        let c = callsite as usize;
        if self.by_callsite.len() <= c {
            self.by_callsite.resize(c + 1, 0);
        }
        if self.by_callsite[c] == 0 {
            let key = key();
            let n = match self.numbers.get(key.as_ref()) {
                Some(&n) => n,
                None if add => {
                    let n = self.numbers.len() as u32;
                    self.numbers.insert(key.into_owned(), n);
                    n
                }
                None => return None,
            };
            self.by_callsite[c] = n + 1;
        }
        Some(self.by_callsite[c] - 1)
    }

    /// Numbers `later`'s keys here too (those new to this one after its own): the number each
    /// of `later`'s numbers becomes.
    pub(crate) fn merge(&mut self, later: Keys) -> Vec<u32> {
        let mut keys: Vec<(String, u32)> = later.numbers.into_iter().collect();
        keys.sort_unstable_by_key(|&(_, n)| n);
        keys.into_iter()
            .map(|(key, _)| {
                let n = self.numbers.len() as u32;
                *self.numbers.entry(key).or_insert(n)
            })
            .collect()
    }

    /// A new process: its callsites are numbered afresh.
    pub(crate) fn next_process(&mut self) {
        self.by_callsite.clear();
    }
}
