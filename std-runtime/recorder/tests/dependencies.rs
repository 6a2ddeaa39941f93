//! What a traced program links: the recorder, the `tracing` layer and the C libraries
//! (libwaffle, libwaffle_mpi) pull in none of the decoder's dependencies (command line, progress bars, HTTP, JSON, protobuf), and
//! not the decoder itself; the Python module links the decoder without its command line.
//! Read from `cargo tree`, as a user checking their build would.

use std::process::Command;

/// The crates a traced program must not link.
const DECODER_ONLY: &[&str] = &["waffle-decode", "clap", "indicatif", "ureq", "prost", "serde_json"];

/// The names of the crates `package` links (normal dependencies only, every feature).
fn linked(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none", "--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let names: Vec<String> =
        text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect();
    assert!(names.iter().any(|n| n == "waffle"), "{package} without waffle? {text}");
    names
}

#[test]
fn the_recorder_and_the_c_libraries_link_nothing_of_the_decoder() {
    for package in ["waffle-std", "waffle-tracing", "waffle-ffi", "waffle-mpi"] {
        let names = linked(package);
        let found: Vec<&str> =
            DECODER_ONLY.iter().copied().filter(|d| names.iter().any(|n| n == d)).collect();
        assert!(found.is_empty(), "{package} links {found:?}");
    }
}

/// The Python module links the decoder (it exports and sends at exit), but not its command line.
#[test]
fn the_python_module_links_no_command_line() {
    let names = linked("waffle-python");
    assert!(names.iter().any(|n| n == "waffle-decode"), "waffle-python without waffle-decode");
    for d in ["clap", "indicatif"] {
        assert!(!names.iter().any(|n| n == d), "waffle-python links {d}");
    }
}

/// The check above would pass on a broken `cargo tree` that lists nothing: the decoder's own tree
/// must show what the recorder's does not.
#[test]
fn the_decoder_links_them() {
    let names = linked("waffle-decode");
    for d in &DECODER_ONLY[1..] {
        assert!(names.iter().any(|n| n == d), "waffle-decode without {d}");
    }
}
