//! `waffle-decode`: turns one or many `trace.bin` files into a trace you can open.
//!
//! ```text
//! waffle-decode rank0.bin rank1.bin -o run.pftrace
//! ```

#![forbid(unsafe_code)]

use clap::Parser;
use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};
use waffle_std::{decode, export::Format};

/// Decode waffle trace files into Perfetto traces.
#[derive(Parser, Debug)]
#[command(name = "waffle-decode", version, about, long_about = None)]
struct Cli {
    /// trace.bin files written by waffle, one per process.
    #[arg(required = true, value_name = "IN")]
    inputs: Vec<PathBuf>,

    /// Output file; its extension picks the format unless --format is given (.pftrace).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,

    /// Output format: perfetto.
    #[arg(short, long, value_name = "FORMAT")]
    format: Option<String>,

    /// Print nothing but errors.
    #[arg(short, long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("waffle-decode: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    let format = match &cli.format {
        Some(name) => {
            Format::from_name(name).ok_or_else(|| format!("unknown format `{name}`; known: perfetto"))?
        }
        None => Format::from_path(&cli.output).ok_or_else(|| {
            format!(
                "cannot tell the format from `{}`; use a .pftrace extension or --format",
                cli.output.display()
            )
        })?,
    };
    let decoded = decode::decode_files(&cli.inputs).map_err(|e| e.to_string())?;
    for w in &decoded.warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    write_atomically(&cli.output, |out| waffle_std::export::export(&decoded.trace, format, out))
        .map_err(|e| format!("{}: {e}", cli.output.display()))?;
    if !cli.quiet {
        summary(&decoded.trace, &cli.output, format);
    }
    Ok(())
}

/// Writes to a temporary file beside `path` and renames it, so a failed export never leaves a
/// half-written file under the final name.
fn write_atomically(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut out = BufWriter::new(File::create(&tmp)?);
        f(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn summary(trace: &waffle_std::model::Trace, out: &Path, format: Format) {
    for p in &trace.processes {
        let spans: usize = p.threads.iter().map(|t| t.spans.len()).sum();
        let events: usize = p.threads.iter().map(|t| t.events.len()).sum();
        eprintln!(
            "{}: pid {} ({}), {} threads, {spans} spans, {events} events{}{}",
            p.source,
            p.pid,
            p.name,
            p.threads.len(),
            if p.dropped > 0 {
                format!(", {} records DROPPED (buffers full)", p.dropped)
            } else {
                String::new()
            },
            if p.complete { "" } else { ", not closed cleanly" },
        );
    }
    eprintln!("wrote {} ({})", out.display(), format.name());
}
