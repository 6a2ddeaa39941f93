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
    dir: Option<tempfile::TempDir>,
}

impl Foreign {
    pub(crate) fn new(quiet: bool) -> Foreign {
        Foreign { quiet, dir: None }
    }

    /// Replaces each JSON trace in `paths` with the `trace.bin` files of its processes, in
    /// place; says on stderr what each became and what it lost. A path that is no JSON is
    /// left for the reader to judge.
    pub(crate) fn convert(&mut self, paths: &mut Vec<PathBuf>) -> Result<(), String> {
        let mut out = Vec::with_capacity(paths.len());
        for path in paths.drain(..) {
            match sniff(&path) {
                Ok(Some(_)) => out.extend(self.one(&path)?),
                _ => out.push(path),
            }
        }
        *paths = out;
        Ok(())
    }

    fn one(&mut self, path: &Path) -> Result<Vec<PathBuf>, String> {
        if self.dir.is_none() {
            let dir = tempfile::Builder::new().prefix("waffle-decode-").tempdir();
            self.dir = Some(dir.map_err(|e| format!("a temporary directory for {}: {e}", path.display()))?);
        }
        let dir = self.dir.as_ref().expect("made above").path().to_owned();
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // Named after the input and the process's number, so that messages about it still say
        // where it came from.
        let target = |i: usize| dir.join(format!("{file}.{i}.bin"));
        let done = convert(path, &mut |i, _| {
            let f = std::fs::File::create(target(i))?;
            Ok(Box::new(std::io::BufWriter::with_capacity(1 << 16, f)) as Box<dyn std::io::Write>)
        })
        .map_err(|e| e.to_string())?;
        for w in &done.warnings {
            eprintln!("waffle-decode: warning: {w}");
        }
        let kind = if done.profiler { "PyTorch profiler trace" } else { "Chrome trace" };
        let mut written = Vec::new();
        for (i, p) in done.processes.iter().enumerate() {
            if !self.quiet {
                eprintln!(
                    "{}: {kind}, process {} (pid {}): {} threads, {} device queues, {} spans and events",
                    path.display(),
                    p.name,
                    p.pid,
                    p.threads,
                    p.device_threads,
                    p.events
                );
            }
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
        Ok(written)
    }
}
