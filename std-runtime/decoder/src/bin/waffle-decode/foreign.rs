//! Other tools' traces among the inputs: each Chrome trace-event JSON file (the PyTorch
//! profiler's too, plain or gzipped) is converted into `trace.bin` files, one per process, in
//! a temporary directory that lives as long as the command; the command then reads those in
//! its place (`waffle_foreign`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};
use waffle_foreign::{convert, sniff};
use waffle_read::threads::on_threads;

/// Each converted file, by the input it came from (its process's pid beside it when the input
/// held several): what reports name instead of the temporary file.
static ORIGINS: Mutex<Option<HashMap<PathBuf, String>>> = Mutex::new(None);

/// `text` with every converted file named by its input (in a JSON report, an input's name is
/// escaped as JSON escapes it).
pub(crate) fn name_inputs(mut text: String) -> String {
    let origins = ORIGINS.lock().unwrap_or_else(PoisonError::into_inner);
    for (converted, origin) in origins.iter().flatten() {
        let json = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let from = converted.display().to_string();
        if text.contains(&json(&from)) {
            text = text.replace(&json(&from), &json(origin));
        }
        if text.contains(&from) {
            text = text.replace(&from, origin);
        }
    }
    text
}

/// How a report names `path`: the input it was converted from, else itself.
pub(crate) fn display(path: &Path) -> String {
    let origins = ORIGINS.lock().unwrap_or_else(PoisonError::into_inner);
    origins.as_ref().and_then(|m| m.get(path).cloned()).unwrap_or_else(|| path.display().to_string())
}

/// The conversions of one command.
pub(crate) struct Foreign {
    quiet: bool,
    /// How many inputs are converted at once (the command's `-j`).
    threads: usize,
    dir: Option<tempfile::TempDir>,
}

impl Foreign {
    pub(crate) fn new(quiet: bool, threads: usize) -> Foreign {
        Foreign { quiet, threads, dir: None }
    }

    /// Replaces each JSON trace in `lists` with the `trace.bin` files of its processes, in
    /// place; says on stderr what each became and what it lost, in the order of the inputs. A
    /// path that is no JSON is left for the reader to judge. Several traces (the two sides of
    /// a `diff`) are converted at once, one thread each, up to the command's threads (`-j`).
    pub(crate) fn convert(&mut self, lists: &mut [&mut Vec<PathBuf>]) -> Result<(), String> {
        let jobs: Vec<(usize, usize)> = lists
            .iter()
            .enumerate()
            .flat_map(|(l, paths)| paths.iter().enumerate().map(move |(i, p)| (l, i, p)))
            .filter(|(_, _, p)| matches!(sniff(p), Ok(Some(_))))
            .map(|(l, i, _)| (l, i))
            .collect();
        if jobs.is_empty() {
            return Ok(());
        }
        if self.dir.is_none() {
            let dir = tempfile::Builder::new().prefix("waffle-decode-").tempdir();
            self.dir = Some(dir.map_err(|e| format!("a temporary directory for the converted traces: {e}"))?);
        }
        let dir = self.dir.as_ref().expect("made above").path();
        let inputs: Vec<&Path> = jobs.iter().map(|&(l, i)| lists[l][i].as_path()).collect();
        let done = on_threads(inputs.iter().copied().enumerate().collect(), self.threads, |(n, path)| {
            one(dir, n, path)
        });
        let mut converted = Vec::with_capacity(jobs.len());
        for (result, path) in done.into_iter().zip(&inputs) {
            let (written, notes) = result?;
            for w in &notes.warnings {
                eprintln!("waffle-decode: warning: {w}");
            }
            if !self.quiet {
                for line in &notes.processes {
                    eprintln!("{}: {line}", path.display());
                }
            }
            converted.push(written);
        }
        // Each converted input's place in its list takes its files; from the last, so that
        // the earlier places keep their indices.
        for (&(l, i), written) in jobs.iter().zip(converted).rev() {
            lists[l].splice(i..=i, written);
        }
        Ok(())
    }
}

/// What one conversion has to say: its warnings, and a line per process it wrote.
struct Notes {
    warnings: Vec<String>,
    processes: Vec<String>,
}

/// Converts input number `n`, `path`, into `dir`: its files, and what to say about it.
fn one(dir: &Path, n: usize, path: &Path) -> Result<(Vec<PathBuf>, Notes), String> {
    let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Named after the input and the process's number, so that messages about it still say
    // where it came from; numbered by input first, since two runs' traces often share a name
    // (`run_a/trace.json`, `run_b/trace.json`).
    let target = |i: usize| dir.join(format!("{n}-{file}.{i}.bin"));
    let done = convert(path, &mut |i, _| {
        let f = std::fs::File::create(target(i))?;
        Ok(Box::new(std::io::BufWriter::with_capacity(1 << 16, f)) as Box<dyn std::io::Write>)
    })
    .map_err(|e| e.to_string())?;
    let kind = if done.profiler { "PyTorch profiler trace" } else { "Chrome trace" };
    let mut written = Vec::new();
    let mut processes = Vec::new();
    for (i, p) in done.processes.iter().enumerate() {
        processes.push(format!(
            "{kind}, process {} (pid {}): {} threads, {} device queues, {} spans and events",
            p.name, p.pid, p.threads, p.device_threads, p.events
        ));
        let origin = match done.processes.len() {
            1 => path.display().to_string(),
            _ => format!("{} (pid {})", path.display(), p.pid),
        };
        ORIGINS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(HashMap::new)
            .insert(target(i), origin);
        written.push(target(i));
    }
    Ok((written, Notes { warnings: done.warnings, processes }))
}
