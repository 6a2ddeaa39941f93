//! A real MPI program (`tests/mpi/allreduce.c`, built with `mpicc`, run with `mpirun -np 2`):
//! one trace file per rank, the rank in each header, one trace id, and
//! `waffle-decode why rank0.bin rank1.bin --event "MPI_Allreduce result is NaN"` reaching rank
//! 1's "Creating NaN on purpose". And one that never starts a session (`tests/mpi/no_start.c`),
//! run with `WAFFLE_OUTPUT=DIR/rank%r.bin`: a file per rank, and the trace id of the launch,
//! shared by its ranks and not by the next launch. And the original C example, unchanged, built
//! as C and as C++, run, and recorded by `WAFFLE_OUTPUT` alone.
//!
//! Needs Open MPI (`apt-get install openmpi-bin libopenmpi-dev`; `scripts/test.sh` installs it).
//! Without `mpicc` (or `mpicxx`) the tests are skipped with a message, except under `CI=true` or
//! `WAFFLE_REQUIRE_MPI` (which `scripts/test.sh` sets), where they fail.

mod common;

use common::{
    assert_tree, compile, decode,
    mpi::{mpi_tool, mpirun_command, run_with_limit},
    render, scratch, which, why_json, Link, CXX_FLAGS, C_FLAGS,
};
use std::{path::Path, process::Command, time::Duration};

const SYMPTOM: &str = "MPI_Allreduce result is NaN";
const CAUSE: &str = "Creating NaN on purpose";

#[test]
fn mpi_allreduce_nan_is_traced_back_to_rank_1() {
    let Some(mpicc) = mpi_tool("mpicc") else { return };
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let dir = scratch("mpi");
    let exe = dir.join("allreduce");
    let source = common::ffi_dir().join("tests/mpi/allreduce.c");
    compile(mpicc.to_str().unwrap(), C_FLAGS, &[source], &exe, Link::Shared, &[]);

    let mut cmd = mpirun_command(&mpirun, 2);
    cmd.arg(&exe).arg(&dir);
    let (ok, stdout, stderr) = run_with_limit(&mut cmd, Duration::from_secs(60));
    assert!(ok, "mpirun failed:\n{stdout}\n{stderr}");

    let files = [dir.join("rank0.bin"), dir.join("rank1.bin")];
    let trace = decode(&files);
    let [r0, r1] = &trace.processes[..] else { panic!("two processes") };
    assert_eq!(
        (r0.header.label("rank"), r1.header.label("rank")),
        (Some("0"), Some("1")),
        "rank labels from OMPI_COMM_WORLD_RANK"
    );
    assert_ne!(r0.header.trace_id, 0);
    assert_eq!(r0.header.trace_id, r1.header.trace_id, "rank 1 records under the trace id rank 0 broadcast");
    let mut expected = String::new();
    for rank in 0..2 {
        expected += &format!("process allreduce rank={rank}\n  thread\n");
        for it in 0..3 {
            expected += &format!("    iteration iteration={it}\n");
            let bad = it == 1;
            if rank == 1 && bad {
                expected += &format!("      ! {CAUSE} rank=1\n");
            }
            let cause = if rank == 1 && bad { format!(" <- event {CAUSE:?}") } else { String::new() };
            expected += &format!("      MPI_Allreduce_op rank={rank}{cause} ~ allreduce={it}\n");
            if rank == 0 && bad {
                expected += &format!("        ! {SYMPTOM} rank=0\n");
            }
        }
    }
    assert_tree(&render(&trace), &expected);

    // The command a user runs.
    let out = Command::new(common::waffle_decode())
        .arg("why")
        .args(&files)
        .args(["--event", SYMPTOM])
        .output()
        .expect("run waffle-decode");
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "waffle-decode why failed:\n{text}\n{err}");
    let (chain, root) =
        text.split_once("\nRoot cause\n").unwrap_or_else(|| panic!("one root cause:\n{text}"));
    assert!(chain.starts_with(&format!("Symptom\n  event {SYMPTOM:?}")), "{text}");
    for step in [
        "\n  ← inside span \"MPI_Allreduce_op\"",
        "\n    ← correlated with span \"MPI_Allreduce_op\"",
        &format!("\n      ← caused by event {CAUSE:?}"),
    ] {
        assert!(chain.contains(step), "missing {step:?} in\n{text}");
    }
    let mut root = root.lines();
    assert!(root.next().unwrap_or("").starts_with(&format!("  event {CAUSE:?} ")), "{text}");
    assert!(root.next().unwrap_or("").trim_start().starts_with("rank 1 ("), "{text}");
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}

/// The original C example (`tests/original/mpi_allreduce.c`, the contract's text unchanged: short
/// names `SPAN`, `KV_I64`, `KV_CAUSE_EVENT`, a bare `WAFFLE_EVENT(...)` statement, no session
/// started) compiles with `mpicc` as C11 and with `mpicxx -x c++` as C++17, warnings as errors,
/// links with libwaffle, and both builds run under `mpirun -np 2` and exit 0, recording nothing.
/// Run again with only `WAFFLE_OUTPUT=rank%r.bin` set, each build writes one file per rank,
/// under one trace id, and `waffle-decode why` leads from **either** rank's symptom to rank 1's
/// "Creating NaN on purpose": from rank 0's through the two ranks' `MPI_Allreduce_op` spans,
/// matched by order (nothing in the program ties them together); with `--no-match` it cannot.
///
/// As C++ it is compiled with `-DOMPI_SKIP_MPICXX` (and MPICH's `MPICH_SKIP_MPICXX`): without
/// it `mpi.h` pulls in Open MPI's deprecated C++ bindings, whose own casts GCC's `-Wextra`
/// rejects (`-Wcast-function-type`), before waffle's headers are even read.
#[test]
fn original_c_example_compiles_unchanged_as_c_and_cxx_and_runs() {
    let (Some(mpicc), Some(mpicxx)) = (mpi_tool("mpicc"), mpi_tool("mpicxx")) else { return };
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let dir = scratch("mpi-original");
    let source = common::ffi_dir().join("tests/original/mpi_allreduce.c");
    let cxx_flags: Vec<&str> =
        CXX_FLAGS.iter().copied().chain(["-DOMPI_SKIP_MPICXX", "-DMPICH_SKIP_MPICXX", "-x", "c++"]).collect();
    for (compiler, flags, name) in
        [(&mpicc, C_FLAGS, "original_c"), (&mpicxx, &cxx_flags[..], "original_cxx")]
    {
        let exe = dir.join(name);
        compile(compiler.to_str().unwrap(), flags, std::slice::from_ref(&source), &exe, Link::Shared, &[]);
        let run = dir.join(format!("{name}.run"));
        std::fs::create_dir_all(&run).unwrap();
        let mut cmd = mpirun_command(&mpirun, 2);
        cmd.arg(&exe).current_dir(&run);
        let (ok, stdout, stderr) = run_with_limit(&mut cmd, Duration::from_secs(60));
        assert!(ok, "{name} under mpirun failed:\n{stdout}\n{stderr}");
        let written: Vec<_> = std::fs::read_dir(&run).unwrap().collect();
        assert!(written.is_empty(), "{name}: nothing is recorded without a session: {written:?}");

        // The same program, recorded by setting WAFFLE_OUTPUT alone.
        let mut cmd = mpirun_command(&mpirun, 2);
        cmd.env("WAFFLE_OUTPUT", run.join("rank%r.bin")).arg(&exe).current_dir(&run);
        let (ok, stdout, stderr) = run_with_limit(&mut cmd, Duration::from_secs(60));
        assert!(ok, "{name} with WAFFLE_OUTPUT failed:\n{stdout}\n{stderr}");
        let files = [run.join("rank0.bin"), run.join("rank1.bin")];
        let trace = decode(&files);
        let [r0, r1] = &trace.processes[..] else { panic!("two processes") };
        assert_eq!((r0.header.label("rank"), r1.header.label("rank")), (Some("0"), Some("1")));
        assert_ne!(r0.header.trace_id, 0);
        assert_eq!(r0.header.trace_id, r1.header.trace_id, "{name}: one launch, one trace id, no code");
        let expected = format!(
            "process {name} rank=0\n  thread\n    MPI_Allreduce_op rank=0\n      ! {ORIGINAL_SYMPTOM}\n\
             process {name} rank=1\n  thread\n    ! {CAUSE} rank=1\n    MPI_Allreduce_op rank=1 <- event {CAUSE:?}\n\
             \x20     ! {ORIGINAL_SYMPTOM}\n"
        );
        assert_tree(&render(&trace), &expected);

        // Both ranks see the NaN; `--nth` picks each symptom in turn.
        let mut symptom_ranks = Vec::new();
        for nth in 0..2 {
            let why = why_json(&files, ORIGINAL_SYMPTOM, nth, &[]);
            let rank = why["symptom"]["process"]["rank"].as_str().unwrap().to_owned();
            let root = &why["root_causes"];
            assert_eq!(root.as_array().map(Vec::len), Some(1), "{name} rank {rank}: {why:#}");
            assert_eq!(
                (root[0]["name"].as_str(), root[0]["process"]["rank"].as_str()),
                (Some(CAUSE), Some("1"))
            );
            let relations: Vec<&str> =
                why["steps"].as_array().unwrap().iter().map(|s| s["relation"].as_str().unwrap()).collect();
            if rank == "0" {
                assert_eq!(relations, ["inside", "matched by order with", "caused by"], "{why:#}");
                assert_eq!(why["steps"][1]["item"]["process"]["rank"], "1");
                assert_eq!(why["steps"][1]["occurrence"], 0);
                let off = why_json(&files, ORIGINAL_SYMPTOM, nth, &["--no-match"]);
                assert_eq!(off["root_causes"], serde_json::json!([]), "{off:#}");
            }
            symptom_ranks.push(rank);
        }
        symptom_ranks.sort();
        assert_eq!(symptom_ranks, ["0", "1"]);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The original C example's symptom.
const ORIGINAL_SYMPTOM: &str = "MPI_Allreduce result is NaN";

/// Two launches of a program that never starts a session, with `WAFFLE_OUTPUT=DIR/rank%r.bin`:
/// each writes `rank0.bin` and `rank1.bin`, labelled with their ranks; the ranks of a launch
/// share the trace id Open MPI's job variables give, and the two launches' ids differ.
#[test]
fn ranks_record_without_a_start_call_under_the_launchs_trace_id() {
    let Some(mpicc) = mpi_tool("mpicc") else { return };
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let dir = scratch("mpi-no-start");
    let exe = dir.join("no_start");
    let source = common::ffi_dir().join("tests/mpi/no_start.c");
    compile(mpicc.to_str().unwrap(), C_FLAGS, &[source], &exe, Link::Shared, &[]);
    let mut trace_ids = Vec::new();
    for launch in ["first", "second"] {
        let out = dir.join(launch);
        std::fs::create_dir(&out).unwrap();
        let mut cmd = mpirun_command(&mpirun, 2);
        cmd.env("WAFFLE_OUTPUT", out.join("rank%r.bin")).args(["-x", "WAFFLE_OUTPUT"]).arg(&exe);
        let (ok, stdout, stderr) = run_with_limit(&mut cmd, Duration::from_secs(60));
        assert!(ok, "mpirun failed:\n{stdout}\n{stderr}");
        assert!(!stderr.contains("waffle:"), "{stderr}");
        let mut names: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["rank0.bin", "rank1.bin"]);
        let trace = decode(&[out.join("rank0.bin"), out.join("rank1.bin")]);
        let [r0, r1] = &trace.processes[..] else { panic!("two processes") };
        assert_eq!((r0.header.label("rank"), r1.header.label("rank")), (Some("0"), Some("1")));
        assert_ne!(r0.header.trace_id, 0);
        assert_eq!(r0.header.trace_id, r1.header.trace_id, "the ranks of one launch share its trace id");
        assert_tree(
            &render(&trace),
            "process no_start rank=0\n  thread\n    compute rank=0\nprocess no_start rank=1\n  thread\n    compute rank=1\n",
        );
        trace_ids.push(r0.header.trace_id);
    }
    assert_ne!(trace_ids[0], trace_ids[1], "two launches, two traces");
    let _ = std::fs::remove_dir_all(dir);
}
