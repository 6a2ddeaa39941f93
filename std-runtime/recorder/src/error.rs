//! Errors of the recorder.

use std::path::PathBuf;

/// The error an [`at_stop`](crate::Config::at_stop) hook returns.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// What can go wrong starting or stopping a session.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The trace file could not be created, written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A session is already recording in this process.
    #[error(
        "a waffle session is already recording in this process (to {0}); drop it before starting another"
    )]
    AlreadyStarted(PathBuf),
    /// Another copy of waffle in this process, of a version this one cannot record with,
    /// records into the file named.
    #[error("another copy of waffle in this process ({0:?}), of a version this one cannot join, is recording to {1}; this copy records nothing")]
    OtherCopy(String, PathBuf),
    /// `start` was called in the child of a `fork` of a process that had recorded: the
    /// parent's buffers and locks are not usable there.
    #[error("waffle cannot start recording in a child made by fork() after the parent recorded (its buffers and locks belong to the parent); start the session after exec(), or fork before recording")]
    ForkedChild,
    /// A hook given to [`Config::at_stop`](crate::Config::at_stop) failed on the closed trace.
    #[error("{path}: recorded, but what was asked at stop failed: {source}")]
    AtStop {
        /// The trace file, complete.
        path: PathBuf,
        /// What the hook said.
        #[source]
        source: HookError,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }
}
