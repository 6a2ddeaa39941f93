//! What the follow-mode tests share: a fresh directory per test, `waffle-decode` started with
//! its output captured, and a bounded wait for it.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// An empty directory named after the test binary's process and `name`.
pub fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-follow-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `waffle-decode ARGS...`, stdout and stderr captured.
pub fn decode(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_waffle-decode"))
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` up to `limit`; kills it and fails past that.
pub fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("still running after {limit:?}:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}
