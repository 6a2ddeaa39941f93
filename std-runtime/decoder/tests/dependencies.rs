//! What each crate links, read from `cargo tree` as a user checking their build would.
//!
//! - A traced program (the recorder, the `tracing` layer, libwaffle, libwaffle_mpi) links none
//!   of the reader's crates or their dependencies (command line, progress bars, HTTP, JSON,
//!   protobuf).
//! - The reader's layers link only what they use: `waffle-read` the file format and
//!   thiserror, not the hot path's linker sections, queues or macros; `waffle-analyze` no
//!   exporter, protobuf or HTTP; `waffle-export` HTTP only with its `send` feature.
//! - The Python module links the reader and the exporters, not the command line.

use std::process::Command;

/// The crates that only the command line links.
const COMMAND_LINE: &[&str] = &["waffle-decode", "clap", "indicatif"];
/// The crates a traced program must not link.
const READER_ONLY: &[&str] = &[
    "waffle-decode",
    "waffle-read",
    "waffle-export",
    "waffle-analyze",
    "clap",
    "indicatif",
    "ureq",
    "prost",
    "serde_json",
];
/// The producer's hot-path machinery, which the reader must not link.
const HOT_PATH: &[&str] = &["waffle", "waffle-macros", "linkme", "bbqueue", "xxhash-rust"];

/// The names of the crates `package` links (normal dependencies only, its default features plus
/// `features`).
fn linked(package: &str, features: &[&str]) -> Vec<String> {
    let mut args = vec!["tree", "-p", package, "-e", "normal", "--prefix", "none", "--format", "{p}"];
    let features = features.join(",");
    if !features.is_empty() {
        args.extend(["--features", &features]);
    }
    let out = Command::new(env!("CARGO"))
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let names: Vec<String> =
        text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect();
    // A broken `cargo tree` that lists nothing would pass every check below.
    assert!(names.iter().any(|n| n == "waffle-wire"), "{package} without waffle-wire? {text}");
    names
}

/// Which of `crates` `names` holds.
fn found<'a>(names: &[String], crates: &[&'a str]) -> Vec<&'a str> {
    crates.iter().copied().filter(|d| names.iter().any(|n| n == d)).collect()
}

#[test]
fn the_recorder_and_the_c_libraries_link_nothing_of_the_reader() {
    for package in ["waffle-std", "waffle-tracing", "waffle-ffi", "waffle-mpi"] {
        let names = linked(package, &[]);
        assert_eq!(found(&names, READER_ONLY), [] as [&str; 0], "{package}");
    }
}

#[test]
fn the_reader_links_the_format_and_nothing_of_the_hot_path() {
    let names = linked("waffle-read", &[]);
    assert_eq!(found(&names, HOT_PATH), [] as [&str; 0], "waffle-read");
    assert_eq!(found(&names, READER_ONLY), ["waffle-read"], "waffle-read");
}

#[test]
fn the_analyses_link_no_exporter_and_no_network() {
    let names = linked("waffle-analyze", &[]);
    assert_eq!(found(&names, HOT_PATH), [] as [&str; 0]);
    assert_eq!(found(&names, READER_ONLY), ["waffle-read", "waffle-analyze", "serde_json"]);
}

#[test]
fn the_exporters_link_http_only_to_send() {
    let names = linked("waffle-export", &[]);
    assert_eq!(found(&names, HOT_PATH), [] as [&str; 0]);
    assert_eq!(found(&names, READER_ONLY), ["waffle-read", "waffle-export", "prost", "serde_json"]);
    let names = linked("waffle-export", &["send"]);
    assert_eq!(found(&names, READER_ONLY), ["waffle-read", "waffle-export", "ureq", "prost", "serde_json"]);
}

/// The Python module exports and sends at exit, and decodes for `waffle.decode`: it links the
/// reader and the exporters, not the analyses or the command line.
#[test]
fn the_python_module_links_no_command_line() {
    let names = linked("waffle-python", &[]);
    assert_eq!(
        found(&names, &["waffle-read", "waffle-export", "ureq"]),
        ["waffle-read", "waffle-export", "ureq"]
    );
    assert_eq!(found(&names, COMMAND_LINE), [] as [&str; 0]);
    assert_eq!(found(&names, &["waffle-analyze"]), [] as [&str; 0]);
}

/// The command line links every layer and what they use: the checks above are not vacuous.
#[test]
fn the_command_line_links_them_all() {
    let names = linked("waffle-decode", &[]);
    assert_eq!(found(&names, READER_ONLY), READER_ONLY);
}
