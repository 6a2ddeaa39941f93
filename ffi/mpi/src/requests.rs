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
use std::sync::atomic::{AtomicU64, Ordering};

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
}

/// Live requests: handle → the five words of a [`Req`].
static LIVE: Table<{ 1 << 16 }, 5> = Table::new();

/// The last number given.
static LAST_ID: AtomicU64 = AtomicU64::new(0);

/// A fresh request number (never 0: 0 is "a blocking call").
pub fn next_id() -> u64 {
    LAST_ID.fetch_add(1, Ordering::Relaxed) + 1
}

impl Req {
    fn words(&self) -> [u64; 5] {
        [
            self.id,
            self.comm as usize as u64,
            u64::from(self.kind as u32) | (u64::from(self.flags as u32) << 32),
            u64::from(self.tag as u32) | (u64::from(self.peer as u32) << 32),
            self.bytes,
        ]
    }

    fn from_words(w: [u64; 5]) -> Req {
        Req {
            id: w[0],
            comm: w[1] as usize as *const Comm,
            kind: w[2] as u32 as i32,
            flags: (w[2] >> 32) as u32 as i32,
            tag: w[3] as u32 as i32,
            peer: (w[3] >> 32) as u32 as i32,
            bytes: w[4],
        }
    }
}

/// Enters the request `handle`. A handle may stand for several requests at once: Open MPI
/// returns one static, already complete request for every send that completed when it
/// started; each is entered and taken once.
pub fn put(handle: u64, req: &Req) {
    LIVE.push(handle, req.words());
}

/// The request `handle`, if it is one of ours.
pub fn get(handle: u64) -> Option<Req> {
    LIVE.get(handle).map(Req::from_words)
}

/// Removes the request `handle`, returning it if it was one of ours.
pub fn take(handle: u64) -> Option<Req> {
    LIVE.take(handle).map(Req::from_words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_through_its_words() {
        let r =
            Req { id: 7, comm: 0x1000 as *const Comm, kind: 2, flags: 3, tag: -1, peer: -2, bytes: 1 << 40 };
        put(99, &r);
        let back = get(99).unwrap();
        assert_eq!((back.id, back.comm, back.kind, back.flags), (7, r.comm, 2, 3));
        assert_eq!((back.tag, back.peer, back.bytes), (-1, -2, 1 << 40));
        assert!(take(99).is_some());
        assert!(get(99).is_none() && take(99).is_none());
        let (a, b) = (next_id(), next_id());
        assert!(a >= 1 && b > a);
    }
}
