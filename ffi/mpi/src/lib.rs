//! # waffle-mpi
//!
//! `libwaffle_mpi.so` records every MPI call of a program as a waffle span, with no change to
//! the program: the library defines the `MPI_*` functions (PMPI interposition, `c/*.c`,
//! compiled with the system's `mpicc`), each of which records and calls the `PMPI_*` function
//! that does the work. Preload it, say where the traces go, run:
//!
//! ```sh
//! cargo build --release -p waffle-mpi
//! WAFFLE_OUTPUT=run/rank%r.bin LD_PRELOAD=$PWD/target/release/libwaffle_mpi.so \
//!     mpirun -np 4 -x WAFFLE_OUTPUT -x LD_PRELOAD ./solver
//! waffle-decode run/rank*.bin -o run.pftrace
//! ```
//!
//! Spans carry their arguments as fields (communicator key, peer and root as world ranks, tag,
//! bytes, reduction op, request numbers); each message is a directed correlation from its send
//! (`mpi.message>`) to the event of its receive (`mpi.message<`), each collective a correlation
//! of its calls on every rank (`mpi.collective`). `docs/mpi.md` is the full contract.
//!
//! The library also carries the whole recorder and re-exports waffle's C ABI
//! ([`waffle_capi`]): a program that records spans of its own through `libwaffle.so` and runs
//! with this library preloaded has its `waffle_*` calls bound here, so its MPI spans nest under
//! its own spans, in one file per rank, and only this image starts a session from
//! `WAFFLE_OUTPUT`.
//!
//! This crate's Rust part is what the C wrappers share: the tables of communicators
//! ([`comms`]) and requests ([`requests`]), the counters and hash behind every correlation value
//! ([`keys`]), lock-free on the path of a call ([`table`]; requests behind a lock, as one handle
//! can stand for several threads' requests), and the recording of the hot
//! wrappers' spans and of the receive event through static callsites ([`record`], one line per
//! function in [`sites`]). The functions below and there are the C wrappers' interface
//! (declared in `c/wmpi.h`), not an API for programs.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod comms;
pub mod keys;
pub mod record;
pub mod requests;
pub mod sites;
pub mod table;

pub use waffle_capi::*;

use comms::Comm;
use keys::Counted;
use requests::Req;
use std::sync::atomic::{AtomicI64, Ordering};

/// This process's rank in `MPI_COMM_WORLD`, once `MPI_Init` returned.
static ME: AtomicI64 = AtomicI64::new(-1);

/// This process's rank in `MPI_COMM_WORLD` (-1 before `MPI_Init` returned).
pub(crate) fn world_rank() -> i64 {
    ME.load(Ordering::Relaxed)
}

/// Called by the `MPI_Init` wrappers with the process's world rank.
#[no_mangle]
pub extern "C" fn waffle_mpi_set_rank(rank: i32) {
    ME.store(i64::from(rank), Ordering::Relaxed);
}

/// The correlation value of the next send (`what` 0), completed receive (1) or collective (2)
/// on the communicator keyed `comm`, with the peer's world rank `peer` and `tag` (see
/// [`keys::next`]). Counts it.
#[no_mangle]
pub extern "C" fn waffle_mpi_next(what: u32, comm: u64, peer: i64, tag: i64) -> u64 {
    let what = match what {
        0 => Counted::Send,
        1 => Counted::Receive,
        _ => Counted::Collective,
    };
    keys::next(what, comm, world_rank(), peer, tag)
}

/// The cached communicator (`kind` 0) or window (1) of `handle`, or NULL.
#[no_mangle]
pub extern "C" fn waffle_mpi_comm_find(kind: u32, handle: u64) -> *const Comm {
    comms::find(kind, handle)
}

/// Caches `handle` as a communicator (`kind` 0) or window (1) whose group has the world ranks
/// `world[..size]` and, for an intercommunicator, the remote group `remote[..remote_size]`.
///
/// # Safety
/// `world` and `remote` are NULL (with a size of 0 or less) or readable for their sizes.
#[no_mangle]
pub unsafe extern "C" fn waffle_mpi_comm_add(
    kind: u32,
    handle: u64,
    world: *const i32,
    size: i32,
    remote: *const i32,
    remote_size: i32,
) -> *const Comm {
    // SAFETY: forwarded from the caller.
    let (world, remote) = unsafe { (ranks(world, size), ranks(remote, remote_size)) };
    comms::add(kind, handle, world, remote)
}

/// `n` ranks at `p`, or none.
///
/// # Safety
/// `p` is NULL or readable for `n` values.
unsafe fn ranks<'a>(p: *const i32, n: i32) -> &'a [i32] {
    if p.is_null() || n <= 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
}

/// Drops the cached communicator (`kind` 0) or window (1) of `handle`.
#[no_mangle]
pub extern "C" fn waffle_mpi_comm_forget(kind: u32, handle: u64) {
    comms::forget(kind, handle);
}

/// A fresh request number.
#[no_mangle]
pub extern "C" fn waffle_mpi_request_id() -> u64 {
    requests::next_id()
}

/// Enters or replaces the request `handle`.
///
/// # Safety
/// `req` is NULL or points to a valid `Req`.
#[no_mangle]
pub unsafe extern "C" fn waffle_mpi_req_put(handle: u64, req: *const Req) {
    // SAFETY: the caller's promise.
    if let Some(req) = unsafe { req.as_ref() } {
        requests::put(handle, req);
    }
}

/// Copies the request `handle` to `out` if it is one of ours (and `take`: removes it, of
/// several under one handle one that `thread` started if any).
///
/// # Safety
/// `out` is NULL or points to writable memory for a `Req`.
#[no_mangle]
pub unsafe extern "C" fn waffle_mpi_req_get(handle: u64, take: bool, thread: u64, out: *mut Req) -> bool {
    let found = if take { requests::take(handle, thread) } else { requests::get(handle) };
    match (found, out.is_null()) {
        (Some(r), false) => {
            // SAFETY: non-null and writable (the caller's promise).
            unsafe { out.write(r) };
            true
        }
        _ => false,
    }
}
