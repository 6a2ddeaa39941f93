//! A traced process killed while its threads are blocked (`examples/blocked.rs`): each thread
//! began a span and never recorded again, yet the spans are in the file — with SIGKILL, from
//! the collector's TAIL copies made while the process ran; with SIGTERM and SIGINT, which the
//! recorder catches, in a complete file (END, no warning) closed before the process died of the
//! signal.

mod common;

use std::{
    io::{BufRead, BufReader},
    os::unix::process::{CommandExt, ExitStatusExt},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};
use waffle_read::model::{Process, Value};

const BLOCKED: [&str; 4] = ["blocked_recv", "blocked_lock", "blocked_sleep", "blocked_main"];

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-signals-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the example, sends `signal` once it is ready, and returns how it ended and its trace.
fn run(signal: libc::c_int, path: &Path) -> (std::process::ExitStatus, Process, Vec<String>) {
    let mut command = Command::new(common::example("blocked"));
    command.arg(path).stdout(Stdio::piped());
    // The recorder leaves an ignored signal ignored, and a shell's background job starts with
    // SIGINT ignored: the child starts with both signals at their default, however the tests
    // were launched.
    // SAFETY: between fork and exec the closure calls only `signal`, which is async-signal-safe,
    // and touches no memory of the parent's.
    unsafe {
        command.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM] {
                if libc::signal(sig, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("run the example");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "READY");
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let status = child.wait().unwrap();
    let (process, warnings) = waffle_read::decode::decode_file(path).expect("the file decodes");
    (status, process, warnings.iter().map(|w| w.to_string()).collect())
}

/// Every blocked thread's span is in the file once, open (its end was never recorded), with
/// its field.
fn check_blocked(p: &Process) {
    for (k, name) in BLOCKED.iter().enumerate() {
        let spans: Vec<_> = p.threads.iter().flat_map(|t| &t.spans).filter(|s| s.name() == *name).collect();
        assert_eq!(spans.len(), 1, "{name}: {spans:?}");
        assert!(!spans[0].ended, "{name} never ended");
        let n = spans[0].fields().find(|(k, _)| *k == "n").map(|(_, v)| v.clone());
        assert_eq!(n, Some(Value::U64(k as u64 + 1)), "{name}");
    }
}

#[test]
fn sigkill_keeps_the_spans_of_blocked_threads() {
    let path = dir("kill").join("t.bin");
    let (status, p, _) = run(libc::SIGKILL, &path);
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(!p.complete, "a killed process writes no END");
    check_blocked(&p);
}

fn closes_the_trace(signal: libc::c_int, name: &str) {
    let path = dir(name).join("t.bin");
    let (status, p, warnings) = run(signal, &path);
    assert_eq!(status.signal(), Some(signal), "died of the signal: {status:?}");
    assert!(p.complete, "END written before dying");
    assert!(warnings.is_empty(), "{warnings:?}");
    check_blocked(&p);
}

#[test]
fn sigterm_closes_the_trace_then_kills() {
    closes_the_trace(libc::SIGTERM, "term");
}

#[test]
fn sigint_closes_the_trace_then_kills() {
    closes_the_trace(libc::SIGINT, "int");
}
