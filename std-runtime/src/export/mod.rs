//! Exporters: the decoded [`Trace`] written in the formats other tools read.
//!
//! Each format is one module that sees only [`crate::model`], never the bytes of a
//! `trace.bin`. [`Format`] names them, picks one from an output file's extension or a
//! `--format` name, and [`export`] dispatches to it.

use std::io::{self, Write};
use std::path::Path;

use crate::model::Trace;

pub mod perfetto;

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Perfetto's protobuf trace (`.pftrace`), for ui.perfetto.dev and trace_processor.
    Perfetto,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: &'static [Format] = &[Format::Perfetto];

    /// The format an output file's extension asks for, if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "pftrace" | "perfetto-trace" | "perfetto" => Some(Format::Perfetto),
            _ => None,
        }
    }

    /// The format with this name (as given to `--format`), if any.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// The format's name, as `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Perfetto => "perfetto",
        }
    }
}

/// Writes `trace` to `out` in `format`.
pub fn export(trace: &Trace, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Perfetto => perfetto::write(trace, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_path_and_name() {
        for p in ["out.pftrace", "a/b.perfetto-trace", "x.PERFETTO"] {
            assert_eq!(Format::from_path(Path::new(p)), Some(Format::Perfetto), "{p}");
        }
        assert_eq!(Format::from_path(Path::new("out.json")), None);
        assert_eq!(Format::from_path(Path::new("pftrace")), None);
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(*f));
        }
        assert_eq!(Format::from_name("chrome-ish"), None);
    }
}
