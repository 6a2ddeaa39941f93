//! What the tests of `waffle-mpi` share: the library built in the test's profile, the test
//! programs built with `mpicc`, a preloaded `mpirun -np 3`, and reading fields of the decoded
//! trace. The C and MPI helpers of `waffle-ffi`'s tests come with it as `common`.

#![allow(dead_code)] // each test binary uses part of it

#[path = "../../../tests/common/mod.rs"]
pub mod common;

use common::{
    cargo_build,
    mpi::{mpi_tool, mpirun_command, run_with_limit},
    profile_dir, scratch, which, C_FLAGS,
};
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    time::Duration,
};
use waffle_read::model::{Event, Span, Trace, Value};

/// `libwaffle_mpi.so`, built now in this test's profile.
pub fn preload() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        cargo_build(&["-p", "waffle-mpi", "--lib"]);
        let lib = profile_dir().join("libwaffle_mpi.so");
        assert!(lib.is_file(), "{} was not built", lib.display());
        lib
    })
}

/// `tests/programs/NAME.c` built with `mpicc` into `dir`, linked with nothing of waffle.
pub fn build(mpicc: &Path, name: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs").join(format!("{name}.c"));
    let out = Command::new(mpicc).args(C_FLAGS).arg(&source).arg("-o").arg(&exe).output().expect("run mpicc");
    assert!(out.status.success(), "mpicc {name}.c:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// `mpirun -np 3` of `exe` with the library preloaded into the ranks (not into mpirun) and
/// `WAFFLE_OUTPUT=out/rank%r.bin`.
pub fn preloaded_run(mpirun: &Path, exe: &Path, out: &Path) -> Command {
    let mut cmd = mpirun_command(mpirun, 3);
    cmd.env("WAFFLE_OUTPUT", out.join("rank%r.bin"))
        .args(["-x", "WAFFLE_OUTPUT", "-x"])
        .arg(format!("LD_PRELOAD={}", preload().display()))
        .arg(exe);
    cmd
}

/// Decodes `out/rank{0,1,2}.bin`, asserting that they are the only files there.
pub fn decode_ranks(out: &Path) -> Trace {
    let mut names: Vec<_> = std::fs::read_dir(out).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["rank0.bin", "rank1.bin", "rank2.bin"], "one file per rank, nothing else");
    common::decode(&[0, 1, 2].map(|r| out.join(format!("rank{r}.bin"))))
}

/// `tests/programs/PROGRAM.c` built, run under `mpirun -np 3` with the library preloaded (it
/// must print "ok" and nothing of waffle's on stderr), and its three files decoded; None when
/// MPI is missing and not required.
pub fn record(program: &str) -> Option<Trace> {
    let mpicc = mpi_tool("mpicc")?;
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let dir = scratch(&format!("mpi-{program}"));
    let exe = build(&mpicc, program, &dir);
    let out = dir.join("out");
    let (ok, stdout, stderr) =
        run_with_limit(&mut preloaded_run(&mpirun, &exe, &out), Duration::from_secs(60));
    assert!(ok && stdout.trim() == "ok", "{program} failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("waffle:"), "{stderr}");
    let trace = decode_ranks(&out);
    let _ = std::fs::remove_dir_all(&dir);
    Some(trace)
}

pub fn field<'a>(fields: impl Iterator<Item = (&'a str, &'a Value)>, key: &str) -> Option<&'a Value> {
    fields.into_iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

pub fn int(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::I64(i)) => *i,
        Some(Value::U64(u)) => *u as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

pub fn span_int(s: &Span, key: &str) -> i64 {
    int(field(s.fields(), key))
}

pub fn event_int(e: &Event, key: &str) -> i64 {
    int(field(e.fields(), key))
}

/// Every span and event of the trace with its process's rank.
pub fn spans(trace: &Trace) -> Vec<(i64, &Span)> {
    let mut all = Vec::new();
    for p in &trace.processes {
        let rank: i64 = p.header.label("rank").expect("rank label").parse().unwrap();
        all.extend(p.threads.iter().flat_map(|t| &t.spans).map(|s| (rank, s)));
    }
    all
}

pub fn events(trace: &Trace) -> Vec<(i64, &Event)> {
    let mut all = Vec::new();
    for p in &trace.processes {
        let rank: i64 = p.header.label("rank").expect("rank label").parse().unwrap();
        all.extend(p.threads.iter().flat_map(|t| &t.events).map(|e| (rank, e)));
    }
    all
}

/// Send spans, and receive events by correlation value, each with its rank.
pub type Messages<'a> = (Vec<&'a (i64, &'a Span)>, HashMap<u64, &'a (i64, &'a Event)>);

/// The messages of a trace: every send span (`mpi.message>`), and every receive event
/// (`mpi.message<`) by its correlation value (two receives sharing a value leave one here).
pub fn messages<'a>(all: &'a [(i64, &'a Span)], received: &'a [(i64, &'a Event)]) -> Messages<'a> {
    let sends = all.iter().filter(|(_, s)| s.callsite.correlate == "mpi.message>").collect();
    let receives = received
        .iter()
        .filter(|(_, e)| e.callsite.correlate == "mpi.message<")
        .map(|r| (r.1.correlation.unwrap(), r))
        .collect();
    (sends, receives)
}

pub fn named<'a>(all: &[(i64, &'a Span)], rank: i64, name: &str) -> Vec<&'a Span> {
    all.iter().filter(|(r, s)| *r == rank && s.name() == name).map(|(_, s)| *s).collect()
}
