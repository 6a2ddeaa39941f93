//! Where the frames go: an [`Output`] for bytes the application chooses.
//!
//! A closure over a byte slice is an output: `|bytes: &[u8]| uart.write_all(bytes)`, a copy into
//! an RTT up-channel, or into a buffer the application keeps. On Cortex-M targets,
//! `SemihostingFile` writes to a file on the host of a debugger or of QEMU.

/// A destination for the bytes of a `trace.bin`.
pub trait Output {
    /// What a failed write reports.
    type Error;

    /// Writes all of `bytes`, in order after what was written before.
    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;
}

/// Any `FnMut(&[u8])` is an output that cannot fail (a blocking UART write, say).
impl<F: FnMut(&[u8])> Output for F {
    type Error = core::convert::Infallible;

    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self(bytes);
        Ok(())
    }
}

#[cfg(all(target_arch = "arm", target_os = "none"))]
pub use semihosting::{SemihostingError, SemihostingFile};

#[cfg(all(target_arch = "arm", target_os = "none"))]
mod semihosting {
    use cortex_m_semihosting::{nr, syscall};

    /// A file on the debugger's or QEMU's host, written through semihosting (slow: each
    /// write stops the core while the host works, so drain rarely, or at the end). A
    /// debugger must be attached (or QEMU run with `-semihosting`), else the first call
    /// faults.
    pub struct SemihostingFile {
        fd: usize,
    }

    /// The host refused to open or to write the file (or the path has no final NUL).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct SemihostingError;

    impl SemihostingFile {
        /// Creates (or truncates) the host file `path` for binary writing, relative to the
        /// host's working directory. `path` ends with a NUL byte, as semihosting wants
        /// (`"trace.bin\0"`); `Err` if it does not, or if the host refuses.
        pub fn create(path: &str) -> Result<SemihostingFile, SemihostingError> {
            let bytes = path.as_bytes();
            if bytes.last() != Some(&0) {
                return Err(SemihostingError);
            }
            // SAFETY: SYS_OPEN reads `len` bytes of the name (NUL-terminated, checked above)
            // and writes nothing of ours.
            let fd = unsafe { syscall!(OPEN, bytes.as_ptr(), nr::open::W_TRUNC_BINARY, bytes.len() - 1) };
            match fd as isize {
                -1 => Err(SemihostingError),
                _ => Ok(SemihostingFile { fd }),
            }
        }
    }

    impl super::Output for SemihostingFile {
        type Error = SemihostingError;

        fn write(&mut self, mut bytes: &[u8]) -> Result<(), SemihostingError> {
            while !bytes.is_empty() {
                // SAFETY: SYS_WRITE reads `bytes.len()` bytes of a live slice and writes none.
                let left = unsafe { syscall!(WRITE, self.fd, bytes.as_ptr(), bytes.len()) };
                match left {
                    0 => return Ok(()),
                    n if n <= bytes.len() => bytes = &bytes[bytes.len() - n..],
                    _ => return Err(SemihostingError),
                }
            }
            Ok(())
        }
    }

    impl Drop for SemihostingFile {
        fn drop(&mut self) {
            // SAFETY: SYS_CLOSE of the descriptor this value owns; it touches no memory.
            unsafe { syscall!(CLOSE, self.fd) };
        }
    }
}
