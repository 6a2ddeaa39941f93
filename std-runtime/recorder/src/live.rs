//! A copy of the trace for a live consumer, written from the collector thread: what
//! [`Config::live`](crate::Config::live) installs.
//!
//! [`Output`] is what the collector's frames go into: the file, and, when a live writer is set,
//! a copy of the same bytes gathered until the collector flushes (after each pass that wrote,
//! after the header, and after the END frame), then handed to the writer in one `write_all`.
//! Each hand-off is therefore whole frames, the first one starting with the file head, in file
//! order. The hot path is untouched: only the collector thread does any of this, and without a
//! live writer `Output` is the buffered file alone.
//!
//! The writer must not block (the decoder's `waffle_export::follow::Live` hands the bytes to a
//! thread of its own through a bounded queue); a writer that fails is dropped and the file goes
//! on without it. At stop, after the END frame has been handed over, the writer is dropped on
//! the collector thread, so a writer that finishes its work on drop delays the stop by that
//! long.

use std::{
    fs::File,
    io::{self, BufWriter, Write},
    sync::{Arc, Mutex},
};

/// A live writer as [`Config`](crate::Config) keeps it: taken by the first session that starts
/// from the config (a writer serves one trace).
#[derive(Clone)]
pub(crate) struct LiveWriter(pub(crate) Arc<Mutex<Option<Box<dyn Write + Send>>>>);

impl LiveWriter {
    pub(crate) fn new(writer: impl Write + Send + 'static) -> LiveWriter {
        LiveWriter(Arc::new(Mutex::new(Some(Box::new(writer)))))
    }

    /// The writer, if no session took it yet.
    pub(crate) fn take(&self) -> Option<Box<dyn Write + Send>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for LiveWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveWriter(..)")
    }
}

/// The trace file, and the copy for a live writer.
pub(crate) struct Output {
    file: BufWriter<File>,
    live: Option<Box<dyn Write + Send>>,
    /// Bytes written since the last flush, for the live writer.
    pending: Vec<u8>,
}

impl Output {
    pub(crate) fn new(file: BufWriter<File>, live: Option<Box<dyn Write + Send>>) -> Output {
        Output { file, live, pending: Vec::new() }
    }

    /// Syncs the file's data to disk.
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        self.file.get_ref().sync_data()
    }
}

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.file.write(bytes)?;
        if self.live.is_some() {
            self.pending.extend_from_slice(&bytes[..n]);
        }
        Ok(n)
    }

    /// Flushes the file, then hands what was written since the last flush to the live writer.
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()?;
        if let Some(live) = &mut self.live {
            if !self.pending.is_empty() {
                if let Err(e) = live.write_all(&self.pending).and_then(|()| live.flush()) {
                    eprintln!("waffle: the live copy of the trace stopped: {e}; the file goes on");
                    self.live = None;
                }
                self.pending.clear();
            }
        }
        Ok(())
    }
}
