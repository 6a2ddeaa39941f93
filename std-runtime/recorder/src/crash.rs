//! Keeping what was recorded when the program ends abruptly.
//!
//! [`Config::start`](crate::Config::start) installs two hooks, once per process:
//!
//! - a **panic hook**, chained before the one that was installed: the panicking thread pushes
//!   its staged records ([`waffle::flush`]) and asks the collector for a drain pass and a file
//!   flush right away, waiting up to [`PANIC_FLUSH_WAIT`] for it. So a panic that is not
//!   unwound (`panic = "abort"`, or a hook that aborts) still leaves every record of the
//!   panicking thread, and what other threads pushed, in the file. A panic that unwinds out of
//!   `main` drops the session as usual, or reaches the exit handler.
//! - an **exit handler** (`atexit`): if the program calls `std::process::exit`, or returns from
//!   `main` while a session is still active (leaked, in a `static`, or the one `WAFFLE_OUTPUT`
//!   started, see [`crate::autostart`]), the session is stopped cleanly — last records, clock,
//!   END frame — as if it had been dropped.
//!
//! - a **fork handler** (`pthread_atfork`, child side): the child of a `fork` has none of the
//!   parent's threads, and any lock they held stays locked in it forever. The child stops
//!   recording at once and never touches the stream-slot pool again, so it can neither
//!   deadlock on it nor write into the parent's file.
//!
//! `SIGTERM` and `SIGINT` are handled per session, in `signals.rs`: the file is closed, then
//! the process dies of the signal.
//!
//! Nothing can run when the process is killed (`SIGKILL`) or calls `abort()`: there, the
//! periodic drain bounds the loss (the collector writes and flushes the file every drain
//! interval, a thread that keeps recording pushes its staged records at least that often, and
//! the collector copies what an idle or blocked thread staged, `tails.rs`).
//! `docs/reliability.md` gives the measured windows.

use std::{sync::Once, time::Duration};

/// How long the panic hook waits for the collector's pass before letting the panic go on.
pub(crate) const PANIC_FLUSH_WAIT: Duration = Duration::from_millis(500);

static INSTALL: Once = Once::new();

/// What the exit handler runs: stopping the session still active (the session module's, given
/// at install, so that this module needs nothing of it).
static ON_EXIT: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Installs the panic hook and the exit handler, once per process; the exit handler runs
/// `on_exit`.
pub(crate) fn install(on_exit: fn()) {
    if std::thread::panicking() {
        return; // `set_hook` may not be called while panicking; a later start installs them
    }
    INSTALL.call_once(|| {
        let _ = ON_EXIT.set(on_exit);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            on_panic();
            previous(info);
        }));
        // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds (it catches panics);
        // registering it has no other precondition. A failure (non-zero) only means the
        // session is not closed at exit, which the periodic drain already tolerates.
        let _ = unsafe { libc::atexit(at_exit) };
        // SAFETY: `in_forked_child` is an `extern "C" fn()` that only stores to atomics (which
        // is async-signal-safe, as a fork child handler must be) and never unwinds.
        let _ = unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
    });
}

/// Runs in the child of a `fork`, before `fork` returns there.
extern "C" fn in_forked_child() {
    waffle::runtime::uninstall(waffle::runtime::last_epoch());
    crate::registry::mark_forked();
}

/// The panicking thread's part: push its records, then have them written.
fn on_panic() {
    waffle::flush();
    crate::collector::request_flush(PANIC_FLUSH_WAIT);
}

/// Stops the session still active when the process exits (the `on_exit` given at install).
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(on_exit) = ON_EXIT.get() {
            on_exit();
        }
    });
}
