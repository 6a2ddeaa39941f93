//! The first pass over files read apart: each file by a pass of its own, on as many threads as
//! it is given, the passes merged in file order ([`Split`]) as they come in. A thread reading
//! files tells the calling thread the bytes it reads and hands it each finished pass; the
//! calling thread reports progress and merges, so the merged pass is the same however the
//! files were shared out.

use std::{
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc,
    },
};

use super::{Input, Scanned, Split};
use crate::{error::Error, reader::Warning};

impl Scanned<()> {
    /// The first pass over `paths`, each file read by a pass of its own that `first` makes
    /// (told how many files there are in all), on up to `threads` threads, the passes merged in
    /// file order ([`Split`]); `progress` is told the bytes read, on the calling thread. The
    /// plan is the same with any number of threads; with one, the files are read on the
    /// calling thread, one after the other. An error is the first in file order.
    pub(crate) fn scan_apart<P: AsRef<Path>, F: Split>(
        paths: &[P],
        first: impl Fn(usize) -> F + Sync,
        threads: usize,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Scanned<F::Plan>, Error> {
        let paths: Vec<&Path> = paths.iter().map(AsRef::as_ref).collect();
        let files = paths.len();
        let read = |path: &Path, progress: &mut dyn FnMut(u64)| -> ReadApart<F> {
            let input = Input::new(path);
            let mut pass = first(files);
            let warnings = input.read(&mut pass, progress)?;
            Ok((pass, warnings, input))
        };
        let mut merging = Merging::new(files);
        let threads = threads.clamp(1, files.max(1));
        if threads == 1 {
            for (i, path) in paths.iter().enumerate() {
                if merging.done(i, read(path, &mut *progress)) {
                    break;
                }
            }
            return merging.into_scanned(|| first(files));
        }
        let (next, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Report<F>>();
        std::thread::scope(|s| {
            for _ in 0..threads {
                let (tx, next, stop, paths, read) = (tx.clone(), &next, &stop, &paths, &read);
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = paths.get(i) else { break };
                        let done = read(path, &mut |n| drop(tx.send(Report::Read(n))));
                        if tx.send(Report::Done(i, done)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            // Ends when every reader has.
            for report in rx {
                match report {
                    Report::Read(n) => progress(n),
                    Report::Done(i, done) => {
                        if merging.done(i, done) {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
        });
        merging.into_scanned(|| first(files))
    }
}

/// A file read by a first pass of its own: the pass, the file's warnings, the file.
type ReadApart<F> = Result<(F, Vec<Warning>, Input), Error>;

/// What a thread reading files tells the one merging them.
enum Report<F> {
    /// Bytes read.
    Read(u64),
    /// File `.0` is read.
    Done(usize, ReadApart<F>),
}

/// First passes of single files, merged in file order as they come, whatever order they are
/// read in.
struct Merging<F> {
    merged: Option<F>,
    inputs: Vec<Input>,
    warnings: Vec<Warning>,
    /// Files read ahead of the next one to merge.
    waiting: Vec<Option<ReadApart<F>>>,
    error: Option<Error>,
}

impl<F: Split> Merging<F> {
    fn new(files: usize) -> Self {
        let waiting = (0..files).map(|_| None).collect();
        Merging {
            merged: None,
            inputs: Vec::with_capacity(files),
            warnings: Vec::new(),
            waiting,
            error: None,
        }
    }

    /// File `i` is read: it, and those after it read already, are merged if every file before
    /// is. Whether an error stops the scan.
    fn done(&mut self, i: usize, read: ReadApart<F>) -> bool {
        self.waiting[i] = Some(read);
        while let Some(read) = self.waiting.get_mut(self.inputs.len()).and_then(Option::take) {
            match read {
                Ok((pass, warnings, input)) if self.error.is_none() => {
                    match &mut self.merged {
                        Some(merged) => merged.merge(pass),
                        None => self.merged = Some(pass),
                    }
                    self.warnings.extend(warnings);
                    self.inputs.push(input);
                }
                Ok(_) => break,
                Err(e) => {
                    // The first error in file order is the one told.
                    self.error.get_or_insert(e);
                    break;
                }
            }
        }
        self.error.is_some()
    }

    fn into_scanned(self, empty: impl FnOnce() -> F) -> Result<Scanned<F::Plan>, Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let plan = self.merged.unwrap_or_else(empty).into_plan();
        Ok(Scanned { inputs: self.inputs, plan, warnings: self.warnings })
    }
}
