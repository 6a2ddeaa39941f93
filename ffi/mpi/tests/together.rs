//! `libwaffle_mpi.so` beside `libwaffle.so`: a program with spans of its own (waffle's C macros,
//! linked with `libwaffle.so`) run with the MPI library preloaded records into one file per
//! rank, its MPI spans children of its own spans: its `waffle_*` calls bind to the preloaded
//! library, and only that library starts a session from `WAFFLE_OUTPUT`. Both libraries export
//! the same `waffle_*` functions, and the MPI library the `MPI_*` ones. Linked instead of
//! preloaded, the library records the same calls. Without MPI, building the library stops with
//! one message from its build script that says what is missing, how to install MPI and how to
//! point at one.
//!
//! A program linked statically with `libwaffle.a` carries a copy of waffle of its own, which meets
//! the preloaded library's in the process and records into its session: the same one file.
//!
//! Needs Open MPI; skipped without it, except under `CI=true` or `WAFFLE_REQUIRE_MPI`.

mod support;

use std::{path::Path, process::Command, time::Duration};
use support::{
    common::{
        compile, lib_dir,
        mpi::{mpi_tool, run_with_limit},
        render, scratch, which, Link, C_FLAGS,
    },
    decode_ranks, preload, preloaded_run,
};

#[test]
fn mpi_spans_nest_under_the_programs_own_spans_in_one_file_per_rank() {
    nested_under_the_programs_spans(Link::Shared, "mpi-nested");
}

/// Linked statically, the program's copy of waffle is not the one its `waffle_*` calls could
/// be bound to from outside: the two copies meet in the process instead, and the program's
/// spans record into the session the preloaded library started, in the same one file.
#[test]
fn a_program_linked_statically_records_into_the_preloaded_librarys_session() {
    nested_under_the_programs_spans(Link::Static, "mpi-nested-static");
}

fn nested_under_the_programs_spans(link: Link, name: &str) {
    let Some(mpicc) = mpi_tool("mpicc") else { return };
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let dir = scratch(name);
    let exe = dir.join("nested");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/nested.c");
    compile(mpicc.to_str().unwrap(), C_FLAGS, &[source], &exe, link, &[]);
    let out = dir.join("out");
    let (ok, stdout, stderr) =
        run_with_limit(&mut preloaded_run(&mpirun, &exe, &out), Duration::from_secs(60));
    assert!(ok && stdout.trim() == "ok", "nested failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("waffle:"), "{stderr}");
    // Two sessions writing one file would leave it damaged: decoding checks it is whole.
    let trace = decode_ranks(&out);
    let mut expected = String::new();
    for rank in 0..3 {
        expected += &format!("process nested rank={rank}\n  thread\n    MPI_Init\n");
        for step in 0..2 {
            expected += &format!("    step step={step}\n      exchange\n");
            let (right, left) = ((rank + 1) % 3, (rank + 2) % 3);
            expected += &format!(
                "        MPI_Sendrecv_replace comm=C peer={left} tag=3 bytes=4 dest={right} send_tag=3 send_bytes=4 ~ mpi.message>=M\n\
                 \x20         ! MPI message received comm=C peer={left} tag=3 bytes=4 request=0 ~ mpi.message<=M\n"
            );
            expected += "      MPI_Allreduce comm=C op=MPI_SUM bytes=8 ~ mpi.collective=M\n";
        }
        expected += "    MPI_Finalize\n";
    }
    common_masked(&render(&trace), &expected);
    let _ = std::fs::remove_dir_all(dir);
}

/// Compares a rendering with `expected`, where `C` stands for any communicator key and `M` for
/// any correlation value (numbers that change from run to run).
fn common_masked(actual: &str, expected: &str) {
    let masked: String = actual
        .lines()
        .map(|line| {
            line.split(' ')
                .map(|word| match word.split_once('=') {
                    Some(("comm", _)) => "comm=C".to_owned(),
                    Some((k, _)) if k.starts_with("mpi.") => format!("{k}=M"),
                    _ => word.to_owned(),
                })
                .collect::<Vec<_>>()
                .join(" ")
                + "\n"
        })
        .collect();
    support::common::assert_tree(&masked, expected);
}

/// The `waffle_*` functions a library exports (`nm -D --defined-only`).
fn exported(lib: &Path, prefix: &str) -> Vec<String> {
    let out = Command::new("nm").args(["-D", "--defined-only"]).arg(lib).output().expect("run nm");
    assert!(out.status.success(), "nm {}", lib.display());
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

#[test]
fn both_libraries_export_the_c_abi_and_the_mpi_library_the_wrappers() {
    if mpi_tool("mpicc").is_none() || which("nm").is_none() {
        return;
    }
    let ours = exported(preload(), "waffle_");
    let abi: Vec<String> = exported(&lib_dir().join("libwaffle.so"), "waffle_")
        .into_iter()
        .filter(|n| !n.starts_with("waffle_mpi_"))
        .collect();
    assert!(abi.len() > 20 && abi.contains(&"waffle_span_begin_t".to_owned()), "{abi:?}");
    let c_abi: Vec<String> = ours.iter().filter(|n| !n.starts_with("waffle_mpi_")).cloned().collect();
    assert_eq!(c_abi, abi, "libwaffle_mpi.so carries the whole C ABI");
    let wrappers = exported(preload(), "MPI_");
    for f in
        ["MPI_Send", "MPI_Irecv", "MPI_Waitsome", "MPI_Ialltoallw", "MPI_Rget_accumulate", "MPI_Comm_free"]
    {
        assert!(wrappers.iter().any(|w| w == f), "{f} not exported: {wrappers:?}");
    }
    assert!(exported(preload(), "PMPI_").is_empty(), "the PMPI_ functions stay MPI's");
}

/// Linked (`-lwaffle_mpi` ahead of MPI) instead of preloaded, the ring records the same calls.
#[test]
fn linking_the_library_records_as_preloading_does() {
    let Some(mpicc) = mpi_tool("mpicc") else { return };
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let dir = scratch("mpi-linked");
    let exe = dir.join("ring");
    let lib = preload().parent().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/ring.c");
    let out = Command::new(&mpicc)
        .args(C_FLAGS)
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(lib)
        .arg("-lwaffle_mpi")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .expect("run mpicc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let files = dir.join("out");
    let mut cmd = support::common::mpi::mpirun_command(&mpirun, 3);
    cmd.env("WAFFLE_OUTPUT", files.join("rank%r.bin")).args(["-x", "WAFFLE_OUTPUT"]).arg(&exe);
    let (ok, stdout, stderr) = run_with_limit(&mut cmd, Duration::from_secs(60));
    assert!(ok && stdout.trim() == "ok", "{stdout}\n{stderr}");
    let trace = decode_ranks(&files);
    let count = |rank: usize, name: &str| {
        trace.processes[rank].threads.iter().flat_map(|t| &t.spans).filter(|s| s.name() == name).count()
    };
    assert_eq!((count(0, "MPI_Send"), count(0, "MPI_Recv"), count(1, "MPI_Send")), (2, 4, 3));
    assert_eq!((count(2, "MPI_Waitall"), count(2, "MPI_Allreduce")), (1, 1));
    let _ = std::fs::remove_dir_all(dir);
}

/// `MPICC` naming a program that does not exist; built in a target directory of its own, so
/// that the real build's script output stays as it is.
#[test]
fn a_missing_mpi_is_one_clear_build_error() {
    let exe = std::env::current_exe().expect("test executable");
    let target = exe.ancestors().nth(3).expect("target directory").join("no-mpi");
    let out = Command::new(env!("CARGO"))
        .args(["build", "--offline", "-p", "waffle-mpi", "--lib", "--target-dir"])
        .arg(&target)
        .env("MPICC", "/nonexistent/bin/mpicc")
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("run cargo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the build succeeded without MPI:\n{stderr}");
    let messages: Vec<&str> =
        stderr.lines().filter(|l| l.contains("waffle-mpi needs an MPI installation")).collect();
    assert_eq!(messages.len(), 1, "one message:\n{stderr}");
    for says in [
        "MPICC=\"/nonexistent/bin/mpicc\" names no program",
        "apt-get install openmpi-bin libopenmpi-dev",
        "point at one with MPICC=/path/to/mpicc",
    ] {
        assert!(stderr.contains(says), "the message does not say {says:?}:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}
