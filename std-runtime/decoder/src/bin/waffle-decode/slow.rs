//! `waffle-decode waits`, `critical-path` and `profile`: why a run is slow, from its files.

use clap::Args;
use std::{io::Write, path::PathBuf};

#[derive(Args, Debug)]
pub(crate) struct WaitsArgs {
    /// trace.bin files of one run, one per process (rank).
    #[arg(required = true, value_name = "FILES")]
    inputs: Vec<PathBuf>,

    /// Print JSON (its shape is documented in `waffle_analyze::waits` and docs/waits.md)
    /// instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CriticalPathArgs {
    /// trace.bin files of one run, one per process (rank).
    #[arg(required = true, value_name = "FILES")]
    inputs: Vec<PathBuf>,

    /// Print JSON (its shape is documented in docs/waits.md) instead of text.
    #[arg(long)]
    json: bool,

    /// The path of one step: the spans with a `step` (or `iteration`) field equal to N.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    step: Option<i64>,
}

#[derive(Args, Debug)]
pub(crate) struct ProfileArgs {
    /// trace.bin files of one run, one per process (rank).
    #[arg(required = true, value_name = "FILES")]
    inputs: Vec<PathBuf>,

    /// Print JSON (its shape is documented in docs/waits.md) instead of text.
    #[arg(long, conflicts_with = "html")]
    json: bool,

    /// Write the profile as a self-contained HTML page (a heat map of the messages between
    /// ranks, a bar per rank, the table of spans) instead of printing text.
    #[arg(long, value_name = "OUT")]
    html: Option<PathBuf>,
}

/// Warnings and notes on stderr.
fn warn(warnings: &[waffle_read::reader::Warning], notes: &[String]) {
    for w in warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    for n in notes {
        eprintln!("waffle-decode: warning: {n}");
    }
}

fn print(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
}

fn pretty(json: &serde_json::Value) -> Result<String, String> {
    serde_json::to_string_pretty(json).map(|s| s + "\n").map_err(|e| e.to_string())
}

/// `waffle-decode waits`: the report on stdout, warnings and errors on stderr.
pub(crate) fn waits(args: &WaitsArgs) -> Result<(), String> {
    let (report, warnings) = waffle_analyze::waits::waits_files(&args.inputs).map_err(|e| e.to_string())?;
    warn(&warnings, &report.notes);
    print(&if args.json { pretty(&report.to_json())? } else { report.to_text() })
}

/// `waffle-decode critical-path`: the path on stdout, warnings and errors on stderr.
pub(crate) fn critical_path(args: &CriticalPathArgs) -> Result<(), String> {
    let (path, warnings) = waffle_analyze::critical_path::critical_path_files(&args.inputs, args.step)
        .map_err(|e| e.to_string())?;
    warn(&warnings, &path.notes);
    print(&if args.json { pretty(&path.to_json())? } else { path.to_text() })
}

/// `waffle-decode profile`: the profile on stdout, or the page in --html's file.
pub(crate) fn profile(args: &ProfileArgs) -> Result<(), String> {
    let (report, warnings) =
        waffle_analyze::profile::profile_files(&args.inputs).map_err(|e| e.to_string())?;
    warn(&warnings, &report.notes);
    if let Some(path) = &args.html {
        let page = report.to_html();
        waffle_export::write_file(path, |out| out.write_all(page.as_bytes()))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("wrote {} (profile page)", path.display());
        return Ok(());
    }
    print(&if args.json { pretty(&report.to_json())? } else { report.to_text() })
}
