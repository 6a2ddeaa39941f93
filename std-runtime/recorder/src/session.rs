//! The running session: the one the process records into (started by `Config::start`), its
//! hooks at stop, and stopping it, by the program, at exit or for another session.

pub use crate::error::HookError;
use crate::{
    collector::{Collector, Stats},
    error::Error,
    hub::{self, Recorder, Remote},
    registry,
};
use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

mod automatic;
pub(crate) use automatic::replace_automatic;
pub(crate) use automatic::{automatic_path, replace_own_automatic, take_automatic, take_own_automatic};

/// A hook run on the closed trace file (see [`Config::at_stop`](crate::Config::at_stop)).
#[derive(Clone)]
pub(crate) struct AtStop(pub(crate) Arc<Hook>);

type Hook = dyn Fn(&Path) -> Result<(), HookError> + Send + Sync;

impl std::fmt::Debug for AtStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtStop(..)")
    }
}

/// The session recording now, if any. It lives here rather than in [`Session`] so that the
/// exit handler can close the file when the program calls `std::process::exit` without
/// dropping its session (see [`crate::crash`]).
static ACTIVE: Mutex<Option<Active>> = Mutex::new(None);

/// What stopping a session needs.
pub(crate) struct Active {
    pub(crate) epoch: u32,
    pub(crate) path: PathBuf,
    pub(crate) collector: Collector,
    /// What to run on the closed file.
    pub(crate) at_stop: Vec<AtStop>,
    /// The process that started it. A child made by `fork` has a copy of this but not the
    /// collector thread: it must neither wait for that thread nor write to the parent's file.
    pub(crate) pid: u32,
    /// Started by `WAFFLE_OUTPUT` rather than by the program ([`crate::autostart`]): an explicit
    /// start replaces it.
    pub(crate) automatic: bool,
    /// How long stopping waits for exiting threads' last records.
    pub(crate) exit_wait: Duration,
}

/// Takes the active session if it belongs to this process; a copy inherited through `fork` is
/// dropped without joining its (absent) collector, and recording in the child stops.
pub(crate) fn take_own(slot: &mut Option<Active>) -> Option<Active> {
    let a = slot.take()?;
    if a.pid == std::process::id() {
        return Some(a);
    }
    waffle::runtime::uninstall(a.epoch);
    std::mem::forget(a); // its thread and file handle belong to the parent
    None
}

pub(crate) fn active() -> std::sync::MutexGuard<'static, Option<Active>> {
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// At exit, how long without a thread giving its stream slot back ends the wait for the
/// others: threads that finished just before (scoped threads, whose destructors push their last
/// records after the scope has returned) give theirs back within it; threads still running
/// (an idle pool) never do, and cost the exit this long.
const EXIT_QUIET: Duration = Duration::from_millis(20);

/// Stops the session still active when the process exits (the exit handler's part, see
/// `crash.rs`). Threads that are finishing are waited for while they give their slots back
/// (see [`EXIT_QUIET`]); threads still running keep what they staged, and what they pushed is
/// written.
pub(crate) fn stop_at_exit() {
    if let Some(Err(e)) = stop_active(None, Wait::WhileReleasing { quiet: EXIT_QUIET }) {
        eprintln!("waffle: closing the trace at exit: {e}");
    }
}

/// The file the process's session records to, whichever copy of waffle runs it and however it
/// started; `None` if no session records.
pub fn current_path() -> Option<PathBuf> {
    let slot = hub::slot();
    if let Recorder::Other(remote) = slot.recorder() {
        return remote.info().map(|_| remote.path());
    }
    own_path()
}

/// Whether another copy of waffle in this process runs the session this copy records into.
pub fn recording_elsewhere() -> bool {
    matches!(hub::slot().recorder(), Recorder::Other(r) if r.info().is_some())
}

/// Pauses (`false`) or resumes (`true`) the process's session, whichever copy of waffle runs
/// it: every copy's spans and events stop recording (spans already open still end).
/// `waffle::set_enabled` pauses only the copy it is called in.
pub fn set_enabled(on: bool) {
    hub::set_enabled(on);
}

/// This copy's own session: its epoch and whether `WAFFLE_OUTPUT` started it.
pub(crate) fn own_session() -> Option<(u32, bool)> {
    let active = active();
    active.as_ref().filter(|a| a.pid == std::process::id()).map(|a| (a.epoch, a.automatic))
}

/// The file of this copy's own session.
pub(crate) fn own_path() -> Option<PathBuf> {
    let active = active();
    active.as_ref().filter(|a| a.pid == std::process::id()).map(|a| a.path.clone())
}

/// A recording session: the collector thread and the open file. Dropping it stops recording,
/// drains every buffer and closes the file; [`Session::stop`] does the same and reports errors.
///
/// If the program ends without dropping it (`std::process::exit`, or a panic that is not
/// unwound), an exit handler or the panic hook that [`Config::start`] installs saves what it can:
/// see `docs/reliability.md`.
#[must_use = "recording stops when the session is dropped"]
pub struct Session {
    epoch: u32,
    path: PathBuf,
    stopped: bool,
    /// The copy of waffle that runs it, if not this one.
    remote: Option<Remote>,
}

impl Session {
    /// The handle of the session just started with `epoch`, recording to `path`.
    pub(crate) fn started(epoch: u32, path: PathBuf) -> Session {
        Session { epoch, path, stopped: false, remote: None }
    }

    /// The handle of the session another copy of waffle runs.
    fn remote(epoch: u32, path: PathBuf, remote: Remote) -> Session {
        Session { epoch, path, stopped: false, remote: Some(remote) }
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops recording and closes the file, returning the session's totals.
    ///
    /// Records staged by this thread are written. Threads that have exited are waited for
    /// (their last records are pushed as they exit); what threads still running (idle or
    /// blocked) staged since their last push is copied into the file by the collector's last
    /// pass (a TAIL frame); what they record after the stop is not kept.
    pub fn stop(mut self) -> Result<Stats, Error> {
        self.finish()
    }

    fn finish(&mut self) -> Result<Stats, Error> {
        if std::mem::replace(&mut self.stopped, true) {
            return Ok(Stats::default());
        }
        if let Some(remote) = self.remote {
            let r = remote.stop(self.epoch);
            if r.status == 2 {
                let e = std::io::Error::other(format!(
                    "stopping the session of {}; see its message",
                    remote.image()
                ));
                return Err(Error::io(&self.path, e));
            }
            return Ok(Stats {
                data_bytes: r.data_bytes,
                data_frames: r.data_frames,
                dropped: r.dropped,
                streams: r.streams,
                slots: r.slots,
                refused_threads: r.refused_threads,
                tail_frames: r.tail_frames,
            });
        }
        stop_active(Some(self.epoch), Wait::Full).unwrap_or_else(|| Ok(Stats::default()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            eprintln!("waffle: {e}");
        }
    }
}

/// How stopping waits for threads that still own a stream slot. A thread that has finished
/// pushes its last records from a thread-local destructor, which may still be running: a scoped
/// thread, for one, counts as done once its closure returns, before its destructors run.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// Up to the session's exit wait (a drop or `stop`, after the program's own threads).
    Full,
    /// Up to the session's exit wait, but only while slots keep coming back: giving up after
    /// `quiet` without one. For the exit of the process, where threads still running (an idle
    /// pool) may never give theirs back.
    WhileReleasing {
        /// How long without a slot coming back ends the wait.
        quiet: Duration,
    },
}

/// Stops the active session (only if its epoch is `epoch`, when given): ends recording, pushes
/// this thread's staged records, waits as `wait` says for exiting threads to push theirs, then
/// lets the collector write the last data, the clock and the END frame. `None` if there was no
/// such session (already stopped, for instance by the exit handler).
pub(crate) fn stop_active(epoch: Option<u32>, wait: Wait) -> Option<Result<Stats, Error>> {
    // The locks are held to the end, so that a new session cannot start while this one closes.
    let slot = hub::slot();
    let mut guard = active();
    if epoch.is_some_and(|e| guard.as_ref().is_some_and(|a| a.epoch != e)) {
        return None;
    }
    let a = take_own(&mut guard)?;
    Some(close(a, wait, &slot))
}

/// Stops the session `a`, taken from [`ACTIVE`] by a caller that still holds the lock (and the
/// process's session, `slot`): the copies that joined it leave it first, so that their last
/// records reach it while it still records.
fn close(a: Active, wait: Wait, slot: &hub::Slot) -> Result<Stats, Error> {
    let Active { epoch, path, collector, at_stop, exit_wait, .. } = a;
    slot.release();
    waffle::runtime::uninstall(epoch);
    waffle::local::with_local(|l| l.release());
    let start = Instant::now();
    let (mut owned, mut last_release) = (registry::owned(), start);
    while owned > 0 && start.elapsed() < exit_wait {
        if let Wait::WhileReleasing { quiet } = wait {
            if last_release.elapsed() >= quiet {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
        let now = registry::owned();
        if now < owned {
            last_release = Instant::now();
        }
        owned = now;
    }
    let stats = collector.finish();
    // Its last pass is over, whether or not it could write: what threads of this session still
    // stage is never pushed (it is in this file, or could not be).
    waffle::runtime::closed(epoch);
    let stats = stats.map_err(|e| Error::io(&path, e))?;
    for hook in &at_stop {
        (hook.0)(&path).map_err(|source| Error::AtStop { path: path.clone(), source })?;
    }
    Ok(stats)
}
