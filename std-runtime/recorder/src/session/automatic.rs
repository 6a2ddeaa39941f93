//! The session `WAFFLE_OUTPUT` started: replaced by an explicit start (its file removed if
//! it recorded nothing), or taken over as an ordinary session.

use super::*;

/// Stops the automatic session `a` for an explicit start (the caller holds the lock): its file
/// stays if it recorded anything, and is removed if not, so that a program that starts its own
/// session early leaves only that session's file. Threads still running are not waited for,
/// as at exit: they may never give their slots back.
pub(crate) fn replace_automatic(a: Active, slot: &hub::Slot) {
    let path = a.path.clone();
    match close(a, Wait::WhileReleasing { quiet: EXIT_QUIET }, slot) {
        Ok(stats) if stats.data_frames == 0 => {
            let _ = std::fs::remove_file(&path);
        }
        Ok(_) => {}
        Err(e) => eprintln!("waffle: closing the trace WAFFLE_OUTPUT started: {e}"),
    }
}

/// Stops this copy's automatic session as an explicit start in another copy replaces it;
/// whether there was one.
pub(crate) fn replace_own_automatic() -> bool {
    let slot = hub::slot();
    let mut active = active();
    match take_own(&mut active) {
        Some(a) if a.automatic => {
            replace_automatic(a, &slot);
            true
        }
        other => {
            *active = other;
            false
        }
    }
}

/// The file of the session `WAFFLE_OUTPUT` started, while it records (in this copy of waffle
/// or in another one of the process).
pub(crate) fn automatic_path() -> Option<PathBuf> {
    let slot = hub::slot();
    if let Recorder::Other(remote) = slot.recorder() {
        return remote.info().filter(|i| i.automatic).map(|_| remote.path());
    }
    let active = active();
    active.as_ref().filter(|a| a.automatic && a.pid == std::process::id()).map(|a| a.path.clone())
}

/// The session `WAFFLE_OUTPUT` started (in any copy of waffle of the process), as a
/// [`Session`] that stops it when dropped; from then on it is an ordinary session, which an
/// explicit start no longer replaces.
pub(crate) fn take_automatic() -> Option<Session> {
    let slot = hub::slot();
    if let Recorder::Other(remote) = slot.recorder() {
        let info = remote.info().filter(|i| i.automatic)?;
        return remote.take().then(|| Session::remote(info.epoch, remote.path(), remote));
    }
    let mut active = active();
    let a = active.as_mut().filter(|a| a.automatic && a.pid == std::process::id())?;
    a.automatic = false;
    Some(Session::started(a.epoch, a.path.clone()))
}

/// Makes this copy's automatic session an ordinary one; whether there was one.
pub(crate) fn take_own_automatic() -> bool {
    let mut active = active();
    match active.as_mut().filter(|a| a.automatic && a.pid == std::process::id()) {
        Some(a) => {
            a.automatic = false;
            true
        }
        None => false,
    }
}
