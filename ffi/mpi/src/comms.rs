//! What the wrappers know of each communicator and window, cached by handle.
//!
//! The first time a wrapper meets a handle (or when a wrapper creates one), the C side asks MPI
//! for the group's world ranks (`MPI_Comm_group`, `MPI_Group_translate_ranks` against
//! `MPI_COMM_WORLD`'s group) and hands them here: [`add`] computes the key
//! ([`crate::keys::group_key`]) and keeps a [`Comm`] that the C side then reads directly, key
//! and rank tables, on every later call with that handle ([`find`]: one probe of a lock-free
//! table). `MPI_Comm_free` and `MPI_Win_free` drop the handle's entry ([`forget`]), since MPI
//! reuses handle values for new objects.
//!
//! A dropped `Comm` is never freed: a request started on a communicator may complete after the
//! communicator was freed (MPI allows it), and the request keeps a pointer to it. That costs a
//! few bytes per rank of its group for every communicator or window the process ever made.

use crate::{keys, table::Table};
use std::sync::Mutex;

/// A communicator or window as the C wrappers read it (`wm_comm_t` in `c/wmpi.h`).
#[repr(C)]
pub struct Comm {
    /// The key every member computes alike (`comm` or `window` in the trace).
    pub key: u64,
    /// Size of the (local) group.
    pub size: i32,
    /// Size of the remote group of an intercommunicator; 0 otherwise.
    pub remote_size: i32,
    /// World rank of each rank of the (local) group.
    pub world: *const i32,
    /// World rank of each rank of the remote group (an intercommunicator's peers).
    pub remote: *const i32,
}

/// A [`Comm`] and the rank tables it points into.
struct Owned {
    comm: Comm,
    _world: Box<[i32]>,
    _remote: Box<[i32]>,
}

// SAFETY: the raw pointers point into the boxes this value owns, never written after
// construction; sharing them between threads is sharing immutable data.
unsafe impl Send for Owned {}

/// Handle (communicators: table 0, windows: table 1) → `*const Comm` as word 0.
static HANDLES: [Table<{ 1 << 12 }, 1>; 2] = [Table::new(), Table::new()];

/// Every `Comm` made, alive or dropped. Boxed: a `Comm`'s address is handed to the C side and
/// must not move when the vector grows.
#[allow(clippy::vec_box)]
static ALL: Mutex<Vec<Box<Owned>>> = Mutex::new(Vec::new());

/// The cached entry of `handle` in table `kind` (0 communicators, 1 windows), if any.
#[inline]
pub fn find(kind: u32, handle: u64) -> *const Comm {
    match HANDLES.get(kind as usize).and_then(|t| t.get(handle)) {
        Some([p]) => p as usize as *const Comm,
        None => std::ptr::null(),
    }
}

/// Makes the entry of `handle` from the world ranks of its group(s) and caches it; counts one
/// more communicator (window) of that membership.
pub fn add(kind: u32, handle: u64, world: &[i32], remote: &[i32]) -> *const Comm {
    let world: Box<[i32]> = world.into();
    let remote: Box<[i32]> = remote.into();
    let comm = Comm {
        key: keys::group_key(kind, &world, &remote),
        size: world.len() as i32,
        remote_size: remote.len() as i32,
        world: world.as_ptr(),
        remote: remote.as_ptr(),
    };
    let owned = Box::new(Owned { comm, _world: world, _remote: remote });
    let ptr: *const Comm = &owned.comm;
    ALL.lock().unwrap_or_else(|e| e.into_inner()).push(owned);
    if let Some(t) = HANDLES.get(kind as usize) {
        t.put(handle, [ptr as usize as u64]);
    }
    ptr
}

/// Drops the cached entry of `handle` (the object is being freed); the `Comm` stays readable.
pub fn forget(kind: u32, handle: u64) {
    if let Some(t) = HANDLES.get(kind as usize) {
        t.take(handle);
    }
}
