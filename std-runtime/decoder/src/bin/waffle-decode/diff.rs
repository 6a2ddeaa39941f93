//! `waffle-decode diff`: its arguments and its run.

use clap::Args;
use std::{io::Write, path::PathBuf};
use waffle_analyze::diff::{diff_files_with, DiffOptions};

#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// BASE NEW: the two runs, one file each (for runs of several ranks, --base and --new).
    #[arg(value_name = "FILE", num_args = 0..=2, conflicts_with_all = ["base", "new"])]
    pair: Vec<PathBuf>,

    /// The base run's files, one per rank.
    #[arg(long, value_name = "FILES", num_args = 1.., requires = "new")]
    base: Vec<PathBuf>,

    /// The new run's files, one per rank, in the base run's rank order.
    #[arg(long, value_name = "FILES", num_args = 1.., requires = "base")]
    new: Vec<PathBuf>,

    /// Print JSON (its shape is documented in `waffle_analyze::diff`) instead of text.
    #[arg(long)]
    json: bool,

    /// Also write the report as a self-contained HTML page (chart, divergence, table).
    #[arg(long, value_name = "OUT")]
    html: Option<PathBuf>,

    /// Also compare the CPU side: in another tool's profile (a PyTorch profiler trace), the
    /// host threads' ops beside the GPU's kernels, copies and sets. Without it such a profile
    /// compares only the device's work; waffle's own traces always compare every span.
    #[arg(long)]
    cpu: bool,

    /// The most kernel rows the text shows (all with 0).
    #[arg(long, value_name = "N", default_value_t = 30)]
    top: usize,
}

impl DiffArgs {
    /// Every list of files it names.
    pub(crate) fn inputs_mut(&mut self) -> [&mut Vec<PathBuf>; 3] {
        [&mut self.pair, &mut self.base, &mut self.new]
    }
}

/// `waffle-decode diff`: the report on stdout (and the page in --html's file), warnings and
/// errors on stderr.
pub(crate) fn diff(args: &DiffArgs) -> Result<(), String> {
    let (base, new) = match (args.pair.as_slice(), args.base.is_empty()) {
        ([base, new], true) => (std::slice::from_ref(base), std::slice::from_ref(new)),
        ([], false) => (args.base.as_slice(), args.new.as_slice()),
        _ => return Err("give two files, BASE NEW, or --base FILES... --new FILES...".into()),
    };
    let options = DiffOptions { cpu: args.cpu };
    let mut report = diff_files_with(base, new, options, &mut |_| {}).map_err(|e| e.to_string())?;
    for f in report.base.files.iter_mut().chain(&mut report.new.files) {
        *f = crate::foreign::display(std::path::Path::new(f.as_str()));
    }
    for w in &report.warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    if let Some(path) = &args.html {
        let page = report.to_html();
        waffle_export::write_file(path, |out| out.write_all(page.as_bytes()))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?;
        json.push('\n');
        json
    } else {
        report.to_text((args.top > 0).then_some(args.top))
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
}
