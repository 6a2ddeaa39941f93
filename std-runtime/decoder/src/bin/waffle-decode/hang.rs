//! `waffle-decode hang`: its arguments and its run.

use clap::Args;
use std::{io::Write, path::PathBuf};

#[derive(Args, Debug)]
pub(crate) struct HangArgs {
    /// trace.bin files written by waffle, one per process (rank).
    #[arg(required = true, value_name = "FILES")]
    pub(crate) inputs: Vec<PathBuf>,

    /// Print JSON (its shape is documented in `waffle_analyze::hang`) instead of
    /// text.
    #[arg(long)]
    json: bool,
}

/// `waffle-decode hang`: the report on stdout (exit status 0 whether or not something was
/// stuck), warnings and errors on stderr.
pub(crate) fn hang(args: &HangArgs) -> Result<(), String> {
    let (report, warnings) = waffle_analyze::hang::hang_files(&args.inputs).map_err(|e| e.to_string())?;
    for w in &warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?;
        json.push('\n');
        json
    } else {
        report.to_text()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
}
