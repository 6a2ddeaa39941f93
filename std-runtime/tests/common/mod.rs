//! Helpers shared by the integration tests.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The binary of example `name`: `cargo test` builds examples next to the test's `deps/`
/// directory; when only the test was built, or the example's source is newer, it is built now.
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
    let bin = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.rs"));
    if modified(&bin).is_none_or(|built| modified(&source).is_some_and(|edited| edited > built)) {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "--example", name, "-p", "waffle-std"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cargo.arg("--release");
        }
        let status = cargo.status().expect("run cargo");
        assert!(status.success() && bin.exists(), "building the example {name} failed: {status}");
    }
    bin
}
