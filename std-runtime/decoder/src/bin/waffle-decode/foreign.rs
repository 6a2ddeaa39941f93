//! Other tools' traces among the inputs: each Chrome trace-event JSON file (the PyTorch
//! profiler's too, plain or gzipped) is converted into `trace.bin` files, one per process, in
//! a temporary directory that lives as long as the command; the command then reads those in
//! its place (`waffle_foreign`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};
use waffle_foreign::{sniff, Conversion};

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
        let mut conv = Conversion::read(path).map_err(|e| e.to_string())?;
        for w in conv.warnings() {
            eprintln!("waffle-decode: warning: {w}");
        }
        if self.dir.is_none() {
            let dir = tempfile::Builder::new().prefix("waffle-decode-").tempdir();
            self.dir = Some(dir.map_err(|e| format!("a temporary directory for {}: {e}", path.display()))?);
        }
        let dir = self.dir.as_ref().expect("made above").path().to_owned();
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let kind = if conv.is_profiler() { "PyTorch profiler trace" } else { "Chrome trace" };
        let mut written = Vec::new();
        for i in 0..conv.processes().len() {
            let p = conv.processes()[i].clone();
            // Named after the input, so that messages about it still say where it came from.
            let name = if conv.processes().len() == 1 {
                format!("{file}.bin")
            } else {
                format!("{file}.{}.bin", p.pid)
            };
            let target = dir.join(name);
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(&target).map_err(|e| format!("{}: {e}", target.display()))?,
            );
            conv.write(i, &mut f)
                .and_then(|()| std::io::Write::flush(&mut f))
                .map_err(|e| format!("{}: {e}", target.display()))?;
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
            let origin = match conv.processes().len() {
                1 => path.display().to_string(),
                _ => format!("{} (pid {})", path.display(), p.pid),
            };
            ORIGINS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(HashMap::new)
                .insert(target.clone(), origin);
            written.push(target);
        }
        Ok(written)
    }
}
