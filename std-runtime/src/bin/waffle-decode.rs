//! `waffle-decode`: turns one or many `trace.bin` files into a trace you can open.
//!
//! ```text
//! waffle-decode rank0.bin rank1.bin -o run.pftrace
//! waffle-decode rank0.bin rank1.bin -o run.jaeger.json     # .zipkin.json, .otlp.json, .otlp.pb,
//!                                                          # .chrome.json, or --format NAME
//! waffle-decode why rank0.bin rank1.bin --event "Output buffer is NaN after AllReduce" [--json]
//! ```

#![forbid(unsafe_code)]

use clap::{ArgGroup, Args, Parser, Subcommand};
use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};
use waffle_std::{
    analysis::{self, Selector, WhyError},
    decode,
    export::Format,
};

/// Decode waffle trace files into Perfetto, Jaeger or Zipkin traces, or explain what caused an
/// event (`why`).
#[derive(Parser, Debug)]
#[command(
    name = "waffle-decode",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// trace.bin files written by waffle, one per process.
    #[arg(required = true, value_name = "IN")]
    inputs: Vec<PathBuf>,

    /// Output file; its extension picks the format unless --format is given (.pftrace,
    /// .jaeger.json, .zipkin.json, .otlp.json, .otlp.pb, .chrome.json).
    #[arg(short, long, value_name = "OUT", required = true)]
    output: Option<PathBuf>,

    /// Output format: perfetto, jaeger, zipkin, otlp-json, otlp, chrome.
    #[arg(short, long, value_name = "FORMAT")]
    format: Option<String>,

    /// Print nothing but errors.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the causal chain from an event back to its root causes, across files.
    Why(WhyArgs),
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("symptom").required(true).args(["event", "id"])))]
struct WhyArgs {
    /// trace.bin files written by waffle, one per process.
    #[arg(required = true, value_name = "FILES")]
    inputs: Vec<PathBuf>,

    /// The symptom: an event's name (spans are searched when no event has it).
    #[arg(long, value_name = "NAME")]
    event: Option<String>,

    /// Which occurrence of --event, counting from 0 in time order across all files.
    #[arg(long, value_name = "N", requires = "event")]
    nth: Option<usize>,

    /// The symptom by id: 16 hex digits as printed, 0x followed by hex, or decimal.
    #[arg(long, value_name = "ID", value_parser = Selector::parse_id, conflicts_with = "event")]
    id: Option<u64>,

    /// Print JSON (its shape is documented in `waffle_std::analysis`) instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Why(args)) => why(args),
        None => run(&cli),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("waffle-decode: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    let output = cli.output.as_ref().ok_or("an output file (-o OUT) is required")?;
    let format = match &cli.format {
        Some(name) => Format::from_name(name)
            .ok_or_else(|| format!("unknown format `{name}`; known: {}", known_formats()))?,
        None => Format::from_path(output).ok_or_else(|| {
            format!(
                "cannot tell the format from `{}`; use an extension such as .pftrace or .jaeger.json, or --format",
                output.display()
            )
        })?,
    };
    let decoded = decode::decode_files(&cli.inputs).map_err(|e| e.to_string())?;
    for w in &decoded.warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    write_atomically(output, |out| waffle_std::export::export(&decoded.trace, format, out))
        .map_err(|e| format!("{}: {e}", output.display()))?;
    if !cli.quiet {
        summary(&decoded.trace, output, format);
    }
    Ok(())
}

/// The names `--format` takes, comma-separated.
fn known_formats() -> String {
    Format::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

/// `waffle-decode why`: the explanation on stdout, warnings and errors on stderr.
fn why(args: &WhyArgs) -> Result<(), String> {
    let selector = match (&args.event, args.id) {
        (_, Some(id)) => Selector::id(id),
        (Some(name), None) => Selector::name(name.clone(), args.nth.unwrap_or(0)),
        (None, None) => return Err("give the symptom with --event NAME or --id ID".into()),
    };
    let decoded = decode::decode_files(&args.inputs).map_err(|e| e.to_string())?;
    for w in &decoded.warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    let explanation = analysis::why(&decoded.trace, &selector).map_err(|e| match e {
        WhyError::NthOutOfRange { count, .. } => format!("{e}; --nth takes 0 to {}", count - 1),
        e => e.to_string(),
    })?;
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&explanation.to_json()).map_err(|e| e.to_string())?;
        json.push('\n');
        json
    } else {
        explanation.to_text()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
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
