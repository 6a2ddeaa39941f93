//! The numbers every rank computes alike without talking to the others: communicator and
//! window keys, and the correlation values of messages and collectives (`docs/mpi.md`).
//!
//! [`hash`] is the one hash behind all of them: fixed constants (no per-process seed), so the
//! same words give the same value on every rank and every machine, and never 0.
//!
//! A communicator's key is the hash of the ordered world ranks of its group (and of its remote
//! group, for an intercommunicator, the two in an order both sides agree on) and of how many
//! communicators with that membership this process made before it. Creating a communicator is
//! collective over its members, in the same order on each of them, so every member counts the
//! same number for it. Windows are keyed the same way, counted apart.
//!
//! The counters are per process, shared by its threads ([`crate::table`]): a message's number
//! `k` is how many earlier sends (receives) of this process had the same communicator, peer and
//! tag; a collective's, how many earlier collectives on that communicator. MPI's non-overtaking
//! rule orders the messages of one sender to one receiver on one communicator and tag, so the
//! k-th send and the k-th receive are one message. Threads sending on the same communicator,
//! peer and tag at once are not ordered by MPI either: each gets its own number, in the order
//! their counter updates land.

use crate::table::Table;

/// The hash of `words`: the same on every machine, never 0. One multiply per word, then
/// MurmurHash3's 64-bit finaliser once: the inputs are ranks, tags, counts and other hashes,
/// not chosen by an adversary, and this runs twice per message on the path of the call.
pub fn hash(words: &[u64]) -> u64 {
    let h = words.iter().fold((words.len() as u64).wrapping_mul(K0), |h, &w| step(h, w));
    finish(h)
}

const K0: u64 = 0x9e37_79b9_7f4a_7c15;
const K1: u64 = 0xbf58_476d_1ce4_e5b9;

#[inline]
fn step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(K1).rotate_left(29)
}

#[inline]
fn finish(mut z: u64) -> u64 {
    z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^= z >> 33;
    if z == 0 {
        1
    } else {
        z
    }
}

/// What a counter counts; part of its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Counted {
    /// Sends on (comm, destination, tag).
    Send = 0,
    /// Receives completed on (comm, source, tag).
    Receive = 1,
    /// Collectives on a communicator.
    Collective = 2,
}

/// Counters of messages and collectives: a key per counted tuple, word 0 the count so far.
static COUNTERS: Table<{ 1 << 16 }, 1> = Table::new();

/// The correlation value of the next `what` on communicator `comm` with `peer` and `tag` (both
/// ignored for collectives), given this process's world rank `me`: the hash of the schema's
/// tuple and the count of earlier ones.
///
/// The tuple without the count, `(comm, source, destination, tag)`, is hashed once and serves
/// twice: as the counter's key (with what is counted mixed in, so that a message to oneself
/// has a send counter and a receive counter), and as the start of the value, which the count
/// then extends. Both sides of a message compute the same tuple, hence the same value.
pub fn next(what: Counted, comm: u64, me: i64, peer: i64, tag: i64) -> u64 {
    let base = match what {
        Counted::Send => tuple(comm, me, peer, tag),
        Counted::Receive => tuple(comm, peer, me, tag),
        Counted::Collective => step(K0, comm),
    };
    let k = COUNTERS.count(base ^ (what as u64 + 1).wrapping_mul(K1));
    finish(step(base, k))
}

/// The hash of a message's `(comm, source, destination, tag)`, before the count.
#[inline]
fn tuple(comm: u64, source: i64, destination: i64, tag: i64) -> u64 {
    [source as u64, destination as u64, tag as u64].iter().fold(step(K0, comm), |h, &w| step(h, w))
}

/// How many communicators (`kind` 0) or windows (`kind` 1) with the membership `signature`
/// were made before: each call counts one more.
static MADE: Table<{ 1 << 12 }, 1> = Table::new();

/// The key of a communicator or window with the group `local` (world ranks in group order)
/// and, for an intercommunicator, the remote group `remote` (empty otherwise).
///
/// Keys are 32 bits (the hash's halves folded together, never 0), so that the `comm` field of
/// every record is a varint of at most 5 bytes rather than 10. Only their equality matters (the
/// decoder groups by them, and they feed the message and collective hashes, which are 64-bit);
/// two of a program's `n` communicators share a key with odds of about n²/2³³ (1 in 860,000
/// for 100 communicators).
pub fn group_key(kind: u32, local: &[i32], remote: &[i32]) -> u64 {
    let signature = signature(kind, local, remote);
    let made_before = MADE.count(signature);
    let h = hash(&[signature, made_before]);
    match (h ^ (h >> 32)) & 0xffff_ffff {
        0 => 1,
        k => k,
    }
}

/// The hash of a membership: kind, groups and their sizes.
fn signature(kind: u32, local: &[i32], remote: &[i32]) -> u64 {
    // Both sides of an intercommunicator see the two groups swapped: put them in one order.
    let (a, b) = if remote.is_empty() || local <= remote { (local, remote) } else { (remote, local) };
    let words: Vec<u64> = [u64::from(kind), a.len() as u64]
        .into_iter()
        .chain(a.iter().map(|&r| r as u32 as u64))
        .chain([b.len() as u64])
        .chain(b.iter().map(|&r| r as u32 as u64))
        .collect();
    hash(&words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fixed_and_never_zero() {
        // Written down once (and computed apart, in Python): a change of the hash would make
        // ranks running different builds disagree.
        assert_eq!(hash(&[1, 2, 3]), 0x39bb_e109_1d15_8102);
        assert_eq!(hash(&[]), 1, "the one input that mixes to 0 is moved to 1");
        assert_ne!(hash(&[1, 2, 3]), hash(&[3, 2, 1]));
        assert_ne!(hash(&[0]), hash(&[0, 0]), "the length is hashed");
        assert!((0..10_000u64).all(|i| hash(&[i]) != 0));
    }

    #[test]
    fn sends_and_receives_of_one_message_agree() {
        // Rank 0 sends twice to rank 1 on comm 7, tag 3; rank 1 receives them. One process plays
        // both here, so each side uses its own communicator key to keep the counters apart as
        // two processes would, and the values are compared through the formula.
        let s0 = next(Counted::Send, 7, 0, 1, 3);
        let s1 = next(Counted::Send, 7, 0, 1, 3);
        assert_ne!(s0, s1);
        let r0 = next(Counted::Receive, 7, 1, 0, 3);
        let r1 = next(Counted::Receive, 7, 1, 0, 3);
        assert_eq!((s0, s1), (r0, r1), "the k-th send is the k-th receive");
        // Collectives: the communicator and the count, whatever the rank, peer and tag.
        let c0 = next(Counted::Collective, 9, 0, 5, 5);
        assert_eq!(c0, finish(step(step(K0, 9), 0)));
        assert_eq!(next(Counted::Collective, 9, 1, 0, 0), finish(step(step(K0, 9), 1)));
        // A message to oneself: the send and the receive count apart, and agree.
        let to_self = next(Counted::Send, 11, 4, 4, 0);
        assert_eq!(next(Counted::Receive, 11, 4, 4, 0), to_self);
    }

    #[test]
    fn group_keys_count_communicators_of_one_membership() {
        let world = [0, 1, 2];
        let a = group_key(0, &world, &[]);
        let b = group_key(0, &world, &[]);
        assert_ne!(a, b, "a duplicate of a communicator has its own key");
        assert!(a != 0 && a <= u64::from(u32::MAX) && b <= u64::from(u32::MAX), "32-bit keys");
        assert_ne!(group_key(0, &[0, 2], &[]), group_key(0, &[2, 0], &[]), "order matters");
        // The two sides of an intercommunicator agree; a window of a group is not its communicator.
        assert_eq!(signature(0, &[10, 11], &[12]), signature(0, &[12], &[10, 11]));
        assert_ne!(signature(0, &[10, 11], &[12]), signature(0, &[10, 11, 12], &[]));
        assert_ne!(signature(0, &world, &[]), signature(1, &world, &[]));
    }
}
