//! Where a recording stream's [`Local`](super::Local) lives: a thread-local per thread with
//! `std` (reached by `with_local`, or by a handle cached by C code); without it, the
//! [`BareStream`] a runtime's selector names (the main loop, an interrupt level), or the one
//! main stream until a runtime installs a selector.
//! The re-entrancy guard that keeps a record made inside another (user code run while encoding,
//! an interrupt) from interleaving with it is here too.

#[cfg(feature = "std")]
mod imp {
    use crate::local::Local;
    use core::{
        cell::{Cell, UnsafeCell},
        ptr::NonNull,
    };

    /// A thread's state, and whether a call of `with_local` is using it right now.
    ///
    /// Public only as the pointee of a [`thread_handle`]: its fields stay private.
    pub struct ThreadLocal {
        entered: Cell<bool>,
        local: UnsafeCell<Local>,
    }

    impl Drop for ThreadLocal {
        /// Runs in the thread's TLS destructors. `entered` stays true from here on, so that a
        /// [`with_local_at`] reached later (from another TLS destructor, through a handle cached
        /// by C code) finds the state taken and records nothing; `local` drops after this,
        /// releasing the slot.
        fn drop(&mut self) {
            self.entered.set(true);
        }
    }

    std::thread_local! {
        static LOCAL: ThreadLocal =
            const { ThreadLocal { entered: Cell::new(false), local: UnsafeCell::new(Local::EMPTY) } };
    }

    /// Clears `entered` when `f` returns or unwinds, so that a panic inside a record (a
    /// user's `FieldValue` impl, say) does not end the thread's recording.
    struct Leave<'a>(&'a Cell<bool>);

    impl Drop for Leave<'_> {
        #[inline(always)]
        fn drop(&mut self) {
            self.0.set(false);
        }
    }

    /// Runs `f` on `tls` unless a call is already using it (or it has been destroyed).
    #[inline(always)]
    fn enter<R>(tls: &ThreadLocal, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
        if tls.entered.replace(true) {
            return None;
        }
        let _leave = Leave(&tls.entered);
        // SAFETY: the state is the calling thread's own (both callers ensure it), and
        // `entered` was false: no other call of `with_local`/`with_local_at` on this thread is
        // running, so this is the only reference to it until `_leave` drops.
        Some(f(unsafe { &mut *tls.local.get() }))
    }

    /// Runs `f` on this thread's state; `None` while the thread is being torn down, or when
    /// called from inside another `with_local` (user code run while encoding, or a panic hook
    /// reached from there), which then records nothing rather than interleave.
    #[inline(always)]
    pub fn with_local<R>(f: impl FnOnce(&mut Local) -> R) -> Option<R> {
        LOCAL.try_with(|tls| enter(tls, f)).ok().flatten()
    }

    /// A pointer to the calling thread's state, for [`with_local_at`]: code that keeps it in
    /// storage of its own that is cheaper to reach than this library's thread-local (a C
    /// program's `_Thread_local`, which uses the initial-exec model where a shared library's
    /// Rust thread-local goes through `__tls_get_addr`). `None` once the thread's state has
    /// been destroyed, and on targets where the handle's lifetime argument (see
    /// [`with_local_at`]) has not been made.
    ///
    /// Taking the handle initialises the state and registers its destructor, as `with_local`
    /// does.
    #[inline]
    pub fn thread_handle() -> Option<NonNull<ThreadLocal>> {
        if cfg!(target_os = "linux") {
            LOCAL.try_with(|tls| NonNull::from(tls)).ok()
        } else {
            None
        }
    }

    /// [`with_local`] on the state `handle` points to, without looking the thread-local up:
    /// the same re-entrancy check, and `None` once the state has been destroyed.
    ///
    /// Why a handle stays usable for its thread's whole life, on Linux (the only target where
    /// [`thread_handle`] gives one): std keeps a `const`-initialised `thread_local!` in the
    /// thread's own TLS block (`#[thread_local]`, the native implementation, never boxed),
    /// at an address fixed for the thread's life; its destructor runs among the thread's TLS
    /// destructors and leaves the memory in place, which the C library frees (or recycles
    /// with the thread's stack) only after every TLS and thread-specific destructor has run.
    /// A library with pending TLS destructors is not unloaded by `dlclose`. So until the
    /// thread has exited the memory stays valid; after [`ThreadLocal`]'s `drop` it holds
    /// `entered == true`, which makes this return `None` (the bytes of `entered` are a
    /// `Cell<bool>` with no drop glue, untouched by the drop of `local`).
    ///
    /// # Safety
    /// `handle` came from [`thread_handle`] on the calling thread.
    #[inline(always)]
    pub unsafe fn with_local_at<R>(
        handle: NonNull<ThreadLocal>,
        f: impl FnOnce(&mut Local) -> R,
    ) -> Option<R> {
        // SAFETY: the handle is the calling thread's (the caller's promise) and its memory
        // outlives every use on that thread (above); only shared references to the cell-based
        // state are made, as `with_local` makes them.
        enter(unsafe { handle.as_ref() }, f)
    }
}

#[cfg(not(feature = "std"))]
mod imp {
    use super::bare::select;
    use crate::local::Local;

    /// Runs `f` on the stream the installed selector names (the one main stream until a
    /// runtime installs one); `None` if that stream is busy (an interrupt that preempted a
    /// record of its own stream, or a stream that never records).
    #[inline(always)]
    pub fn with_local<R>(f: impl FnOnce(&mut Local) -> R) -> Option<R> {
        select().with(f)
    }
}

/// Recording streams without threads: one [`Local`] per stream a bare-metal runtime defines
/// (the main loop, each interrupt priority level), and the selector that says which one the
/// running code is in.
///
/// Two records of one stream never interleave as long as a stream is never preempted by
/// code that records into the same stream: on a Cortex-M, one stream per priority level
/// holds this, since an exception never preempts one of its own priority. The `taken` flag
/// still catches a mistake in the mapping: the inner record is skipped, never interleaved.
///
/// The types are compiled with `std` too, so that a bare-metal runtime builds (and its tests
/// run) on a host whose build has `std` on; there each thread keeps its own stream and the
/// selector is not consulted.
mod bare {
    use crate::local::Local;
    use core::{
        cell::UnsafeCell,
        sync::atomic::{AtomicBool, AtomicUsize, Ordering},
    };

    /// One recording stream on bare metal: its [`Local`] and whether a record is using it.
    pub struct BareStream {
        taken: AtomicBool,
        local: UnsafeCell<Local>,
    }

    // SAFETY: `local` is only reached through `with`, which holds `taken` exclusively.
    unsafe impl Sync for BareStream {}

    impl BareStream {
        /// A stream that has recorded nothing yet.
        pub const fn new() -> BareStream {
            BareStream { taken: AtomicBool::new(false), local: UnsafeCell::new(Local::EMPTY) }
        }

        /// A stream that never records: what a selector names for code that has no stream.
        pub const fn refusing() -> BareStream {
            BareStream { taken: AtomicBool::new(true), local: UnsafeCell::new(Local::EMPTY) }
        }

        /// Runs `f` on this stream's state; `None` if a record is using it already.
        ///
        /// A runtime calls it from another stream's code to flush this one's staged records (with
        /// interrupts masked, so that the owner's records are not skipped meanwhile).
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
            if self.taken.swap(true, Ordering::Acquire) {
                return None;
            }
            // SAFETY: `taken` was false and is now ours, so no other reference to `local`
            // exists until it is stored false again below.
            let r = f(unsafe { &mut *self.local.get() });
            self.taken.store(false, Ordering::Release);
            Some(r)
        }
    }

    impl Default for BareStream {
        fn default() -> BareStream {
            BareStream::new()
        }
    }

    /// The stream of code the runtime's selector has not been asked about: everything,
    /// until [`set_stream_selector`] is called.
    #[cfg_attr(feature = "std", allow(dead_code))]
    static MAIN: BareStream = BareStream::new();

    /// The selector as a `fn() -> &'static BareStream` cast to `usize` (0: none).
    static SELECTOR: AtomicUsize = AtomicUsize::new(0);

    /// Installs the function that names the stream the running code records into, such as
    /// one stream per Cortex-M priority level read from the IPSR register. It runs on every
    /// record, so it should be a few instructions. Without `std` only; with `std` each thread
    /// is its own stream and this changes nothing.
    pub fn set_stream_selector(selector: fn() -> &'static BareStream) {
        SELECTOR.store(selector as usize, Ordering::Release);
    }

    /// The stream of the running code.
    #[cfg_attr(feature = "std", allow(dead_code))]
    #[inline(always)]
    pub(super) fn select() -> &'static BareStream {
        match SELECTOR.load(Ordering::Acquire) {
            0 => &MAIN,
            raw => {
                // SAFETY: the only non-zero value ever stored is a
                // `fn() -> &'static BareStream` cast to usize by `set_stream_selector`,
                // and function pointers and usize have the same size.
                let selector = unsafe { core::mem::transmute::<usize, fn() -> &'static BareStream>(raw) };
                selector()
            }
        }
    }
}

pub use bare::{set_stream_selector, BareStream};
pub use imp::with_local;
#[cfg(feature = "std")]
pub use imp::{thread_handle, with_local_at, ThreadLocal};
