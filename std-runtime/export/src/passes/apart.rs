//! Files read apart, on as many threads as there are to read them.
//!
//! - The first pass ([`Scanned::scan_apart`]): each file by a pass of its own, the passes
//!   merged in file order ([`Split`]) as they come in. A thread reading files tells the calling
//!   thread the bytes it reads and hands it each finished pass; the calling thread reports
//!   progress and merges, so the merged pass is the same however the files were shared out.
//! - The second pass, where the format's plan lets each file be written by itself
//!   ([`Scanned::write_apart`]): each file written by a pass of its own into blocks that the
//!   calling thread writes out in file order, so the output is the same bytes as one pass
//!   over every file.

use std::{
    io::{self, Write},
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc, Condvar, Mutex,
    },
};

use super::{Input, Origin, Records, Scanned, Split};
use crate::{reader::Warning, Error};

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
            return merging.into_scanned(|| first(files), 1);
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
        merging.into_scanned(|| first(files), threads)
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

    fn into_scanned(self, empty: impl FnOnce() -> F, threads: usize) -> Result<Scanned<F::Plan>, Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let plan = self.merged.unwrap_or_else(empty).into_plan_on(threads);
        Ok(Scanned { inputs: self.inputs, plan, warnings: self.warnings })
    }
}

/// How many bytes of files' outputs may wait in memory for the files before them to be
/// written out: beyond, a file's output waits in a temporary file, and no file is begun more
/// than a file per thread ahead. (In unit tests no block waits in memory, so that they spill.)
const WAITING: usize = if cfg!(test) { 1 } else { 256 << 20 };

/// A file's output while the files before it are written out: blocks in memory, then, once
/// those of every file hold [`WAITING`] bytes, the rest in a temporary file.
#[derive(Default)]
struct Held {
    blocks: Vec<Vec<u8>>,
    spilled: Option<Spill>,
    /// Bytes held, in memory and spilled.
    bytes: usize,
}

/// A temporary file, removed when dropped.
struct Spill {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl Spill {
    fn new() -> io::Result<Spill> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("waffle-decode-{}-{n}.part", std::process::id()));
        let file = std::fs::File::options().read(true).write(true).create_new(true).open(&path)?;
        Ok(Spill { file, path })
    }

    /// Writes what it holds to `out`.
    fn copy_to(&mut self, out: &mut dyn Write) -> io::Result<()> {
        use io::{Read, Seek};
        self.file.seek(io::SeekFrom::Start(0))?;
        let mut block = vec![0u8; 1 << 20];
        loop {
            match self.file.read(&mut block)? {
                0 => return Ok(()),
                n => out.write_all(&block[..n])?,
            }
        }
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What a thread writing files tells the one writing them out.
enum Written {
    /// Bytes read.
    Read(u64),
    /// The next bytes of file `.0`'s output.
    Bytes(usize, Vec<u8>),
    /// File `.0` is written.
    Done(usize, io::Result<()>),
}

/// A file's output, handed block by block to the thread writing the files out.
struct Blocks<'a> {
    file: usize,
    tx: &'a mpsc::Sender<Written>,
    /// Blocks written out, to be filled again (a fresh one is pages the kernel must map).
    spare: &'a Mutex<Vec<Vec<u8>>>,
}

impl Write for Blocks<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut block = self.spare.lock().ok().and_then(|mut spare| spare.pop()).unwrap_or_default();
        block.clear();
        block.extend_from_slice(buf);
        let closed = |_| io::Error::other("the output was closed");
        self.tx.send(Written::Bytes(self.file, block)).map_err(closed)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<P> Scanned<P> {
    /// The second pass with each file written by itself, on up to `threads` threads: `write`
    /// reads file `i`'s records into the output it is given, with `parts[i]` (what the plan
    /// gives that file). The outputs go to `out` in file order, from the calling thread,
    /// which `progress` is told the bytes read on. A file's output waits until the files before
    /// it are written out, in memory up to [`WAITING`] bytes in all, beyond that in a temporary
    /// file; no file is begun more than `threads` files ahead of the one being written out
    /// while more than that waits.
    /// A file that changed since the first pass is an error, as is the first error in file
    /// order, or `out`'s.
    pub(crate) fn write_apart<T: Send>(
        &self,
        parts: Vec<T>,
        threads: usize,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
        write: impl Fn(usize, T, &mut Records<'_>, &mut dyn Write) -> io::Result<()> + Sync,
    ) -> io::Result<()> {
        let files = self.inputs.len();
        let parts: Vec<Mutex<Option<T>>> = parts.into_iter().map(|p| Mutex::new(Some(p))).collect();
        let threads = threads.clamp(1, files.max(1));
        // Files written out so far and the bytes waiting, which the threads wait on to begin
        // a file further ahead.
        let (done, room) = (Mutex::new((0usize, 0usize)), Condvar::new());
        let (next, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Written>();
        let spare = Mutex::new(Vec::new());
        let keep = |block: Vec<u8>| {
            if let Ok(mut spare) = spare.lock() {
                if spare.len() < 2 * threads {
                    spare.push(block);
                }
            }
        };
        let inputs = &self.inputs;
        let one = |i: usize, tx: &mpsc::Sender<Written>| -> io::Result<()> {
            let input = &inputs[i];
            if Input::size(&input.path) != input.size {
                let path = input.path.display();
                return Err(io::Error::other(format!("{path}: changed while it was read")));
            }
            let part = parts[i].lock().map_err(|_| io::Error::other("a writer failed"))?.take();
            let part = part.ok_or_else(|| io::Error::other("a file written twice"))?;
            let mut read = |n| drop(tx.send(Written::Read(n)));
            let mut records = Records { from: Origin::File(&input.path, input.calibration, &mut read) };
            write(i, part, &mut records, &mut Blocks { file: i, tx, spare: &spare })
        };
        let mut error: Option<io::Error> = None;
        std::thread::scope(|s| {
            for _ in 0..threads {
                let (tx, next, stop, done, room, one) = (tx.clone(), &next, &stop, &done, &room, &one);
                s.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= files {
                        break;
                    }
                    let mut written = done.lock().unwrap_or_else(|e| e.into_inner());
                    while i >= written.0 + threads && written.1 > WAITING && !stop.load(Ordering::Relaxed) {
                        written = room.wait(written).unwrap_or_else(|e| e.into_inner());
                    }
                    drop(written);
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if tx.send(Written::Done(i, one(i, &tx))).is_err() {
                        break;
                    }
                });
            }
            drop(tx);
            let mut held: Vec<Held> = (0..files).map(|_| Held::default()).collect();
            // Bytes held in memory, over every file.
            let mut in_memory = 0;
            let mut ended: Vec<Option<io::Result<()>>> = (0..files).map(|_| None).collect();
            let mut current = 0;
            let fail = |error: &mut Option<io::Error>, e: io::Error| {
                error.get_or_insert(e);
                stop.store(true, Ordering::Relaxed);
                drop(done.lock());
                room.notify_all();
            };
            // Ends when every writer has.
            for report in rx {
                match report {
                    Written::Read(n) => progress(n),
                    Written::Bytes(_, _) if error.is_some() => {}
                    Written::Bytes(i, bytes) if i == current => {
                        if let Err(e) = out.write_all(&bytes) {
                            fail(&mut error, e);
                        }
                        keep(bytes);
                    }
                    Written::Bytes(i, bytes) => {
                        done.lock().unwrap_or_else(|e| e.into_inner()).1 += bytes.len();
                        let h = &mut held[i];
                        h.bytes += bytes.len();
                        if h.spilled.is_none() && in_memory + bytes.len() <= WAITING {
                            in_memory += bytes.len();
                            h.blocks.push(bytes);
                            continue;
                        }
                        let spilled = match h.spilled.take() {
                            Some(spill) => Ok(spill),
                            None => Spill::new(),
                        };
                        match spilled.and_then(|mut spill| spill.file.write_all(&bytes).map(|()| spill)) {
                            Ok(spill) => h.spilled = Some(spill),
                            Err(e) => fail(&mut error, io::Error::other(format!("a temporary file: {e}"))),
                        }
                        keep(bytes);
                    }
                    Written::Done(i, result) => {
                        ended[i] = Some(result);
                        // The files now complete in order are written out.
                        while error.is_none() {
                            match ended.get_mut(current).and_then(Option::take) {
                                None => break,
                                Some(Err(e)) => fail(&mut error, e),
                                Some(Ok(())) => {
                                    current += 1;
                                    let Some(mut h) = held.get_mut(current).map(std::mem::take) else {
                                        continue;
                                    };
                                    in_memory -= h.blocks.iter().map(Vec::len).sum::<usize>();
                                    let mut written = done.lock().unwrap_or_else(|e| e.into_inner());
                                    *written = (current, written.1 - h.bytes);
                                    drop(written);
                                    room.notify_all();
                                    for bytes in h.blocks.drain(..) {
                                        if let Err(e) = out.write_all(&bytes) {
                                            fail(&mut error, e);
                                            break;
                                        }
                                        keep(bytes);
                                    }
                                    if let (Some(spill), None) = (&mut h.spilled, &error) {
                                        if let Err(e) = spill.copy_to(out) {
                                            fail(&mut error, e);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        });
        match error {
            Some(e) => Err(e),
            None => out.flush(),
        }
    }
}

#[cfg(test)]
mod tests;
