//! Errors of reading a trace.

use std::path::PathBuf;

/// What can go wrong reading a trace (or writing what was read from one).
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
    /// The file is not a waffle trace.
    #[error("{path}: not a waffle trace file (its first bytes are not the waffle magic)")]
    NotATrace {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a newer, incompatible waffle.
    #[error("{path}: trace format version {found} is newer than this decoder reads (up to {supported}); update waffle-decode")]
    UnknownVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u16,
        /// The newest version this build reads.
        supported: u16,
    },
    /// The file is damaged before anything usable.
    #[error("{path}: damaged at offset {offset}: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// What was wrong.
        what: String,
    },
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }
}
