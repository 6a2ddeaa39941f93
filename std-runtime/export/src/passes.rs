//! The two passes every streaming format makes over the records, driven in one place.
//!
//! An exporter must know things about the whole trace before it writes its first byte: which
//! items others refer to, where those end up, the processes and their threads (a thread's name
//! may come after its records). So each format reads the records twice. Its first pass
//! ([`FirstPass`]) is a decoder [`Sink`] that keeps only what cross-references need and leaves
//! a [`Plan`]; its second pass (a [`Pass`] built from that plan) writes as records arrive.
//! Neither keeps the records: memory grows with open spans and cross-references, never with
//! the files.
//!
//! What every format shares lives here:
//! - **where records come from** ([`Records`]): a `trace.bin` file streamed by the decoder, or
//!   a [`Trace`] in memory played back as the same records (`replay`);
//! - **calibration**: every tick of a file is converted with its last CLOCK frame's
//!   calibration, found from the frame heads before each pass reads the file
//!   ([`Records::calibration`]); a pass's sink takes it in place of the header's. (The sink
//!   is told, rather than handed a header rewritten by a wrapping sink: such a wrapper would
//!   forward every `Sink` method, and would silently stop forwarding one the decoder adds.)
//! - **progress**: both passes tell the caller every byte they read;
//! - **process order**: files are read one after the other, in the order given, each one
//!   process; the plan keeps each one's [`ProcessInfo`], which renaming and the summary use;
//! - **the files between the passes**: a file whose size changed since the first pass is an
//!   error of the second.
//!
//! - **threads**: a first pass that can read each file on its own and be merged in file order
//!   ([`Split`]) reads the files on as many threads as it is given
//!   ([`Scanned::scan_apart`]); with one, the same per-file passes are made one after the
//!   other and merged the same way, so the plan, and everything written from it, is the same
//!   bytes whatever the number of threads. A format whose first pass is not split reads its
//!   files one after the other ([`Scanned::scan`]). Every second pass reads them one after
//!   the other: it numbers what it writes (tracks, sequences, flows met) as it goes, across
//!   files.
//!
//! What cannot be shared is each format's sinks: Perfetto's first pass counts references and
//! lets the decoder skip every item that refers nowhere (`Sink::EVERY_ITEM`), while the span
//! formats' first pass must assemble every span to learn where each referenced item ends up,
//! so its two passes are the same sink run twice (`spans::assemble`). A new format plugs in by
//! giving its two passes and its plan, and a variant of [`Files`](super::Files)' plans.

use std::{
    io::{self, Read},
    path::{Path, PathBuf},
};
use waffle_wire::Calibration;

use super::process::ProcessInfo;
use crate::{
    decode::{run, stream::Sink, ProcessStats},
    model::Trace,
    reader::{FrameReader, Warning},
    Error,
};

mod apart;

/// The records a pass reads at one go: one file, or a whole model.
pub(crate) struct Records<'a> {
    from: Origin<'a>,
}

enum Origin<'a> {
    /// A `trace.bin`, its calibration, and who is told the bytes read.
    File(&'a Path, Option<Calibration>, &'a mut dyn FnMut(u64)),
    /// A decoded trace, every process of it.
    Trace(&'a Trace),
}

impl Records<'_> {
    /// The calibration every tick of the records is converted with, when it is not the
    /// header's: a file's last CLOCK frame's. (A model's times are nanoseconds already.)
    pub(crate) fn calibration(&self) -> Option<Calibration> {
        match self.from {
            Origin::File(_, cal, _) => cal,
            Origin::Trace(_) => None,
        }
    }

    /// Hands the records to `sink`; the file's warnings.
    pub(crate) fn decode<S: Sink>(&mut self, sink: &mut S) -> Result<Vec<Warning>, Error> {
        match &mut self.from {
            Origin::File(path, _, progress) => {
                let path: &Path = path;
                let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
                let input = io::BufReader::with_capacity(
                    1 << 20,
                    Counting { inner: file, progress: &mut **progress },
                );
                run::decode(FrameReader::new(input, path)?, path, sink)
            }
            Origin::Trace(trace) => {
                super::replay::replay(trace, sink);
                Ok(Vec::new())
            }
        }
    }
}

/// A reader that reports how much it read.
struct Counting<'a, R> {
    inner: R,
    progress: &'a mut dyn FnMut(u64),
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        (self.progress)(n as u64);
        Ok(n)
    }
}

/// One pass of a format over the records: its sink, fed one file (or one model) at a time.
pub(crate) trait Pass {
    /// Reads `records` into the format's sink; their warnings.
    fn read(&mut self, records: &mut Records<'_>) -> Result<Vec<Warning>, Error>;

    /// (Second pass.) After each file: the first error the output gave, if any. The pass
    /// stops there.
    fn written(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// (Second pass.) After the last file: writes what is left.
    fn finish(self) -> io::Result<()>
    where
        Self: Sized,
    {
        Ok(())
    }
}

/// A format's first pass: it learns what its second pass must know in advance.
pub(crate) trait FirstPass: Pass {
    /// What it leaves the second pass.
    type Plan: Plan;

    /// The pass is over.
    fn into_plan(self) -> Self::Plan;
}

/// A first pass that can read each file into a pass of its own, the passes then merged in file
/// order into what one pass over every file would have learnt; so files can be read on
/// several threads. Merging is what makes the plan: a pass over many files is the merge of its
/// per-file passes, however many threads read them.
pub(crate) trait Split: FirstPass + Send + Sized {
    /// `later`, a pass over the file after those this one read, joins it.
    fn merge(&mut self, later: Self);

    /// The pass is over: its plan, made on up to `threads` threads where the plan has parts
    /// that can be (the same plan with any number).
    fn into_plan_on(self, threads: usize) -> Self::Plan {
        let _ = threads;
        self.into_plan()
    }
}

/// What a first pass learnt, as every format's plan has it.
pub(crate) trait Plan {
    /// Each process (each file), in the order read.
    fn processes(&self) -> &[ProcessInfo];

    /// The same, to rename: the second pass takes processes from the plan, never from the
    /// headers it reads again, so a name given here is the one written.
    fn processes_mut(&mut self) -> &mut [ProcessInfo];

    /// Leaves out the arrows between spans matched by order across ranks, for the formats
    /// that draw them.
    fn unmatch(&mut self) {}
}

/// One input file, as the first pass found it.
struct Input {
    path: PathBuf,
    /// Its last CLOCK frame's calibration.
    calibration: Option<Calibration>,
    /// Its size, to tell whether it changed before the second pass.
    size: Option<u64>,
}

impl Input {
    fn new(path: &Path) -> Input {
        Input { path: path.to_owned(), calibration: run::final_calibration(path), size: Input::size(path) }
    }

    fn size(path: &Path) -> Option<u64> {
        std::fs::metadata(path).map(|m| m.len()).ok()
    }

    /// Reads the file into `pass`; its warnings.
    fn read(&self, pass: &mut impl Pass, progress: &mut dyn FnMut(u64)) -> Result<Vec<Warning>, Error> {
        pass.read(&mut Records { from: Origin::File(&self.path, self.calibration, progress) })
    }
}

/// Files after the first pass: the plan, and what the second pass reads again.
pub(crate) struct Scanned<P> {
    inputs: Vec<Input>,
    /// What the first pass learnt.
    pub(crate) plan: P,
    /// Problems in the files that were worked around.
    pub(crate) warnings: Vec<Warning>,
}

impl Scanned<()> {
    /// The first pass over `paths` (one `trace.bin` per process), with the pass `first`
    /// makes for that many files; `progress` is told the bytes read.
    pub(crate) fn scan<P: AsRef<Path>, F: FirstPass>(
        paths: &[P],
        first: impl FnOnce(usize) -> F,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Scanned<F::Plan>, Error> {
        let mut pass = first(paths.len());
        let mut inputs = Vec::with_capacity(paths.len());
        let mut warnings = Vec::new();
        for path in paths {
            let input = Input::new(path.as_ref());
            warnings.extend(input.read(&mut pass, &mut *progress)?);
            inputs.push(input);
        }
        Ok(Scanned { inputs, plan: pass.into_plan(), warnings })
    }

    /// The files with `plan`.
    pub(crate) fn with<P>(self, plan: P) -> Scanned<P> {
        self.map(|()| plan)
    }
}

impl<P> Scanned<P> {
    /// The same files with the plan `f` makes of this one.
    pub(crate) fn map<Q>(self, f: impl FnOnce(P) -> Q) -> Scanned<Q> {
        Scanned { inputs: self.inputs, plan: f(self.plan), warnings: self.warnings }
    }

    /// The plan, and the files without it (to be given another, [`with`](Scanned::with)).
    pub(crate) fn take_plan(self) -> (P, Scanned<()>) {
        let Scanned { inputs, plan, warnings } = self;
        (plan, Scanned { inputs, plan: (), warnings })
    }
}

impl<P: Plan> Scanned<P> {
    /// Each file's process, in numbers.
    pub(crate) fn stats(&self) -> Vec<ProcessStats> {
        self.plan.processes().iter().map(ProcessInfo::stats).collect()
    }

    /// Gives every process `name`.
    pub(crate) fn rename_processes(&mut self, name: &str) {
        for process in self.plan.processes_mut() {
            name.clone_into(&mut process.header.name);
        }
    }

    /// The second pass: reads the files again into the pass `second` makes of the plan.
    fn write<W: Pass>(self, second: impl FnOnce(P) -> W, progress: &mut dyn FnMut(u64)) -> io::Result<()> {
        let mut pass = second(self.plan);
        for input in &self.inputs {
            if Input::size(&input.path) != input.size {
                let path = input.path.display();
                return Err(io::Error::other(format!("{path}: changed while it was read")));
            }
            input.read(&mut pass, &mut *progress).map_err(io::Error::other)?;
            pass.written()?;
        }
        pass.finish()
    }
}

/// Where a format's second pass reads from: a model in memory, or files the first pass has
/// read.
pub(crate) enum Source<'a, P> {
    /// A decoded trace, played back as records.
    Trace(&'a Trace),
    /// Scanned files, read again; the progress callback is told the bytes read.
    Files(Box<Scanned<P>>, &'a mut dyn FnMut(u64)),
}

impl<P: Plan> Source<'_, P> {
    /// Runs the format's passes: for a model, `first` (made for its number of processes) and
    /// then the second; for files, only the second, from the plan of their scan. `second`
    /// makes the second pass of a plan.
    pub(crate) fn run<F, W>(
        self,
        first: impl FnOnce(usize) -> F,
        second: impl FnOnce(P) -> W,
    ) -> io::Result<()>
    where
        F: FirstPass<Plan = P>,
        W: Pass,
    {
        match self {
            Source::Trace(trace) => {
                let mut pass = first(trace.processes.len());
                pass.read(&mut Records { from: Origin::Trace(trace) }).map_err(io::Error::other)?;
                let mut pass = second(pass.into_plan());
                pass.read(&mut Records { from: Origin::Trace(trace) }).map_err(io::Error::other)?;
                pass.written()?;
                pass.finish()
            }
            Source::Files(scanned, progress) => scanned.write(second, progress),
        }
    }
}
