//! [`Format`]: the formats, named by an output file's extension or by `--format`.

use std::path::{Path, PathBuf};

/// An output's name does not say which format to write.
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot tell the export format from this name; use an extension such as .pftrace, .jaeger.json, .zipkin.json, .otlp.json, .otlp.pb or .chrome.json", path.display())]
pub struct UnknownFormat {
    /// The export's file name.
    pub path: PathBuf,
}

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Perfetto's protobuf trace (`.pftrace`), for ui.perfetto.dev and trace_processor.
    Perfetto,
    /// Jaeger's JSON (`.jaeger.json`), as its query API returns traces and its UI opens them.
    Jaeger,
    /// Zipkin v2 JSON (`.zipkin.json`): the list of spans Zipkin's API takes and its UI opens.
    Zipkin,
    /// OpenTelemetry's OTLP `ExportTraceServiceRequest` in protobuf (`.otlp.pb`), as
    /// `POST /v1/traces` takes it.
    Otlp,
    /// The same request in OTLP/JSON (`.otlp.json`), one line, as collectors read files.
    OtlpJson,
    /// Chrome trace-event JSON (`.chrome.json`), for chrome://tracing and Perfetto UI.
    Chrome,
    /// TensorBoard's profile format, an `XSpace` (`.xplane.pb`), for the profile plugin
    /// (xprof).
    Xspace,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: &'static [Format] = &[
        Format::Perfetto,
        Format::Jaeger,
        Format::Zipkin,
        Format::Otlp,
        Format::OtlpJson,
        Format::Chrome,
        Format::Xspace,
    ];

    /// The format an output file's extension asks for, if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let file = path.file_name()?.to_str()?.to_ascii_lowercase();
        for (suffix, format) in [
            ("jaeger.json", Format::Jaeger),
            ("zipkin.json", Format::Zipkin),
            ("otlp.pb", Format::Otlp),
            ("otlp.json", Format::OtlpJson),
            ("chrome.json", Format::Chrome),
            ("xplane.pb", Format::Xspace),
        ] {
            if file.strip_suffix(suffix).is_some_and(|stem| stem.is_empty() || stem.ends_with('.')) {
                return Some(format);
            }
        }
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
            Format::Jaeger => "jaeger",
            Format::Zipkin => "zipkin",
            Format::Otlp => "otlp",
            Format::OtlpJson => "otlp-json",
            Format::Chrome => "chrome",
            Format::Xspace => "xspace",
        }
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
        for (p, f) in [
            ("run.jaeger.json", Format::Jaeger),
            ("a/B.Zipkin.JSON", Format::Zipkin),
            ("zipkin.json", Format::Zipkin),
            ("out.jaeger.json", Format::Jaeger),
        ] {
            assert_eq!(Format::from_path(Path::new(p)), Some(f), "{p}");
        }
        assert_ne!(Format::from_path(Path::new("myzipkin.json")), Some(Format::Zipkin));
        assert_eq!(Format::from_name("Jaeger"), Some(Format::Jaeger));
        for (p, f) in [
            ("run.otlp.json", Format::OtlpJson),
            ("a/run.OTLP.pb", Format::Otlp),
            ("run.chrome.json", Format::Chrome),
            ("host.xplane.pb", Format::Xspace),
        ] {
            assert_eq!(Format::from_path(Path::new(p)), Some(f), "{p}");
        }
        assert_eq!(Format::from_path(Path::new("run.json")), None);
        assert_eq!(Format::from_path(Path::new("run.pb")), None);
        assert_eq!(Format::from_name("otlp-json"), Some(Format::OtlpJson));
    }
}
