//! `waffle-decode waits`, `critical-path` and `profile`: why a run is slow, from its files.

use clap::Args;
use std::{collections::HashMap, io::Write, path::PathBuf};
use waffle_analyze::{critical_path::CriticalPath, waits::Waits};
use waffle_export::perfetto::overlay::{Overlay, OverlaySlice, OverlayTrack};

#[derive(Args, Debug)]
pub(crate) struct WaitsArgs {
    /// trace.bin files of one run, one per process (rank).
    #[arg(required = true, value_name = "FILES")]
    pub(crate) inputs: Vec<PathBuf>,

    /// Print JSON (its shape is documented in `waffle_analyze::waits` and docs/waits.md)
    /// instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CriticalPathArgs {
    /// trace.bin files of one run, one per process (rank).
    #[arg(required = true, value_name = "FILES")]
    pub(crate) inputs: Vec<PathBuf>,

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
    pub(crate) inputs: Vec<PathBuf>,

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

/// Writes a report's JSON to stdout as it is serialized (`write_json`).
fn print_json(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    write(&mut out).and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
}

fn pretty(json: &serde_json::Value) -> Result<String, String> {
    serde_json::to_string_pretty(json).map(|s| s + "\n").map_err(|e| e.to_string())
}

/// `waffle-decode waits`: the report on stdout, warnings and errors on stderr.
pub(crate) fn waits(args: &WaitsArgs) -> Result<(), String> {
    let (report, warnings) = waffle_analyze::waits::waits_files(&args.inputs).map_err(|e| e.to_string())?;
    warn(&warnings, &report.notes);
    if args.json {
        return print_json(|out| report.write_json(out));
    }
    print(&report.to_text())
}

/// `waffle-decode critical-path`: the path on stdout, warnings and errors on stderr.
pub(crate) fn critical_path(args: &CriticalPathArgs) -> Result<(), String> {
    let (path, warnings) = waffle_analyze::critical_path::critical_path_files(&args.inputs, args.step)
        .map_err(|e| e.to_string())?;
    warn(&warnings, &path.notes);
    if args.json {
        return print_json(|out| path.write_json(out));
    }
    print(&path.to_text())
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

/// `--waits`: the waits of the files' run, the work they were charged to, and its critical path,
/// as tracks to lay over its Perfetto trace. Warnings and notes on stderr.
pub(crate) fn overlay(inputs: &[PathBuf]) -> Result<Overlay, String> {
    let (run, warnings) = waffle_analyze::read_run(inputs).map_err(|e| e.to_string())?;
    let waits = waffle_analyze::waits::waits_of(&run);
    let path = waffle_analyze::critical_path::critical_path_of(&run, None).map_err(|e| e.to_string())?;
    warn(&warnings, &waits.notes);
    Ok(tracks(&waits, &path))
}

/// One "waits" track per thread that waited or was waited for, under its process: each wait a
/// slice named by its kind, each piece of work charged with waits a slice `cause: NAME` with a
/// flow to the end of each wait it caused; then the critical path, a track at the top, a flow
/// where it goes from one rank to another.
fn tracks(waits: &Waits, path: &CriticalPath) -> Overlay {
    let mut by_lane: HashMap<(usize, usize), usize> = HashMap::new();
    let mut overlay = Overlay::default();
    let mut track = |overlay: &mut Overlay, process: usize, thread: usize| -> usize {
        *by_lane.entry((process, thread)).or_insert_with(|| {
            let name = if thread == 0 { "waits".to_owned() } else { format!("waits (thread {thread})") };
            overlay.tracks.push(OverlayTrack { process: Some(process), name, slices: Vec::new() });
            overlay.tracks.len() - 1
        })
    };
    let mut ends: Vec<Vec<u64>> = vec![Vec::new(); waits.waits.len()];
    let mut flow = 0u64;
    for c in &waits.charged {
        let cause = &waits.root_causes[c.root_cause];
        let out: Vec<u64> = c
            .waits
            .iter()
            .map(|_| {
                flow += 1;
                flow
            })
            .collect();
        for (&w, &f) in c.waits.iter().zip(&out) {
            ends[w].push(f);
        }
        let t = track(&mut overlay, c.process, c.thread);
        overlay.tracks[t].slices.push(OverlaySlice {
            name: format!("cause: {}", cause.span),
            start_ns: c.start_ns,
            dur_ns: c.end_ns - c.start_ns,
            args: vec![
                ("root_cause".into(), cause.span.clone()),
                ("caused_wait_ns (all instances)".into(), cause.caused_wait_ns.to_string()),
                ("waits caused here".into(), c.waits.len().to_string()),
            ],
            flows_out: out,
            ..Default::default()
        });
    }
    for (w, ends) in waits.waits.iter().zip(ends) {
        let cause = w.root_cause.map(|k| &waits.root_causes[k]);
        let mut args = vec![
            ("call".into(), w.site.to_string()),
            ("wait_ns".into(), w.wait_ns.to_string()),
            ("waited_for".into(), format!("rank {} {}", w.waited_for_rank, w.waited_for)),
        ];
        if let Some(c) = cause {
            args.push(("root_cause".into(), format!("rank {} {}", c.rank, c.span)));
        }
        let t = track(&mut overlay, w.process, w.thread);
        overlay.tracks[t].slices.push(OverlaySlice {
            name: w.kind.name().to_owned(),
            start_ns: w.start_ns,
            dur_ns: w.wait_ns,
            args,
            flows_in_at_end: ends,
            ..Default::default()
        });
    }
    let mut critical = OverlayTrack { process: None, name: "critical path".into(), slices: Vec::new() };
    let mut last: Option<&waffle_analyze::critical_path::Segment> = None;
    for s in &path.segments {
        let mut slice = OverlaySlice {
            name: format!("rank {}: {}", s.rank, s.span),
            start_ns: s.start_ns,
            dur_ns: s.dur_ns,
            args: vec![("rank".into(), s.rank.to_string()), ("span".into(), s.span.clone())],
            ..Default::default()
        };
        if last.is_some_and(|l| (l.process, l.thread) != (s.process, s.thread)) {
            flow += 1;
            critical.slices.last_mut().expect("the segment before").flows_out.push(flow);
            slice.flows_in.push(flow);
        }
        critical.slices.push(slice);
        last = Some(s);
    }
    if !critical.slices.is_empty() {
        overlay.tracks.push(critical);
    }
    overlay
}
