//! `waffle-decode`: turns one or many `trace.bin` files into a trace you can open.
//!
//! ```text
//! waffle-decode rank0.bin rank1.bin -o run.pftrace
//! waffle-decode rank0.bin rank1.bin -o run.jaeger.json     # .zipkin.json, .otlp.json, .otlp.pb,
//!                                                          # .chrome.json, .xplane.pb, or --format NAME
//! waffle-decode rank0.bin rank1.bin -o logdir/ --step-span train_step   # TensorBoard's layout
//! waffle-decode rank0.bin rank1.bin --send zipkin=http://127.0.0.1:9411 \
//!                                    --send otlp=http://127.0.0.1:4318 [-o run.pftrace]
//! waffle-decode why rank0.bin rank1.bin --event "Output buffer is NaN after AllReduce" [--json]
//! waffle-decode why rank0.bin rank1.bin --first-nan
//! waffle-decode hang rank0.bin rank1.bin rank2.bin [--json]
//! waffle-decode waits rank0.bin rank1.bin rank2.bin [--json]     # who waited, for what delay
//! waffle-decode critical-path rank0.bin rank1.bin [--json] [--step N]
//! waffle-decode profile rank0.bin rank1.bin [--json | --html profile.html]
//! waffle-decode --follow rank0.bin rank1.bin --send otlp=http://127.0.0.1:4318   # while they run
//! waffle-decode --follow rank0.bin rank1.bin -o run.json       # Chrome JSON, grows as they run
//! waffle-decode diff base.bin new.bin [--json] [--html diff.html]
//! waffle-decode diff --base a0.bin a1.bin --new b0.bin b1.bin
//! ```
//!
//! Every format, and `--send`, is written in two streaming passes over the files (memory grows
//! with open spans and cross-references, not with records), with a progress bar over the bytes
//! read when stderr is a terminal (`--quiet` hides it).
//!
//! `--send` retries as [`waffle_export::send::Policy`] says; the environment can shorten it (for
//! tests): `WAFFLE_SEND_BACKOFF_MS` (the first wait; later waits double, up to 16 times it),
//! `WAFFLE_SEND_BUDGET_MS` (the time one request may take over all its attempts) and
//! `WAFFLE_SEND_ATTEMPTS`.

#![forbid(unsafe_code)]

use clap::{ArgGroup, Parser, Subcommand};
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};
#[path = "waffle-decode/diff.rs"]
mod diff;
#[path = "waffle-decode/follow.rs"]
mod follow;
#[path = "waffle-decode/foreign.rs"]
mod foreign;
#[path = "waffle-decode/hang.rs"]
mod hang;
#[path = "waffle-decode/progress.rs"]
mod progress;
#[path = "waffle-decode/slow.rs"]
mod slow;
#[path = "waffle-decode/why.rs"]
mod why;
use progress::Progress;
use waffle_export::{
    send::{self, Endpoint, Options, Policy},
    Files, Format,
};
use waffle_read::decode::ProcessStats;

// It links no recorder: `WAFFLE_OUTPUT` in its environment starts nothing here, so a fixed path
// there is never truncated by the tool about to read it.

/// Decode waffle trace files into Perfetto, Jaeger or Zipkin traces, or explain what caused an
/// event (`why`).
#[derive(Parser, Debug)]
#[command(
    group(ArgGroup::new("destination").required(true).multiple(true).args(["output", "send"])),
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

    /// trace.bin files written by waffle, one per process; Chrome trace JSON and PyTorch
    /// profiler traces (.json, .json.gz) too, each converted first.
    #[arg(required = true, value_name = "IN")]
    inputs: Vec<PathBuf>,

    /// Output file; its extension picks the format unless --format is given (.pftrace,
    /// .jaeger.json, .zipkin.json, .otlp.json, .otlp.pb, .chrome.json, .xplane.pb). A
    /// directory (one that exists, or a path ending in `/`) gets TensorBoard's profile layout,
    /// LOGDIR/plugins/profile/RUN/HOST.xplane.pb, one XSpace per host. Every format, and
    /// --send, is streamed in two passes over the inputs: memory stays bounded however large
    /// they are (it grows with the spans open at once and with cross-references, not with the
    /// records). With --follow, only OUT.json: Chrome JSON appended while the program runs.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,

    /// Output format: perfetto, jaeger, zipkin, otlp-json, otlp, chrome, xspace.
    #[arg(short, long, value_name = "FORMAT", requires = "output")]
    format: Option<String>,

    /// (xspace) Spans of this name are steps, for the profile plugin's step times (so are
    /// spans with a `step` field). May be given several times.
    #[arg(long, value_name = "NAME", requires = "output")]
    step_span: Vec<String>,

    /// (xspace, to a directory) The run's directory name under plugins/profile; by default the
    /// time of the earliest record, YYYY_MM_DD_HH_MM_SS (UTC).
    #[arg(long, value_name = "NAME", requires = "output")]
    run: Option<String>,

    /// Send the spans to a running backend: zipkin=URL (Zipkin v2 JSON to URL/api/v2/spans) or
    /// otlp=URL (OTLP/HTTP protobuf to URL/v1/traces). May be given several times, with or
    /// without -o.
    #[arg(long, value_name = "KIND=URL", value_parser = |s: &str| s.parse::<Endpoint>())]
    send: Vec<Endpoint>,

    /// The most spans one --send request carries.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    batch_spans: u32,

    /// Print nothing but errors (no summary, no progress bar).
    #[arg(short, long)]
    quiet: bool,

    /// (perfetto) Lay why the run is slow over the trace: a "waits" track under each rank
    /// with its wait states, a slice for each piece of work they were charged to with a flow
    /// to each wait it caused, and the critical path as a track of its own (see `waffle-decode
    /// waits` and `critical-path`). The files must be one whole run.
    #[arg(long, requires = "output")]
    waits: bool,

    /// Do not join spans matched by order across ranks (the k-th span of a name on each rank)
    /// with Perfetto flow arrows; draw only recorded links, parents and correlations.
    #[arg(long)]
    no_match: bool,

    /// Threads to read the inputs on (default: the machine's cores). Perfetto reads each file
    /// on a thread of its own, and writes each on one too unless two files share ids, with
    /// the same bytes with any number; the other formats read the files one after the other.
    /// Other tools' traces among the inputs (of any command) are converted this many at once.
    /// 1: the calling thread only.
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    #[command(flatten)]
    follow: follow::FollowArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the causal chain from an event back to its root causes, across files.
    Why(why::WhyArgs),
    /// Show where a stopped run was stuck: the spans each thread was still inside, who waited
    /// for whom among the MPI ranks, and the deadlocks.
    Hang(hang::HangArgs),
    /// Compare two runs: kernels aligned by step, name and occurrence (slower, missing, fused,
    /// split), the first tensor whose values differ, the first NaN or Inf of each run.
    Diff(diff::DiffArgs),
    /// Why a run is slow: every wait state of its MPI calls (late sender, late receiver,
    /// collectives, barriers, late broadcast roots) and the delays they come back to, across
    /// ranks.
    Waits(slow::WaitsArgs),
    /// The chain of work across ranks that sets the length of the run (or of one step), its
    /// largest contributors, and how much shorter the run would be without each.
    CriticalPath(slow::CriticalPathArgs),
    /// Where a run's time went: per rank and span name, count, total and self time; MPI time
    /// per rank; the messages between each pair of ranks.
    Profile(slow::ProfileArgs),
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    // Other tools' traces become trace.bin files that live as long as `foreign`.
    let mut foreign = foreign::Foreign::new(cli.quiet, threads(&cli));
    let converted = match &mut cli.command {
        Some(Command::Why(args)) => foreign.convert(&mut [&mut args.inputs]),
        Some(Command::Diff(args)) => foreign.convert(&mut args.inputs_mut()),
        Some(Command::Hang(args)) => foreign.convert(&mut [&mut args.inputs]),
        Some(Command::Waits(args)) => foreign.convert(&mut [&mut args.inputs]),
        Some(Command::CriticalPath(args)) => foreign.convert(&mut [&mut args.inputs]),
        Some(Command::Profile(args)) => foreign.convert(&mut [&mut args.inputs]),
        None if cli.follow.follow => Ok(()),
        None => foreign.convert(&mut [&mut cli.inputs]),
    };
    let result = converted.and_then(|()| match &cli.command {
        Some(Command::Why(args)) => why::why(args),
        Some(Command::Diff(args)) => diff::diff(args),
        Some(Command::Hang(args)) => hang::hang(args),
        Some(Command::Waits(args)) => slow::waits(args),
        Some(Command::CriticalPath(args)) => slow::critical_path(args),
        Some(Command::Profile(args)) => slow::profile(args),
        None if cli.follow.follow => follow::run(&cli),
        None => run(&cli),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("waffle-decode: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    if cli.output.is_none() && cli.send.is_empty() {
        return Err("give an output file (-o OUT), a backend (--send KIND=URL), or both".into());
    }
    let output = match &cli.output {
        Some(path) => Some((path, output_format(path, cli.format.as_deref())?)),
        None => None,
    };
    if let Some(run) = &cli.run {
        if run.is_empty() || run.contains(['/', '\\']) || run == "." || run == ".." {
            return Err(format!("--run {run:?}: a run is one directory name"));
        }
    }
    let options = Options { batch_spans: cli.batch_spans as usize, policy: policy_from_env()? };
    // The first read of the files tells their warnings and numbers; later reads repeat them.
    let mut told = false;
    if let Some((path, format)) = output {
        let mut progress = Progress::new(cli.quiet, &cli.inputs);
        let mut files = scan(cli, format, &mut progress, &mut told)?;
        files.step_spans(&cli.step_span);
        if is_dir(path) {
            let written = files.write_xspace_dir(path, cli.run.as_deref(), &mut progress.inc());
            progress.done();
            let written = written.map_err(|e| format!("{}: {e}", path.display()))?;
            if !cli.quiet {
                for file in written {
                    eprintln!("wrote {} ({})", file.display(), format.name());
                }
            }
        } else if cli.waits {
            if format != Format::Perfetto {
                return Err(format!("--waits draws tracks in a Perfetto trace, not {}", format.name()));
            }
            let overlay = progress.suspend(|| slow::overlay(&cli.inputs))?;
            let written = waffle_export::write_file(path, |out| {
                files.write_with_overlay(out, &overlay, &mut progress.inc())
            });
            progress.done();
            written.map_err(|e| format!("{}: {e}", path.display()))?;
            if !cli.quiet {
                eprintln!(
                    "wrote {} ({}, with the waits and the critical path)",
                    path.display(),
                    format.name()
                );
            }
        } else {
            let written = waffle_export::write_file(path, |out| files.write(out, &mut progress.inc()));
            progress.done();
            written.map_err(|e| format!("{}: {e}", path.display()))?;
            if !cli.quiet {
                eprintln!("wrote {} ({})", path.display(), format.name());
            }
        }
    }
    // Every backend is tried, whatever became of the others.
    let mut failures = Vec::new();
    for target in &cli.send {
        let mut progress = Progress::new(cli.quiet, &cli.inputs);
        let files = scan(cli, target.format(), &mut progress, &mut told)?;
        let sent = send::send_files(files, target, &options, &mut progress.inc());
        progress.done();
        match sent {
            Ok(report) => {
                for w in &report.warnings {
                    eprintln!("waffle-decode: warning: {target}: {w}");
                }
                if !cli.quiet {
                    eprintln!(
                        "sent {} to {target} in {} ({}, {:.2} s)",
                        count(report.spans, "span", "spans"),
                        count(report.requests, "request", "requests"),
                        count(report.retries, "retry", "retries"),
                        report.elapsed.as_secs_f64()
                    );
                }
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\nwaffle-decode: error: "))
    }
}

/// The threads to read inputs on: `-j`, else the machine's cores.
fn threads(cli: &Cli) -> usize {
    match cli.threads {
        Some(n) => n as usize,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    }
}

/// The first of the two reads of the files, for `format`; the first time, says what it found.
fn scan(cli: &Cli, format: Format, progress: &mut Progress, told: &mut bool) -> Result<Files, String> {
    let mut files = Files::scan_threads(&cli.inputs, format, threads(cli), &mut progress.inc())
        .map_err(|e| e.to_string())?;
    if cli.no_match {
        files.unmatch();
    }
    if !std::mem::replace(told, true) {
        for w in files.warnings() {
            progress.say(format!("waffle-decode: warning: {w}"));
        }
        if !cli.quiet {
            progress.suspend(|| summary(&files.processes()));
        }
    }
    Ok(files)
}

/// Whether `-o path` is a directory: one that exists, or a path ending in a separator.
fn is_dir(path: &Path) -> bool {
    path.is_dir() || path.as_os_str().to_string_lossy().ends_with(std::path::MAIN_SEPARATOR)
}

/// The format of `-o path`: `--format`'s, else the one its extension names; a directory is
/// written in TensorBoard's profile layout, XSpace only.
fn output_format(path: &Path, format: Option<&str>) -> Result<Format, String> {
    let named = format.map(|name| {
        Format::from_name(name).ok_or_else(|| format!("unknown format `{name}`; known: {}", known_formats()))
    });
    if is_dir(path) {
        return match named.unwrap_or(Ok(Format::Xspace))? {
            Format::Xspace => Ok(Format::Xspace),
            other => Err(format!(
                "{}: a directory takes the xspace format (TensorBoard's profile layout), not {}",
                path.display(),
                other.name()
            )),
        };
    }
    match named {
        Some(format) => format,
        None => Format::from_path(path).ok_or_else(|| {
            format!(
                "cannot tell the format from `{}`; use an extension such as .pftrace or .jaeger.json, or --format",
                path.display()
            )
        }),
    }
}

/// `1 span`, `2 spans`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The retry policy, shortened by `WAFFLE_SEND_BACKOFF_MS`, `WAFFLE_SEND_BUDGET_MS` and
/// `WAFFLE_SEND_ATTEMPTS` where set.
fn policy_from_env() -> Result<Policy, String> {
    let var = |name: &str| -> Result<Option<u64>, String> {
        match std::env::var(name) {
            Ok(v) => v.trim().parse().map(Some).map_err(|_| format!("{name}={v:?}: expected a whole number")),
            Err(_) => Ok(None),
        }
    };
    let mut policy = Policy::default();
    if let Some(ms) = var("WAFFLE_SEND_BACKOFF_MS")? {
        policy.backoff = Duration::from_millis(ms);
        policy.max_backoff = policy.backoff.saturating_mul(16);
    }
    if let Some(ms) = var("WAFFLE_SEND_BUDGET_MS")? {
        policy.budget = Duration::from_millis(ms);
    }
    if let Some(n) = var("WAFFLE_SEND_ATTEMPTS")? {
        policy.attempts = u32::try_from(n).unwrap_or(u32::MAX).max(1);
    }
    Ok(policy)
}

/// The names `--format` takes, comma-separated.
fn known_formats() -> String {
    Format::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

fn summary(processes: &[ProcessStats]) {
    for p in processes {
        eprintln!(
            "{}: pid {} ({}), {} threads, {} spans, {} events{}{}{}",
            foreign::display(Path::new(&p.source)),
            p.pid,
            p.name,
            p.threads,
            p.spans,
            p.events,
            if p.dropped > 0 {
                format!(", {} records DROPPED (buffers full)", p.dropped)
            } else {
                String::new()
            },
            if p.complete { "" } else { ", not closed cleanly" },
            p.sample.as_ref().map_or(String::new(), |r| format!(", head-sampled: roots kept at rate {r}")),
        );
    }
}
