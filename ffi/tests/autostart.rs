//! `WAFFLE_OUTPUT`: a C program that never starts a session (`tests/c/autostart.c`, as the
//! original examples are written) records into the file the variable names, linked against the
//! shared library and against the static one; an explicit `waffle_start` replaces that session;
//! a bad value costs one line on stderr and nothing else; a forked child leaves the parent's
//! file alone; `waffle_stop` closes it.

mod common;

use common::{assert_tree, command, compile, decode, render, scratch, Link, C_FLAGS};
use std::{
    path::{Path, PathBuf},
    process::Output,
};

/// What `work()` of `autostart.c` records, under the process named `PROGRAM`.
const WORK: &str = r#"
process PROGRAM
  thread
    solve cells=4096
      ! residual diverged r=1000000000
      restart <- event "residual diverged"
  thread
    worker items=2 (in span "solve")
"#;

/// `autostart.c` built with `link` into a fresh directory; returns (directory, program).
fn build(link: Link, name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let exe = dir.join(name);
    compile(&common::cc(), C_FLAGS, &[common::ffi_dir().join("tests/c/autostart.c")], &exe, link, &[]);
    (dir, exe)
}

/// Runs `exe ARGS` with `WAFFLE_OUTPUT=output`; returns its pid and output, after checking that
/// it exited 0 and printed "ok".
fn run(exe: &Path, output: &str, args: &[&str]) -> (u32, Output) {
    let child = command(exe)
        .args(args)
        .env("WAFFLE_OUTPUT", output)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the program");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait for the program");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{exe:?} {args:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    assert_eq!(stdout.trim(), "ok", "{stderr}");
    (pid, out)
}

/// The names of the files in `dir` other than the program, sorted.
fn files(dir: &Path, exe: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p != exe)
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn records_without_a_start_call(link: Link, name: &str) {
    let (dir, exe) = build(link, name);
    let (pid, out) = run(&exe, &format!("{}/t-%p.bin", dir.display()), &[]);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(files(&dir, &exe), [format!("t-{pid}.bin")]);
    let trace = decode(&[dir.join(format!("t-{pid}.bin"))]);
    let p = &trace.processes[0];
    assert_eq!(p.header.pid, pid);
    assert_ne!(p.header.trace_id, 0);
    assert_tree(&render(&trace), &WORK.replace("PROGRAM", name));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_program_linked_with_the_shared_library_records_with_only_waffle_output_set() {
    records_without_a_start_call(Link::Shared, "autostart");
}

/// A static link keeps the start-up hook: the C linker takes `libwaffle.a`'s members only for
/// symbols the program needs, and the recording functions' member refers to the hook's.
#[test]
fn a_program_linked_with_the_static_library_records_with_only_waffle_output_set() {
    records_without_a_start_call(Link::Static, "autostart-static");
}

/// `waffle_start` first thing: the explicit file holds everything, and the automatic session,
/// which recorded nothing, leaves no file.
#[test]
fn an_explicit_start_records_into_its_own_path() {
    let (dir, exe) = build(Link::Shared, "explicit");
    let explicit = dir.join("explicit.bin");
    let (_, out) =
        run(&exe, &format!("{}/t-%p.bin", dir.display()), &["explicit", explicit.to_str().unwrap()]);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(files(&dir, &exe), ["explicit.bin"]);
    assert_tree(&render(&decode(&[explicit])), &WORK.replace("PROGRAM", "explicit"));
    let _ = std::fs::remove_dir_all(dir);
}

/// `waffle_start` after a span: that span stays in the automatic session's file, closed cleanly,
/// and everything after goes to the explicit one.
#[test]
fn an_explicit_start_after_recording_keeps_the_automatic_file() {
    let (dir, exe) = build(Link::Static, "late");
    let explicit = dir.join("explicit.bin");
    let (pid, _) = run(&exe, &format!("{}/t-%p.bin", dir.display()), &["late", explicit.to_str().unwrap()]);
    let automatic = format!("t-{pid}.bin");
    assert_eq!(files(&dir, &exe), ["explicit.bin".to_owned(), automatic.clone()]);
    assert_tree(&render(&decode(&[dir.join(automatic)])), "process late\n  thread\n    before start\n");
    assert_tree(&render(&decode(&[explicit])), &WORK.replace("PROGRAM", "late"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_value_prints_one_line_and_the_program_runs_untraced() {
    let (dir, exe) = build(Link::Shared, "bad");
    let d = dir.display();
    let cases = [
        (format!("{d}/%q.bin"), "unknown placeholder %q (use %r, %p, %h or %%)".to_owned()),
        (format!("{d}/t-%"), "a lone % at the end (write %% for a %)".to_owned()),
        (String::new(), "empty path".to_owned()),
        (
            format!("{d}/bad/run/t.bin"), // under the program: no directory can be made there
            format!("directory \"{d}/bad/run\" cannot be made: Not a directory (os error 20)"),
        ),
        (format!("{d}/bad/t.bin"), format!("\"{d}/bad\" is not a directory")), // the program
        (d.to_string(), format!("cannot create \"{d}\": Is a directory (os error 21)")),
    ];
    for (value, fault) in cases {
        let (_, out) = run(&exe, &value, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr, format!("waffle: WAFFLE_OUTPUT={value:?}: {fault}; not recording\n"));
        assert!(files(&dir, &exe).is_empty(), "nothing written for {value:?}");
    }
    // A directory nobody may create files in, root included: sysfs (when mounted).
    if Path::new("/sys/kernel").is_dir() {
        let (_, out) = run(&exe, "/sys/waffle-%p.bin", &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let prefix = "waffle: WAFFLE_OUTPUT=\"/sys/waffle-%p.bin\": directory \"/sys\" is not writable: ";
        assert!(stderr.starts_with(prefix) && stderr.ends_with("; not recording\n"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The child of a `fork` records nothing, and its exit handler neither writes nor closes the
/// parent's file: the file holds the parent's spans only, complete and undamaged.
#[test]
fn a_forked_child_leaves_the_parents_file_alone() {
    let (dir, exe) = build(Link::Shared, "fork");
    let (pid, out) = run(&exe, &format!("{}/t-%p.bin", dir.display()), &["fork"]);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(files(&dir, &exe), [format!("t-{pid}.bin")], "one file: the child starts no session");
    let expected = WORK.replace("PROGRAM", "fork").replacen("  thread\n", "  thread\n    before fork\n", 1);
    assert_tree(&render(&decode(&[dir.join(format!("t-{pid}.bin"))])), &expected);
    let _ = std::fs::remove_dir_all(dir);
}

/// `waffle_stop` closes the automatic session too; what follows is not recorded.
#[test]
fn waffle_stop_closes_the_automatic_session() {
    let (dir, exe) = build(Link::Shared, "stop");
    let (pid, out) = run(&exe, &format!("{}/t-%p.bin", dir.display()), &["stop"]);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_tree(&render(&decode(&[dir.join(format!("t-{pid}.bin"))])), &WORK.replace("PROGRAM", "stop"));
    let _ = std::fs::remove_dir_all(dir);
}
