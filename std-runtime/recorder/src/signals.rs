//! SIGTERM and SIGINT close the trace, then take their default action.
//!
//! A program stopped by `kill`, by a batch system at the end of its time limit, by `mpirun`
//! passing on a signal, or by Ctrl-C would otherwise leave a file without its last records and
//! without END. While a session records, these two signals get a handler — but only where their
//! disposition is still `SIG_DFL` when the session starts: a handler the program or a runtime
//! installed (CPython's for SIGINT, an MPI library's) is never replaced, and an ignored signal
//! stays ignored. When the session stops, the default is put back (if our handler is still the
//! one installed).
//!
//! The handler does only async-signal-safe things: it sets a flag, waits with `nanosleep` up to
//! [`CLOSE_WAIT`] for the collector to see the flag (it looks every [`POLL`]), run its last
//! pass — which copies what every thread still has staged, the interrupted one included — and
//! write CLOCK and END, flush and sync the file; then it resets the default disposition and
//! raises the signal again, so the process dies of it and its exit status says so. If the
//! interrupted thread held a lock the collector needs, the wait simply runs out and the process
//! still dies, with what earlier passes wrote. The collector thread blocks both signals, so the
//! handler never runs on the thread it waits for.

use std::{
    sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering},
    time::Duration,
};

/// The longest the handler waits for the collector to close the file.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How often the collector looks at the flag the handler sets.
pub(crate) const POLL: Duration = Duration::from_millis(2);

const SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

/// The signal caught (0: none since the session started).
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// Set once the collector has closed the file (or ended).
static CLOSED: AtomicBool = AtomicBool::new(true);
/// The process whose collector the handler waits for (a `fork` child has none).
static OWNER: AtomicU32 = AtomicU32::new(0);
/// Whether our handler was installed for `SIGNALS[i]`.
static INSTALLED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Called when a collector starts: clears the flags and installs the handler for each signal
/// whose disposition is `SIG_DFL`.
pub(crate) fn arm() {
    CAUGHT.store(0, Ordering::SeqCst);
    CLOSED.store(false, Ordering::SeqCst);
    OWNER.store(std::process::id(), Ordering::SeqCst);
    for (i, &sig) in SIGNALS.iter().enumerate() {
        if current(sig) == Some(libc::SIG_DFL) {
            let installed = set(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
            INSTALLED[i].store(installed, Ordering::SeqCst);
        }
    }
}

/// Called when the collector has ended: the file is closed, and each signal whose handler is
/// still ours gets `SIG_DFL` back.
pub(crate) fn disarm() {
    closed();
    for (i, &sig) in SIGNALS.iter().enumerate() {
        let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        if INSTALLED[i].swap(false, Ordering::SeqCst) && current(sig) == Some(ours) {
            set(sig, libc::SIG_DFL);
        }
    }
}

/// Whether a signal asked the session to close.
pub(crate) fn caught() -> bool {
    CAUGHT.load(Ordering::SeqCst) != 0
}

/// The collector has written END and flushed the file: a waiting handler may let the signal go.
pub(crate) fn closed() {
    CLOSED.store(true, Ordering::Release);
}

/// Blocks both signals in the calling thread (the collector), so that the kernel hands them to
/// another thread.
pub(crate) fn block_here() {
    // SAFETY: `set` is a local, initialised by `sigemptyset` before use; `pthread_sigmask` only
    // changes the calling thread's mask and reads `set`. A failure leaves the mask as it was,
    // which costs only the bounded wait if the signal ever lands on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// The handler installed for `sig` now, if it can be read.
fn current(sig: libc::c_int) -> Option<libc::sighandler_t> {
    // SAFETY: `old` is a local `sigaction` that the call fills in; a null new action only reads.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(sig, std::ptr::null(), &mut old) == 0).then_some(old.sa_sigaction)
    }
}

/// Installs `handler` (a function, or `SIG_DFL`) for `sig`; returns whether it was.
fn set(sig: libc::c_int, handler: libc::sighandler_t) -> bool {
    // SAFETY: `action` is a local, zeroed (an empty flag set) and then filled; `handler` is
    // `SIG_DFL` or `on_signal`, an `extern "C" fn(c_int)` that does only async-signal-safe
    // things, as a handler installed without `SA_SIGINFO` must be.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(sig, &action, std::ptr::null_mut()) == 0
    }
}

/// The handler: ask the collector to close the file, wait for it (bounded), then die of `sig`.
/// Only atomics, `getpid`, `nanosleep`, `sigaction` and `raise`: all async-signal-safe.
extern "C" fn on_signal(sig: libc::c_int) {
    let errno_at = errno_location();
    // SAFETY: `errno_location` gives this thread's errno (or null where unknown); reading it
    // and restoring it below keeps the interrupted code's value (nanosleep may change it).
    let errno = (!errno_at.is_null()).then(|| unsafe { *errno_at });
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if pid == OWNER.load(Ordering::SeqCst) {
        CAUGHT.store(sig, Ordering::SeqCst);
        let step = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        for _ in 0..CLOSE_WAIT.as_millis() {
            if CLOSED.load(Ordering::Acquire) {
                break;
            }
            // SAFETY: `step` is a valid timespec; a null remainder is allowed. An early return
            // (another signal) only shortens this step: the wait stays bounded.
            unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
        }
    }
    set(sig, libc::SIG_DFL);
    if let Some(errno) = errno {
        // SAFETY: the same valid pointer to this thread's errno as above.
        unsafe { *errno_at = errno };
    }
    // SAFETY: raise has no memory preconditions. The signal raised here is blocked while this
    // handler runs, so it is delivered, with its default action, as the handler returns.
    unsafe { libc::raise(sig) };
}

/// Where this thread's `errno` lives (null on a platform this file does not know).
fn errno_location() -> *mut libc::c_int {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: no preconditions; returns the calling thread's errno address.
    return unsafe { libc::__errno_location() };
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd", target_os = "dragonfly"))]
    // SAFETY: as above.
    return unsafe { libc::__error() };
    #[allow(unreachable_code)]
    std::ptr::null_mut()
}
