//! Random bits for ids that must differ between processes and runs (trace ids, stream salts,
//! the hub's tokens), without a random-number crate: the standard library's per-process hash
//! keys, the pid and the time, mixed.

/// 128 random bits, from the standard library's per-process hash keys, the pid and the time.
pub(crate) fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let word = |i: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    };
    u128::from(word(0)) << 64 | u128::from(word(1))
}
