//! `Files::rename_processes`: the name given replaces each file's process name in every format,
//! written in two streaming passes. Two files are recorded here, by processes named `first`
//! and `second` (the second with a `rank` label); each format is written once as recorded and
//! once renamed, and each output is read back for the name it shows per process.

use std::{path::PathBuf, sync::OnceLock};

use prost::Message;
use serde_json::Value as Json;
use waffle_export::{otlp, xspace::proto::XSpace, Files, Format};

#[path = "common/perfetto_pb.rs"]
mod pb;

/// The two recorded files (recorded once for every test of this binary: one session at a
/// time per process).
fn files() -> &'static [PathBuf] {
    static FILES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("waffle-rename-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut paths = Vec::new();
        for (file, name, rank) in [("a.bin", "first", None), ("b.bin", "second", Some("1"))] {
            let path = dir.join(file);
            let mut config = waffle_std::Config::new(&path).process_name(name);
            if let Some(rank) = rank {
                config = config.label("rank", rank);
            }
            let session = config.start().unwrap();
            {
                let _outer = waffle::span!("outer", n = 1u64);
                let _inner = waffle::span!("inner");
                waffle::event!("tick");
            }
            session.stop().unwrap();
            paths.push(path);
        }
        paths
    })
}

/// `format` written from the files, renamed to `name` when one is given; and the processes'
/// names as `Files::processes` reports them.
fn write(format: Format, name: Option<&str>) -> (Vec<u8>, Vec<String>) {
    let mut files = Files::scan(files(), format, &mut |_| {}).unwrap();
    if let Some(name) = name {
        files.rename_processes(name);
    }
    let reported = files.processes().into_iter().map(|p| p.name).collect();
    let mut out = Vec::new();
    files.write(&mut out, &mut |_| {}).unwrap();
    (out, reported)
}

/// The name each process goes by in `format`'s output, sorted.
fn names(format: Format, out: &[u8]) -> Vec<String> {
    let json = || serde_json::from_slice::<Json>(out).unwrap();
    let text = |v: &Json| v.as_str().unwrap().to_owned();
    let mut names: Vec<String> = match format {
        Format::Perfetto => pb::Trace::decode(out)
            .unwrap()
            .packet
            .into_iter()
            .filter_map(|p| p.track?.process?.name)
            .collect(),
        Format::Jaeger => {
            let processes = json()["data"][0]["processes"].as_object().unwrap().clone();
            processes.values().map(|p| text(&p["serviceName"])).collect()
        }
        Format::Zipkin => {
            let mut services: Vec<String> =
                json().as_array().unwrap().iter().map(|s| text(&s["localEndpoint"]["serviceName"])).collect();
            services.dedup();
            services
        }
        Format::Otlp | Format::OtlpJson => {
            let request = match format {
                Format::Otlp => otlp::protobuf_to_json(out).unwrap(),
                _ => json(),
            };
            let resources = request["resourceSpans"].as_array().unwrap().clone();
            resources
                .iter()
                .map(|rs| {
                    let attributes = rs["resource"]["attributes"].as_array().unwrap();
                    let service = attributes.iter().find(|a| a["key"] == "service.name").unwrap();
                    text(&service["value"]["stringValue"])
                })
                .collect()
        }
        Format::Chrome => json()["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
            .map(|e| text(&e["args"]["name"]))
            .collect(),
        // Processes sharing the host plane name its lines, `NAME (pid PID): THREAD`; each
        // process here has one thread.
        Format::Xspace => XSpace::decode(out).unwrap().planes[0]
            .lines
            .iter()
            .map(|l| l.name.split_once(" (pid ").expect("a process's name").0.to_owned())
            .collect(),
    };
    names.sort();
    names
}

/// What `format` shows of the processes `first` and `second` (rank 1).
fn expected(format: Format, first: &str, second: &str) -> Vec<String> {
    let second = match format {
        Format::Chrome => format!("{second} (rank 1)"),
        _ => second.to_owned(),
    };
    let mut names = vec![first.to_owned(), second];
    if format == Format::Zipkin {
        // Zipkin names the service on each span; the spans come file by file.
        names.dedup();
    }
    names.sort();
    names
}

fn check(format: Format) {
    let (out, reported) = write(format, None);
    assert_eq!(names(format, &out), expected(format, "first", "second"), "{format:?} as recorded");
    assert_eq!(reported, ["first", "second"]);
    let (out, reported) = write(format, Some("renamed"));
    assert_eq!(names(format, &out), expected(format, "renamed", "renamed"), "{format:?} renamed");
    assert_eq!(reported, ["renamed", "renamed"], "{format:?}: the processes as reported");
}

#[test]
fn perfetto_process_name() {
    check(Format::Perfetto);
}

#[test]
fn jaeger_service() {
    check(Format::Jaeger);
}

#[test]
fn zipkin_local_endpoint() {
    check(Format::Zipkin);
}

#[test]
fn otlp_service_name() {
    check(Format::Otlp);
    check(Format::OtlpJson);
}

#[test]
fn chrome_process_name() {
    check(Format::Chrome);
}

#[test]
fn xspace_line_names() {
    check(Format::Xspace);
}
