//! `waffle-decode waits` on MPI runs where the answer is known: `programs/late.c` under
//! `mpirun -np 3` with the library preloaded, one rank late by design (a span "injected_delay"
//! of a known length, in a known iteration, at a known point), in each scenario:
//! - a direct delay (a late sender);
//! - a delay that propagates through a chain of ranks;
//! - a late root in a broadcast;
//! - a late receiver of a synchronous send.
//!
//! In each, at least 90 % of the wait time measured in the program's iterations (at
//! `MPI_Init` and `MPI_Finalize` ranks also wait for the launch, not for each other's work) is
//! charged to the injected delay, the kinds are the expected ones, and every nanosecond of
//! waiting is charged once. A clean run (the chain, no delay) waits a small fraction of what
//! one delay costs. And the original C
//! example, its MPI calls recorded by the preloaded library, on 2 ranks.
//!
//! The scenarios run one after the other (a lock): three ranks spinning in MPI besides those of
//! another test would measure the machine's load, not the program. A waiting rank yields its
//! core (`mpi_yield_when_idle`), as on an oversubscribed node.
//!
//! Needs Open MPI; skipped without it, except under `CI=true` or `WAFFLE_REQUIRE_MPI`.

mod support;

use serde_json::Value as Json;
use std::{path::Path, process::Command, sync::Mutex, time::Duration};
use support::{
    common::{
        compile, decode,
        mpi::{mpi_tool, mpirun_command, run_with_limit},
        scratch, waffle_decode, which, Link, C_FLAGS,
    },
    preload, preloaded_run,
};

/// The injected delay, ms: far above what scheduling adds to a run of microsecond steps.
const DELAY_MS: u64 = 400;
const MS: u64 = 1_000_000;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `waffle-decode COMMAND FILES --json ARGS` (`waits`, `critical-path`).
fn analyse(command: &str, files: &[impl AsRef<Path>], args: &[&str]) -> Json {
    let out = Command::new(waffle_decode())
        .arg(command)
        .args(files.iter().map(AsRef::as_ref))
        .arg("--json")
        .args(args)
        .output()
        .expect("run waffle-decode");
    assert!(out.status.success(), "{command} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("--json is JSON")
}

fn waits(files: &[impl AsRef<Path>]) -> Json {
    analyse("waits", files, &[])
}

fn int(v: &Json) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Runs `late SCENARIO DELAY_MS` on 3 ranks; its `waits` report, and the id of its one
/// "injected_delay" span (0 in the clean run), which must be in iteration 2. The critical path
/// of the run and of iteration 2 leads to the delay too: it is their largest contributor, and
/// without it they would be shorter by most of it.
fn scenario(name: &str) -> Option<(Json, u64)> {
    let (report, id, dir) = recorded(name, 4)?;
    let _ = std::fs::remove_dir_all(dir);
    Some((report, id))
}

/// [`scenario`] with `iterations` iterations, keeping its files: they are
/// `DIR/out/rank{0,1,2}.bin`.
fn recorded(name: &str, iterations: u32) -> Option<(Json, u64, std::path::PathBuf)> {
    let mpicc = mpi_tool("mpicc")?;
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch(&format!("mpi-late-{name}-{:?}", std::thread::current().id()).replace(['(', ')'], ""));
    let exe = dir.join("late");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/late.c");
    compile(mpicc.to_str().unwrap(), C_FLAGS, &[source], &exe, Link::Shared, &[]);
    let out = dir.join("out");
    let mut cmd = preloaded_run(&mpirun, &exe, &out);
    cmd.env("OMPI_MCA_mpi_yield_when_idle", "1")
        .arg(name)
        .arg(DELAY_MS.to_string())
        .arg(iterations.to_string());
    let (ok, stdout, stderr) = run_with_limit(&mut cmd, Duration::from_secs(60));
    assert!(ok && stdout.trim() == "ok", "late {name} failed:\n{stdout}\n{stderr}");
    let files: Vec<_> = (0..3).map(|r| out.join(format!("rank{r}.bin"))).collect();
    let trace = decode(&files);
    let delays: Vec<_> = trace
        .processes
        .iter()
        .flat_map(|p| p.threads.iter().flat_map(|t| &t.spans))
        .filter(|s| s.name() == "injected_delay")
        .collect();
    let id = match delays.as_slice() {
        [] => 0,
        [one] => {
            let iteration = one.fields().find(|(k, _)| *k == "iteration").map(|(_, v)| v.to_string());
            assert_eq!(iteration.as_deref(), Some("2"), "the delay is in the iteration it was put in");
            one.id
        }
        more => panic!("{} injected delays", more.len()),
    };
    let report = waits(&files);
    for args in [&[][..], &["--step", "2"]] {
        let path = analyse("critical-path", &files, args);
        let sum: u64 = path["segments"].as_array().unwrap().iter().map(|s| int(&s["dur_ns"])).sum();
        assert_eq!(sum, int(&path["length_ns"]), "the segments sum to the length: {path:#}");
        if id == 0 {
            continue;
        }
        // The delay is the step's largest contributor; in the whole run, MPI_Init (the launch's
        // wire-up, its length the machine's) may outweigh it, but only the delay, freed, would
        // shorten the run by most of its length.
        let contributors = path["contributors"].as_array().unwrap();
        let delay =
            contributors.iter().find(|c| c["span"] == "injected_delay").expect("the delay on the path");
        assert!(int(&delay["if_free_ns"]) >= DELAY_MS * MS * 8 / 10, "{args:?}: {delay:#}");
        if !args.is_empty() {
            assert_eq!(contributors[0]["span"], "injected_delay", "{args:?}: {path:#}");
        }
    }
    Some((report, id, dir))
}

/// The waits of the program's iterations: all but those at `MPI_Init` and `MPI_Finalize`,
/// where ranks wait for the launch to bring the others up (or down), a wait of the machine's
/// making that the report charges to what each rank did before (`gap start → MPI_Init`).
fn in_iterations(report: &Json) -> u64 {
    let waits = report["waits"].as_array().unwrap().iter();
    let setup =
        |w: &&Json| matches!(w["call"].as_str(), Some("MPI_Init" | "MPI_Init_thread" | "MPI_Finalize"));
    waits.filter(|w| !setup(w)).map(|w| int(&w["wait_ns"])).sum()
}

/// The checks every scenario shares; the share of the iterations' waiting charged to the delay
/// on `rank`.
fn charged_to_delay(report: &Json, rank: i64, id: u64) -> f64 {
    let causes = report["root_causes"].as_array().unwrap();
    let charged: u64 = causes.iter().map(|c| int(&c["caused_wait_ns"])).sum();
    assert_eq!(
        charged,
        int(&report["total_wait_ns"]),
        "every nanosecond of waiting is charged once: {report:#}"
    );
    let total = in_iterations(report);
    let top = &causes[0];
    assert_eq!(
        (top["rank"].as_i64(), top["span"].as_str()),
        (Some(rank), Some("injected_delay")),
        "{report:#}"
    );
    assert_eq!(top["span_id"], format!("{id:016x}"), "the delay's own span");
    let delay = int(&top["delay_ns"]);
    assert!((DELAY_MS * MS / 2..=(DELAY_MS + 50) * MS).contains(&delay), "delay {delay} ns: {report:#}");
    let share = int(&top["caused_wait_ns"]) as f64 / total as f64;
    eprintln!("rank {rank}'s delay: {:.1} % of {total} ns of waiting", share * 100.0);
    share
}

/// The waits of `kind` on `rank`, in ns.
fn waited(report: &Json, rank: i64, kind: &str) -> u64 {
    let waits = report["waits"].as_array().unwrap().iter();
    waits.filter(|w| w["rank"].as_i64() == Some(rank) && w["kind"] == kind).map(|w| int(&w["wait_ns"])).sum()
}

#[test]
fn a_late_sender_is_charged_to_its_delay() {
    let Some((report, id)) = scenario("direct") else { return };
    let share = charged_to_delay(&report, 1, id);
    assert!(share >= 0.9, "{:.1} % charged to the delay: {report:#}", share * 100.0);
    assert!(waited(&report, 0, "late_sender") >= DELAY_MS * MS * 8 / 10, "{report:#}");
    // Rank 2, idle, waits at the barrier for the late pair.
    assert!(waited(&report, 2, "wait_at_barrier") >= DELAY_MS * MS * 8 / 10, "{report:#}");
}

#[test]
fn a_delay_propagating_through_a_chain_is_charged_to_its_origin() {
    let Some((report, id)) = scenario("chain") else { return };
    let share = charged_to_delay(&report, 2, id);
    assert!(share >= 0.9, "{:.1} % charged to the delay: {report:#}", share * 100.0);
    for rank in [0, 1] {
        assert!(waited(&report, rank, "late_sender") >= DELAY_MS * MS * 8 / 10, "rank {rank}: {report:#}");
    }
    let top = &report["root_causes"][0];
    assert!(
        int(&top["propagated_ns"]) >= DELAY_MS * MS * 8 / 10,
        "rank 0's wait came through rank 1: {top:#}"
    );
}

#[test]
fn a_late_broadcast_root_is_charged_to_its_delay() {
    let Some((report, id)) = scenario("bcast") else { return };
    let share = charged_to_delay(&report, 0, id);
    assert!(share >= 0.9, "{:.1} % charged to the delay: {report:#}", share * 100.0);
    for rank in [1, 2] {
        assert!(
            waited(&report, rank, "late_broadcast_root") >= DELAY_MS * MS * 8 / 10,
            "rank {rank}: {report:#}"
        );
    }
}

#[test]
fn a_late_receiver_of_a_synchronous_send_is_charged_to_its_delay() {
    let Some((report, id)) = scenario("ssend") else { return };
    let share = charged_to_delay(&report, 1, id);
    assert!(share >= 0.9, "{:.1} % charged to the delay: {report:#}", share * 100.0);
    assert!(waited(&report, 0, "late_receiver") >= DELAY_MS * MS * 8 / 10, "{report:#}");
}

#[test]
fn a_clean_run_waits_little() {
    let Some((report, id)) = scenario("clean") else { return };
    assert_eq!(id, 0);
    let causes = report["root_causes"].as_array().unwrap();
    assert_eq!(causes.iter().map(|c| int(&c["caused_wait_ns"])).sum::<u64>(), int(&report["total_wait_ns"]));
    assert!(causes.iter().all(|c| c["span"] != "injected_delay"));
    // One delay makes the ranks wait about twice its length in all; the clean run's 4
    // iterations of microseconds, a small part of one.
    let total = in_iterations(&report);
    eprintln!("the clean run waited {total} ns in its iterations");
    assert!(total < DELAY_MS * MS / 4, "a clean run waited {total} ns: {report:#}");
}

/// The original C example (`ffi/tests/original/mpi_allreduce.c`, unchanged) with its MPI calls
/// recorded by the preloaded library, on 2 ranks: its one `MPI_Allreduce`, inside the program's
/// own `MPI_Allreduce_op` span, is the only call that can wait, at an N×N collective.
#[test]
fn the_original_c_example_on_two_ranks() {
    let Some(mpicc) = mpi_tool("mpicc") else { return };
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("mpi-waits-original");
    let exe = dir.join("original");
    let source = support::common::ffi_dir().join("tests/original/mpi_allreduce.c");
    compile(mpicc.to_str().unwrap(), C_FLAGS, &[source], &exe, Link::Shared, &[]);
    let out = dir.join("out");
    let mut cmd = mpirun_command(&mpirun, 2);
    cmd.env("WAFFLE_OUTPUT", out.join("rank%r.bin"))
        .args(["-x", "WAFFLE_OUTPUT", "-x"])
        .arg(format!("LD_PRELOAD={}", preload().display()))
        .arg(&exe);
    let (ok, stdout, stderr) = run_with_limit(&mut cmd, Duration::from_secs(60));
    assert!(ok, "the original example failed:\n{stdout}\n{stderr}");
    let files = [out.join("rank0.bin"), out.join("rank1.bin")];
    let report = waits(&files);
    let total = int(&report["total_wait_ns"]);
    // MPI_Init and MPI_Finalize synchronise the ranks too.
    for w in report["waits"].as_array().unwrap() {
        assert_eq!(w["kind"], "wait_at_nxn", "{w:#}");
        match w["call"].as_str() {
            Some("MPI_Allreduce") => assert_eq!(w["site"], "MPI_Allreduce in MPI_Allreduce_op"),
            call => assert!(matches!(call, Some("MPI_Init" | "MPI_Finalize")), "{w:#}"),
        }
    }
    let ranks: Vec<i64> =
        report["per_rank"].as_array().unwrap().iter().map(|r| r["rank"].as_i64().unwrap()).collect();
    assert_eq!(ranks, [0, 1]);
    let causes = report["root_causes"].as_array().unwrap();
    assert_eq!(causes.iter().map(|c| int(&c["caused_wait_ns"])).sum::<u64>(), total);
    let _ = std::fs::remove_dir_all(dir);
}

/// `waffle-decode waits FILES`: its exit status, stdout and stderr.
fn waits_cli(files: &[std::path::PathBuf]) -> (bool, String, String) {
    let out = Command::new(waffle_decode())
        .arg("waits")
        .args(files)
        .arg("--json")
        .output()
        .expect("run waffle-decode");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// Where to cut `path` so that the delay is before the cut: in the middle of its last DATA
/// frame. The delay is in iteration 2 of 300, so its chunk is an earlier frame, whole. (A cut at
/// a fixed share of the bytes could fall inside the delay's own frame: a thread blocked for the
/// delay's length is copied as TAIL frames, ahead of its DATA, and a TAIL copied between the
/// receive's event and the correlation recorded after it leaves the message unjoined.)
fn cut_offset(path: &Path) -> usize {
    let mut reader = waffle_read::reader::FrameReader::open(path).expect("open");
    let (mut warnings, mut payload) = (Vec::new(), Vec::new());
    let mut data = Vec::new();
    while let Some((kind, offset)) = reader.read_frame(&mut warnings, &mut payload) {
        if kind == waffle::wire::frame::DATA {
            data.push(offset as usize + payload.len() / 2);
        }
    }
    assert!(
        data.len() >= 2,
        "{}: {} DATA frames; the test needs the delay in an earlier one",
        path.display(),
        data.len()
    );
    *data.last().unwrap()
}

/// Files of two runs, a rank's file missing: clear errors, no report. A file cut short: the
/// waits up to the cut (those of the whole file that begin before it), and a warning; the run
/// has 300 iterations, so that its records are in several chunks, the delay's in an early one.
#[test]
fn bad_input_is_a_clear_error_or_a_warning() {
    let Some((whole, _, direct)) = recorded("direct", 300) else { return };
    let Some((_, _, bcast)) = recorded("bcast", 4) else { return };
    let rank = |dir: &Path, r: u32| dir.join("out").join(format!("rank{r}.bin"));

    let (ok, _, stderr) = waits_cli(&[rank(&direct, 0), rank(&bcast, 1), rank(&bcast, 2)]);
    assert!(!ok && stderr.contains("are from different runs"), "{stderr}");
    let (ok, _, stderr) = waits_cli(&[rank(&direct, 0), rank(&direct, 1)]);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("rank 2 is missing") && stderr.contains("the run had 3 ranks"), "{stderr}");

    let cut = direct.join("cut.bin");
    let bytes = std::fs::read(rank(&direct, 0)).unwrap();
    std::fs::write(&cut, &bytes[..cut_offset(&rank(&direct, 0))]).unwrap();
    let (ok, stdout, stderr) = waits_cli(&[cut.clone(), rank(&direct, 1), rank(&direct, 2)]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("warning") && stderr.contains("cut.bin"), "{stderr}");
    let report: Json = serde_json::from_str(&stdout).unwrap();
    // Waits of rank 0 of 1 ms or more. Without the CLOCK frame written at the end, the cut
    // file's times use its header's calibration, a few µs off the whole file's: waits of
    // microseconds come and go with that, the long ones stay where they were.
    let of_rank_0 = |r: &Json| -> Vec<(u64, String)> {
        let waits =
            r["waits"].as_array().unwrap().iter().filter(|w| w["rank"] == 0 && int(&w["wait_ns"]) >= MS);
        waits.map(|w| (int(&w["start_ns"]), w["kind"].as_str().unwrap().to_owned())).collect()
    };
    let (before, after) = (of_rank_0(&whole), of_rank_0(&report));
    eprintln!("rank 0: {} waits whole, {} up to the cut", before.len(), after.len());
    assert!(after.iter().any(|w| w.1 == "late_sender"), "the delay's wait is before the cut: {report:#}");
    for w in &after {
        let near = |b: &(u64, String)| b.1 == w.1 && b.0.abs_diff(w.0) < MS;
        assert!(before.iter().any(near), "{w:?} is not a wait of the whole file: {before:?}");
    }
    assert!(!report["notes"].as_array().unwrap().is_empty(), "{report:#}");
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_dir_all(direct);
        let _ = std::fs::remove_dir_all(bcast);
    }
}
