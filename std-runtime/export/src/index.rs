//! Lookups the two passes make per reference, without hashing a string or trusting ids: maps
//! keyed by ids, and correlation keys by number.

use crate::correlation::{self, group_key, Role};
use std::{
    borrow::Cow,
    collections::{hash_map::RandomState, HashMap},
    hash::{BuildHasher, Hasher},
};

/// Hashes ids (and small tuples of them) with one multiply-xorshift round per word, keyed at
/// random per map so that a file cannot choose colliding ids in advance.
#[derive(Clone)]
pub(crate) struct IdHash(u64);

impl Default for IdHash {
    fn default() -> Self {
        IdHash(RandomState::new().hash_one(0x5741_4646u64))
    }
}

impl BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(self.0)
    }
}

/// See [`IdHash`].
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.write_u64(u64::from(b)));
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        // splitmix64's finaliser.
        let mut x = self.0 ^ v;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.0 = x ^ (x >> 31);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by ids.
pub(crate) type IdMap<K, V> = HashMap<K, V, IdHash>;

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
