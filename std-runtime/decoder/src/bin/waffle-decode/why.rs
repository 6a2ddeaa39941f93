//! `waffle-decode why`: its arguments and its run.

use clap::{ArgGroup, Args};
use std::{io::Write, path::PathBuf};
use waffle_decode::{
    analysis::{self, Selector, WhyError},
    decode, diff,
};

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("symptom").required(true).args(["event", "id", "first_nan"])))]
pub(crate) struct WhyArgs {
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

    /// The symptom is the first tensor (in time order across all files) with a NaN element
    /// (`tensor.nan` > 0); its name is printed first.
    #[arg(long, conflicts_with_all = ["event", "id"])]
    first_nan: bool,

    /// Print JSON (its shape is documented in `waffle_decode::analysis`) instead of text.
    #[arg(long)]
    json: bool,

    /// Do not match spans by order across ranks (the k-th span of a name on each rank taken
    /// as one operation); follow only recorded links, parents and correlation keys.
    #[arg(long)]
    no_match: bool,
}

/// `waffle-decode why`: the explanation on stdout, warnings and errors on stderr.
pub(crate) fn why(args: &WhyArgs) -> Result<(), String> {
    let decoded = decode::decode_files(&args.inputs).map_err(|e| e.to_string())?;
    for w in &decoded.warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    let mut heading = String::new();
    let selector = match (&args.event, args.id) {
        _ if args.first_nan => {
            let Some((at, name)) = diff::first_nan(&decoded.trace) else {
                return Err("no tensor with a NaN element (tensor.nan > 0) in these files".into());
            };
            let item = decoded.trace.describe(at);
            let source = &decoded.trace.processes[at.process].source;
            heading = format!("first NaN: tensor {name} (event {:016x}, {source})\n", item.id);
            Selector::id(item.id)
        }
        (_, Some(id)) => Selector::id(id),
        (Some(name), None) => Selector::name(name.clone(), args.nth.unwrap_or(0)),
        (None, None) => return Err("give the symptom with --event NAME, --id ID or --first-nan".into()),
    };
    let options = analysis::Options { match_by_order: !args.no_match };
    let explanation = analysis::why_with(&decoded.trace, &selector, &options).map_err(|e| match e {
        WhyError::NthOutOfRange { count, .. } => format!("{e}; --nth takes 0 to {}", count - 1),
        e => e.to_string(),
    })?;
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&explanation.to_json()).map_err(|e| e.to_string())?;
        json.push('\n');
        json
    } else {
        heading + &explanation.to_text()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
}
