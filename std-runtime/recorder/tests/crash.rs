//! Crash safety: the traced process panics, aborts, is killed or exits without dropping its
//! session, and what it recorded before the fault is in the file.
//!
//! This test has no harness (`harness = false`): the binary runs itself again as a child with
//! `WAFFLE_CRASH_CHILD=<mode>`, so that the child's `main` really panics, aborts or exits. The
//! parent decodes each child's file and checks it.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};
use waffle_read::model::{Process, Value};

const MODE: &str = "WAFFLE_CRASH_CHILD";
const FILE: &str = "WAFFLE_CRASH_FILE";
/// Records made by the children that stop at a known point.
const N: u64 = 300;
/// The most a killed or aborted child may lose: records older than this at the fault must be
/// in the file. The design bound is a flush interval plus a drain interval (2 ms); the rest is
/// slack for a loaded machine running tests in parallel.
const LOSS_LIMIT_MS: f64 = 50.0;

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// `N` steps: an outer span with its index, an inner span and an event in it.
fn steps(from: u64) {
    for i in from..from + N {
        let _outer = waffle::span!("step", i);
        let _inner = waffle::span!("inner");
        let _e = waffle::event!("done", i);
    }
}

/// Records `tick` spans with their index and wall-clock time, about one every 20 µs, until the
/// process dies; `LAST` is the index of the last one ended.
fn ticker() {
    static LAST: AtomicU64 = AtomicU64::new(u64::MAX);
    std::thread::Builder::new()
        .name("ticker".into())
        .spawn(|| {
            for i in 0u64.. {
                let t = unix_ns();
                drop(waffle::span!("tick", i, t));
                LAST.store(i, Ordering::SeqCst);
                let next = Instant::now() + Duration::from_micros(20);
                while Instant::now() < next {
                    std::hint::spin_loop();
                }
            }
        })
        .unwrap();
}

/// The child: records, then meets its fault.
fn child(mode: &str, path: &Path) {
    match mode {
        // A panic unwinds out of main: the session drops on the way out.
        "panic-main" => {
            let _session = waffle_std::start(path).unwrap();
            steps(0);
            panic!("deliberate panic in main");
        }
        // A panic that is not unwound (the hook aborts, as with `panic = "abort"`): waffle's
        // hook, chained before it, pushes the staged records and has them written first.
        "panic-abort" => {
            std::panic::set_hook(Box::new(|_| std::process::abort()));
            let _session = waffle_std::start(path).unwrap();
            steps(0);
            panic!("deliberate panic, aborted by the hook");
        }
        // A worker panics; main records more and calls exit without dropping the session.
        "panic-worker-exit" => {
            let _session = waffle_std::start(path).unwrap();
            let worker = std::thread::spawn(|| {
                steps(0);
                let _open = waffle::span!("doomed");
                panic!("deliberate panic in a worker");
            });
            assert!(worker.join().is_err());
            steps(N);
            std::process::exit(0);
        }
        // `exit(3)` with the session alive: the exit handler closes the file.
        "exit" => {
            let _session = waffle_std::start(path).unwrap();
            std::thread::spawn(|| steps(0)).join().unwrap();
            steps(N);
            std::process::exit(3);
        }
        // `abort()` while a thread records: only what was drained survives.
        "abort" => {
            let _session = waffle_std::start(path).unwrap();
            ticker();
            std::thread::sleep(Duration::from_millis(50));
            eprintln!("FAULT {}", unix_ns());
            std::process::abort();
        }
        // Killed by the parent after it reads the line.
        "kill" => {
            let _session = waffle_std::start(path).unwrap();
            ticker();
            std::thread::sleep(Duration::from_millis(50));
            println!("RECORDING");
            std::thread::sleep(Duration::from_secs(60));
            unreachable!("the parent kills this process");
        }
        other => panic!("unknown child mode {other}"),
    }
}

fn run_child(dir: &Path, mode: &str) -> (std::process::Child, PathBuf) {
    let path = dir.join(format!("{mode}.bin"));
    let child = Command::new(std::env::current_exe().unwrap())
        .env(MODE, mode)
        .env(FILE, &path)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, path)
}

fn decode(path: &Path) -> Process {
    let (p, warnings) = waffle_read::decode::decode_file(path).unwrap();
    // A file cut by a kill may end inside a frame; nothing else may be wrong.
    assert!(warnings.iter().all(|w| w.message.contains("file ends inside")), "{warnings:?}");
    p
}

fn u64_field(v: &Value) -> u64 {
    match v {
        Value::U64(x) => *x,
        other => panic!("{other:?}"),
    }
}

/// Every step `0..n` is present once, nested as recorded, all ended.
fn check_steps(p: &Process, n: u64) {
    let mut seen = vec![0u32; n as usize];
    for th in &p.threads {
        for s in th.spans.iter().filter(|s| s.name() == "step") {
            assert!(s.ended, "step {:?} ended", s.fields);
            seen[u64_field(&s.fields[0]) as usize] += 1;
        }
        let inner = th.spans.iter().filter(|s| s.name() == "inner").count();
        let steps = th.spans.iter().filter(|s| s.name() == "step").count();
        assert_eq!((inner, th.events.len()), (steps, steps));
    }
    assert!(seen.iter().all(|&c| c == 1), "every step once: {:?}", seen.iter().position(|&c| c != 1));
}

/// For a child that died while `ticker` recorded: the ticks in the file are `0..=k` without a
/// gap; returns how long before the fault (Unix ns) the last one was made, in ms.
fn loss_window(p: &Process, fault_ns: u64) -> f64 {
    let mut ticks: Vec<(u64, u64)> = p
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .filter(|s| s.name() == "tick")
        .map(|s| (u64_field(&s.fields[0]), u64_field(&s.fields[1])))
        .collect();
    ticks.sort_unstable();
    assert!(ticks.len() > 100, "{} ticks", ticks.len());
    assert!(ticks.iter().enumerate().all(|(k, &(i, _))| i == k as u64), "ticks 0..=k without a gap");
    let last = ticks.last().unwrap().1;
    fault_ns.saturating_sub(last) as f64 / 1e6
}

fn parent() {
    let dir = std::env::temp_dir().join(format!("waffle-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut report = Vec::new();

    for (mode, code, steps, complete) in [
        ("panic-main", Some(101), N, true),
        ("panic-abort", None, N, false),
        ("panic-worker-exit", Some(0), 2 * N, true),
        ("exit", Some(3), 2 * N, true),
    ] {
        let (child, path) = run_child(&dir, mode);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), code, "{mode}: {stderr}");
        let p = decode(&path);
        assert_eq!(p.complete, complete, "{mode}: closed cleanly");
        check_steps(&p, steps);
        if mode == "panic-worker-exit" {
            let doomed = p.threads.iter().flat_map(|t| &t.spans).find(|s| s.name() == "doomed").unwrap();
            assert!(doomed.ended, "the panicking worker's open span ends as it unwinds");
        }
        report.push(format!("{mode}: exit {code:?}, {steps} steps, complete {complete}"));
    }

    // abort(): the child prints the fault time just before aborting.
    let (child, path) = run_child(&dir, "abort");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{stderr}");
    let fault: u64 = stderr.lines().find_map(|l| l.strip_prefix("FAULT ")).unwrap().parse().unwrap();
    let p = decode(&path);
    assert!(!p.complete);
    let abort_ms = loss_window(&p, fault);
    assert!(abort_ms <= LOSS_LIMIT_MS, "abort lost the last {abort_ms} ms");
    report.push(format!("abort: last tick in the file {abort_ms:.2} ms before the fault"));

    // SIGKILL: the parent kills the child once it says it is recording.
    let (mut child, path) = run_child(&dir, "kill");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "RECORDING");
    std::thread::sleep(Duration::from_millis(20));
    let fault = unix_ns();
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    let p = decode(&path);
    assert!(!p.complete);
    let kill_ms = loss_window(&p, fault);
    assert!(kill_ms <= LOSS_LIMIT_MS, "SIGKILL lost the last {kill_ms} ms");
    report.push(format!("kill: last tick in the file {kill_ms:.2} ms before the kill"));

    std::fs::remove_dir_all(&dir).ok();
    for line in report {
        println!("crash safety: {line}");
    }
}

fn main() {
    match (std::env::var(MODE), std::env::var_os(FILE)) {
        (Ok(mode), Some(path)) => child(&mode, Path::new(&path)),
        _ => {
            parent();
            println!("test result: ok. crash safety: 6 child processes checked");
        }
    }
}
