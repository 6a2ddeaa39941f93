//! [`Slot`]: the process's session as this copy sees it, the hub locked while it is held;
//! who records ([`Recorder`]), and taking or giving up the session through it.

use super::*;

/// The process's session as this copy sees it, with the hub locked while this is held: it
/// cannot change hands meanwhile, except through this copy.
pub(crate) struct Slot {
    _lock: Option<Locked>,
}

/// Who records in the process.
pub(crate) enum Recorder {
    /// Nobody else (this copy may, or nobody does).
    Free,
    /// Another copy of the same protocol: its session.
    Other(Remote),
    /// A copy of another protocol, recording into this file.
    Foreign(PathBuf),
}

/// Locks the process's session (see [`Slot`]).
pub(crate) fn slot() -> Slot {
    register();
    Slot { _lock: hub().map(Locked::take) }
}

impl Slot {
    /// Who records now.
    pub(crate) fn recorder(&self) -> Recorder {
        if let Some(hub) = hub() {
            let owner = hub.owner.load(Ordering::Acquire);
            if std::ptr::eq(owner, &MODULE) {
                return Recorder::Free;
            }
            if let Some(m) = owner_of(hub) {
                return Recorder::Other(Remote(m));
            }
        }
        // Nobody of this protocol: a copy of another one may record, through the first fields
        // of this hub or of its own.
        match head() {
            Some(head) if head.recording.load(Ordering::Acquire) != 0 => {
                let file = head.file.load(Ordering::Acquire);
                // SAFETY: a non-null `file` is a NUL-terminated string its owner keeps for the
                // life of the process (the frozen part of every protocol).
                let name =
                    (!file.is_null()).then(|| unsafe { CStr::from_ptr(file) }.to_string_lossy().into_owned());
                Recorder::Foreign(PathBuf::from(name.unwrap_or_default()))
            }
            _ => Recorder::Free,
        }
    }

    /// Makes this copy's new session, recording into `path`, the process's, and has every
    /// other copy join it.
    pub(crate) fn claim(&self, path: &Path) {
        let file = published(path);
        if let Some(head) = head() {
            head.file.store(file, Ordering::Release);
            head.recording.store(1, Ordering::Release);
        }
        let Some(hub) = hub() else { return };
        hub.owner.store((&MODULE as *const Module).cast_mut(), Ordering::Release);
        for m in others(hub) {
            (m.joined)(&MODULE);
        }
    }

    /// This copy's session ends: the others leave it.
    pub(crate) fn release(&self) {
        if let Some(head) = head() {
            head.recording.store(0, Ordering::Release);
        }
        let Some(hub) = hub() else { return };
        if hub
            .owner
            .compare_exchange(
                (&MODULE as *const Module).cast_mut(),
                std::ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            for m in others(hub) {
                (m.joined)(std::ptr::null());
            }
        }
    }
}
