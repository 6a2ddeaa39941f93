//! Maps keyed by ids (and small tuples of them) that hash with one multiply-xorshift round per
//! word instead of SipHash: the readers' joins look up an id per record.

use std::{
    collections::{hash_map::RandomState, HashMap},
    hash::{BuildHasher, Hasher},
};

/// Hashes ids (and small tuples of them) with one multiply-xorshift round per word, keyed at
/// random per map so that a file cannot choose colliding ids in advance.
#[derive(Clone)]
pub struct IdHash(u64);

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
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.write_u64(u64::from(b)));
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
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
pub type IdMap<K, V> = HashMap<K, V, IdHash>;
