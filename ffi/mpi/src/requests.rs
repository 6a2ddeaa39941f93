//! Requests followed from their start to their completion.
//!
//! A nonblocking start (`MPI_Isend`, `MPI_Irecv`, `MPI_Iallreduce`, `MPI_Rput`, ...) gets a
//! number unique in the process ([`next_id`]: 1, 2, ...), recorded as the span's `request`, and
//! its handle is entered here with what its completion needs to know ([`Req`]): for a receive,
//! the communicator, to turn the status's source into a world rank. A persistent request
//! (`MPI_Send_init`, ...) stays from its init to `MPI_Request_free`, holding its peer, tag and
//! size for each `MPI_Start`, which numbers it anew.
//!
//! The Wait and Test wrappers take their requests out *before* calling MPI and put back those
//! that did not complete: once MPI completes a request it frees the handle, and another thread
//! may start a request that reuses the value at once, whose entry a removal after the call
//! would delete.

use crate::{comms::Comm, table::Table};
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex, MutexGuard,
};

/// A request as the C wrappers read and write it (`wm_req_t` in `c/wmpi.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Req {
    /// The request's number (`request` in the trace).
    pub id: u64,
    /// The communicator (or window) it was started on.
    pub comm: *const Comm,
    /// What it is: `WM_SEND`, `WM_RECV`, `WM_COLL`, `WM_RMA`, `WM_MESSAGE` (`c/wmpi.h`).
    pub kind: i32,
    /// `WM_PERSISTENT`, `WM_ACTIVE` (`c/wmpi.h`).
    pub flags: i32,
    /// The tag of a persistent send or receive.
    pub tag: i32,
    /// The peer's world rank, for a persistent send or receive.
    pub peer: i32,
    /// The bytes of a persistent send or receive.
    pub bytes: u64,
    /// The thread that started it (`pthread_self`): when one handle stands for requests of
    /// several threads, a thread completing it takes its own first.
    pub thread: u64,
}

/// Live requests: handle → the six words of a [`Req`].
static LIVE: Table<{ 1 << 16 }, 6> = Table::new();

/// Serialises the table's requests. Open MPI hands every thread the same handle for a send that
/// completed at once, so one key holds requests of several threads, and "the calling thread's
/// oldest" must be chosen and removed in one step: the lock-free take chooses by a score read
/// while other threads push and take the same key, and under `MPI_THREAD_MULTIPLE` a thread was
/// seen to take another's request (`families.rs`, the threads test). Only nonblocking starts
/// and their completions come here, never the blocking point-to-point path.
static GATE: Mutex<()> = Mutex::new(());

fn gate() -> MutexGuard<'static, ()> {
    GATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The last number given.
static LAST_ID: AtomicU64 = AtomicU64::new(0);

/// A fresh request number (never 0: 0 is "a blocking call").
pub fn next_id() -> u64 {
    LAST_ID.fetch_add(1, Ordering::Relaxed) + 1
}

impl Req {
    fn words(&self) -> [u64; 6] {
        [
            self.id,
            self.comm as usize as u64,
            u64::from(self.kind as u32) | (u64::from(self.flags as u32) << 32),
            u64::from(self.tag as u32) | (u64::from(self.peer as u32) << 32),
            self.bytes,
            self.thread,
        ]
    }

    fn from_words(w: [u64; 6]) -> Req {
        Req {
            id: w[0],
            comm: w[1] as usize as *const Comm,
            kind: w[2] as u32 as i32,
            flags: (w[2] >> 32) as u32 as i32,
            tag: w[3] as u32 as i32,
            peer: (w[3] >> 32) as u32 as i32,
            bytes: w[4],
            thread: w[5],
        }
    }
}

/// Enters the request `handle`. A handle may stand for several requests at once: Open MPI
/// returns one static, already complete request for every send that completed when it
/// started, on any thread; each is entered and taken once, and [`take`] prefers the calling
/// thread's.
pub fn put(handle: u64, req: &Req) {
    let _gate = gate();
    LIVE.push(handle, req.words());
}

/// The request `handle`, if it is one of ours.
pub fn get(handle: u64) -> Option<Req> {
    let _gate = gate();
    LIVE.get(handle).map(Req::from_words)
}

/// Removes the request `handle`, returning it if it was one of ours; of several under one
/// handle, the oldest that `thread` started if there is one (a thread completes its own
/// requests, and usually in the order it started them), else the oldest.
pub fn take(handle: u64, thread: u64) -> Option<Req> {
    let _gate = gate();
    LIVE.take_least(handle, |w| (u64::from(w[5] != thread) << 63) | w[0]).map(Req::from_words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_through_its_words() {
        let r = Req {
            id: 7,
            comm: 0x1000 as *const Comm,
            kind: 2,
            flags: 3,
            tag: -1,
            peer: -2,
            bytes: 1 << 40,
            thread: 5,
        };
        put(99, &r);
        let back = get(99).unwrap();
        assert_eq!((back.id, back.comm, back.kind, back.flags), (7, r.comm, 2, 3));
        assert_eq!((back.tag, back.peer, back.bytes, back.thread), (-1, -2, 1 << 40, 5));
        put(99, &Req { id: 9, thread: 6, ..r });
        put(99, &Req { id: 8, thread: 6, ..r });
        assert_eq!(take(99, 6).map(|r| r.id), Some(8), "the calling thread's oldest first");
        assert_eq!(take(99, 6).map(|r| r.id), Some(9));
        assert_eq!(take(99, 6).map(|r| r.id), Some(7), "then any");
        assert!(get(99).is_none() && take(99, 6).is_none());
        let (a, b) = (next_id(), next_id());
        assert!(a >= 1 && b > a);
    }

    /// Threads starting and completing requests under one handle at once (Open MPI's shared
    /// handle of sends that completed at once): each takes back exactly its own, oldest first.
    #[test]
    fn threads_sharing_one_handle_take_back_their_own() {
        std::thread::scope(|s| {
            for thread in 1..=6u64 {
                s.spawn(move || {
                    let base = Req {
                        id: 0,
                        comm: std::ptr::null(),
                        kind: 0,
                        flags: 0,
                        tag: 0,
                        peer: 0,
                        bytes: 0,
                        thread: 0,
                    };
                    for round in 0..20_000u64 {
                        let id = thread << 32 | round << 1;
                        put(0x5eed, &Req { id, thread, ..base });
                        put(0x5eed, &Req { id: id | 1, thread, ..base });
                        for want in [id, id | 1] {
                            let got = take(0x5eed, thread).map(|r| (r.id, r.thread));
                            assert_eq!(got, Some((want, thread)), "thread {thread} round {round}");
                        }
                    }
                });
            }
        });
        assert!(take(0x5eed, 1).is_none());
    }
}
