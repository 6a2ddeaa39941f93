//! # waffle-export
//!
//! The second layer of waffle's reader: `trace.bin` files, or a decoded trace, written in the
//! formats other tools read — Perfetto, Jaeger, Zipkin, OTLP (JSON and protobuf), Chrome and
//! XSpace — and, with the `send` feature, posted to collectors (`send`) or followed while
//! they are written (`follow`).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("waffle-export-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let path = dir.join("run.bin");
//! {
//!     let _session = waffle_std::start(&path)?;
//!     let _step = waffle::span!("step", n = 1u64);
//! }
//! // Two passes over the file: the first learns what refers to what, the second writes.
//! let files = waffle_export::Files::scan(&[&path], waffle_export::Format::Zipkin, &mut |_| {})?;
//! let mut json = Vec::new();
//! files.write(&mut json, &mut |_| {})?;
//! let json = String::from_utf8(json)?;
//! assert!(json.starts_with('[') && json.contains(r#""name":"step""#));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! Each format is one module that sees only decoded data, never the bytes of a `trace.bin`: the
//! decoder's records as they stream, in two passes over the files ([`Files`]), so that memory
//! grows with open spans and cross-references, never with the records. A [`Trace`] already in
//! memory is played back as the same records ([`export`]). Every format's two passes are
//! driven by one scaffold (`passes`: sources, calibration, progress, the plan between the
//! passes). Perfetto has passes of its own (`perfetto::plan` and its writer); the others are
//! built on one stream of finished spans (`spans`). [`Format`] names the formats and picks one
//! from an output file's extension or a `--format` name.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::io::{self, Write};
use std::path::Path;

// The reader's modules, under the names the exporters use for them.
use waffle_read::{correlation, decode, matching, model, reader, Error};

use decode::ProcessStats;
use model::Trace;
use passes::{Plan, Scanned, Source};
use reader::Warning;

pub mod chrome;
mod file;
#[cfg(feature = "send")]
pub mod follow;
mod format;
mod index;
pub mod jaeger;
mod json_buf;
mod layout;
pub mod otlp;
mod passes;
pub mod perfetto;
mod process;
mod replay;
#[cfg(feature = "send")]
pub mod send;
mod spans;
pub mod xspace;
pub mod zipkin;

pub use file::write_file;
pub use format::{Format, UnknownFormat};

/// What a recorder's stop hook runs (`waffle_std::Config::at_stop`): it writes the closed
/// trace to each of `outputs`, in the format its name asks for, streaming the file in two passes
/// as `waffle-decode` does. The names are checked now, so that a misspelt one fails before
/// anything is recorded.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let export = waffle_export::at_stop(["run.pftrace", "run.jaeger.json"])?;
/// let _session = waffle_std::Config::new("run.bin").at_stop(export).start()?;
/// # Ok(()) }
/// ```
#[allow(clippy::type_complexity)]
pub fn at_stop<P: AsRef<Path>>(
    outputs: impl IntoIterator<Item = P>,
) -> Result<
    impl Fn(&Path) -> Result<(), Box<dyn std::error::Error + Send + Sync>> + Send + Sync + 'static,
    UnknownFormat,
> {
    let outputs = outputs
        .into_iter()
        .map(|p| {
            let p = p.as_ref();
            Format::from_path(p)
                .map(|f| (p.to_owned(), f))
                .ok_or_else(|| UnknownFormat { path: p.to_owned() })
        })
        .collect::<Result<Vec<_>, UnknownFormat>>()?;
    Ok(move |trace: &Path| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        for (out, format) in &outputs {
            let files = Files::scan(&[trace], *format, &mut |_| {})?;
            write_file(out, |w| files.write(w, &mut |_| {})).map_err(|e| Error::io(out, e))?;
        }
        Ok(())
    })
}

/// Files read once to learn the trace, ready to be written in one format: what
/// `waffle-decode FILES -o OUT` does, in bounded memory.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use waffle_export::{Files, Format};
/// let files = Files::scan(&["rank0.bin", "rank1.bin"], Format::Jaeger, &mut |_| {})?;
/// for w in files.warnings() {
///     eprintln!("warning: {w}");
/// }
/// waffle_export::write_file("run.jaeger.json".as_ref(), |out| files.write(out, &mut |_| {}))?;
/// # Ok(()) }
/// ```
pub struct Files {
    format: Format,
    scanned: Scanned<Plans>,
    xspace: xspace::Options,
    /// The threads the files may be read on.
    threads: usize,
}

/// The plans of the formats' first passes: Perfetto's own, or the span formats' shared one.
enum Plans {
    Perfetto(perfetto::Plan),
    Spans(spans::State),
}

impl Plan for Plans {
    fn processes(&self) -> &[process::ProcessInfo] {
        match self {
            Plans::Perfetto(p) => p.processes(),
            Plans::Spans(s) => s.processes(),
        }
    }

    fn processes_mut(&mut self) -> &mut [process::ProcessInfo] {
        match self {
            Plans::Perfetto(p) => p.processes_mut(),
            Plans::Spans(s) => s.processes_mut(),
        }
    }

    fn unmatch(&mut self) {
        match self {
            Plans::Perfetto(p) => p.unmatch(),
            Plans::Spans(s) => s.unmatch(),
        }
    }
}

impl Files {
    /// Reads `paths` (one `trace.bin` per process) once, for `format`; `progress` is told the
    /// bytes read. Fails when a file cannot be read or has no usable header.
    pub fn scan<P: AsRef<Path>>(
        paths: &[P],
        format: Format,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Files, Error> {
        Files::scan_threads(paths, format, 1, progress)
    }

    /// [`scan`](Files::scan) on up to `threads` threads (0 or 1: the calling thread only),
    /// where the format allows: Perfetto reads each file on a thread of its own and merges
    /// what it learnt in file order, and [`write`](Files::write) writes each file on a thread
    /// of its own where the files allow it ([`write_threads`](Files::write_threads)), so what
    /// is written is the same bytes with any number of threads; the other formats read their
    /// files one after the other. `progress` is told the bytes read on the calling thread.
    pub fn scan_threads<P: AsRef<Path>>(
        paths: &[P],
        format: Format,
        threads: usize,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Files, Error> {
        let scanned = match format {
            Format::Perfetto => {
                Scanned::scan_apart(paths, perfetto::Scan::new, threads, progress)?.map(Plans::Perfetto)
            }
            Format::Chrome => {
                Scanned::scan(paths, |_| spans::first_pass(chrome::LOGS), progress)?.map(Plans::Spans)
            }
            Format::Xspace => {
                Scanned::scan(paths, |_| spans::first_pass(xspace::LOGS), progress)?.map(Plans::Spans)
            }
            _ => Scanned::scan(paths, |_| spans::first_pass(spans::LOGS), progress)?.map(Plans::Spans),
        };
        Ok(Files { format, scanned, xspace: xspace::Options::default(), threads })
    }

    /// The threads [`write`](Files::write) writes the files on: for Perfetto, those given to
    /// the scan (at most one a file) when each file can be written by itself, which it can
    /// unless two files share ids (the same file given twice, say) or a correlation group
    /// with causes and effects is too large for the first pass to queue its members; else 1,
    /// as for the other formats.
    pub fn write_threads(&self) -> usize {
        match &self.scanned.plan {
            Plans::Perfetto(plan) if plan.apart => self.threads.clamp(1, plan.processes().len()),
            _ => 1,
        }
    }

    /// The format it was scanned for.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Problems in the files that were worked around.
    pub fn warnings(&self) -> &[Warning] {
        &self.scanned.warnings
    }

    /// Writes every process under `name` instead of the name its file gives: Jaeger's and
    /// Zipkin's service, OTLP's `service.name`, Perfetto's and Chrome's process name.
    /// [`processes`](Files::processes) reports the new name too.
    pub fn rename_processes(&mut self, name: &str) {
        self.scanned.rename_processes(name);
    }

    /// Leaves out the arrows between spans matched by order across ranks (the k-th span of a
    /// name on every rank, see [`crate::matching`]), which the Perfetto format draws by
    /// default; the other formats draw only recorded links and correlations anyway.
    pub fn unmatch(&mut self) {
        self.scanned.plan.unmatch();
    }

    /// Takes the spans named `names` for steps, in the XSpace format (see [`xspace`]).
    pub fn step_spans(&mut self, names: &[String]) {
        self.xspace.step_spans = names.to_vec();
    }

    /// Each file's process, in numbers.
    pub fn processes(&self) -> Vec<ProcessStats> {
        self.scanned.stats()
    }

    /// Reads the files again and writes them to `out`; `progress` is told the bytes read. A
    /// file that changed since the scan is an error.
    pub fn write(self, out: &mut dyn Write, progress: &mut dyn FnMut(u64)) -> io::Result<()> {
        let (plan, files) = self.scanned.take_plan();
        let spans = match plan {
            Plans::Perfetto(p) => {
                let files = Source::Files(Box::new(files.with(p)), progress);
                return perfetto::write_from(files, out, self.threads);
            }
            Plans::Spans(s) => Source::Files(Box::new(files.with(s)), progress),
        };
        match self.format {
            Format::Jaeger => jaeger::write_from(spans, out),
            Format::Zipkin => zipkin::write_from(spans, out),
            Format::Otlp => otlp::write_protobuf_from(spans, out),
            Format::OtlpJson => otlp::write_json_from(spans, out),
            Format::Chrome => chrome::write_from(spans, out),
            Format::Xspace => xspace::write_from(spans, &self.xspace, out),
            Format::Perfetto => unreachable!("Perfetto is scanned as such"),
        }
    }

    /// (Scanned for [`Format::Perfetto`].) [`write`](Files::write), then the tracks of
    /// `overlay` laid over the trace (see [`perfetto::overlay`]): under the process tracks of
    /// the files, or at the top.
    pub fn write_with_overlay(
        self,
        out: &mut dyn Write,
        overlay: &perfetto::overlay::Overlay,
        progress: &mut dyn FnMut(u64),
    ) -> io::Result<()> {
        match self.scanned.take_plan() {
            (Plans::Perfetto(p), files) => perfetto::write_with_overlay(
                Source::Files(Box::new(files.with(p)), progress),
                out,
                self.threads,
                overlay,
            ),
            _ => Err(io::Error::other(format!(
                "tracks are laid over a Perfetto trace, not {}",
                self.format.name()
            ))),
        }
    }

    /// (Scanned for [`Format::Xspace`].) Reads the files again and writes them under `dir` as
    /// TensorBoard's profile plugin lays a run out, `dir/plugins/profile/<run>/<host>.xplane.pb`,
    /// one file per host; `run` defaults to the time of the earliest record
    /// ([`xspace::run_name`]). The files written.
    pub fn write_xspace_dir(
        self,
        dir: &Path,
        run: Option<&str>,
        progress: &mut dyn FnMut(u64),
    ) -> io::Result<Vec<std::path::PathBuf>> {
        let options = self.xspace;
        match self.scanned.take_plan() {
            (Plans::Spans(s), files) if self.format == Format::Xspace => {
                xspace::write_dir_from(Source::Files(Box::new(files.with(s)), progress), &options, dir, run)
            }
            _ => Err(io::Error::other(format!(
                "a profile directory is written in the xspace format, not {}",
                self.format.name()
            ))),
        }
    }

    #[cfg(feature = "send")] // used by `follow` and `send` only
    /// The scanned files, for sending their spans.
    pub(crate) fn into_spans(self) -> Option<Scanned<spans::State>> {
        match self.scanned.take_plan() {
            (Plans::Spans(s), files) => Some(files.with(s)),
            (Plans::Perfetto(_), _) => None,
        }
    }
}

/// Writes `trace` to `out` in `format`.
pub fn export(trace: &Trace, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Perfetto => perfetto::write(trace, out),
        Format::Jaeger => jaeger::write(trace, out),
        Format::Zipkin => zipkin::write(trace, out),
        Format::Otlp => otlp::write_protobuf(trace, out),
        Format::OtlpJson => otlp::write_json(trace, out),
        Format::Chrome => chrome::write(trace, out),
        Format::Xspace => xspace::write(trace, &xspace::Options::default(), out),
    }
}
