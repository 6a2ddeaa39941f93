//! `WAFFLE_OUTPUT`: a Rust program that never starts a session records into the file it names
//! (`examples/autostart.rs`, which names this crate only in `use waffle_std as _;`); a bad value
//! costs one line on stderr; `waffle-decode` does not record; an explicit start replaces the
//! automatic session, keeping its file only if it recorded something.
//!
//! The explicit-start tests run this test binary again as a child with `WAFFLE_OUTPUT` set
//! (the session starts before `main`, so the variable must be there when the process starts):
//! the child runs only [`child`], in the mode `WAFFLE_AUTOSTART_CHILD` names.

mod common;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Command, Output},
};
use waffle_read::model::Trace;

const CHILD: &str = "WAFFLE_AUTOSTART_CHILD";

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("waffle-autostart-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `cmd` with `WAFFLE_OUTPUT=output`; returns its pid and output after checking it exited 0.
fn run(mut cmd: Command, output: &str) -> (u32, Output) {
    for var in waffle_std::launcher::variables() {
        cmd.env_remove(var);
    }
    let child = cmd
        .env("WAFFLE_OUTPUT", output)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    (pid, out)
}

/// The names of the files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn decode(files: &[PathBuf]) -> Trace {
    let decoded = waffle_read::decode::decode_files(files).expect("decode");
    assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
    for p in &decoded.trace.processes {
        assert!(p.complete && p.dropped == 0, "{} incomplete or dropped", p.source);
    }
    decoded.trace
}

/// Each thread that recorded as lines `name fields <- cause`, indented under their parent
/// within the thread; threads sorted by their text, so that the order they started in does not
/// matter.
fn render(trace: &Trace) -> String {
    let index = trace.index();
    let name =
        |id: u64| index.get(&id).map_or("?".to_owned(), |&r| trace.describe(r).callsite.name.to_string());
    let mut out = String::new();
    for p in &trace.processes {
        out += &format!("process {}\n", p.header.name);
        let mut threads = Vec::new();
        for t in p.threads.iter().filter(|t| !t.spans.is_empty() || !t.events.is_empty()) {
            let mut items: Vec<(u64, Option<u64>, String)> = Vec::new();
            for s in &t.spans {
                let fields: String = s.fields().map(|(k, v)| format!(" {k}={v}")).collect();
                let causes: String = s.links.iter().map(|l| format!(" <- {}", name(*l))).collect();
                items.push((s.id, s.parent, format!("{}{fields}{causes}", s.name())));
            }
            for e in &t.events {
                let fields: String = e.fields().map(|(k, v)| format!(" {k}={v}")).collect();
                items.push((e.id, e.parent, format!("! {}{fields}", e.name())));
            }
            items.sort();
            let depth: HashMap<u64, usize> = items.iter().fold(HashMap::new(), |mut d, (id, parent, _)| {
                let level = parent.and_then(|p| d.get(&p).map(|l| l + 1)).unwrap_or(0);
                d.insert(*id, level);
                d
            });
            let lines: String =
                items.iter().map(|(id, _, line)| format!("    {}{line}\n", "  ".repeat(depth[id]))).collect();
            threads.push(format!("  thread\n{lines}"));
        }
        threads.sort();
        out += &threads.concat();
    }
    out
}

#[test]
fn a_rust_program_records_with_only_waffle_output_set() {
    let dir = scratch("rust");
    let (pid, out) = run(Command::new(common::example("autostart")), &format!("{}/t-%p.bin", dir.display()));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(files(&dir), [format!("t-{pid}.bin")]);
    let trace = decode(&[dir.join(format!("t-{pid}.bin"))]);
    assert_eq!(
        render(&trace),
        "process autostart\n  thread\n    main\n      ! input ready items=2\n  \
         thread\n    worker worker=0 <- input ready\n      step worker=0\n  \
         thread\n    worker worker=1 <- input ready\n      step worker=1\n"
    );
    // The ids the program saw are the file's, not null.
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.trim(), format!("trace {:032x}", trace.processes[0].header.trace_id));
    assert_ne!(trace.processes[0].header.trace_id, 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// Before `main`, in a Rust binary: the message is one line, and the program runs on untraced.
#[test]
fn a_bad_value_prints_one_line_and_the_program_runs_untraced() {
    let dir = scratch("bad");
    let d = dir.display();
    std::fs::write(dir.join("plain"), "a file, not a directory").unwrap();
    for (value, fault) in [
        (format!("{d}/run-%x.bin"), "unknown placeholder %x (use %r, %p, %h or %%)".to_owned()),
        (
            format!("{d}/plain/run/t.bin"),
            format!("directory \"{d}/plain/run\" cannot be made: Not a directory (os error 20)"),
        ),
    ] {
        let (_, out) = run(Command::new(common::example("autostart")), &value);
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("waffle: WAFFLE_OUTPUT={value:?}: {fault}; not recording\n")
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("trace {}", "0".repeat(32)));
        assert_eq!(files(&dir), ["plain"]);
    }
    // Missing directories are made, not a fault.
    let (pid, out) = run(Command::new(common::example("autostart")), &format!("{d}/made/deeper/t-%p.bin"));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.join(format!("made/deeper/t-{pid}.bin")).is_file());
    let _ = std::fs::remove_dir_all(dir);
}

/// `waffle-decode` links no recorder: with `WAFFLE_OUTPUT` naming the very file it reads, it reads it
/// whole and writes nothing else.
#[test]
fn waffle_decode_does_not_record() {
    let dir = scratch("decode");
    let (pid, _) = run(Command::new(common::example("autostart")), &format!("{}/t.bin", dir.display()));
    let trace = dir.join("t.bin");
    let before = std::fs::read(&trace).unwrap();
    let mut cmd = Command::new(common::decoder_binary());
    cmd.arg(&trace).arg("-o").arg(dir.join("t.chrome.json"));
    let (_, out) = run(cmd, trace.to_str().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("pid {pid} (autostart), 3 threads, 5 spans, 1 events")), "{stderr}");
    assert_eq!(std::fs::read(&trace).unwrap(), before);
    assert_eq!(files(&dir), ["t.bin", "t.chrome.json"]);
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs [`child`] in a child process in `mode`, with `WAFFLE_OUTPUT=DIR/auto.bin`; returns DIR.
fn run_child(mode: &str) -> PathBuf {
    let dir = scratch(mode);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"]).env(CHILD, mode);
    cmd.env("WAFFLE_AUTOSTART_DIR", &dir);
    let (_, out) = run(cmd, &format!("{}/auto.bin", dir.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("test child ... ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// The child's part (does nothing in an ordinary run).
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD) else { return };
    let dir = PathBuf::from(std::env::var("WAFFLE_AUTOSTART_DIR").unwrap());
    let (automatic, explicit) = (dir.join("auto.bin"), dir.join("explicit.bin"));
    assert_eq!(waffle_std::autostart::path(), Some(automatic.clone()), "started before main");
    assert!(waffle::is_enabled());
    match mode.as_str() {
        "explicit" => {}
        "record-then-explicit" => drop(waffle::span!("automatic")),
        "take" => {
            let taken = waffle_std::autostart::take().expect("the automatic session");
            assert_eq!(taken.path(), automatic);
            assert_eq!(waffle_std::autostart::path(), None, "taken");
            drop(waffle::span!("taken"));
            // Now an ordinary session: an explicit start does not replace it.
            assert!(matches!(waffle_std::start(&explicit), Err(waffle_std::Error::AlreadyStarted(_))));
            let stats = taken.stop().expect("stop");
            assert_eq!(stats.data_frames, 1);
        }
        other => panic!("unknown mode {other}"),
    }
    let session = waffle_std::start(&explicit).expect("an explicit start succeeds");
    assert_eq!(waffle_std::autostart::path(), None, "replaced");
    drop(waffle::span!("explicit"));
    session.stop().expect("stop");
}

#[test]
fn an_explicit_start_replaces_an_automatic_session_that_recorded_nothing() {
    let dir = run_child("explicit");
    assert_eq!(files(&dir), ["explicit.bin"], "the empty automatic file is removed");
    let name = exe_name();
    assert_eq!(
        render(&decode(&[dir.join("explicit.bin")])),
        format!("process {name}\n  thread\n    explicit\n")
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_explicit_start_keeps_the_automatic_file_when_it_recorded() {
    let dir = run_child("record-then-explicit");
    assert_eq!(files(&dir), ["auto.bin", "explicit.bin"]);
    let name = exe_name();
    assert_eq!(
        render(&decode(&[dir.join("auto.bin")])),
        format!("process {name}\n  thread\n    automatic\n")
    );
    assert_eq!(
        render(&decode(&[dir.join("explicit.bin")])),
        format!("process {name}\n  thread\n    explicit\n")
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_taken_automatic_session_is_an_ordinary_one() {
    let dir = run_child("take");
    assert_eq!(files(&dir), ["auto.bin", "explicit.bin"]);
    let name = exe_name();
    assert_eq!(render(&decode(&[dir.join("auto.bin")])), format!("process {name}\n  thread\n    taken\n"));
    assert_eq!(
        render(&decode(&[dir.join("explicit.bin")])),
        format!("process {name}\n  thread\n    explicit\n")
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// This test binary's name, which names the child's process.
fn exe_name() -> String {
    std::env::current_exe().unwrap().file_name().unwrap().to_string_lossy().into_owned()
}
