//! `waffle-decode --follow FILES --send otlp=URL [-o OUT.json]`: the options of follow mode and
//! its run (see `waffle_export::follow`).
//!
//! ```text
//! waffle-decode --follow rank0.bin rank1.bin --send otlp=http://127.0.0.1:4318   # while they run
//! waffle-decode --follow rank0.bin rank1.bin -o run.json     # Chrome JSON, appended as they run
//! ```

use std::time::Duration;

use clap::Args;
use waffle_export::follow::{self, Options};

/// Follow mode's options.
#[derive(Args, Debug)]
pub(crate) struct FollowArgs {
    /// Follow files that are still being written (or not yet created) and send each span to
    /// the --send backend (one) soon after it ends, until every file is closed (its END
    /// frame read). Spans are batched by time (--batch-delay); while the backend is away they
    /// are held (--buffer-spans) and sent once it is back, and spans beyond the buffer are
    /// dropped and counted. With -o OUT.json (with or without --send), each span and event is
    /// also appended to OUT.json as Chrome trace-event JSON in its array form, written out
    /// every --batch-delay, a form viewers (Perfetto UI, chrome://tracing) may open
    /// before its closing `]` is written; the `]` comes once every file is done. It has no
    /// flow arrows. No other format can be written while following.
    /// Parents and causes are sent as the recorded ids; see docs/live-export.md for what
    /// differs from exporting finished files.
    #[arg(long, conflicts_with_all = ["format"])]
    pub(crate) follow: bool,

    /// (--follow) Seconds to wait for a file that does not exist yet (0: do not wait).
    #[arg(long, value_name = "SECS", default_value_t = 30.0, requires = "follow")]
    wait: f64,

    /// (--follow) Seconds a file may stop growing before it counts as done without an END
    /// frame (its program was killed); by default, wait for the END frame.
    #[arg(long, value_name = "SECS", requires = "follow")]
    idle: Option<f64>,

    /// (--follow) Milliseconds a span may wait for its batch to fill before the batch goes
    /// (and between writes to -o).
    #[arg(long, value_name = "MS", default_value_t = 250, requires = "follow")]
    batch_delay: u64,

    /// (--follow) The most spans held for sending while the backend is away or slow; beyond
    /// it, spans are dropped and counted.
    #[arg(long, value_name = "N", default_value_t = 200_000, requires = "follow")]
    buffer_spans: usize,

    /// (--follow) Seconds to keep trying, once every file is done, while the backend is away.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, requires = "follow")]
    stop_wait: f64,
}

fn secs(what: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("{what} {s}: expected seconds, 0 or more"))
}

/// Follows the inputs, sending to the one target and appending to the output; the summary on
/// stderr unless `--quiet`.
pub(crate) fn run(cli: &super::Cli) -> Result<(), String> {
    let (args, inputs, quiet) = (&cli.follow, &cli.inputs, cli.quiet);
    let target = match cli.send.as_slice() {
        [] => None,
        [target] => Some(target),
        _ => return Err("--follow sends to one backend: give --send otlp=URL once".into()),
    };
    let output = cli.output.as_deref();
    if let Some(path) = output {
        if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            return Err(format!(
                "{}: --follow writes only Chrome JSON (its array form can be appended to while \
                 the program runs); give -o OUT.json",
                path.display()
            ));
        }
    }
    let options = Options {
        batch_spans: cli.batch_spans as usize,
        batch_delay: Duration::from_millis(args.batch_delay),
        buffer_spans: args.buffer_spans.max(1),
        wait: Some(secs("--wait", args.wait)?),
        idle: args.idle.map(|s| secs("--idle", s)).transpose()?,
        stop_wait: secs("--stop-wait", args.stop_wait)?,
        ..Options::default()
    };
    let say = |line: String| eprintln!("waffle-decode: {line}");
    let summary = follow::follow_to(inputs, target, output, &options, &say)?;
    let mut errors = Vec::new();
    for file in &summary.files {
        for w in &file.warnings {
            eprintln!("waffle-decode: warning: {w}");
        }
        match &file.error {
            Some(e) => errors.push(e.clone()),
            None if !quiet => eprintln!(
                "{}: {} spans, {} events{}{}",
                file.source.display(),
                file.spans,
                file.events,
                if file.dropped_records > 0 {
                    format!(", {} records DROPPED (buffers full)", file.dropped_records)
                } else {
                    String::new()
                },
                if file.complete { "" } else { ", not closed cleanly" },
            ),
            None => {}
        }
    }
    if let Some(target) = target {
        if !quiet || summary.lost() > 0 {
            eprintln!("followed to {target}: {summary}");
        }
    }
    if let (Some(path), false) = (output, quiet) {
        eprintln!("wrote {} (chrome, {} spans and events)", path.display(), summary.written);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\nwaffle-decode: error: "))
    }
}
