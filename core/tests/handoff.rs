//! The buffer hand-off under concurrency: producer threads stage records and push chunks into
//! `StreamSlot` queues while a consumer thread drains them, and slots pass from exited threads
//! to new ones. Every chunk arrives whole and in order, ids continue across owners, and every
//! record is received or counted as dropped.
//!
//! Meanwhile the consumer also takes snapshots of what the producers have staged and not pushed
//! (`StreamSlot::snapshot`, as the collector does for blocked threads): every snapshot returned
//! must be the head and a prefix of the records of the chunk it copied, never a torn mix; and a
//! snapshot still current after the drain (the collector's test for writing a TAIL) must be of
//! the next chunk the slot pushes. Producers yield now and then so that thousands of snapshots
//! are taken, and one thread per wave blocks with a span staged until one is.
//!
//! `scripts/test.sh` also runs this test under ThreadSanitizer (nightly, `-Zbuild-std`), which
//! checks the synchronisation itself: bbqueue's grants, the `owned` flag that hands the staging
//! area and the id counter from one owner to the next, the runtime's hooks, and the seqlock's
//! sequence, head and fill (the byte copy it validates is left unwatched, see
//! `core/src/queue/staged.rs`).

use std::{
    ptr::NonNull,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        OnceLock,
    },
};
use waffle::{
    queue::{Snapshot, StreamSlot},
    runtime::Hooks,
    wire,
};

const SLOTS: usize = 4;
const WAVES: u64 = 3;
const SPANS: u64 = 3000;

static POOL: OnceLock<Vec<&'static StreamSlot>> = OnceLock::new();
static HOOKS: Hooks = Hooks { acquire, release };
/// Snapshots the consumer kept (their chunk still staged after its drain).
static KEPT: AtomicU64 = AtomicU64::new(0);

/// Any slot no thread owns (the runtime in `waffle-std` also waits for it to be drained; here
/// the consumer tells owners apart by the generation in each chunk).
fn acquire() -> Option<&'static StreamSlot> {
    POOL.get()?.iter().copied().find(|s| s.try_claim().is_some())
}

fn release(_: &'static StreamSlot) {}

fn leak(n: usize) -> NonNull<[u8]> {
    NonNull::from(Box::leak(vec![0u8; n].into_boxed_slice()))
}

/// What the consumer saw of one slot.
#[derive(Default)]
struct Seen {
    /// Records received, SPAN_BEGINs among them, and the sum of their `i` fields.
    records: u64,
    begins: u64,
    sum_i: u64,
    /// The owner generation of the last chunk, and the id the slot's next chunk should start
    /// at if nothing is dropped.
    generation: u64,
    next_id: Option<u64>,
    /// A snapshot taken before a drain that did not contain its chunk: the next chunk of the
    /// slot must be that chunk (or, if it was dropped, a later one).
    pending: Option<(Snapshot, Vec<u8>)>,
    /// Snapshots checked against the chunk that later held their records.
    matched: u64,
    /// Every snapshot `snapshot` returned, whether or not its chunk was pushed meanwhile: each
    /// must match its chunk too (the seqlock's own check, without the collector's).
    taken: Vec<(Snapshot, Vec<u8>)>,
    /// Of those, checked against their chunk.
    matched_taken: u64,
    /// The last chunks received: a snapshot of a chunk already drained is checked against it.
    recent: Vec<Received>,
}

/// A chunk as received: its key (generation, first id, base ts), depth and dropped, record
/// count and records.
type Received = ((u64, u64, u64), (u64, u64), u64, Vec<u8>);

fn key(snap: &Snapshot) -> (u64, u64, u64) {
    (snap.head.generation as u64, snap.head.first_id, snap.head.base_ts)
}

/// Checks the snapshot `snap` of records `staged` against the chunk it copied.
fn check(snap: &Snapshot, staged: &[u8], head: (u64, u64, u64), records: u64, chunk_records: &[u8]) {
    let h = snap.head;
    assert_eq!((h.base_ts, h.depth, h.dropped), head, "snapshot head");
    assert!(h.records <= records, "a snapshot holds a prefix of its chunk");
    assert_eq!(&chunk_records[..staged.len()], staged, "a torn snapshot was kept");
}

fn varint(buf: &[u8], at: &mut usize) -> u64 {
    let (v, n) = wire::read_varint(&buf[*at..]).expect("a whole varint");
    *at += n;
    v
}

/// Checks and counts the chunks in `bytes`, which must hold whole chunks only.
fn consume(bytes: &[u8], seen: &mut Seen) {
    let mut at = 0;
    while at < bytes.len() {
        let len = varint(bytes, &mut at) as usize;
        let end = at + len;
        assert!(end <= bytes.len(), "a chunk split across reads");
        let generation = varint(bytes, &mut at);
        let base_ts = varint(bytes, &mut at);
        let first_id = varint(bytes, &mut at);
        let depth = varint(bytes, &mut at);
        let dropped = varint(bytes, &mut at);
        let records = varint(bytes, &mut at);
        assert!(depth <= 1);
        let body = &bytes[at..end];
        if seen.recent.len() == 8 {
            seen.recent.remove(0);
        }
        seen.recent.push(((generation, first_id, base_ts), (depth, dropped), records, body.to_vec()));
        if let Some((snap, staged)) = seen.pending.take() {
            let head = snap.head;
            if (head.generation as u64, head.first_id) == (generation, first_id) {
                check(&snap, &staged, (base_ts, depth, dropped), records, body);
                seen.matched += 1;
            } else {
                // Its chunk was refused by the full queue; this one says so.
                assert!(dropped > 0 || generation != head.generation as u64, "snapshot {head:?} lost");
            }
        }
        // Snapshots of earlier chunks are done with; those of this one are checked.
        seen.taken.retain(|(snap, staged)| {
            let h = snap.head;
            let key = (h.generation as u64, h.first_id);
            if key == (generation, first_id) && h.base_ts == base_ts {
                check(snap, staged, (base_ts, depth, dropped), records, body);
                seen.matched_taken += 1;
                return false;
            }
            key >= (generation, first_id)
        });
        if let Some(expected) = seen.next_id {
            // Ids continue across chunks and owners; dropped records took theirs. (A new
            // owner's first chunk cannot say how many of its predecessor's last were dropped.)
            assert!(first_id >= expected, "{first_id} after {expected}");
            assert!(generation >= seen.generation, "owners in order");
            if generation == seen.generation {
                assert!(first_id - expected <= dropped, "{first_id} after {expected}, {dropped} dropped");
            }
        }
        seen.generation = generation;
        let mut n = 0;
        let mut id = first_id;
        while at < end {
            match bytes[at] {
                wire::tag::SPAN_BEGIN => {
                    at += 1;
                    let _callsite = varint(bytes, &mut at);
                    let _delta = varint(bytes, &mut at);
                    let _t = varint(bytes, &mut at);
                    seen.sum_i += varint(bytes, &mut at);
                    seen.begins += 1;
                    id += 1;
                }
                wire::tag::SPAN_END => {
                    at += 1;
                    let _delta = varint(bytes, &mut at);
                }
                other => panic!("unexpected tag {other:#x}"),
            }
            n += 1;
        }
        assert_eq!((at, n), (end, records), "the header's record count");
        seen.records += n;
        seen.next_id = Some(id);
    }
}

#[test]
fn chunks_cross_threads_whole_and_slots_change_owners() {
    let pool = (0..SLOTS)
        .map(|k| {
            let first_id = waffle::ids::stream_id_base(7, k as u32);
            // SAFETY: both regions were just leaked: valid forever, disjoint, used by this
            // slot alone.
            let slot = unsafe { StreamSlot::new(leak(4096), leak(256), k as u32, first_id) };
            &*Box::leak(Box::new(slot))
        })
        .collect();
    assert!(POOL.set(pool).is_ok());
    let pool = POOL.get().unwrap();
    let epoch = waffle::runtime::install(&HOOKS);

    let done = AtomicBool::new(false);
    let attempted = AtomicU64::new(0);
    let seen: Vec<Seen> = std::thread::scope(|s| {
        let consumer = s.spawn(|| {
            let mut seen: Vec<Seen> = (0..SLOTS).map(|_| Seen::default()).collect();
            let mut buf = vec![0u8; 256];
            loop {
                let finished = done.load(Ordering::Acquire);
                let mut drained = 0;
                for (slot, seen) in pool.iter().zip(&mut seen) {
                    // Snapshot, then drain, then check the chunk was not pushed meanwhile: the
                    // collector's order (the sequence turns odd before a push).
                    let snap = slot.snapshot(&mut buf);
                    if let Some(snap) = snap {
                        let staged = &buf[..snap.len];
                        if let Some((k, (depth, dropped), records, body)) =
                            seen.recent.iter().find(|r| r.0 == key(&snap))
                        {
                            check(&snap, staged, (k.2, *depth, *dropped), *records, body);
                            seen.matched_taken += 1;
                        } else {
                            if seen.taken.len() == 64 {
                                seen.taken.remove(0);
                            }
                            seen.taken.push((snap, staged.to_vec()));
                        }
                    }
                    while slot.drain_with(|bytes| consume(bytes, seen)) > 0 {
                        drained += 1;
                    }
                    // Kept if its chunk is still staged; a newer copy of the same chunk replaces
                    // an older one.
                    let older = seen.pending.as_ref().map(|(p, _)| p.seq);
                    if let Some(snap) =
                        snap.filter(|s| slot.mark().seq == s.seq && older.is_none_or(|o| o == s.seq))
                    {
                        seen.pending = Some((snap, buf[..snap.len].to_vec()));
                        KEPT.fetch_add(1, Ordering::Release);
                    }
                }
                if finished && drained == 0 {
                    return seen;
                }
                std::thread::yield_now();
            }
        });
        for wave in 0..WAVES as u32 {
            std::thread::scope(|w| {
                for t in 0..SLOTS as u32 {
                    let attempted = &attempted;
                    w.spawn(move || {
                        let mut made = 0;
                        for i in 0..SPANS as u32 {
                            // Typed fields (casts), so that each value is one plain varint.
                            let span = waffle::span!("w", t = (wave * 10 + t) as u64, i = i as u64);
                            made += u64::from(!span.id().is_null());
                            drop(span);
                            if i % 4 == 0 {
                                // Room for the consumer's snapshots between records.
                                std::thread::yield_now();
                            }
                        }
                        if t == 0 {
                            // A thread that blocks with a span staged: its records are copied
                            // before it pushes them (at exit), whatever the machine's load.
                            let kept = KEPT.load(Ordering::Acquire);
                            let span = waffle::span!("w", t = (wave * 10) as u64, i = 0u64);
                            made += u64::from(!span.id().is_null());
                            let start = std::time::Instant::now();
                            while KEPT.load(Ordering::Acquire) == kept && start.elapsed().as_secs() < 5 {
                                std::thread::yield_now();
                            }
                        }
                        attempted.fetch_add(made * 2, Ordering::Relaxed);
                    });
                }
            });
            // The thread-local's destructor pushes a thread's last chunk and unclaims its slot
            // after the thread's closure returned, so after `scope` may return: wait for it, as
            // the runtime in `waffle-std` does when it stops.
            while pool.iter().any(|s| s.is_owned()) {
                std::thread::yield_now();
            }
        }
        done.store(true, Ordering::Release);
        consumer.join().unwrap()
    });
    waffle::runtime::uninstall(epoch);

    let received: u64 = seen.iter().map(|s| s.records).sum();
    let dropped: u64 = pool.iter().map(|s| s.dropped()).sum();
    let attempted = attempted.load(Ordering::Relaxed);
    // Each wave's thread 0 records one span more, the one it blocks with.
    assert_eq!(attempted, WAVES * (SLOTS as u64 * SPANS + 1) * 2, "every thread got a slot");
    assert_eq!(received + dropped, attempted, "received {received}, dropped {dropped}");
    let generations: Vec<u32> = pool.iter().map(|s| s.generation()).collect();
    assert_eq!(generations.iter().sum::<u32>(), WAVES as u32 * SLOTS as u32, "one claim per thread");
    assert!(generations.iter().any(|&g| g > 1), "slots changed owners");
    let matched: u64 = seen.iter().map(|s| s.matched).sum();
    assert!(matched > 0, "no snapshot was checked against its chunk");
    let matched_taken: u64 = seen.iter().map(|s| s.matched_taken).sum();
    assert!(matched_taken > 0, "no snapshot was checked against a chunk it copied");
    if dropped == 0 {
        let sum: u64 = seen.iter().map(|s| s.sum_i).sum();
        assert_eq!(sum, WAVES * SLOTS as u64 * (SPANS * (SPANS - 1) / 2));
    }
}
