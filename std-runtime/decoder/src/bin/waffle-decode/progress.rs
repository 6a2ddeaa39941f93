//! `waffle-decode`'s progress bar over the bytes it reads.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::{io::IsTerminal, path::PathBuf};

/// A progress bar over the bytes of both reads of the files, when stderr is a terminal.
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar over both reads of `inputs`, unless `quiet` or stderr is no terminal.
    pub(crate) fn new(quiet: bool, inputs: &[PathBuf]) -> Progress {
        Progress(progress_bar(quiet, inputs))
    }

    /// What a read tells as it goes.
    pub(crate) fn inc(&self) -> impl FnMut(u64) + '_ {
        move |n| {
            if let Some(bar) = &self.0 {
                bar.inc(n);
            }
        }
    }

    /// Prints a line above the bar.
    pub(crate) fn say(&self, line: String) {
        self.suspend(|| eprintln!("{line}"));
    }

    /// Runs `f` with the bar hidden.
    pub(crate) fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// The reads are over.
    pub(crate) fn done(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

fn progress_bar(quiet: bool, inputs: &[PathBuf]) -> Option<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let size: u64 = inputs.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let bar = ProgressBar::with_draw_target(Some(2 * size), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta} left)",
    );
    if let Ok(style) = style {
        bar.set_style(style);
    }
    Some(bar)
}
