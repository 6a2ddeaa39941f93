//! `waffle-decode` on good and bad input: clear messages, non-zero exits, never a panic.

use std::{path::PathBuf, process::Command};

fn decode(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_waffle-decode")).args(args).output().expect("run waffle-decode");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "waffle-decode panicked: {stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A real trace with one thread of nested spans.
fn real_trace(path: &std::path::Path) {
    let session = waffle_std::start(path).unwrap();
    for i in 0..200u64 {
        let _outer = waffle::span!("outer", i);
        let _inner = waffle::span!("inner");
        let _e = waffle::event!("mark", ok = true);
    }
    session.stop().unwrap();
}

#[test]
fn errors_and_warnings_name_the_problem() {
    let d = dir();
    let out = d.join("out.pftrace");

    let missing = d.join("missing.bin");
    let (code, err) = decode(&[missing.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("missing.bin") && err.contains("No such file"), "{err}");

    let text = d.join("notes.txt");
    std::fs::write(&text, "just some text, not a trace\n").unwrap();
    let (code, err) = decode(&[text.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("notes.txt: not a waffle trace"), "{err}");

    let future = d.join("future.bin");
    let mut bytes = waffle::wire::MAGIC.to_vec();
    bytes.extend_from_slice(&99u16.to_le_bytes());
    std::fs::write(&future, &bytes).unwrap();
    let (code, err) = decode(&[future.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("format version 99 is newer than this decoder reads (up to 1)"), "{err}");

    let good = d.join("good.bin");
    real_trace(&good);
    let (code, err) = decode(&[good.as_os_str(), "-o".as_ref(), d.join("out.unknown").as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot tell the format from") && err.contains("--format"), "{err}");
    assert!(!d.join("out.unknown").exists() && !d.join("out.unknown.partial").exists());

    let (code, err) = decode(&[good.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("400 spans, 200 events"), "{err}");
    assert!(std::fs::metadata(&out).unwrap().len() > 0);

    // Cut inside the last data: the prefix decodes, the warning names the offset.
    let full = std::fs::read(&good).unwrap();
    let cut = d.join("cut.bin");
    let at = full.len() - 40;
    std::fs::write(&cut, &full[..at]).unwrap();
    let (code, err) = decode(&[cut.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning") && err.contains("cut.bin: offset") && err.contains("file ends inside"),
        "{err}"
    );
    assert!(err.contains("not closed cleanly"), "{err}");
}
