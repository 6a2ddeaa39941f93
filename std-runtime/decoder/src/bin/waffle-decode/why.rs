//! `waffle-decode why`: its arguments and its run.

use clap::{ArgGroup, Args};
use std::{io::Write, path::PathBuf};
use waffle_analyze::why::{self, ItemInfo, Selector, WhyError, WhyFilesError};
use waffle_read::model::Value;
use waffle_wire::reserved::tensor;

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("symptom").required(true).args(["event", "id", "first_nan"])))]
pub(crate) struct WhyArgs {
    /// trace.bin files written by waffle, one per process.
    #[arg(required = true, value_name = "FILES")]
    pub(crate) inputs: Vec<PathBuf>,

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

    /// Print JSON (its shape is documented in `waffle_analyze::why`) instead of text.
    #[arg(long)]
    json: bool,

    /// Do not match spans by order across ranks (the k-th span of a name on each rank taken
    /// as one operation); follow only recorded links, parents and correlation keys.
    #[arg(long)]
    no_match: bool,
}

/// `waffle-decode why`: the explanation on stdout, warnings and errors on stderr. The files
/// are indexed, not decoded into a model (`why::why_files`): memory stays a small part of
/// their size.
pub(crate) fn why(args: &WhyArgs) -> Result<(), String> {
    let selector = match (&args.event, args.id) {
        _ if args.first_nan => Selector::FirstNan,
        (_, Some(id)) => Selector::id(id),
        (Some(name), None) => Selector::name(name.clone(), args.nth.unwrap_or(0)),
        (None, None) => return Err("give the symptom with --event NAME, --id ID or --first-nan".into()),
    };
    let options = why::Options { match_by_order: !args.no_match };
    let (explanation, warnings) = match why::why_files(&args.inputs, &selector, &options) {
        Ok(found) => found,
        Err(WhyFilesError::Why(e @ WhyError::NthOutOfRange { count, .. })) => {
            return Err(format!("{e}; --nth takes 0 to {}", count - 1))
        }
        Err(e) => return Err(e.to_string()),
    };
    for w in &warnings {
        eprintln!("waffle-decode: warning: {w}");
    }
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&explanation.to_json()).map_err(|e| e.to_string())?;
        json.push('\n');
        json
    } else if args.first_nan {
        first_nan_heading(&explanation.symptom) + &explanation.to_text()
    } else {
        explanation.to_text()
    };
    let text = crate::foreign::name_inputs(text);
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
}

/// `first NaN: tensor NAME (event ID, FILE)`: the tensor's name is its `tensor.name` field.
fn first_nan_heading(symptom: &ItemInfo) -> String {
    let name = symptom.fields.iter().find_map(|(k, v)| match (k.as_str(), v) {
        (tensor::NAME, Value::Str(s)) => Some(s.as_str()),
        _ => None,
    });
    let name = name.unwrap_or(&symptom.name);
    format!("first NaN: tensor {name} (event {:016x}, {})\n", symptom.id, symptom.source)
}
